"""TLS to upstreams: unverified for an Ingress's ``backend-protocol``, verified for a Gateway's
BackendTLSPolicy.

Some backends listen only for TLS (an application server with its own certificate, a gRPC
server with TLS on). ingress-nginx reached them with ``backend-protocol: HTTPS``/``GRPCS`` and,
unless told otherwise (``proxy-ssl-verify``, which interlock does not serve), without verifying
their certificate: inside a cluster such certificates are mostly self-signed. The edge does the
same, so an Ingress that worked behind ingress-nginx works behind interlock — encrypted on the
wire, but not authenticated (``docs/ingress-nginx.md`` says so where it lists the annotation).

A Gateway backend named by a BackendTLSPolicy is verified instead
(:class:`~interlock.model.backend_tls.BackendTLS`): its chain must end in the policy's CAs (or
the system's), the policy's hostname is the SNI and, unless subject alternative names are
listed, the name the certificate must be valid for; with such names listed, the certificate
must carry one of them (:func:`peer_problem`, checked once the handshake verified the chain).
The Gateway's client certificate, when it has one, is presented.
"""

from __future__ import annotations

import os
import ssl
import tempfile
from typing import Any

from interlock.model.backend_tls import BackendTLS
from interlock.model.moduleset import SecretValue

MAX_VERIFIED_SETTINGS = 256
"""Verified TLS settings (BackendTLSPolicy) with connections of their own at once, per client
(HTTP/1.1 pools, h2 connections); past it they start afresh (settings no longer served)."""


def unverified_client_context(*, alpn: tuple[str, ...]) -> ssl.SSLContext:
    """A client context offering ``alpn``, TLS 1.2 or newer, that does not verify the server's
    certificate or name."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    context.set_alpn_protocols(list(alpn))
    return context


def verified_client_context(tls: BackendTLS, *, alpn: tuple[str, ...]) -> ssl.SSLContext:
    """A client context offering ``alpn`` that verifies the backend as ``tls`` says (connect
    with ``server_hostname=tls.hostname``). Raises ``ssl.SSLError`` when the CA bundle or the
    client certificate cannot be loaded (the error names neither's content)."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.verify_mode = ssl.CERT_REQUIRED
    # With subject alternative names listed, the hostname is only the SNI (the Gateway API).
    context.check_hostname = not tls.subject_alt_names
    if tls.ca_bundle is None:
        context.load_default_certs(ssl.Purpose.SERVER_AUTH)
    else:
        context.load_verify_locations(cadata=tls.ca_bundle.reveal().decode("ascii", "replace"))
    if tls.client_certificate is not None:
        load_key_pair(context, *tls.client_certificate)
    context.set_alpn_protocols(list(alpn))
    return context


def load_key_pair(context: ssl.SSLContext, cert_pem: SecretValue, key_pem: SecretValue) -> None:
    """Load a PEM certificate chain and its private key into ``context`` (OpenSSL reads them
    from files only: written to a private folder, mode 0600, removed at once). Raises
    ``ssl.SSLError`` or ``OSError``."""
    with tempfile.TemporaryDirectory(prefix="interlock-tls-") as folder:
        cert_path = os.path.join(folder, "tls.crt")
        key_path = os.path.join(folder, "tls.key")
        for path, value in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(value.reveal())
        context.load_cert_chain(cert_path, key_path)


def _name_matches(pattern: str, name: str) -> bool:
    """A certificate's DNS name (``*.example.com`` covers one label) against ``name``."""
    pattern, name = pattern.lower().rstrip("."), name.lower().rstrip(".")
    if pattern.startswith("*."):
        head, _, rest = name.partition(".")
        return bool(head) and rest == pattern[2:]
    return pattern == name


def peer_problem(tls: BackendTLS, peer_certificate: dict[str, Any] | None) -> str | None:
    """Why the verified certificate ``peer_certificate`` (``SSLSocket.getpeercert()``) is not
    one of ``tls.subject_alt_names`` (None: it is, or none are listed)."""
    if not tls.subject_alt_names:
        return None
    found = (peer_certificate or {}).get("subjectAltName", ())
    dns = [value for kind, value in found if kind == "DNS"]
    uris = [value for kind, value in found if kind == "URI"]
    for kind, wanted in tls.subject_alt_names:
        if kind == "Hostname" and any(_name_matches(name, wanted) for name in dns):
            return None
        if kind == "URI" and wanted in uris:
            return None
    listed = ", ".join(f"{kind} {value}" for kind, value in tls.subject_alt_names)
    return f"the backend's certificate carries none of the subject alternative names {listed}"
