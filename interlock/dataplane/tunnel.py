"""HTTP Upgrade (a WebSocket, or another protocol) relayed byte for byte (RFC 9110 §7.8).

A client that sends ``Connection: upgrade`` and ``Upgrade: foo`` asks the server to switch the
connection to ``foo``; a proxy in between that strips the hop-by-hop headers (as it must for
anything it does not understand) silently turns the request into a plain one, and one that
forwards them blindly lets a backend's ``101`` reach a client that never asked. This module does
what a proxy that supports upgrades does: it sends the request with its upgrade headers to the
backend on a connection of its own, reads the answer's head, and only when the backend switched
to a protocol the client offered does the client get the ``101`` — then bytes flow both ways,
untouched, until either side closes or no byte went either way for the idle timeout. A
backend that does not switch is a 502 (the answer the data plane gives to a failed upstream),
never a 101 with nothing behind it. Why WebSockets are relayed so too: ``websocket.py``.

Not relayed: ``Upgrade: h2c`` (HTTP/2 by upgrade, which RFC 9113 retired: the listeners speak
h2c with prior knowledge instead); such a request goes on as a plain request without the
upgrade (:func:`upgrade_protocols`).
A request with a body is not upgraded either (its body and the new protocol's bytes would share
the connection).
"""

from __future__ import annotations

import asyncio
import contextlib
import ssl
from collections.abc import Callable, Mapping
from contextlib import AbstractContextManager
from typing import Any

from aiohttp import web
from loguru import logger
from multidict import CIMultiDict

from interlock.dataplane.answers import (
    UPSTREAM_FAILED,
    UPSTREAM_TIMEOUT,
    UPSTREAM_UNREACHABLE,
    Answer,
    answer,
)
from interlock.dataplane.source import Address

NOT_RELAYED = frozenset({"h2c"})
"""Upgrade tokens this module does not carry (see the module docstring)."""

MAX_HEAD = 64 * 1024
"""Largest answer head (status line and headers) read from the backend."""

HIGH_WATER = 1024 * 1024
"""Bytes buffered toward the backend before the client's connection stops being read."""

CHUNK = 64 * 1024


def upgrade_protocols(method: str, headers: Mapping[str, str]) -> tuple[str, ...]:
    """The protocols a client asked to upgrade to (``Connection: upgrade`` and ``Upgrade``),
    lower case, without those this module does not relay; () when none are left."""
    connection = {token.strip().lower() for token in headers.get("Connection", "").split(",")}
    if "upgrade" not in connection or method == "CONNECT":
        return ()
    offered = (token.strip() for token in headers.get("Upgrade", "").split(","))
    return tuple(t for t in offered if t and t.split("/")[0].lower() not in NOT_RELAYED)


async def relay_tunnel(
    request: web.BaseRequest,
    *,
    address: Address,
    target: str,
    headers: CIMultiDict[str],
    protocols: tuple[str, ...],
    handshake_timeout: float | None,
    idle_timeout: float,
    where: str,
    hold: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
    tls: ssl.SSLContext | None = None,
    server_hostname: str | None = None,
    peer_check: Callable[[dict[str, Any] | None], str | None] | None = None,
) -> web.StreamResponse | Answer:
    """Send ``request`` (to ``target``, with ``headers`` — hop-by-hop ones removed, filters
    applied — and the upgrade to ``protocols``) to ``address``; relay the backend's 101 and
    then bytes both ways until either side ends or none went either way for ``idle_timeout``
    seconds; or the answer to give when the backend did not switch. ``hold`` is entered while
    bytes are relayed (the open-connections gauge). ``tls``: the upstream connection speaks TLS
    with it, sending ``server_hostname`` as SNI; ``peer_check`` refuses a verified peer
    certificate (why, or None) before anything is sent."""
    host, port = address
    sent = CIMultiDict(headers)
    sent["Connection"] = "upgrade"
    sent["Upgrade"] = ", ".join(protocols)
    head = "".join(
        [f"{request.method} {target} HTTP/1.1\r\n"]
        + [f"{name}: {value}\r\n" for name, value in sent.items()]
        + ["\r\n"]
    )
    try:
        async with asyncio.timeout(handshake_timeout):
            reader, writer = await asyncio.open_connection(
                host,
                port,
                limit=MAX_HEAD,
                ssl=tls,
                server_hostname=server_hostname if tls is not None else None,
            )
            if peer_check is not None:
                problem = peer_check(writer.get_extra_info("peercert"))
                if problem is not None:
                    writer.close()
                    raise ssl.SSLCertVerificationError(problem)
            writer.write(head.encode("utf-8", "surrogateescape"))
            answer_head = await reader.readuntil(b"\r\n\r\n")
    except TimeoutError:
        return answer(UPSTREAM_TIMEOUT, f"{where}: no upgrade answer from {address} in time")
    except OSError as error:
        logger.debug("{}: cannot connect to {}: {}", where, address, error)
        return answer(UPSTREAM_UNREACHABLE, f"{where}: cannot connect to {address}")
    except (asyncio.IncompleteReadError, asyncio.LimitOverrunError):
        return answer(UPSTREAM_FAILED, f"{where}: {address} sent no complete answer head")
    status, answered = _parse_head(answer_head)
    chosen = answered.get("upgrade", "").strip()
    if status != 101 or chosen.lower() not in {p.lower() for p in protocols}:
        writer.close()
        detail = f"{where}: {address} answered {status} to an upgrade to {sent['Upgrade']}"
        logger.debug("{}", detail)
        return answer(UPSTREAM_FAILED, detail)
    response = web.StreamResponse(status=101, reason="Switching Protocols")
    for name, value in answered.items():
        if name.lower() not in ("connection", "upgrade", "content-length", "transfer-encoding"):
            response.headers.add(name, value)
    response.headers["Connection"] = "upgrade"
    response.headers["Upgrade"] = chosen
    response.force_close()
    try:
        await response.prepare(request)
        with hold():
            idled = not await _relay_bytes(request, reader, writer, idle_timeout=idle_timeout)
        if idled:
            logger.debug("{}: no byte either way for {:g} s: closed", where, idle_timeout)
    finally:
        writer.close()
        if request.transport is not None:
            request.transport.close()
    return response


def _parse_head(head: bytes) -> tuple[int, CIMultiDict[str]]:
    """An answer head's status and headers (0 for a status line that does not parse)."""
    lines = head.decode("latin-1").split("\r\n")
    parts = lines[0].split(" ", 2)
    status = int(parts[1]) if len(parts) > 1 and parts[1].isdigit() else 0
    headers: CIMultiDict[str] = CIMultiDict()
    for line in lines[1:]:
        name, sep, value = line.partition(":")
        if sep:
            headers.add(name.strip(), value.strip())
    return status, headers


class _ToUpstream:
    """The client's bytes after the 101, as aiohttp's connection hands them over (its payload
    parser slot), written to the backend; reading pauses while too much is buffered."""

    def __init__(self, request: web.BaseRequest, writer: asyncio.StreamWriter) -> None:
        self._client = request.transport
        self._writer = writer
        self._draining: asyncio.Task[None] | None = None
        self.ended = asyncio.Event()
        self._loop = asyncio.get_running_loop()
        self.last = self._loop.time()
        """When a byte last went either way (the relay's idle timeout counts from it)."""

    def feed_data(self, data: bytes) -> tuple[bool, bytes]:
        self.last = self._loop.time()
        if self._writer.is_closing():
            return False, b""
        self._writer.write(data)
        if (
            self._draining is None
            and self._client is not None
            and self._writer.transport.get_write_buffer_size() > HIGH_WATER
        ):
            self._client.pause_reading()
            self._draining = asyncio.get_running_loop().create_task(self._drain())
        return False, b""

    async def _drain(self) -> None:
        try:
            await self._writer.drain()
        except ConnectionError:
            self.ended.set()
        finally:
            self._draining = None
            if self._client is not None and not self._client.is_closing():
                self._client.resume_reading()

    def feed_eof(self) -> None:
        with contextlib.suppress(OSError, RuntimeError):
            if self._writer.can_write_eof():
                self._writer.write_eof()
        self.ended.set()


async def _relay_bytes(
    request: web.BaseRequest,
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    *,
    idle_timeout: float,
) -> bool:
    """Both directions until either side ends: the backend's bytes to the client (with
    back-pressure), the client's to the backend (``_ToUpstream``); False when it was ended
    because no byte went either way for ``idle_timeout`` seconds."""
    to_upstream = _ToUpstream(request, writer)
    protocol = request.protocol
    protocol.set_parser(to_upstream)  # type: ignore[arg-type]  # any feed_data/feed_eof
    client = request.transport
    assert client is not None
    loop = asyncio.get_running_loop()

    async def to_client() -> None:
        while data := await reader.read(CHUNK):
            to_upstream.last = loop.time()
            client.write(data)
            await protocol._drain_helper()

    idled: asyncio.Future[None] = loop.create_future()
    timer: asyncio.TimerHandle | None = None

    def check_idle() -> None:
        # One timer per connection, re-armed only when it fires early (not one per chunk).
        nonlocal timer
        left = to_upstream.last + idle_timeout - loop.time()
        if left > 0:
            timer = loop.call_later(left, check_idle)
        elif not idled.done():
            idled.set_result(None)

    check_idle()
    pumping = loop.create_task(to_client())
    ended = loop.create_task(to_upstream.ended.wait())
    try:
        await asyncio.wait((pumping, ended, idled), return_when=asyncio.FIRST_COMPLETED)
        if ended.done() and not pumping.done() and not idled.done():
            # The client finished sending: the backend may still answer what it got.
            await asyncio.wait((pumping, idled), return_when=asyncio.FIRST_COMPLETED)
        return not idled.done() or pumping.done()
    finally:
        if timer is not None:
            timer.cancel()
        idled.cancel()
        for task in (pumping, ended):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
