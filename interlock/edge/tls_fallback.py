"""Asking TLS clients for a certificate without refusing those whose certificate fails.

A Gateway's ``AllowInsecureFallback`` (``spec.tls.frontend``, ``model/gateway_frontend.py``)
asks clients for a certificate and lets every client in, valid certificate or not, none or one
from a CA nobody trusts: authorization is the backend's then. Python's ``ssl`` offers no such
mode: ``CERT_OPTIONAL`` requests a certificate but fails the handshake when the one sent does
not verify, and ``CERT_NONE`` requests none (clients that would present one never do). OpenSSL
has it — a verify callback that accepts what its own verification refused — but Python does not
expose it, so :func:`accept_any_client_certificate` sets one through ``ctypes`` on the context's
``SSL_CTX`` (found at the start of CPython's ``PySSLContext``, after the object header).

That pointer is checked before anything is written through it: OpenSSL must report, for it, the
verify mode Python reports for the context, for two different modes in turn. When the check
fails (another Python build, another layout), nothing is changed and the caller is told, so the
listener falls back to asking for no certificate — still letting every client in, as the mode
says, never refusing one.
"""

from __future__ import annotations

import ctypes
import ssl
from typing import Any

from loguru import logger

_VERIFY_PEER = 0x01
"""OpenSSL's SSL_VERIFY_PEER: request a certificate (without FAIL_IF_NO_PEER_CERT)."""

_VerifyCallback = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_int, ctypes.c_void_p)


def _accept(_preverified: int, _store: int | None) -> int:
    """OpenSSL's verify callback: every certificate of the chain is accepted."""
    return 1


_ACCEPT = _VerifyCallback(_accept)
"""Kept for the process's life: OpenSSL holds a pointer to it in every context it is set on."""


def _openssl() -> Any | None:
    """The libssl Python's ``_ssl`` is linked with, with the two functions used (None: not
    found, e.g. a statically linked build that exports none)."""
    try:
        import _ssl  # the extension module: its handle resolves symbols of its libssl

        library = ctypes.CDLL(_ssl.__file__)
        get_mode = library.SSL_CTX_get_verify_mode
        set_verify = library.SSL_CTX_set_verify
    except (OSError, AttributeError, ImportError):
        return None
    get_mode.argtypes = [ctypes.c_void_p]
    get_mode.restype = ctypes.c_int
    set_verify.argtypes = [ctypes.c_void_p, ctypes.c_int, _VerifyCallback]
    set_verify.restype = None
    return library


_LIBRARY = _openssl()


def _ssl_ctx(context: ssl.SSLContext) -> int | None:
    """The ``SSL_CTX *`` of ``context``, checked against OpenSSL's own view of it."""
    if _LIBRARY is None:
        return None
    pointer = ctypes.c_void_p.from_address(id(context) + object.__basicsize__).value
    if not pointer:
        return None
    before = context.verify_mode
    try:
        # CERT_REQUIRED is PEER|FAIL_IF_NO_PEER_CERT (3) to OpenSSL, CERT_OPTIONAL PEER (1).
        for mode, expected in ((ssl.CERT_REQUIRED, 3), (ssl.CERT_OPTIONAL, 1)):
            context.verify_mode = mode
            if _LIBRARY.SSL_CTX_get_verify_mode(pointer) != expected:
                return None
    finally:
        context.verify_mode = before
    return int(pointer)


def accept_any_client_certificate(context: ssl.SSLContext) -> bool:
    """Make ``context`` (a server's) request a client certificate and accept every client:
    with one that verifies, one that does not, or none. False when this Python cannot (the
    context is left as it was)."""
    pointer = _ssl_ctx(context)
    if pointer is None or _LIBRARY is None:
        logger.warning(
            "TLS: this Python's ssl cannot request a client certificate without refusing "
            "those that fail verification; AllowInsecureFallback listeners request none"
        )
        return False
    _LIBRARY.SSL_CTX_set_verify(pointer, _VERIFY_PEER, _ACCEPT)
    return True
