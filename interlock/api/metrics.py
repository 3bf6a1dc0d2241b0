"""``/metrics``: the controller's counters in Prometheus text, read from ``statistics()``.

Every component already keeps its own counters for ``/debug`` (the actor system per actor kind,
each informer, the status patcher, the edge actors, the leader elector). Counting the same things
again in metric objects would mean two sources of truth that drift, and a cost on the
hot path of every message. Instead one custom collector reads the ``statistics()`` snapshots when
Prometheus scrapes, so each figure is counted exactly once, where it happens, and a scrape costs
one pass over the actor kinds (not over the actors).

Components are passed as callables returning their statistics (:class:`MetricsSources`): the
wiring in ``controller/`` decides where each one lives, and a component that is not running (no
edge, not yet leading) simply contributes nothing. No metric carries a Secret or any object content:
the labels are actor kinds, informer names, outcomes and states.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from interlock import __version__
from interlock.api.exposition import (
    CONTENT_TYPE,
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    MetricFamily,
    ProcessFamilies,
    Registry,
    python_families,
)
from interlock.api.grpc.counters import METHOD_TYPES, SERVICE, GrpcApiStatistics
from interlock.api.http_server import Response, StreamResponse
from interlock.api.policy import PolicyApiCounters, PolicyApiStatistics
from interlock.api.routes import Handler, Request, Routes
from interlock.dataplane.metrics import DURATION_BUCKETS, Traffic, TrafficStatistics
from interlock.kube.client_metrics import REQUEST_BUCKETS, KubeClientStatistics, client_metrics
from interlock.kube.events import EventRecorder, EventRecorderStatistics
from interlock.kube.informer import InformerSet, InformerStatistics
from interlock.kube.lease import LeaderElector, LeaderElectorStatistics
from interlock.kube.status import StatusPatcher, StatusPatcherStatistics
from interlock.mailbox import ActorSystem, KindStatistics, SystemStatistics
from interlock.mailbox.statistics import HANDLING_BUCKETS
from interlock.model.edge_board import RECONCILE_OUTCOMES, EdgeBoard

PREFIX = "interlock"


@dataclass(frozen=True, kw_only=True)
class MetricsSources:
    """Where each group of metrics comes from; ``None`` leaves the group out."""

    actors: Callable[[], SystemStatistics] | None = None
    """The actor system (``ActorSystem.statistics``): per-kind actors, depth, handled, failed,
    restarts, handling time, and the dead letters of the whole system."""

    informers: Callable[[], Mapping[str, InformerStatistics]] | None = None
    """Informer statistics by informer name (``InformerSet.statistics``)."""

    status_patches: Callable[[], StatusPatcherStatistics | None] | None = None
    """The one ``StatusPatcher`` every status write goes through (routes, Ingresses,
    ModuleSets); ``None`` from the callable before it exists."""

    edge_routes: Callable[[], EdgeBoard | None] | None = None
    """The edge actors' board: each route's current state (backend attached, last error) and
    the steps taken by outcome."""

    leader: Callable[[], LeaderElectorStatistics | None] | None = None
    """The leader elector; ``None`` from the callable when no election runs."""

    events: Callable[[], EventRecorderStatistics | None] | None = None
    """The Kubernetes Event recorder; ``None`` from the callable before it exists."""

    kube_client: Callable[[], KubeClientStatistics | None] | None = None
    """Every request to the Kubernetes API (``interlock.kube.client_metrics``); ``None`` from
    the callable before the client exists."""

    policy_api: Callable[[], PolicyApiStatistics | None] | None = None
    """The outbound policy API's answers and open watch streams."""

    grpc_api: Callable[[], GrpcApiStatistics] | None = None
    """Linkerd's proxy API (``--grpc-addr``): calls started and handled, messages sent."""

    traffic: Callable[[], TrafficStatistics] | None = None
    """Requests through the edge and the mesh listener (``interlock.dataplane.metrics``)."""

    ready: Callable[[], bool] | None = None
    """Whether the initial sync is done (what ``/readyz`` answers 200 for)."""

    refresh: Callable[[], Awaitable[None]] | None = None
    """Awaited before each scrape: reads what other processes count (``--edge-workers``)."""


class ControllerCollector:
    """The controller's families, read from :class:`MetricsSources` at scrape time."""

    def __init__(self, sources: MetricsSources) -> None:
        self._sources = sources

    def collect(self) -> Iterator[MetricFamily]:
        sources = self._sources
        if sources.actors is not None:
            yield from _actor_families(sources.actors())
        if sources.informers is not None:
            yield from _informer_families(sources.informers())
        if sources.status_patches is not None:
            yield from _status_families(sources.status_patches())
        if sources.edge_routes is not None:
            yield from _edge_families(sources.edge_routes())
        if sources.leader is not None:
            yield from _leader_families(sources.leader())
        if sources.events is not None:
            yield from _event_families(sources.events())
        if sources.kube_client is not None:
            yield from _kube_client_families(sources.kube_client())
        if sources.policy_api is not None:
            yield from _policy_api_families(sources.policy_api())
        if sources.grpc_api is not None:
            yield from _grpc_api_families(sources.grpc_api())
        if sources.traffic is not None:
            yield from _traffic_families(sources.traffic())
        if sources.ready is not None:
            ready = _gauge(
                "ready",
                "1 once the initial sync is done and this replica serves what it computed "
                "(/readyz answers 200), else 0.",
            )
            ready.add_metric([], 1 if sources.ready() else 0)
            yield ready


def _counter(name: str, documentation: str, labels: Sequence[str] = ()) -> CounterMetricFamily:
    return CounterMetricFamily(f"{PREFIX}_{name}", documentation, labels=labels)


def _gauge(name: str, documentation: str, labels: Sequence[str] = ()) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}_{name}", documentation, labels=labels)


def _actor_families(stats: SystemStatistics | None) -> Iterator[MetricFamily]:
    actors = _gauge("actors", "Actors alive, by kind (address prefix).", ["kind"])
    depth = _gauge("mailbox_depth", "Messages waiting in mailboxes, by actor kind.", ["kind"])
    handled = _counter(
        "messages_handled", "Messages handled without error, by actor kind.", ["kind"]
    )
    failed = _counter("messages_failed", "Messages whose handler raised, by actor kind.", ["kind"])
    restarts = _counter("actor_restarts", "Actors restarted by supervision, by kind.", ["kind"])
    dead = _counter(
        "dead_letters",
        "Messages never delivered (unknown or stopped actor, overflow, shutdown).",
    )
    busy = _gauge("actors_busy", "Actors that own a task right now (idle actors own none).")
    handling = HistogramMetricFamily(
        f"{PREFIX}_message_handling_seconds",
        "Seconds a handler took per message, by actor kind (failed runs included; a handler "
        "awaiting I/O counts the wait).",
        labels=["kind"],
    )
    reconciles = _counter(
        "reconciles",
        "Messages handled by the actors that keep objects of a kind up to date, by that "
        "Kubernetes kind (Service, HTTPRoute, GRPCRoute, Ingress, ModuleSet …) and result "
        "(success, or error when the handler raised).",
        ["kind", "result"],
    )
    reconcile_time = HistogramMetricFamily(
        f"{PREFIX}_reconcile_seconds",
        "Seconds the actors keeping objects of a kind up to date took per message, by that "
        "Kubernetes kind.",
        labels=["kind"],
    )
    if stats is not None:
        for kind, counts in sorted(stats.reconciles.items()):
            reconciles.add_metric([kind, "success"], counts.processed)
            reconciles.add_metric([kind, "error"], counts.failed)
            reconcile_time.add_metric([kind], _cumulative(counts), counts.handling_seconds)
        for kind, counts in sorted(stats.kinds.items()):
            actors.add_metric([kind], counts.actors)
            depth.add_metric([kind], counts.depth)
            handled.add_metric([kind], counts.processed)
            failed.add_metric([kind], counts.failed)
            restarts.add_metric([kind], counts.restarts)
            handling.add_metric([kind], _cumulative(counts), counts.handling_seconds)
        dead.add_metric([], stats.dead_letters)
        busy.add_metric([], stats.busy)
    yield from (actors, depth, handled, failed, restarts, dead, busy, handling)
    yield from (reconciles, reconcile_time)


def _cumulative(counts: KindStatistics) -> list[tuple[str, float]]:
    """Prometheus buckets (``le`` → runs at most that long) from the runtime's per-slot counts."""
    return _buckets(HANDLING_BUCKETS, counts.handling_buckets)


def _buckets(bounds: tuple[float, ...], counts: tuple[int, ...]) -> list[tuple[str, float]]:
    """Cumulative ``(le, count)`` pairs from per-bucket counts whose last slot is ``+Inf``."""
    labels = [*(repr(bound) for bound in bounds), "+Inf"]
    buckets: list[tuple[str, float]] = []
    total = 0
    for bound, count in zip(labels, counts, strict=True):
        total += count
        buckets.append((bound, total))
    return buckets


def _informer_families(stats: Mapping[str, InformerStatistics] | None) -> Iterator[MetricFamily]:
    labels = ["informer"]
    objects = _gauge("informer_objects", "Objects an informer currently knows.", labels)
    events = _counter("informer_events", "Events an informer delivered (upserts, deletes).", labels)
    relists = _counter(
        "informer_relists", "Lists after the initial one (each follows 410 Gone).", labels
    )
    reconnects = _counter(
        "informer_reconnects", "Watches re-opened after a failure or a dropped connection.", labels
    )
    sink_errors = _counter(
        "informer_sink_errors", "Events whose delivery to the controller raised.", labels
    )
    for name, counts in sorted((stats or {}).items()):
        objects.add_metric([name], counts.objects)
        events.add_metric([name], counts.events)
        relists.add_metric([name], counts.relists)
        reconnects.add_metric([name], counts.reconnects)
        sink_errors.add_metric([name], counts.sink_errors)
    yield from (objects, events, relists, reconnects, sink_errors)


def _status_families(stats: StatusPatcherStatistics | None) -> Iterator[MetricFamily]:
    patches = _counter(
        "status_patches",
        "Status writes by outcome: written, unchanged (skipped as identical), gone (object "
        "deleted), rejected (4xx), failed (transient, retried).",
        ["outcome"],
    )
    if stats is not None:
        for outcome in ("written", "unchanged", "gone", "rejected", "failed"):
            patches.add_metric([outcome], getattr(stats, outcome))
    yield patches


def _edge_families(board: EdgeBoard | None) -> Iterator[MetricFamily]:
    routes = _gauge(
        "edge_routes",
        "Edge routes by state: serving (backend attached) or no_backend (answers 503).",
        ["state"],
    )
    failing = _gauge(
        "edge_routes_failing",
        "Edge routes whose last step failed, by error class: permanent (waits for a change) "
        "or transient (retried with backoff).",
        ["error"],
    )
    reconciles = _counter(
        "edge_reconciles",
        "Steps edge actors took against the data plane, by outcome: applied (a route's "
        "modules), reserved (a new route whose modules failed, answering 503), attached (a "
        "backend), removed, tls_set, failed_transient (retried) or failed_permanent (waits "
        "for a change).",
        ["outcome"],
    )
    counts = {"serving": 0, "no_backend": 0}
    errors = {"permanent": 0, "transient": 0}
    for host in board.hosts.values() if board is not None else ():
        for route in host.routes.values():
            if not route.desired:
                continue
            counts["serving" if route.backend is not None else "no_backend"] += 1
            if route.last_error is not None:
                errors["permanent" if route.permanent else "transient"] += 1
    if board is not None:
        for state, count in counts.items():
            routes.add_metric([state], count)
        for error, count in errors.items():
            failing.add_metric([error], count)
        for outcome in RECONCILE_OUTCOMES:
            reconciles.add_metric([outcome], board.reconciles[outcome])
    yield from (routes, failing, reconciles)


def _leader_families(stats: LeaderElectorStatistics | None) -> Iterator[MetricFamily]:
    leader = _gauge("leader", "1 while this replica holds the Lease (and writes status), else 0.")
    acquisitions = _counter("leader_acquisitions", "Times this replica became leader.")
    renewals = _counter("lease_renewals", "Successful Lease renewals while leading.")
    conflicts = _counter("lease_conflicts", "Lease writes refused because another replica won.")
    failures = _counter("lease_failures", "Lease attempts that failed for another reason.")
    if stats is not None:
        leader.add_metric([], 1 if stats.is_leader else 0)
        acquisitions.add_metric([], stats.acquisitions)
        renewals.add_metric([], stats.renewals)
        conflicts.add_metric([], stats.conflicts)
        failures.add_metric([], stats.failures)
    yield from (leader, acquisitions, renewals, conflicts, failures)


def _event_families(stats: EventRecorderStatistics | None) -> Iterator[MetricFamily]:
    events = _counter(
        "kube_events",
        "Kubernetes Events recorded: created, aggregated into an existing one, or failed.",
        ["outcome"],
    )
    if stats is not None:
        events.add_metric(["created"], stats.created)
        events.add_metric(["aggregated"], stats.aggregated)
        events.add_metric(["failed"], stats.failed)
    yield events


def _kube_client_families(stats: KubeClientStatistics | None) -> Iterator[MetricFamily]:
    # client-go's names and labels, unprefixed, so dashboards built for Go controllers work.
    requests = CounterMetricFamily(
        "rest_client_requests",
        "Requests to the Kubernetes API, by HTTP status code (<error>: no answer), method "
        "and host (client-go's metric).",
        labels=["code", "method", "host"],
    )
    durations = HistogramMetricFamily(
        "rest_client_request_duration_seconds",
        "Seconds until the Kubernetes API's answer (its headers: a watch counts until its "
        "stream starts), by HTTP method (client-go's verb label) and host.",
        labels=["verb", "host"],
    )
    by_resource = _counter(
        "kube_requests",
        "Requests to the Kubernetes API by Kubernetes verb (get, list, watch, create, update, "
        "patch, delete, discover), API group, resource, subresource and HTTP status code.",
        ["verb", "group", "resource", "subresource", "code"],
    )
    resource_durations = HistogramMetricFamily(
        f"{PREFIX}_kube_request_duration_seconds",
        "Seconds until the Kubernetes API's answer (its headers), by Kubernetes verb, API "
        "group and resource.",
        labels=["verb", "group", "resource"],
    )
    in_flight = _gauge(
        "kube_requests_in_flight",
        "Requests to the Kubernetes API waiting for their answer's headers (a watch until its "
        "stream starts), by Kubernetes verb, API group and resource.",
        ["verb", "group", "resource"],
    )
    if stats is not None:
        for verb_labels, waiting in sorted(stats.in_flight.items()):
            in_flight.add_metric(list(verb_labels), waiting)
        for labels, count in sorted(stats.requests.items()):
            requests.add_metric(list(labels), count)
        for method_host, histogram in sorted(stats.durations.items()):
            buckets = _buckets(REQUEST_BUCKETS, histogram.buckets)
            durations.add_metric(list(method_host), buckets, histogram.total)
        for resource_labels, count in sorted(stats.resource_requests.items()):
            by_resource.add_metric(list(resource_labels), count)
        for verb_labels, histogram in sorted(stats.resource_durations.items()):
            buckets = _buckets(REQUEST_BUCKETS, histogram.buckets)
            resource_durations.add_metric(list(verb_labels), buckets, histogram.total)
    yield from (requests, durations, by_resource, resource_durations, in_flight)


def _policy_api_families(stats: PolicyApiStatistics | None) -> Iterator[MetricFamily]:
    responses = _counter(
        "policy_requests",
        "Requests the outbound policy API answered, by request (get, watch, schema) and HTTP "
        "status code (a watch is counted when its stream starts).",
        ["request", "code"],
    )
    open_watches = _gauge(
        "policy_watches_open", "Watch streams of the outbound policy API open now."
    )
    opened = _counter("policy_watches_opened", "Watch streams of the outbound policy API opened.")
    if stats is not None:
        for (request, code), count in sorted(stats.responses.items()):
            responses.add_metric([request, str(code)], count)
        open_watches.add_metric([], stats.watches_open)
        opened.add_metric([], stats.watches_opened)
    yield from (responses, open_watches, opened)


def _grpc_api_families(stats: GrpcApiStatistics | None) -> Iterator[MetricFamily]:
    labels = ["grpc_service", "grpc_method", "grpc_type"]
    started = _counter("grpc_server_started", "Calls of Linkerd's proxy API started.", labels)
    handled = _counter(
        "grpc_server_handled",
        "Calls of Linkerd's proxy API ended, by status code (a watch when its stream ends).",
        [*labels, "grpc_code"],
    )
    sent = _counter("grpc_server_msg_sent", "Messages sent by Linkerd's proxy API.", labels)
    open_watches = _gauge("grpc_watches_open", "Watch streams of Linkerd's proxy API open now.")
    if stats is not None:
        for method, count in sorted(stats.started.items()):
            started.add_metric([SERVICE, method, METHOD_TYPES[method]], count)
        for (method, code), count in sorted(stats.handled.items()):
            handled.add_metric([SERVICE, method, METHOD_TYPES[method], code], count)
        for method, count in sorted(stats.sent.items()):
            sent.add_metric([SERVICE, method, METHOD_TYPES[method]], count)
        open_watches.add_metric([], stats.watches_open)
    yield from (started, handled, sent, open_watches)


def _traffic_families(stats: TrafficStatistics | None) -> Iterator[MetricFamily]:
    front_target = ["front", "target"]
    requests = _counter(
        "http_requests",
        "Requests answered by the data plane, by front door (edge, mesh), target (the edge's "
        "host, the mesh's namespace/service:port; empty when it names none known), route and "
        "status class (2xx … 5xx).",
        ["front", "target", "route", "code_class"],
    )
    durations = HistogramMetricFamily(
        f"{PREFIX}_http_request_duration_seconds",
        "Seconds from a request's arrival until its answer was written (relayed) or made, by "
        "front door and target.",
        labels=front_target,
    )
    connect_errors = _counter(
        "upstream_connect_errors",
        "Requests answered 502 because no connection to an upstream could be opened.",
        front_target,
    )
    timeouts = _counter(
        "upstream_timeouts",
        "Requests answered 504 because the upstream did not answer in time.",
        front_target,
    )
    retries = _counter("upstream_retries", "Requests sent to an upstream again.", front_target)
    tunnel_durations = HistogramMetricFamily(
        f"{PREFIX}_tunnel_duration_seconds",
        "Seconds CONNECT requests lasted (a tunnel until both sides closed, a refused one until "
        "answered), by front door and target; kept out of the request latency histogram.",
        labels=front_target,
    )
    tunnel_bytes = _counter(
        "tunnel_bytes",
        "Bytes carried by CONNECT tunnels, by front door, target and direction (to_client, "
        "to_upstream).",
        ["front", "target", "direction"],
    )
    open_connections = _gauge(
        "connections_open",
        "Connections relayed now after their handshake, by front door and protocol: websocket, "
        "upgrade (another protocol, byte for byte) or connect (a mesh CONNECT tunnel).",
        ["front", "protocol"],
    )
    if stats is not None:
        for pair, count in sorted(stats.open_connections.items()):
            open_connections.add_metric(list(pair), count)
        for labels, count in sorted(stats.requests.items()):
            requests.add_metric(list(labels), count)
        for pair, histogram in sorted(stats.durations.items()):
            buckets = _buckets(DURATION_BUCKETS, tuple(histogram.buckets))
            durations.add_metric(list(pair), buckets, histogram.total)
        for pair, histogram in sorted(stats.tunnel_durations.items()):
            buckets = _buckets(DURATION_BUCKETS, tuple(histogram.buckets))
            tunnel_durations.add_metric(list(pair), buckets, histogram.total)
        for way, count in sorted(stats.tunnel_bytes.items()):
            tunnel_bytes.add_metric(list(way), count)
        for family, counts in (
            (connect_errors, stats.connect_errors),
            (timeouts, stats.timeouts),
            (retries, stats.retries),
        ):
            for pair, count in sorted(counts.items()):
                family.add_metric(list(pair), count)
    yield from (requests, durations, connect_errors, timeouts, retries)
    yield from (tunnel_durations, tunnel_bytes, open_connections)


class EdgeParts(Protocol):
    """The edge half of a controller (``interlock.controller.edge_half.EdgeHalf``)."""

    @property
    def board(self) -> EdgeBoard: ...

    async def refresh_workers(self) -> None: ...

    def worker_traffic(self) -> list[TrafficStatistics]: ...


class ControllerParts(Protocol):
    """The parts of a running controller that keep statistics (``controller.app.Controller``)."""

    @property
    def system(self) -> ActorSystem: ...

    @property
    def informers(self) -> InformerSet | None: ...

    @property
    def patcher(self) -> StatusPatcher | None: ...

    @property
    def edge(self) -> EdgeParts | None: ...

    @property
    def recorder(self) -> EventRecorder | None: ...

    @property
    def elector(self) -> LeaderElector | None: ...

    @property
    def api(self) -> Any: ...

    @property
    def policy_counters(self) -> PolicyApiCounters: ...

    @property
    def traffic(self) -> Traffic: ...

    @property
    def ready(self) -> bool: ...


def controller_sources(controller: ControllerParts) -> MetricsSources:
    """Sources reading ``controller``'s parts at scrape time: parts created after ``/metrics``
    was mounted (the informers, the Lease) are picked up as they appear."""

    def informers() -> Mapping[str, InformerStatistics]:
        found = controller.informers
        return found.statistics() if found is not None else {}

    def status_patches() -> StatusPatcherStatistics | None:
        patcher = controller.patcher
        return patcher.statistics() if patcher is not None else None

    def edge_routes() -> EdgeBoard | None:
        edge = controller.edge
        return edge.board if edge is not None else None

    def leader() -> LeaderElectorStatistics | None:
        elector = controller.elector
        return elector.statistics() if elector is not None else None

    def events() -> EventRecorderStatistics | None:
        recorder = controller.recorder
        return recorder.statistics() if recorder is not None else None

    def traffic() -> TrafficStatistics:
        own = controller.traffic.statistics()
        edge = controller.edge
        workers = [] if edge is None else edge.worker_traffic()
        if not workers:
            return own
        # Only an edge with workers sums: ``interlock.edge`` loads with the edge half.
        from interlock.edge.worker_traffic import summed

        return summed([own, *workers])

    async def refresh() -> None:
        edge = controller.edge
        if edge is not None:
            await edge.refresh_workers()

    def kube_client() -> KubeClientStatistics | None:
        metrics = client_metrics(controller.api)
        return metrics.statistics() if metrics is not None else None

    return MetricsSources(
        actors=controller.system.statistics,
        informers=informers,
        status_patches=status_patches,
        edge_routes=edge_routes,
        leader=leader,
        events=events,
        kube_client=kube_client,
        policy_api=controller.policy_counters.statistics,
        traffic=traffic,
        ready=lambda: controller.ready,
        refresh=refresh,
    )


def metrics_registry(sources: MetricsSources, *, process: bool = True) -> Registry:
    """A registry of its own (several controllers may share a process in tests) holding the
    controller's families, ``interlock_build_info{version}``, ``python_info`` and
    ``python_gc_*`` (what operators' dashboards look for beside any Python service) and, with
    ``process``, the standard ``process_*`` metrics."""
    build = GaugeMetricFamily(
        "interlock_build_info",
        "Always 1; the version of interlock serving these metrics is its label.",
        ["version"],
    )
    build.add_metric([__version__], 1)
    families = [ControllerCollector(sources).collect, lambda: [build], python_families]
    if process:
        families.append(ProcessFamilies())
    return Registry(families)


def metrics_handler(
    registry: Registry, *, refresh: Callable[[], Awaitable[None]] | None = None
) -> Handler:
    """A handler answering ``GET /metrics`` with ``registry`` in Prometheus text, after
    awaiting ``refresh``."""

    async def handle(_request: Request) -> StreamResponse:
        if refresh is not None:
            await refresh()
        return Response(body=registry.exposition(), headers={"Content-Type": CONTENT_TYPE})

    return handle


def mount_metrics(app: Routes, sources: MetricsSources) -> Registry:
    """Serve ``/metrics`` on ``app`` (the admin routes, before they are served); returns the
    registry."""
    registry = metrics_registry(sources)
    app.add_get("/metrics", metrics_handler(registry, refresh=sources.refresh))
    return registry
