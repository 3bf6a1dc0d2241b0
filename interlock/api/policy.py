"""The outbound policy API: the HTTP contract of ``docs/policy-api.md``, nothing more.

``GET /v1/outbound/{namespace}/{service}/{port}?clientNamespace=NS`` answers the current policy
of a Service port as seen from a client namespace; ``&watch=true`` streams newline-delimited
JSON, the current policy first and then one line per change;
``GET /v1/schema/outbound-policy.json`` answers the JSON Schema every policy satisfies. This
module only speaks HTTP: the policies come from a :class:`PolicySource` (the service-port watch
registry, ``interlock.actors.service_port_watch.ServicePortWatches``), one latest-value slot per
request, so a slow reader coalesces to the newest policy and never holds up the actor that
computes it. See ``docs/policy-api.md``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import parse_qsl

from interlock.api.hosts import host_guard
from interlock.api.http_server import Response, StreamResponse, json_response
from interlock.api.policy_schema import OUTBOUND_POLICY_SCHEMA, SCHEMA_PATH
from interlock.api.policy_stream import WatchStreams
from interlock.api.policy_target import BadRequest, watch_target
from interlock.api.routes import Request, Routes
from interlock.mailbox.slot import LatestValueSlot, SlotClosed
from interlock.model.allowed_hosts import AllowedHosts
from interlock.model.policy_watch import PolicyUpdate, WatchTarget

NDJSON = "application/x-ndjson"


class PolicySource(Protocol):
    """Hands out a slot per reader; the slot receives the target's policy and every change."""

    def open_watch(self, target: WatchTarget) -> LatestValueSlot[PolicyUpdate]: ...

    def close_watch(self, target: WatchTarget, slot: LatestValueSlot[PolicyUpdate]) -> None: ...


@dataclass(frozen=True, slots=True)
class PolicyApiStatistics:
    """A snapshot of :class:`PolicyApiCounters`."""

    responses: dict[tuple[str, int], int]
    """``(request, code)`` → answers; ``request`` is ``get``, ``watch`` or ``schema``. A watch
    is counted once, with the code its stream started with."""
    watches_open: int
    """Watch streams open now (each a mesh proxy or edge reading a Service port's policy)."""
    watches_opened: int
    """Watch streams ever opened."""


class PolicyApiCounters:
    """What the policy API answered (``/metrics``: ``interlock_policy_*``); one per app."""

    __slots__ = ("responses", "watches_open", "watches_opened")

    def __init__(self) -> None:
        self.responses: dict[tuple[str, int], int] = {}
        self.watches_open = 0
        self.watches_opened = 0

    def answered(self, request: str, response: StreamResponse) -> StreamResponse:
        """Count ``response`` as the answer to a ``request`` (``get``, ``watch``); return it."""
        self.count(request, response.status)
        return response

    def count(self, request: str, code: int) -> None:
        """Count one answer with ``code`` to a ``request`` (``get``, ``watch``, ``schema``)."""
        key = (request, code)
        self.responses[key] = self.responses.get(key, 0) + 1

    def statistics(self) -> PolicyApiStatistics:
        return PolicyApiStatistics(
            responses=dict(self.responses),
            watches_open=self.watches_open,
            watches_opened=self.watches_opened,
        )


def parse_target(request: Request) -> WatchTarget:
    """The :class:`WatchTarget` of a request, or :class:`BadRequest` naming the wrong part."""
    return watch_target(
        namespace=request.match_info["namespace"],
        service=request.match_info["service"],
        port_text=request.match_info["port"],
        client_namespace=_query(request).get("clientNamespace"),
    )


def _query(request: Request) -> dict[str, str]:
    """The query parameters (the first value of each), parsed without ``request.query``: that
    one stays cached on the request for as long as a watch stream is open."""
    params: dict[str, str] = {}
    for name, value in parse_qsl(request.query_string):
        params.setdefault(name, value)
    return params


def _is_watch(request: Request) -> bool:
    return _query(request).get("watch", "").lower() in ("true", "1", "yes")


def build_policy_app(
    *,
    source: PolicySource,
    first_policy_timeout: float = 10.0,
    wait_ready: Callable[[], Awaitable[object]] | None = None,
    is_ready: Callable[[], bool] | None = None,
    counters: PolicyApiCounters | None = None,
    allowed_hosts: AllowedHosts | None = None,
) -> Routes:
    """The routes of the policy API, reading policies from ``source``.

    ``first_policy_timeout`` bounds how long a request waits for the controller's initial sync
    (``wait_ready``) and the first policy of a target (normally immediate); past it the answer
    is 503 so a client retries instead of hanging or getting a policy computed from half the
    cluster. ``is_ready`` says without waiting whether ``wait_ready`` would return at once: a
    watch request that needs no wait is streamed by :mod:`interlock.api.policy_stream` (without
    ``is_ready``, only when there is no ``wait_ready``). ``counters`` (a fresh one by default)
    counts the answers and the open streams. ``allowed_hosts``: the ``Host`` names answered
    besides IP addresses and localhost (:mod:`interlock.api.hosts`).
    """
    hosts = allowed_hosts or AllowedHosts()
    counted = counters if counters is not None else PolicyApiCounters()
    answered = counted.answered

    async def outbound(request: Request) -> StreamResponse:
        watching = _is_watch(request)
        asked = "watch" if watching else "get"
        try:
            target = parse_target(request)
        except BadRequest as exc:
            return answered(asked, json_response({"error": str(exc)}, status=400))
        if wait_ready is not None:
            try:
                await asyncio.wait_for(wait_ready(), timeout=first_policy_timeout)
            except TimeoutError:
                return answered(
                    asked,
                    json_response(
                        {"error": "the controller has not finished its initial sync; retry"},
                        status=503,
                    ),
                )
        slot = source.open_watch(target)
        open_slots.add(slot)
        try:
            if slot.version == 0:
                # Only a watch being spawned has no policy yet; wait_for costs a task, so the
                # usual case (the policy is already there) does not pay for it.
                try:
                    await asyncio.wait_for(slot.next(after=0), timeout=first_policy_timeout)
                except TimeoutError:
                    return answered(
                        asked,
                        json_response({"error": f"no policy for {target} yet; retry"}, status=503),
                    )
                except SlotClosed:
                    pass
            if slot.closed:
                return answered(
                    asked,
                    json_response({"error": "the controller is shutting down"}, status=503),
                )
            version, update = slot.version, slot.latest
            assert update is not None
            if not _is_watch(request):
                return answered(asked, Response(body=update.body, content_type="application/json"))
            # The stream's loop lives in this frame: a watch stream is held open for hours by
            # each of thousands of proxies, so every nested coroutine frame counts per stream.
            response = StreamResponse(headers={"Content-Type": NDJSON, "Cache-Control": "no-cache"})
            await response.prepare(request)
            answered(asked, response)
            counted.watches_opened += 1
            counted.watches_open += 1
            try:
                while True:
                    # The write awaits the client; meanwhile the slot keeps only the newest.
                    await response.write(update.body + b"\n")
                    await slot.wait(after=version)
                    if slot.closed:
                        break
                    version, update = slot.version, slot.latest
                    assert update is not None
            except ConnectionResetError:
                return response
            finally:
                counted.watches_open -= 1
            await response.write_eof()
            return response
        finally:
            open_slots.discard(slot)
            source.close_watch(target, slot)

    async def schema(_request: Request) -> StreamResponse:
        response = json_response(OUTBOUND_POLICY_SCHEMA, content_type="application/schema+json")
        counted.count("schema", 200)
        return response

    async def end_streams() -> None:
        # Shutdown waits for running handlers; closing the slots ends every watch stream now.
        streams.end()
        for slot in list(open_slots):
            slot.close()

    open_slots: set[LatestValueSlot[PolicyUpdate]] = set()
    streams = WatchStreams(
        source=source,
        counters=counted,
        open_slots=open_slots,
        is_ready=is_ready if is_ready is not None else lambda: wait_ready is None,
        allows_host=hosts.allows,
    )
    routes = Routes(guard=host_guard(hosts))
    routes.front = streams.protocol
    routes.add_get("/v1/outbound/{namespace}/{service}/{port}", outbound)
    routes.add_get(SCHEMA_PATH, schema)
    routes.on_shutdown.append(end_streams)
    return routes
