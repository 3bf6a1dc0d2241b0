"""AllowInsecureFallback's TLS: a client certificate is requested, and every client let in."""

from __future__ import annotations

import ssl
from pathlib import Path

import pytest

from interlock.edge.tls_fallback import accept_any_client_certificate
from tests.kit.tls_certs import Issued, TestCa, self_signed

TRUSTED = TestCa("trusted")
STRANGER = TestCa("stranger")


def _files(tmp_path: Path, name: str, cert: str, key: str) -> tuple[str, str]:
    cert_path, key_path = tmp_path / f"{name}.crt", tmp_path / f"{name}.key"
    cert_path.write_text(cert)
    key_path.write_text(key)
    return str(cert_path), str(key_path)


def handshake(tmp_path: Path, *, fallback: bool, client: Issued | None) -> bytes | None:
    """A handshake over memory BIOs, then one message: the certificate the server received
    (None: none)."""
    cert, key = self_signed("a.example")
    server = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    server.load_cert_chain(*_files(tmp_path, "server", cert, key))
    server.load_verify_locations(cadata=TRUSTED.pem)
    server.verify_mode = ssl.CERT_OPTIONAL
    if fallback:
        assert accept_any_client_certificate(server)
    client_context = ssl.create_default_context(cadata=cert)
    if client is not None:
        client_context.load_cert_chain(*_files(tmp_path, "client", client.cert_pem, client.key_pem))
    buffers = [ssl.MemoryBIO() for _ in range(4)]
    server_side = server.wrap_bio(buffers[0], buffers[1], server_side=True)
    client_side = client_context.wrap_bio(buffers[2], buffers[3], server_hostname="a.example")
    done = {"server": False, "client": False}
    for _ in range(20):
        for name, side in (("client", client_side), ("server", server_side)):
            if not done[name]:
                try:
                    side.do_handshake()
                    done[name] = True
                except ssl.SSLWantReadError:
                    pass
        buffers[0].write(buffers[3].read())
        buffers[2].write(buffers[1].read())
        if all(done.values()):
            break
    # TLS 1.3: the server judges the client's certificate after the client's handshake ends.
    client_side.write(b"ping")
    buffers[0].write(buffers[3].read())
    assert server_side.read(4) == b"ping"
    return server_side.getpeercert(binary_form=True)


def test_a_certificate_from_a_stranger_is_received_and_let_in(tmp_path: Path) -> None:
    stranger = STRANGER.issue("client")
    assert handshake(tmp_path, fallback=True, client=stranger) == stranger.der


def test_a_trusted_certificate_and_none_are_let_in(tmp_path: Path) -> None:
    trusted = TRUSTED.issue("client")
    assert handshake(tmp_path, fallback=True, client=trusted) == trusted.der
    assert handshake(tmp_path, fallback=True, client=None) is None


def test_without_it_the_stranger_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ssl.SSLError):
        handshake(tmp_path, fallback=False, client=STRANGER.issue("client"))
