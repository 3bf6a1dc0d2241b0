"""HTTP Upgrade pass-through for both front doors, only for a client that asked to upgrade.

``Upgrade`` and ``Connection`` are hop-by-hop (RFC 9110 §7.6.1): a proxy must not forward them
blindly, and a backend's ``101 Switching Protocols`` must never reach a client that did not ask
(the engine answers 502 then). A client that did ask (``Connection: upgrade`` and ``Upgrade``
on a request without a body, :func:`wants_upgrade`) gets its upgrade relayed here, the upstream
handshake first — so a backend that refuses, or cannot be reached, is answered as any other
failed upstream and the client never sees a 101 that has nothing behind it — then bytes both
ways (``tunnel.py``), WebSockets (RFC 6455) included.

Why a WebSocket is relayed as bytes, not message by message (as it was, on aiohttp's WebSocket
objects): the edge then negotiated ``permessage-deflate`` with the client itself, so it had to
inflate what the client sent — one 250 KiB frame inflated to 256 MiB in the edge's memory and
was relayed whole — and it held each message whole before relaying it (a 160 MiB message
raised its memory by 481 MiB). Relayed as bytes, the handshake (``Sec-WebSocket-Key``,
``-Protocol``, ``-Extensions``) is the client's and the backend's own: compression is what they
agree on, inflated by the backend at its own limits, as a gzip request body is (the edge never
decodes bodies); a message of any size streams through with the back-pressure of both sockets
(at most ``tunnel.HIGH_WATER`` bytes held per direction); ping, pong and the close handshake are
end to end. This is what nginx, HAProxy and Envoy do.

What one client may hold (``UpgradeLimits``, the ``--edge-upgrade-*`` flags): upgraded
connections of their own — not the HTTP pool's, and not bounded by it — at most ``per_client``
from one client address (beyond: 429 ``too-many-upgrades``) and ``total`` in all (beyond: 503
``upgrades-full``), each closed once no byte went either way for ``idle_timeout`` seconds. A
hundred idle WebSockets used to hold the upgrade pool of every client (the 101st waited 5 s,
then 504).

``h2c`` is not relayed: such a request is forwarded as plain HTTP without the upgrade.
"""

from __future__ import annotations

import contextlib
import functools
import itertools
import ssl
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from dataclasses import dataclass

from aiohttp import web
from multidict import CIMultiDict

from interlock.dataplane.access_log import Front, note_upstream
from interlock.dataplane.answers import (
    NO_READY_ENDPOINTS,
    TOO_MANY_UPGRADES,
    UPGRADES_FULL,
    UPSTREAM_FAILED,
    Answer,
    answer,
)
from interlock.dataplane.engine import upstream_error_answer
from interlock.dataplane.filters import apply_all, set_host
from interlock.dataplane.limits import ProxyLimits
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.plan import Forward
from interlock.dataplane.source import Address, UpstreamError
from interlock.dataplane.tunnel import relay_tunnel, upgrade_protocols
from interlock.dataplane.upstream_tls import (
    MAX_VERIFIED_SETTINGS,
    peer_problem,
    verified_client_context,
)
from interlock.model.backend_tls import BackendTLS
from interlock.model.service import ServicePortKey


def wants_websocket(method: str, headers: Mapping[str, str]) -> bool:
    """Whether the client asked to upgrade this request to a WebSocket (RFC 6455 §4.1)."""
    if method != "GET":
        return False
    upgrade = headers.get("Upgrade", "")
    connection = headers.get("Connection", "")
    tokens = {token.strip().lower() for token in connection.split(",")}
    return upgrade.strip().lower() == "websocket" and "upgrade" in tokens


def wants_upgrade(method: str, headers: Mapping[str, str]) -> bool:
    """Whether the client asked for an upgrade this module relays: a protocol other than
    ``h2c`` (a WebSocket, say), on a request without a body."""
    bodyless = headers.get("Content-Length", "0") == "0" and "Transfer-Encoding" not in headers
    return bodyless and bool(upgrade_protocols(method, headers))


@dataclass(frozen=True, slots=True, kw_only=True)
class UpgradeLimits:
    """Bounds of the upgraded connections of one front door (see the module docstring)."""

    total: int = 10_000
    """Upgraded connections open at once in all (a handshake in progress counts)."""
    per_client: int = 100
    """Upgraded connections open at once from one client address."""
    idle_timeout: float = 300.0
    """Seconds an upgraded connection may stay open with no byte either way."""


def upgrade_limits(limits: ProxyLimits) -> UpgradeLimits:
    """The bounds of upgraded connections (:class:`UpgradeLimits`) in ``limits``."""
    return UpgradeLimits(
        total=limits.upgrade_connections,
        per_client=limits.upgrade_connections_per_client,
        idle_timeout=limits.upgrade_idle_timeout,
    )


class Upgrades:
    """The upstream side of relayed upgrades, with their limits: each upgraded connection has
    an upstream connection of its own for its whole life. Each is counted open in ``traffic``
    (by ``front`` and protocol: ``websocket`` or ``upgrade``) while its bytes flow."""

    def __init__(
        self,
        limits: UpgradeLimits = UpgradeLimits(),
        *,
        traffic: Traffic | None = None,
        front: Front = "edge",
    ) -> None:
        self._limits = limits
        self._traffic = traffic
        self._front: Front = front
        self._turns: dict[ServicePortKey, itertools.count[int]] = {}
        self._open = 0
        self._per_client: dict[str, int] = {}
        self._verified: dict[BackendTLS, ssl.SSLContext] = {}
        """Client contexts of the verified settings (BackendTLSPolicy) upgrades went to."""

    @property
    def open(self) -> int:
        """Upgraded connections open (or being opened) now."""
        return self._open

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
        client: str,
    ) -> web.StreamResponse | Answer:
        """Relay a client's upgrade as the engine's ``decision`` says: to one of the chosen
        backend's ``addresses`` in turn, with the rule's request filters and path; the answer
        to give when that cannot be done. ``client`` is the client's address, as the front
        door believes it."""
        if isinstance(addresses, UpstreamError):
            return upstream_error_answer(addresses)
        if not addresses:
            return answer(NO_READY_ENDPOINTS, f"{decision.target.describe()} has no ready endpoint")
        limits = self._limits
        held = self._per_client.get(client, 0)
        if held >= limits.per_client:
            refused = answer(TOO_MANY_UPGRADES, f"{where}: {held} upgraded connections open")
            return Answer(
                status=refused.status,
                reason=refused.reason,
                detail=refused.detail,
                headers=(("Retry-After", "1"),),
            )
        if self._open >= limits.total:
            return answer(UPGRADES_FULL, f"{where}: {self._open} upgraded connections open")
        tls = decision.backend_tls
        context = None
        if tls is not None:
            context = self._verified.get(tls)
            if context is None:
                try:
                    context = verified_client_context(tls, alpn=("http/1.1",))
                except ssl.SSLError as error:
                    # Neither the CA bundle's nor the key's content: what could not be loaded.
                    detail = f"{where}: TLS to the backend cannot be set up ({error.reason})"
                    return answer(UPSTREAM_FAILED, detail)
                if len(self._verified) >= MAX_VERIFIED_SETTINGS:
                    self._verified.clear()
                self._verified[tls] = context
        apply_all(decision.filters.request_headers, headers)
        if decision.filters.rewrite is not None and decision.filters.rewrite.hostname:
            set_host(headers, decision.filters.rewrite.hostname)
        turn = self._turns.setdefault(decision.target, itertools.count())
        address = addresses[next(turn) % len(addresses)]
        note_upstream(*address)
        self._open += 1
        self._per_client[client] = held + 1
        try:
            return await relay_tunnel(
                request,
                address=address,
                target=decision.path + (f"?{query}" if query else ""),
                headers=headers,
                protocols=upgrade_protocols(request.method, request.headers),
                handshake_timeout=handshake_timeout,
                idle_timeout=limits.idle_timeout,
                where=where,
                hold=self._hold(
                    "websocket" if wants_websocket(request.method, request.headers) else "upgrade"
                ),
                tls=context,
                server_hostname=None if tls is None else tls.hostname,
                peer_check=None if tls is None else functools.partial(peer_problem, tls),
            )
        finally:
            self._open -= 1
            left = self._per_client[client] - 1
            if left:
                self._per_client[client] = left
            else:
                del self._per_client[client]

    def _hold(self, protocol: str) -> Callable[[], AbstractContextManager[object]]:
        traffic = self._traffic
        if traffic is None:
            return contextlib.nullcontext
        return lambda: traffic.holding(self._front, protocol)

    async def close(self) -> None:
        """Nothing to close: each relay closes its own connections when it ends."""
