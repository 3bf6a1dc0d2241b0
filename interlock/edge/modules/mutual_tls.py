"""mutualTLS: a route that serves only clients holding a certificate from its own CAs.

Two layers do the work, because one TLS listener serves every host (``interlock.edge.tls``):

1. **The handshake.** A host with a mutualTLS route gets a TLS context that asks for a client
   certificate (``CERT_OPTIONAL``) and trusts the CA certificates of all its mutualTLS routes;
   the listener picks that context from the ClientHello (``interlock/edge/tls_listener.py``),
   so hosts without mutualTLS never ask. A client certificate that does not verify against the
   host's store (unknown issuer, expired, malformed) fails the handshake: Python's ``ssl`` gives
   no way to accept it and refuse later. A client that sends none completes the handshake.
2. **The route** (this module, per request). It needs the certificate TLS verified and checks
   that one of *this route's* CA certificates issued it directly, and that it is valid now. That
   is what keeps routes and hosts apart: SNI names one host and ``Host`` may name another, a
   resumed TLS session carries a certificate verified for another host, and a host's trust store
   holds the CAs of all its routes. No certificate (plain HTTP, or none sent) → 403 with a clear
   body; a certificate this route's CAs did not issue → 403.

Python 3.11's ``ssl`` gives the server only the client's leaf certificate, not the chain it
verified, so the route's check is "issued directly by a certificate in the bundle": a bundle
holds the certificates that sign client certificates (an intermediate is fine, as a trust
anchor: the store is built with ``VERIFY_X509_PARTIAL_CHAIN``).

The verified identity goes to the backend in :data:`CLIENT_CERT_HEADERS`
(``client_cert_headers.py``); copies a client sent are removed on every route, with mutualTLS or
not (and on a mutualTLS route a ``headers`` module cannot set them). A CA bundle holds no
secret, but it comes from a Secret like every other module input (see ``docs/modules.md`` for
why not a ConfigMap); its bytes are still never logged.
"""

from __future__ import annotations

import hashlib
import ssl
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, MutableMapping
from dataclasses import dataclass

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization

from interlock.edge.modules.client_cert_headers import (
    CLIENT_CERT_HEADERS,
    FINGERPRINT_HEADER,
    SAN_HEADER,
    SUBJECT_HEADER,
    strip_client_cert_headers,
)
from interlock.edge.modules.errors import ModuleConfigError, describe_ref, lookup_secret
from interlock.edge.modules.view import Rejection, reject
from interlock.model.moduleset import MutualTlsModule, SecretValue

CACHE_SIZE = 1024
"""Client certificates whose verdict is remembered (per compiled module)."""

_FIELD = "mutualTLS.caSecretRef"


@dataclass(frozen=True, slots=True)
class _Verdict:
    """What one client certificate means for this route (time validity is checked per use)."""

    headers: tuple[tuple[str, str], ...] | None
    """The identity headers, or None: no CA of the route issued it."""
    not_before: float
    not_after: float


class MutualTls:
    """Compiled: the route's CA certificates; the verdicts of recent client certificates."""

    __slots__ = (
        "_bundle",
        "_cas",
        "_no_certificate",
        "_not_accepted",
        "_ref",
        "_verdicts",
        "_wall_clock",
    )

    def __init__(
        self,
        config: MutualTlsModule,
        secrets: Mapping[tuple[str, str], SecretValue],
        *,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._wall_clock = wall_clock
        self._ref = config.ca_secret_ref
        value = lookup_secret(secrets, config.ca_secret_ref, field=_FIELD)
        where = f"{_FIELD} ({describe_ref(self._ref)})"
        self._cas = parse_ca_bundle(value.reveal(), where=where)
        self._bundle = "".join(
            ca.public_bytes(serialization.Encoding.PEM).decode() for ca in self._cas
        )
        self._verdicts: OrderedDict[bytes, _Verdict] = OrderedDict()
        self._no_certificate = reject(
            403,
            "this route requires a client certificate: connect over HTTPS with a certificate "
            "issued by one of its certificate authorities\n",
        )
        self._not_accepted = reject(
            403, "the client certificate is not accepted by this route (issuer or validity)\n"
        )

    def __repr__(self) -> str:
        return f"MutualTls({len(self._cas)} CA certificate(s))"

    @property
    def ca_bundle(self) -> str:
        """The route's CA certificates as PEM text, for the host's TLS trust store."""
        return self._bundle

    def check(
        self, peer_certificate: bytes | None, *, now: float | None = None
    ) -> Rejection | None:
        """``peer_certificate`` is the DER certificate TLS verified (None: none, or plain HTTP);
        ``now`` is Unix seconds (the wall clock by default)."""
        if not peer_certificate:
            return self._no_certificate
        if now is None:
            now = self._wall_clock()
        verdict = self._verdict(peer_certificate)
        if verdict.headers is None or not verdict.not_before <= now <= verdict.not_after:
            return self._not_accepted
        return None

    def upstream_headers(
        self, headers: MutableMapping[str, str], peer_certificate: bytes | None
    ) -> None:
        """Remove client-sent :data:`CLIENT_CERT_HEADERS`, then set the verified identity (the
        request was admitted by :meth:`check`, so its certificate has a verdict)."""
        strip_client_cert_headers(headers)
        if peer_certificate:
            verdict = self._verdict(peer_certificate)
            for name, value in verdict.headers or ():
                headers[name] = value

    def summary(self) -> dict[str, object]:
        return {
            "caSecretRef": {"name": self._ref.name, "key": self._ref.key},
            "certificateAuthorities": [ca.subject.rfc4514_string() for ca in self._cas],
            "headers": list(CLIENT_CERT_HEADERS),
        }

    def _verdict(self, der: bytes) -> _Verdict:
        verdict = self._verdicts.get(der)
        if verdict is not None:
            self._verdicts.move_to_end(der)
            return verdict
        verdict = _judge(der, self._cas)
        self._verdicts[der] = verdict
        if len(self._verdicts) > CACHE_SIZE:
            self._verdicts.popitem(last=False)
        return verdict


def _judge(der: bytes, cas: tuple[x509.Certificate, ...]) -> _Verdict:
    try:
        certificate = x509.load_der_x509_certificate(der)
    except ValueError:
        return _Verdict(None, 0.0, 0.0)
    not_before = certificate.not_valid_before_utc.timestamp()
    not_after = certificate.not_valid_after_utc.timestamp()
    if not any(_issued_by(certificate, ca) for ca in cas):
        return _Verdict(None, not_before, not_after)
    headers = [
        (SUBJECT_HEADER, header_safe(certificate.subject.rfc4514_string())),
        (FINGERPRINT_HEADER, hashlib.sha256(der).hexdigest()),
    ]
    names = subject_alternative_names(certificate)
    if names:
        headers.append((SAN_HEADER, ", ".join(header_safe(n, escape=",") for n in names)))
    return _Verdict(tuple(headers), not_before, not_after)


def _issued_by(certificate: x509.Certificate, ca: x509.Certificate) -> bool:
    try:
        certificate.verify_directly_issued_by(ca)
    except (InvalidSignature, ValueError, TypeError):  # not its issuer, or an unusable key
        return False
    return True


def subject_alternative_names(certificate: x509.Certificate) -> list[str]:
    """``DNS:…``, ``email:…``, ``URI:…``, ``IP:…`` for each name (the OpenSSL spellings)."""
    try:
        extension = certificate.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return []
    names: list[str] = []
    for kind, prefix in (
        (x509.DNSName, "DNS"),
        (x509.RFC822Name, "email"),
        (x509.UniformResourceIdentifier, "URI"),
        (x509.IPAddress, "IP"),
    ):
        names.extend(f"{prefix}:{value}" for value in extension.value.get_values_for_type(kind))
    return names


def header_safe(text: str, *, escape: str = "") -> str:
    """``text`` with every byte outside printable ASCII (and each of ``escape`` and ``\\``
    when ``escape`` is given) written as ``\\HH`` (RFC 4514's hex escape): a certificate's
    names are the issuer's data, and a control character in a header could split it."""
    out: list[str] = []
    for char in text:
        if " " <= char <= "~" and char not in escape and not (escape and char == "\\"):
            out.append(char)
        else:
            out.extend(f"\\{byte:02X}" for byte in char.encode())
    return "".join(out)


def parse_ca_bundle(pem: bytes, *, where: str) -> tuple[x509.Certificate, ...]:
    """The CA certificates of a PEM bundle, or :class:`ModuleConfigError` naming ``where`` and
    the certificate (never the bytes): none found, one that is not a CA, or one OpenSSL refuses."""
    try:
        certificates = tuple(x509.load_pem_x509_certificates(pem))
    except ValueError:
        raise ModuleConfigError(
            where, "holds no PEM certificate (expected one or more CA certificates)"
        ) from None
    for index, certificate in enumerate(certificates):
        try:
            constraints = certificate.extensions.get_extension_for_class(x509.BasicConstraints)
            is_ca = constraints.value.ca
        except x509.ExtensionNotFound:
            is_ca = False
        if not is_ca:
            raise ModuleConfigError(
                where,
                f"certificate {index + 1} ({certificate.subject.rfc4514_string()}) is not a CA "
                "certificate (basicConstraints CA:TRUE is required)",
            )
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    try:
        context.load_verify_locations(
            cadata="".join(
                c.public_bytes(serialization.Encoding.PEM).decode() for c in certificates
            )
        )
    except ssl.SSLError as exc:
        raise ModuleConfigError(where, f"OpenSSL refuses the bundle ({exc.reason})") from None
    return certificates
