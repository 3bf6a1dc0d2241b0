"""The edge's TLS listener: it reads the server name from the ClientHello *before* the handshake,
so that each host's TLS settings apply to its own connections only.

Why not ``loop.create_server(ssl=context)`` with an SNI callback: Python's ``ssl`` takes a
connection's verify mode from the context it was created with, and switching contexts in the SNI
callback changes the certificate and the trust store but not whether a client certificate is
requested. With one context for every host, a host with mutualTLS would make the listener ask
every client of every host for a certificate, and a client that sent one to a host without
mutualTLS would fail the handshake. So the listener accepts the TCP connection itself, peeks
(``MSG_PEEK``: nothing is consumed) at the first TLS record until the ClientHello is complete,
reads its ``server_name`` extension (:func:`server_name_of`), and only then starts TLS with the
context of that host (:meth:`~interlock.edge.tls.SniCertificates.context_for`). The bytes stay in
the kernel's buffer, so OpenSSL reads the same ClientHello; the host context keeps an SNI
callback that refuses a name it does not serve, should the two readings ever differ.

A client gets ``header_timeout`` seconds to send its ClientHello (the HTTP header timeout: a
client that connects and sends nothing holds a socket no longer than one that stalls its
headers) and the same again for the handshake. The connection then belongs to the aiohttp
server as if it had accepted it (its limits, its drain on stop).
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
import ssl
from collections.abc import Callable

from loguru import logger

MAX_RECORD = 5 + 16384
"""A TLS record's header and largest body: a ClientHello is read from the first record only."""

_POLL = 0.01
"""Seconds between peeks while the ClientHello is incomplete (the socket stays readable)."""


class Incomplete:
    """:func:`server_name_of` needs more bytes."""


INCOMPLETE = Incomplete()


def server_name_of(data: bytes) -> str | Incomplete | None:
    """The ``server_name`` (host name, lower case) of the ClientHello at the start of ``data``.

    :data:`INCOMPLETE` when the first record has not fully arrived; None when there is no name
    (no SNI, or ``data`` is not a TLS ClientHello at all: OpenSSL then refuses it).
    """
    if len(data) < 5:
        return INCOMPLETE if data[:1] in (b"", b"\x16") else None
    if data[0] != 0x16:  # not a handshake record
        return None
    length = int.from_bytes(data[3:5], "big")
    if len(data) < 5 + length:
        return INCOMPLETE if len(data) < MAX_RECORD else None
    try:
        return _server_name(memoryview(data)[5 : 5 + length])
    except IndexError:
        return None


def _server_name(hello: memoryview) -> str | None:
    if hello[0] != 0x01:  # ClientHello
        return None
    body = hello[4 : 4 + int.from_bytes(hello[1:4], "big")]
    at = 2 + 32  # client_version, random
    at += 1 + body[at]  # session_id
    at += 2 + int.from_bytes(body[at : at + 2], "big")  # cipher_suites
    at += 1 + body[at]  # compression_methods
    end = at + 2 + int.from_bytes(body[at : at + 2], "big")
    at += 2
    while at + 4 <= end:
        kind = int.from_bytes(body[at : at + 2], "big")
        size = int.from_bytes(body[at + 2 : at + 4], "big")
        if kind == 0:  # server_name: a list of (type, name); type 0 is a host name
            names = body[at + 4 : at + 4 + size]
            position = 2
            while position + 3 <= len(names):
                name_type = names[position]
                name_length = int.from_bytes(names[position + 1 : position + 3], "big")
                name = bytes(names[position + 3 : position + 3 + name_length])
                if name_type == 0 and len(name) == name_length:
                    try:
                        return name.decode("ascii").lower()
                    except UnicodeDecodeError:
                        return None
                position += 3 + name_length
            return None
        at += 4 + size
    return None


class TlsListener:
    """Accepts TCP connections, picks each one's TLS context by its ClientHello's server name,
    and hands the TLS connection to ``protocol_factory`` (the aiohttp server)."""

    def __init__(
        self,
        *,
        protocol_factory: Callable[[], asyncio.Protocol],
        context_for: Callable[[str | None], ssl.SSLContext],
        timeout: float,
    ) -> None:
        self._factory = protocol_factory
        self._context_for = context_for
        self._timeout = timeout
        self._socket: socket.socket | None = None
        self._accepting: asyncio.Task[None] | None = None
        self._pending: set[asyncio.Task[None]] = set()

    async def start(self, host: str, port: int, *, reuse_port: bool = False) -> tuple[str, int]:
        """Listen on ``host:port`` (port 0: a free one); returns the address bound. With
        ``reuse_port`` other processes may listen on it too (``SO_REUSEPORT``: the kernel spreads
        connections over them, ``--edge-workers``)."""
        loop = asyncio.get_running_loop()
        infos = await loop.getaddrinfo(
            host or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
        )
        family, kind, proto, _, address = infos[0]
        listening = socket.socket(family, kind, proto)
        try:
            listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            if reuse_port:
                listening.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)
            listening.bind(address)
            listening.listen(1024)
            listening.setblocking(False)
        except BaseException:
            listening.close()
            raise
        self._socket = listening
        self._accepting = asyncio.create_task(self._accept(listening), name="edge TLS accept")
        bound = listening.getsockname()
        return str(bound[0]), int(bound[1])

    async def close(self) -> None:
        """Stop accepting; connections not yet handed over are closed (the others belong to
        the aiohttp server, which drains them)."""
        if self._accepting is not None:
            self._accepting.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._accepting
            self._accepting = None
        if self._socket is not None:
            self._socket.close()
            self._socket = None
        for task in list(self._pending):
            task.cancel()
        if self._pending:
            await asyncio.gather(*self._pending, return_exceptions=True)

    async def _accept(self, listening: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        while True:
            try:
                connection, _ = await loop.sock_accept(listening)
            except OSError as exc:  # EMFILE and the like: keep the listener, say why
                logger.warning("edge TLS listener: accept failed: {}", type(exc).__name__)
                await asyncio.sleep(0.1)
                continue
            task = asyncio.create_task(self._start_tls(connection))
            self._pending.add(task)
            task.add_done_callback(self._pending.discard)

    async def _start_tls(self, connection: socket.socket) -> None:
        loop = asyncio.get_running_loop()
        try:
            connection.setblocking(False)
            async with asyncio.timeout(self._timeout):
                name = await _peek_server_name(connection)
            context = self._context_for(name)
            await loop.connect_accepted_socket(
                self._factory, connection, ssl=context, ssl_handshake_timeout=self._timeout
            )
        except (OSError, TimeoutError, ssl.SSLError, ConnectionError):
            # A client that sent no ClientHello in time, or whose handshake failed: asyncio
            # has closed the transport, or nothing owns the socket yet.
            connection.close()
        except asyncio.CancelledError:
            connection.close()
            raise


async def _peek_server_name(connection: socket.socket) -> str | None:
    loop = asyncio.get_running_loop()
    while True:
        readable: asyncio.Future[None] = loop.create_future()

        def ready(future: asyncio.Future[None] = readable) -> None:
            if not future.done():
                future.set_result(None)

        loop.add_reader(connection.fileno(), ready)
        try:
            await readable
        finally:
            loop.remove_reader(connection.fileno())
        try:
            data = connection.recv(MAX_RECORD, socket.MSG_PEEK)
        except BlockingIOError:  # woken with nothing to read after all
            continue
        if not data:
            raise ConnectionError("closed before its ClientHello")
        found = server_name_of(data)
        if not isinstance(found, Incomplete):
            return found
        # Part of the record is here: the socket stays readable, so wait a little instead.
        await asyncio.sleep(_POLL)
