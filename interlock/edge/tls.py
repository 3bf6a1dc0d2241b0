"""Serving each edge host with its own certificate over one TLS listener (SNI).

An Ingress names a TLS Secret per host; every host shares the data plane's TLS address, so the
certificate is chosen during the handshake from the client's SNI name. Python can only load
certificates from files, so a PEM pair is written to a private (0700) temporary directory, loaded
and deleted at once; the key never stays on disk and its bytes never reach a message.

A handshake for a host without a certificate (or without SNI) is refused with
``unrecognized_name`` rather than answered with some other host's certificate.
"""

from __future__ import annotations

import os
import ssl
import tempfile

from interlock.edge.routing import normalize_host
from interlock.model.moduleset import SecretValue


class TlsConfigError(ValueError):
    """A certificate or key that cannot be used; the message names the host, never the bytes."""


def load_certificate(*, host: str, cert_pem: SecretValue, key_pem: SecretValue) -> ssl.SSLContext:
    """A server context for ``host`` from a PEM certificate chain and its private key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    with tempfile.TemporaryDirectory(prefix="interlock-tls-") as folder:
        cert_path = os.path.join(folder, "tls.crt")
        key_path = os.path.join(folder, "tls.key")
        for path, value in ((cert_path, cert_pem), (key_path, key_pem)):
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as file:
                file.write(value.reveal())
        try:
            context.load_cert_chain(cert_path, key_path)
        except (ssl.SSLError, OSError) as exc:
            reason = getattr(exc, "reason", None) or type(exc).__name__
            raise TlsConfigError(
                f"TLS for host {host}: tls.crt/tls.key cannot be loaded ({reason})"
            ) from None
    return context


class SniCertificates:
    """Host → certificate context, and the listener context whose SNI callback picks among them."""

    def __init__(self) -> None:
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server.minimum_version = ssl.TLSVersion.TLSv1_2
        self._server.sni_callback = self._select

    @property
    def server_context(self) -> ssl.SSLContext:
        return self._server

    def hosts(self) -> frozenset[str]:
        return frozenset(self._contexts)

    def set(self, *, host: str, context: ssl.SSLContext | None) -> None:
        key = normalize_host(host)
        if context is None:
            self._contexts.pop(key, None)
        else:
            self._contexts[key] = context

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> int | None:
        context = self._contexts.get(normalize_host(server_name)) if server_name else None
        if context is None:
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        connection.context = context
        return None
