"""The TLS listener reads the server name from real ClientHellos (made by Python's own TLS
client), waits for a ClientHello that arrives in pieces, and drops a client that sends none."""

from __future__ import annotations

import asyncio
import ssl
import tempfile
from pathlib import Path
from typing import cast

import pytest

from interlock.edge.tls_listener import INCOMPLETE, TlsListener, server_name_of
from tests.kit.tls_certs import self_signed


def client_hello(server_hostname: str | None) -> bytes:
    """The first flight of a real TLS client (its ClientHello record)."""
    context = ssl.create_default_context()
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    incoming, outgoing = ssl.MemoryBIO(), ssl.MemoryBIO()
    connection = context.wrap_bio(incoming, outgoing, server_hostname=server_hostname)
    with pytest.raises(ssl.SSLWantReadError):
        connection.do_handshake()
    return outgoing.read()


def test_the_server_name_of_a_real_client_hello() -> None:
    assert server_name_of(client_hello("App.Example.COM")) == "app.example.com"
    assert server_name_of(client_hello(None)) is None


def test_a_partial_client_hello_asks_for_more_and_anything_else_has_no_name() -> None:
    hello = client_hello("app.example.com")
    for cut in (0, 1, 4, 5, 40, len(hello) - 1):
        assert server_name_of(hello[:cut]) is INCOMPLETE, cut
    assert server_name_of(b"GET / HTTP/1.1\r\nHost: app.example.com\r\n\r\n") is None
    # A record that claims to be a ClientHello but is cut short inside is no name, not a crash.
    assert server_name_of(hello[:5] + b"\x01\x00\x00\x10" + b"\x00" * (len(hello) - 9)) is None


async def test_a_client_hello_in_pieces_is_waited_for_and_a_silent_client_is_dropped() -> None:
    cert, key = self_signed("app.example.com")
    server_context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    with tempfile.TemporaryDirectory() as folder:
        (Path(folder) / "c.pem").write_text(cert + key)
        server_context.load_cert_chain(Path(folder) / "c.pem")
    names: list[str | None] = []
    connected = asyncio.Event()

    class Greeter(asyncio.Protocol):
        def connection_made(self, transport: asyncio.BaseTransport) -> None:
            connected.set()
            cast(asyncio.WriteTransport, transport).write(b"hello\n")

    def context_for(name: str | None) -> ssl.SSLContext:
        names.append(name)
        return server_context

    listener = TlsListener(protocol_factory=Greeter, context_for=context_for, timeout=1.0)
    host, port = await listener.start("127.0.0.1", 0)
    try:
        # A silent client: closed once the ClientHello timeout has passed (no timing asserted).
        reader, writer = await asyncio.open_connection(host, port)
        assert await asyncio.wait_for(reader.read(), 60) == b""
        writer.close()

        # A ClientHello sent in two pieces is read whole, then the handshake proceeds.
        trust = ssl.create_default_context(cadata=cert)
        hello = client_hello("app.example.com")
        raw_reader, raw_writer = await asyncio.open_connection(host, port)
        raw_writer.write(hello[:10])
        await raw_writer.drain()
        await asyncio.sleep(0.05)
        raw_writer.write(hello[10:])
        await raw_writer.drain()
        await asyncio.wait_for(raw_reader.read(1), 60)  # the server's answer to the hello
        raw_writer.close()

        tls_reader, tls_writer = await asyncio.open_connection(
            host, port, ssl=trust, server_hostname="app.example.com"
        )
        assert await asyncio.wait_for(tls_reader.readline(), 60) == b"hello\n"
        tls_writer.close()
        assert names == ["app.example.com", "app.example.com"]
    finally:
        await listener.close()
