"""The embedded API server's TLS: a certificate authority and a serving certificate, made at start.

The server authenticates its clients by bearer token (see :mod:`interlock.embedded.http`), and
kubectl — client-go — sends a kubeconfig's credentials only to an ``https://`` server: over plain
HTTP it sends nothing, and every request would be refused. So the server speaks TLS, as every
real one does, with a certificate authority of its own made when it is created (nothing is
stored: a new server, a new authority). The kubeconfig it writes carries the authority's
certificate (``certificate-authority-data``), so clients verify the server without a flag to
skip verification, and the token never travels in clear text.

The serving certificate names ``localhost``, ``127.0.0.1``, ``::1`` and the host the server was
given. EC P-256 keys: each costs about a millisecond to make.
"""

from __future__ import annotations

import datetime
import ipaddress
import os
import ssl
import tempfile
from dataclasses import dataclass
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

_VALID_FOR = datetime.timedelta(days=365)


def _names(host: str) -> list[x509.GeneralName]:
    names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        if host and host != "localhost":
            names.append(x509.DNSName(host))
        return names
    if not address.is_unspecified and x509.IPAddress(address) not in names:
        names.append(x509.IPAddress(address))
    return names


@dataclass(frozen=True, slots=True)
class ServerTls:
    """A certificate authority's certificate and the server certificate and key it signed."""

    ca_pem: bytes
    cert_pem: bytes
    key_pem: bytes

    @classmethod
    def create(cls, host: str) -> ServerTls:
        now = datetime.datetime.now(datetime.UTC)
        ca_key = ec.generate_private_key(ec.SECP256R1())
        ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "interlock-embedded-ca")])
        ca_ski = x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key())
        ca = (
            x509.CertificateBuilder()
            .subject_name(ca_name)
            .issuer_name(ca_name)
            .public_key(ca_key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.BasicConstraints(ca=True, path_length=0), critical=True)
            .add_extension(
                x509.KeyUsage(
                    digital_signature=False,
                    content_commitment=False,
                    key_encipherment=False,
                    data_encipherment=False,
                    key_agreement=False,
                    key_cert_sign=True,
                    crl_sign=True,
                    encipher_only=False,
                    decipher_only=False,
                ),
                critical=True,
            )
            .add_extension(ca_ski, critical=False)
            .sign(ca_key, hashes.SHA256())
        )
        key = ec.generate_private_key(ec.SECP256R1())
        cert = (
            x509.CertificateBuilder()
            .subject_name(
                x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "interlock-embedded")])
            )
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + _VALID_FOR)
            .add_extension(x509.SubjectAlternativeName(_names(host)), critical=False)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.SERVER_AUTH]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_subject_key_identifier(ca_ski),
                critical=False,
            )
            .sign(ca_key, hashes.SHA256())
        )
        return cls(
            ca_pem=ca.public_bytes(serialization.Encoding.PEM),
            cert_pem=cert.public_bytes(serialization.Encoding.PEM),
            key_pem=key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.PKCS8,
                serialization.NoEncryption(),
            ),
        )

    def server_context(self) -> ssl.SSLContext:
        """The context the server listens with (the key passes through a private temporary
        file: ``ssl`` loads certificates from files only)."""
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        with tempfile.TemporaryDirectory(prefix="interlock-embedded-tls-") as directory:
            chain = Path(directory) / "server.pem"
            descriptor = os.open(chain, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(descriptor, "wb") as file:
                file.write(self.cert_pem + self.key_pem)
            context.load_cert_chain(chain)
        return context

    def client_context(self) -> ssl.SSLContext:
        """A context that trusts this server (and nothing else): for clients without a
        kubeconfig, such as tests calling the server's URL directly."""
        return ssl.create_default_context(cadata=self.ca_pem.decode())
