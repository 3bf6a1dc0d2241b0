"""Request metrics of the data plane's two front doors, counted once per finished request.

What ingress and mesh users chart and alert on: requests by front door (``edge``/``mesh``),
target (the edge's host, the mesh's ``namespace/service:port``), route and status class; a
latency histogram per front door and target; upstream connection errors and timeouts; retries.
They are plain counters here, read by ``/metrics`` at scrape time
(``interlock.api.metrics``), as every other component's statistics are: one dictionary update
per request, nothing when nobody scrapes.

Label values come from the policy and the edge's configuration (hosts, Services, routes), never
from what a client sends: a request for an unknown host is counted under the target ``""``, so
a client cannot create series by naming hosts.
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Final

from interlock.dataplane.access_log import REASON_HEADER, Exchange, Front, begin, log_line

if TYPE_CHECKING:
    # Annotations only: a controller without an edge counts no requests and does not import
    # aiohttp.web (issue 29 item 5).
    from aiohttp import web

DURATION_BUCKETS: Final[tuple[float, ...]] = (
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1.0,
    2.5,
    5.0,
    10.0,
)
"""Upper bounds in seconds of the request latency histogram (Prometheus ``le``)."""

UPSTREAM_TIMEOUT: Final = "upstream-timeout"
UPSTREAM_UNREACHABLE: Final = "upstream-unreachable"

Labels = tuple[str, str]
"""``(front, target)``."""


_STATUS_CLASSES: Final = ("0xx", "1xx", "2xx", "3xx", "4xx", "5xx")
"""A status's class by its hundreds: ``2xx`` … ``5xx`` (``0xx`` for a request that was never
answered)."""


@dataclass(slots=True)
class Histogram:
    buckets: list[int] = field(default_factory=lambda: [0] * (len(DURATION_BUCKETS) + 1))
    """Per bucket of :data:`DURATION_BUCKETS`, not cumulative; the last slot is +Inf."""
    total: float = 0.0


@dataclass(slots=True)
class TrafficStatistics:
    """The counters; each key is a tuple of label values."""

    _requests: dict[tuple[str, str, str, str], int] = field(default_factory=dict)
    """:attr:`requests`, without the counts :attr:`_counting` holds yet."""
    _counting: list[_Counted] = field(default_factory=list, compare=False, repr=False)
    """Where :class:`Traffic` counts its requests (not a tunnel's) as they finish, added to
    :attr:`requests` when it is read: a request adds one to a list's item, where a dictionary
    keyed by a tuple hashed the key twice, to read the count and to write it (~600
    instructions a request, compiled)."""
    durations: dict[Labels, Histogram] = field(default_factory=dict)
    connect_errors: dict[Labels, int] = field(default_factory=dict)
    """Requests answered 502 because no upstream connection could be opened."""
    timeouts: dict[Labels, int] = field(default_factory=dict)
    """Requests answered 504 because the upstream did not answer in time."""
    retries: dict[Labels, int] = field(default_factory=dict)
    """Requests sent again (one per retry)."""
    tunnel_durations: dict[Labels, Histogram] = field(default_factory=dict)
    """How long CONNECT tunnels lasted (kept out of the request latency histogram)."""
    tunnel_bytes: dict[tuple[str, str, str], int] = field(default_factory=dict)
    """``(front, target, direction)`` → bytes through tunnels, ``direction`` being
    ``to_client`` or ``to_upstream``."""
    open_connections: dict[tuple[str, str], int] = field(default_factory=dict)
    """``(front, protocol)`` → connections being relayed now after the handshake: a WebSocket
    (``websocket``), another upgraded protocol (``upgrade``) or a mesh ``CONNECT`` tunnel
    (``connect``). Long-lived by design, so counted while open, not only when finished."""

    @property
    def requests(self) -> dict[tuple[str, str, str, str], int]:
        """``(front, target, route, status class)`` → requests answered: current whenever
        read (what :attr:`_counting` holds is added to it then)."""
        requests = self._requests
        for counted in self._counting:
            counts = counted.counts
            for grade in range(len(counts)):
                count = counts[grade]
                if count:
                    key = counted.keys[grade]
                    requests[key] = requests.get(key, 0) + count
                    counts[grade] = 0
        return requests


class _Counted:
    """Where the requests of one ``(front, target, route)`` are counted, found on its first
    request (not a tunnel's): its :attr:`TrafficStatistics.requests` key per status class,
    and its ``(front, target)`` latency histogram. A request found its key and histogram by
    hashing tuples made for it (each look-up hashed a new tuple and compared it with the key
    found, element by element); these keys are the very ones in the dictionary, found by the
    target's and the route's strings (whose hashes Python keeps)."""

    __slots__ = ("counts", "front", "histogram", "keys", "route", "target")

    def __init__(
        self, front: str, target: str, route: str, keys: list[Any], histogram: Histogram
    ) -> None:
        # ``Any``, not the key's tuple type: the compiled build would unpack a tuple typed so
        # and pack a new one for each dictionary call.
        self.keys = keys
        self.counts = [0] * len(keys)
        """Requests counted per status class and not yet added to
        :attr:`TrafficStatistics.requests` (under :attr:`keys`, by the same index)."""
        self.histogram = histogram
        self.front = front
        self.target = target
        self.route = route
        """Its labels, the very strings it was found by (:attr:`Traffic._last`)."""


class Traffic:
    """What both front doors report finished requests to: the counters, and the access log
    when it is on."""

    def __init__(
        self,
        *,
        access_log: bool = False,
        worker: int | None = None,
        clock: Callable[[], float] = time.monotonic,
    ):
        """``worker``: which edge worker of ``interlock run --edge-workers`` this process is
        (from 1), named in each access log line; None: the only data plane."""
        self.access_log = access_log
        self.worker = worker
        self.clock = clock
        self._statistics = TrafficStatistics()
        self._edge: dict[str, dict[str, _Counted]] = {}
        """target -> route -> :class:`_Counted`, of the front door ``edge``; :attr:`_mesh` of
        ``mesh``. Labels come from configuration and policy, never from clients (the module
        docstring): as bounded as the series themselves."""
        self._mesh: dict[str, dict[str, _Counted]] = {}
        self._last = _Counted("", "", "", [], Histogram())
        """The :class:`_Counted` a request found last, looked at first: most requests count
        where the one before did, under the same configured strings (compared as pointers:
        the two dictionary look-ups by the target and the route cost ~260 instructions a
        request, compiled). Not one any request counts under until the first is counted."""

    def statistics(self) -> TrafficStatistics:
        return self._statistics

    @contextlib.contextmanager
    def holding(self, front: Front, protocol: str) -> Iterator[None]:
        """Count one open ``protocol`` connection of ``front`` while inside."""
        key = (front, protocol)
        opened = self._statistics.open_connections
        opened[key] = opened.get(key, 0) + 1
        try:
            yield
        finally:
            opened[key] -= 1

    async def observe(
        self,
        front: Front,
        request: web.BaseRequest,
        handle: Callable[[web.BaseRequest], Awaitable[web.StreamResponse]],
    ) -> web.StreamResponse:
        """Run a front door's ``handle`` on ``request`` as one :class:`Exchange`, counted (and
        logged) once answered."""
        exchange = begin(
            front,
            host=request.headers.get("Host", ""),
            method=request.method,
            path=request.path,
            clock=self.clock,
        )
        response = await handle(request)
        await self.finish(exchange, request, response)
        return response

    async def finish(
        self, exchange: Exchange, request: web.BaseRequest, response: web.StreamResponse
    ) -> None:
        """Count (and log) ``exchange`` once ``response`` — relayed, or made by the data plane
        and written here — was sent: ``bytes`` is what went to the client, headers included
        (nginx's ``$bytes_sent``)."""
        if not response.prepared:
            await response.prepare(request)
            await response.write_eof()
        self.record(
            exchange,
            status=response.status,
            sent=response.body_length,
            reason=response.headers.get(REASON_HEADER, ""),
        )

    def record(self, exchange: Exchange, *, status: int, sent: int, reason: str) -> None:
        """Count (and log) ``exchange``, answered with ``status`` after ``sent`` bytes;
        ``reason`` when the data plane answered itself.

        The counting is done here, not in a method of :class:`TrafficStatistics`: every finished
        request passes through, and a second Python frame was a call's cost per request."""
        duration = exchange.duration = self.clock() - exchange.started
        exchange.status = status
        exchange.bytes = sent
        exchange.reason = reason
        statistics = self._statistics
        front, target, tunnel = exchange.front, exchange.target, exchange.tunnel
        # The status class inline (once per request: a function call cost more than the rest).
        grade = status // 100 if 100 <= status < 600 else 0
        if tunnel:
            labels = (front, target)
            key = (front, target, exchange.route, _STATUS_CLASSES[grade])
            requests = statistics._requests
            requests[key] = requests.get(key, 0) + 1
            histogram = statistics.tunnel_durations.get(labels)
            if histogram is None:
                histogram = statistics.tunnel_durations[labels] = Histogram()
        else:
            route = exchange.route
            counted = self._last
            if counted.target is not target or counted.route is not route or counted.front != front:
                routes = (self._edge if front == "edge" else self._mesh).get(target)
                found = None if routes is None else routes.get(route)
                counted = self._last = (
                    self._counted(front, target, route) if found is None else found
                )
            counts = counted.counts
            counts[grade] = counts[grade] + 1  # not ``+=``: compiled, that is Python's addition
            histogram = counted.histogram
        # bisect.bisect_left(DURATION_BUCKETS, duration), in line (a module attribute and a
        # call): most requests take less than the first bound.
        slot = 0
        for bound in DURATION_BUCKETS:
            if not bound < duration:
                break
            slot += 1
        buckets = histogram.buckets
        buckets[slot] = buckets[slot] + 1  # not ``+=``: compiled, that is Python's addition
        histogram.total += duration
        if reason or exchange.retries or tunnel:
            self._record_more(exchange, reason, sent)
        if self.access_log:
            log_line(exchange, worker=self.worker)

    def _counted(self, front: Front, target: str, route: str) -> _Counted:
        """The :class:`_Counted` of a ``(front, target, route)`` not counted yet."""
        durations = self._statistics.durations
        labels = (front, target)
        histogram = durations.get(labels)
        if histogram is None:
            histogram = durations[labels] = Histogram()
        counted = _Counted(
            front,
            target,
            route,
            [(front, target, route, grade) for grade in _STATUS_CLASSES],
            histogram,
        )
        (self._edge if front == "edge" else self._mesh).setdefault(target, {})[route] = counted
        self._statistics._counting.append(counted)
        return counted

    def _record_more(self, exchange: Exchange, reason: str, sent: int) -> None:
        """:meth:`record`'s counting of what most requests do not have: the data plane's
        reason, retries, a tunnel's bytes."""
        statistics = self._statistics
        labels = (exchange.front, exchange.target)
        if reason == UPSTREAM_UNREACHABLE:
            errors = statistics.connect_errors
            errors[labels] = errors.get(labels, 0) + 1
        elif reason == UPSTREAM_TIMEOUT:
            timeouts = statistics.timeouts
            timeouts[labels] = timeouts.get(labels, 0) + 1
        if exchange.retries:
            retries = statistics.retries
            retries[labels] = retries.get(labels, 0) + exchange.retries
        if exchange.tunnel:
            moved = statistics.tunnel_bytes
            for way, count in (("to_client", sent), ("to_upstream", exchange.received)):
                moved[(*labels, way)] = moved.get((*labels, way), 0) + count
