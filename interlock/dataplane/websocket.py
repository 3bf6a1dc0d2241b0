"""HTTP Upgrade pass-through for both front doors, only for a client that asked to upgrade.

``Upgrade`` and ``Connection`` are hop-by-hop (RFC 9110 §7.6.1): a proxy must not forward them
blindly, and a backend's ``101 Switching Protocols`` must never reach a client that did not ask
(the engine answers 502 then). A client that did ask (``Connection: upgrade`` and ``Upgrade``,
:func:`wants_upgrade`) gets its upgrade relayed here, the upstream handshake first — so a
backend that refuses, or cannot be reached, is answered as any other failed upstream and the
client never sees a 101 that has nothing behind it:

* a WebSocket (RFC 6455: ``GET`` with ``Upgrade: websocket``) message by message: the client's
  handshake with the subprotocol the backend chose, then both directions relayed until either
  side closes, whose close code and reason go to the other. Relaying messages rather than bytes
  lets aiohttp do what each hop needs (framing, masking, ping/pong per connection, the close
  handshake on each side). Messages are not size-limited here (the backend sets its own limits);
  the connection has no idle timeout (long-lived by design);
* any other protocol byte for byte (``tunnel.py``), except ``h2c``: such a request is forwarded
  as plain HTTP without the upgrade.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager

import aiohttp
from aiohttp import WSMsgType, web
from loguru import logger
from multidict import CIMultiDict
from yarl import URL

from interlock.dataplane.access_log import Front, note_upstream
from interlock.dataplane.answers import NO_READY_ENDPOINTS, Answer, answer
from interlock.dataplane.engine import upstream_error_answer
from interlock.dataplane.filters import apply_all, set_host
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.plan import Forward
from interlock.dataplane.source import Address, ServicePortRef, UpstreamError
from interlock.dataplane.tunnel import relay_tunnel, upgrade_protocols

_HANDSHAKE_HEADERS = frozenset(
    {
        "sec-websocket-key",
        "sec-websocket-version",
        "sec-websocket-protocol",
        "sec-websocket-extensions",
        "sec-websocket-accept",
    }
)
"""Negotiated per connection: the upstream handshake gets its own (aiohttp writes them)."""

CLOSE_TIMEOUT = 10.0
"""Seconds each side has to finish the close handshake."""


def wants_websocket(method: str, headers: Mapping[str, str]) -> bool:
    """Whether the client asked to upgrade this request to a WebSocket (RFC 6455 §4.1)."""
    if method != "GET":
        return False
    upgrade = headers.get("Upgrade", "")
    connection = headers.get("Connection", "")
    tokens = {token.strip().lower() for token in connection.split(",")}
    return upgrade.strip().lower() == "websocket" and "upgrade" in tokens


def wants_upgrade(method: str, headers: Mapping[str, str]) -> bool:
    """Whether the client asked for an upgrade this module relays: a WebSocket, or another
    protocol (not ``h2c``) on a request without a body."""
    if wants_websocket(method, headers):
        return True
    bodyless = headers.get("Content-Length", "0") == "0" and "Transfer-Encoding" not in headers
    return bodyless and bool(upgrade_protocols(method, headers))


class WebSocketFailed(Exception):
    """The upstream handshake did not succeed; ``status`` is what the client should get."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason


class Upgrades:
    """The upstream side of relayed upgrades: one client session of their own for WebSockets
    (a WebSocket holds its connection for its whole life, so it takes none from the HTTP pool),
    a connection of its own for each other protocol. Each relayed connection is counted open in
    ``traffic`` (by ``front`` and protocol) while its bytes flow."""

    def __init__(self, *, traffic: Traffic | None = None, front: Front = "edge") -> None:
        self._traffic = traffic
        self._front: Front = front
        self._session: aiohttp.ClientSession | None = None
        self._turns: dict[ServicePortRef, itertools.count[int]] = {}

    async def relay_decision(
        self,
        request: web.BaseRequest,
        decision: Forward,
        *,
        addresses: Sequence[Address] | UpstreamError,
        query: str,
        headers: CIMultiDict[str],
        handshake_timeout: float | None,
        where: str,
    ) -> web.StreamResponse | Answer:
        """Relay a client's upgrade as the engine's ``decision`` says: to one of the chosen
        backend's ``addresses`` in turn, with the rule's request filters and path; the answer
        to give when that cannot be done."""
        if isinstance(addresses, UpstreamError):
            return upstream_error_answer(addresses)
        if not addresses:
            return answer(NO_READY_ENDPOINTS, f"{decision.target} has no ready endpoint")
        apply_all(decision.filters.request_headers, headers)
        if decision.filters.rewrite is not None and decision.filters.rewrite.hostname:
            set_host(headers, decision.filters.rewrite.hostname)
        turn = self._turns.setdefault(decision.target, itertools.count())
        address = addresses[next(turn) % len(addresses)]
        note_upstream(*address)
        if not wants_websocket(request.method, request.headers):
            return await relay_tunnel(
                request,
                address=address,
                target=decision.path + (f"?{query}" if query else ""),
                headers=headers,
                protocols=upgrade_protocols(request.method, request.headers),
                handshake_timeout=handshake_timeout,
                where=where,
                hold=self._hold("upgrade"),
            )
        if self._session is None:
            self._session = aiohttp.ClientSession(
                cookie_jar=aiohttp.DummyCookieJar(),
                auto_decompress=False,
                skip_auto_headers=("User-Agent", "Accept-Encoding"),
            )
        try:
            return await relay_websocket(
                request,
                session=self._session,
                address=address,
                path=decision.path,
                query=query,
                headers=headers,
                handshake_timeout=handshake_timeout,
                where=where,
                hold=self._hold("websocket"),
            )
        except WebSocketFailed as failed:
            return Answer(status=failed.status, reason=failed.reason, detail=str(failed))

    def _hold(self, protocol: str) -> Callable[[], AbstractContextManager[object]]:
        traffic = self._traffic
        if traffic is None:
            return contextlib.nullcontext
        return lambda: traffic.holding(self._front, protocol)

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()
            self._session = None


async def relay_websocket(
    request: web.BaseRequest,
    *,
    session: aiohttp.ClientSession,
    address: tuple[str, int],
    path: str,
    query: str,
    headers: CIMultiDict[str],
    handshake_timeout: float | None,
    where: str,
    hold: Callable[[], AbstractContextManager[object]] = contextlib.nullcontext,
) -> web.WebSocketResponse:
    """Open the upstream WebSocket, then the client's, and relay until one side closes.

    ``headers`` are the upstream request headers the front door prepared (hop-by-hop removed,
    filters applied). Raises :class:`WebSocketFailed` when the upstream handshake fails (nothing
    has been sent to the client then). ``hold`` is entered while messages are relayed.
    """
    host, port = address
    url = URL.build(scheme="ws", host=host, port=port, path=path, query_string=query, encoded=True)
    sent = CIMultiDict((k, v) for k, v in headers.items() if k.lower() not in _HANDSHAKE_HEADERS)
    protocols = tuple(
        p.strip() for p in request.headers.get("Sec-WebSocket-Protocol", "").split(",") if p.strip()
    )
    try:
        async with asyncio.timeout(handshake_timeout):
            upstream = await session.ws_connect(
                url,
                headers=sent,
                protocols=protocols,
                autoclose=False,
                max_msg_size=0,
                timeout=aiohttp.ClientWSTimeout(ws_receive=None, ws_close=CLOSE_TIMEOUT),
            )
    except aiohttp.WSServerHandshakeError as error:
        logger.debug("{}: upstream refused the WebSocket: {}", where, error.status)
        raise WebSocketFailed(
            502, "upstream-failed", f"{where}: the upstream answered {error.status}"
        ) from None
    except TimeoutError:
        raise WebSocketFailed(
            504, "upstream-timeout", f"{where}: no WebSocket handshake in time"
        ) from None
    except aiohttp.ClientConnectorError:
        raise WebSocketFailed(
            502, "upstream-unreachable", f"{where}: cannot connect to {host}:{port}"
        ) from None
    except aiohttp.ClientError as error:
        raise WebSocketFailed(502, "upstream-failed", f"{where}: {type(error).__name__}") from None
    client = web.WebSocketResponse(
        protocols=(upstream.protocol,) if upstream.protocol else (),
        autoclose=False,
        max_msg_size=0,
        timeout=CLOSE_TIMEOUT,
    )
    try:
        await client.prepare(request)
        with hold():
            await _relay_both_ways(client, upstream)
    finally:
        await upstream.close()
    return client


async def _relay_both_ways(
    client: web.WebSocketResponse, upstream: aiohttp.ClientWebSocketResponse
) -> None:
    to_upstream = asyncio.create_task(_pump(client, upstream))
    to_client = asyncio.create_task(_pump(upstream, client))
    try:
        await asyncio.wait((to_upstream, to_client), return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (to_upstream, to_client):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task


async def _pump(
    source: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
    sink: web.WebSocketResponse | aiohttp.ClientWebSocketResponse,
) -> None:
    """Relay ``source``'s messages to ``sink``; when ``source`` closes, close ``sink`` with the
    same code and reason."""
    while True:
        message = await source.receive()
        if message.type is WSMsgType.TEXT:
            await sink.send_str(message.data)
        elif message.type is WSMsgType.BINARY:
            await sink.send_bytes(message.data)
        elif message.type is WSMsgType.CLOSE:
            code = message.data if isinstance(message.data, int) else 1000
            reason = message.extra.encode() if isinstance(message.extra, str) else b""
            await sink.close(code=code, message=reason)
            await source.close()
            return
        elif message.type in (WSMsgType.CLOSING, WSMsgType.CLOSED, WSMsgType.ERROR):
            await sink.close(code=1011 if message.type is WSMsgType.ERROR else 1000)
            return
