"""Serving each edge host with its own certificate over one TLS listener (SNI).

An Ingress names a TLS Secret per host; every host shares the data plane's TLS address, so the
certificate is chosen during the handshake from the client's SNI name. Python can only load
certificates from files, so a PEM pair is written to a private (0700) temporary directory, loaded
and deleted at once; the key never stays on disk and its bytes never reach a message.

A handshake for a host without a certificate (or without SNI) is refused with
``unrecognized_name`` rather than answered with some other host's certificate.

**Client certificates (mutualTLS).** A host whose routes use mutualTLS gets a context that
asks for a client certificate (``CERT_OPTIONAL``) and trusts those routes' CA certificates; the
others never ask. Python's ``ssl`` takes a connection's verify mode from the context it starts
with (the SNI callback can change the certificate and trust store, not whether a certificate is
requested), so the edge's listener (``tls_listener.py``) reads the server name from the
ClientHello first and starts TLS with that host's context (:meth:`SniCertificates.context_for`).
A client certificate that does not verify fails the handshake (OpenSSL verifies every
certificate it is sent); each route then checks its own CAs (``edge/modules/mutual_tls.py``).
"""

from __future__ import annotations

import asyncio
import ssl

from interlock.dataplane.request_target import normalize_host
from interlock.dataplane.upstream_tls import load_key_pair
from interlock.model.moduleset import SecretValue


class TlsConfigError(ValueError):
    """A certificate or key that cannot be used; the message names the host, never the bytes."""


def load_certificate(*, host: str, cert_pem: SecretValue, key_pem: SecretValue) -> ssl.SSLContext:
    """A server context for ``host`` from a PEM certificate chain and its private key."""
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    try:
        load_key_pair(context, cert_pem, key_pem)
    except (ssl.SSLError, OSError) as exc:
        reason = getattr(exc, "reason", None) or type(exc).__name__
        raise TlsConfigError(
            f"TLS for host {host}: tls.crt/tls.key cannot be loaded ({reason})"
        ) from None
    return context


def trust_client_cas(context: ssl.SSLContext, *, host: str, ca_bundles: tuple[str, ...]) -> None:
    """Make ``context`` verify client certificates against ``ca_bundles`` (PEM texts), every
    certificate in them a trust anchor (an intermediate needs no root)."""
    if not ca_bundles:
        return
    context.verify_mode = ssl.CERT_OPTIONAL
    context.verify_flags |= ssl.VERIFY_X509_PARTIAL_CHAIN
    try:
        context.load_verify_locations(cadata="".join(ca_bundles))
    except ssl.SSLError as exc:
        raise TlsConfigError(
            f"TLS for host {host}: client CA certificates ({exc.reason})"
        ) from None


def peer_certificate(transport: asyncio.BaseTransport | None) -> bytes | None:
    """The client certificate (DER) the handshake verified, or None (plain HTTP, none sent)."""
    ssl_object = None if transport is None else transport.get_extra_info("ssl_object")
    if not isinstance(ssl_object, ssl.SSLObject):
        return None
    return ssl_object.getpeercert(binary_form=True) or None


class SniCertificates:
    """Host → certificate context, and the listener context whose SNI callback picks among them.

    A host's context is built from its certificate pair (:meth:`set_certificate`) and the client
    CA certificates of its mutualTLS routes (:meth:`set_client_cas`), again whenever either
    changes (a context's trust store can only grow).
    """

    def __init__(self) -> None:
        self._contexts: dict[str, ssl.SSLContext] = {}
        self._pairs: dict[str, tuple[SecretValue, SecretValue]] = {}
        self._client_cas: dict[str, tuple[str, ...]] = {}
        self._server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self._server.minimum_version = ssl.TLSVersion.TLSv1_2
        self._server.sni_callback = self._select

    def hosts(self) -> frozenset[str]:
        return frozenset(self._contexts)

    def set_certificate(self, *, host: str, pair: tuple[SecretValue, SecretValue] | None) -> None:
        """Serve ``host`` with ``(cert PEM, key PEM)``, or stop serving it (None).

        Raises :class:`TlsConfigError` and keeps what was served when the pair cannot be used.
        """
        key = normalize_host(host)
        if pair is None:
            self._pairs.pop(key, None)
            self._contexts.pop(key, None)
            return
        self._contexts[key] = self._build(key, pair, self._client_cas.get(key, ()))
        self._pairs[key] = pair

    def set_client_cas(self, *, host: str, ca_bundles: tuple[str, ...]) -> None:
        """Verify ``host``'s client certificates against ``ca_bundles`` (none: do not).

        Raises :class:`TlsConfigError` and keeps what was served when OpenSSL refuses them.
        """
        key = normalize_host(host)
        if ca_bundles == self._client_cas.get(key, ()):
            return
        pair = self._pairs.get(key)
        if pair is not None:
            self._contexts[key] = self._build(key, pair, ca_bundles)
        if ca_bundles:
            self._client_cas[key] = ca_bundles
        else:
            self._client_cas.pop(key, None)

    def context_for(self, server_name: str | None) -> ssl.SSLContext:
        """The context to start a connection with, from its ClientHello's server name: the
        host's own, or the listener's (which refuses the handshake) for an unknown name."""
        if server_name:
            context = self._contexts.get(normalize_host(server_name))
            if context is not None:
                return context
        return self._server

    def _build(
        self, host: str, pair: tuple[SecretValue, SecretValue], ca_bundles: tuple[str, ...]
    ) -> ssl.SSLContext:
        context = load_certificate(host=host, cert_pem=pair[0], key_pem=pair[1])
        trust_client_cas(context, host=host, ca_bundles=ca_bundles)
        # HTTP/2 when the client offers it (browsers, curl, gRPC over TLS), else HTTP/1.1.
        context.set_alpn_protocols(["h2", "http/1.1"])
        # Should OpenSSL read another name than the listener did: that host's, or refused.
        context.sni_callback = self._select
        return context

    def _select(
        self, connection: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> int | None:
        context = self._contexts.get(normalize_host(server_name)) if server_name else None
        if context is None:
            return ssl.ALERT_DESCRIPTION_UNRECOGNIZED_NAME
        connection.context = context
        return None
