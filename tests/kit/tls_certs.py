"""Certificates for the tests that serve or install TLS: a self-signed server certificate, a
certificate authority that issues client certificates (mutualTLS), and the ``kubernetes.io/tls``
Secret that carries a certificate and its key."""

from __future__ import annotations

import base64
import datetime
import ipaddress
from dataclasses import dataclass
from typing import Any

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID


def _key_pem(key: ec.EllipticCurvePrivateKey) -> str:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    ).decode()


def self_signed(host: str) -> tuple[str, str]:
    """``(certificate PEM, private key PEM)`` valid for ``host`` for a day."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, host)])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(host)]), critical=False)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode(), _key_pem(key)


@dataclass(frozen=True)
class Issued:
    """A certificate and its key, as PEM text (and the certificate object, for assertions)."""

    certificate: x509.Certificate
    cert_pem: str
    key_pem: str

    @property
    def der(self) -> bytes:
        return self.certificate.public_bytes(serialization.Encoding.DER)


class TestCa:
    """A certificate authority (self-signed, CA:TRUE) that issues client certificates."""

    __test__ = False

    def __init__(self, name: str) -> None:
        self._key = ec.generate_private_key(ec.SECP256R1())
        self.name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
        now = datetime.datetime.now(datetime.UTC)
        self.certificate = (
            x509.CertificateBuilder()
            .subject_name(self.name)
            .issuer_name(self.name)
            .public_key(self._key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
            .sign(self._key, hashes.SHA256())
        )
        self.pem = self.certificate.public_bytes(serialization.Encoding.PEM).decode()

    def issue(
        self,
        common_name: str,
        *,
        organization: str | None = None,
        dns: tuple[str, ...] = (),
        emails: tuple[str, ...] = (),
        ips: tuple[str, ...] = (),
        uris: tuple[str, ...] = (),
        valid_from: datetime.datetime | None = None,
        valid_until: datetime.datetime | None = None,
    ) -> Issued:
        """A certificate for ``common_name`` (valid for a day unless told otherwise): a client's,
        or a server's with ``dns`` and ``uris`` names."""
        key = ec.generate_private_key(ec.SECP256R1())
        attributes = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
        if organization is not None:
            attributes.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, organization))
        now = datetime.datetime.now(datetime.UTC)
        builder = (
            x509.CertificateBuilder()
            .subject_name(x509.Name(attributes))
            .issuer_name(self.name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(valid_from or now - datetime.timedelta(minutes=5))
            .not_valid_after(valid_until or now + datetime.timedelta(days=1))
        )
        names: list[x509.GeneralName] = [x509.DNSName(d) for d in dns]
        names += [x509.RFC822Name(e) for e in emails]
        names += [x509.IPAddress(ipaddress.ip_address(i)) for i in ips]
        names += [x509.UniformResourceIdentifier(u) for u in uris]
        if names:
            builder = builder.add_extension(x509.SubjectAlternativeName(names), critical=False)
        certificate = builder.sign(self._key, hashes.SHA256())
        return Issued(
            certificate,
            certificate.public_bytes(serialization.Encoding.PEM).decode(),
            _key_pem(key),
        )


def tls_secret(
    name: str, cert_pem: str, key_pem: str, *, namespace: str = "default"
) -> dict[str, Any]:
    """A ``kubernetes.io/tls`` Secret holding ``cert_pem`` and ``key_pem``."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "type": "kubernetes.io/tls",
        "metadata": {"name": name, "namespace": namespace},
        "data": {
            "tls.crt": base64.b64encode(cert_pem.encode()).decode(),
            "tls.key": base64.b64encode(key_pem.encode()).decode(),
        },
    }
