"""The running controller: everything wired together from one :class:`ControllerConfig`.

``Controller.start()`` connects to Kubernetes (or starts the embedded API server), spawns the
actors, starts the informers, the leader election and the HTTP servers; ``ready`` turns true
once every informer delivered its initial list; ``stop()`` drains the actors, releases the Lease
and closes everything, so a rolling restart hands status writing over at once. Nothing else in
the package reads configuration or opens connections: tests start a ``Controller`` exactly as
``interlock run`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import functools
import gc
import random
import tempfile
from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from pathlib import Path
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from loguru import logger

from interlock.actors.durable import durable_mailbox
from interlock.actors.grants import GrantsDirectory
from interlock.actors.messages import (
    GRANTS_DIRECTORY,
    INFORMER_ROUTER,
    SERVICE_DIRECTORY,
    STATUS_WRITER,
    LeadershipChanged,
    ObjectChanged,
)
from interlock.actors.route import RouteActor, RouteOutputs
from interlock.actors.router import InformerRouter, RouteFactory, parse_change
from interlock.actors.service_directory import ServiceDirectory
from interlock.actors.service_port_watch import ServicePortWatches
from interlock.actors.status_writer import StatusWriter
from interlock.api.admin import AdminApp
from interlock.api.grpc.counters import GrpcApiCounters
from interlock.api.metrics import controller_sources, mount_metrics
from interlock.api.policy import PolicyApiCounters, build_policy_app
from interlock.api.policy_json import policy_body
from interlock.api.routes import Routes
from interlock.api.serving import RunningSite, serve
from interlock.config import Address, ControllerConfig
from interlock.controller.kinds import ABSENT, ROUTER, Half, rows_for, watched
from interlock.controller.status_sink import KubeStatusSink
from interlock.controller.view import ControllerView
from interlock.dataplane.metrics import Traffic
from interlock.kube.client import close_api_client, make_api_client
from interlock.kube.discovery import served_resource
from interlock.kube.events import EventRecorder
from interlock.kube.informer import Deleted, Informer, InformerEvent, InformerSet, resource_version
from interlock.kube.lease import LeaderElector
from interlock.kube.resources import (
    HTTP_ROUTE_VERSIONS,
    Resource,
)
from interlock.kube.status import StatusPatcher
from interlock.kube.transport import KubeApiError
from interlock.mailbox import ActorSystem, BackoffPolicy, Tracer
from interlock.model.cluster_ips import ServiceAddresses

if TYPE_CHECKING:
    # Imported when embedded mode starts: the embedded API server (and the CEL library it
    # validates CRD rules with, which brings a REPL's worth of modules) is ~16 MiB of RSS that a
    # controller against a real cluster never uses.
    from interlock.api.grpc.server import GrpcPolicyServer
    from interlock.controller.edge_half import EdgeHalf
    from interlock.controller.gateway_half import GatewayHalf
    from interlock.controller.mesh_half import MeshHalf
    from interlock.controller.upstreams import SharedUpstreamCache
    from interlock.embedded import EmbeddedApiServer
    from interlock.otel import SpanTracer  # the optional OpenTelemetry SDK: only when asked

CRDS_DIR = Path(__file__).resolve().parents[1] / "manifests" / "crds"
"""The CRDs applied first in embedded mode (shipped inside the package)."""

_RELEASE_TIMEOUT = 5.0
"""Seconds stopping waits to release the Lease (an API server that does not answer must not
hold the shutdown past the Pod's grace period; the Lease then expires instead)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


class StartupError(RuntimeError):
    """The controller cannot start as configured; the message names the setting to fix."""


def _span_tracer(endpoint: str, *, lines: Tracer | None) -> SpanTracer:
    """The OTLP exporter, imported only when asked for (the SDK is an optional extra)."""
    try:
        from interlock.otel import span_tracer
    except ImportError as error:
        raise StartupError(
            f"--otlp-endpoint needs the OpenTelemetry SDK ({error}): pip install 'interlock[otel]'"
        ) from error
    try:
        return span_tracer(endpoint, lines=lines)
    except ValueError as error:
        raise StartupError(str(error)) from error


async def _shutdown_spans(spans: SpanTracer) -> None:
    """Export the buffered spans off the event loop, waiting at most a few seconds: a collector
    that is down must not hold up a stop (the exporter's own timeout bounds the thread)."""
    flush = asyncio.ensure_future(asyncio.to_thread(spans.shutdown))
    try:
        await asyncio.wait_for(asyncio.shield(flush), 5.0)
    except TimeoutError:
        logger.warning("OTLP export: the collector did not take the last spans within 5 s")


async def _serve(app: Routes, address: Address, *, flag: str) -> RunningSite:
    try:
        return await serve(app, address)
    except OSError as error:
        raise StartupError(f"{flag} {address}: cannot listen: {error.strerror or error}") from error


def _teller(
    system: ActorSystem,
    address: str,
    follows: Callable[[ObjectChanged], bool] | None,
    parser: Callable[[dict[str, Any]], object],
) -> Callable[[ObjectChanged], None]:
    """Tells a change to ``address`` parsed by ``parser`` (an ``ObjectParsed``), only those
    ``follows`` accepts, when given. Called from the router's handler, so the message is
    correlated with the informer event."""
    if follows is None:
        return lambda change: system.tell(address, parse_change(change, parser))

    def tell(change: ObjectChanged) -> None:
        if follows(change):
            system.tell(address, parse_change(change, parser))

    return tell


def object_changed(event: InformerEvent) -> ObjectChanged:
    """The router's message for an informer event (its identity becomes the correlation id)."""
    return ObjectChanged.of(event.obj, kind=event.resource.kind, deleted=isinstance(event, Deleted))


class Controller:
    """One replica of interlock: informers → actors → policy API, status through the Lease."""

    def __init__(self, config: ControllerConfig, *, now: Callable[[], datetime] = _utc_now) -> None:
        self.config = config
        self._now = now
        self.embedded: EmbeddedApiServer | None = None
        self.kubeconfig_path: str | None = config.cluster.kubeconfig
        self.api: Any = None
        self.tracer: Tracer | None = None
        self.spans: SpanTracer | None = None
        """The OTLP span exporter (``--otlp-endpoint``), also :attr:`tracer` when set."""
        self.system = ActorSystem()
        self.watches = ServicePortWatches(
            self.system, grace=config.policy.watch_grace, encode=policy_body
        )
        self.traffic = Traffic(access_log=config.observability.access_log)
        """Requests through the edge and the mesh listener: ``/metrics`` and the access log."""
        self.upstream_cache: SharedUpstreamCache | None = None
        """The one endpoint cache the edge's and the mesh listener's upstream indexes read
        (spawned by the first of them to start); built with the first of them, so that an
        outbound-only controller does not import it."""
        self.edge: EdgeHalf | None = None
        if config.edge.runs:
            # Imported only for an edge: its data plane (HTTP/1 and HTTP/2 servers, edge
            # modules) is RSS that a controller without --edge-addr never uses.
            from interlock.controller.edge_half import EdgeHalf

            self.edge = EdgeHalf(
                config=config,
                system=self.system,
                watches=self.watches,
                upstream_cache=self._shared_upstream_cache(),
                status_statistics=lambda: (
                    None if self.status_writer is None else self.status_writer.statistics()
                ),
                resync_object=self._resync_object,
                traffic=self.traffic,
            )
        self.gateways: GatewayHalf | None = None
        if self.edge is not None and self.edge.upstreams is not None:
            from interlock.controller.gateway_half import GatewayHalf

            self.gateways = GatewayHalf(
                config=config,
                system=self.system,
                upstreams=self.edge.upstreams,
                traffic=self.traffic,
                resync_object=self._resync_object,
            )
        self.mesh: MeshHalf | None = None
        if config.mesh.addr is not None:
            from interlock.controller.mesh_half import MeshHalf  # only for a mesh listener

            self.mesh = MeshHalf(
                config=config,
                system=self.system,
                watches=self.watches,
                upstream_cache=self._shared_upstream_cache(),
                endpoints_from_edge=self.edge is not None,
                traffic=self.traffic,
                resync_object=self._resync_object,
            )
        self.informers: InformerSet | None = None
        self.elector: LeaderElector | None = None
        self.status_writer: StatusWriter | None = None
        self.policy_site: RunningSite | None = None
        self.admin_site: RunningSite | None = None
        self.http_route_resource: Resource | None = None
        self.patcher: StatusPatcher | None = None
        self.recorder: EventRecorder | None = None
        """Records the Events the status writer is asked for (the edge's)."""
        self.policy_counters = PolicyApiCounters()
        """What the policy API answered (``/metrics``: ``interlock_policy_*``)."""
        self.grpc_server: GrpcPolicyServer | None = None
        """Linkerd's proxy API (``--grpc-addr``), once listening."""
        self.grpc_counters = GrpcApiCounters()
        """What it answered (``/metrics``: ``interlock_grpc_server_*``)."""
        self.service_addresses = (
            ServiceAddresses() if config.linkerd.grpc_addr is not None else None
        )
        """Cluster IP → Service, kept by the Service directory only for the gRPC API."""
        self._synced = asyncio.Event()
        self._tasks: list[asyncio.Task[None]] = []
        self._resyncs: set[asyncio.Task[None]] = set()
        """Objects being read again after a poison message (:meth:`_resync_object`)."""
        self._tempdir: tempfile.TemporaryDirectory[str] | None = None

    def _shared_upstream_cache(self) -> SharedUpstreamCache:
        """:attr:`upstream_cache`, built (and its module imported) on the first call."""
        if self.upstream_cache is None:
            from interlock.controller.upstreams import SharedUpstreamCache

            self.upstream_cache = SharedUpstreamCache(self.system)
        return self.upstream_cache

    # ---------------------------------------------------------------------------------------
    # Lifecycle

    @property
    def ready(self) -> bool:
        """True once every informer delivered its initial list and the actors settled on it."""
        return self._synced.is_set()

    async def wait_ready(self, *, within: float = 30.0) -> None:
        """Wait for :attr:`ready`; raises ``TimeoutError`` after ``within`` seconds."""
        await asyncio.wait_for(self._synced.wait(), within)

    async def _initial_sync(self) -> None:
        # The informers are ready when the lists reached the router; the policies are ready
        # when the actors finished with them (no actor has work left), not before.
        assert self.informers is not None
        await self.informers.ready.wait()
        await self.system.wait_idle()
        if self.config.tune_gc:
            # What exists now (informer stores, actors, policies) lives as long as the process.
            gc.freeze()
        self._synced.set()
        logger.info("initial sync done: {} actors", self.system.statistics().actors)

    async def start(self) -> None:
        """Connect, spawn the actors, start informers, leader election and the HTTP servers."""
        config = self.config
        if config.tune_gc:
            # Start-up creates hundreds of thousands of long-lived objects; the default gen-0
            # threshold (700) would run a collection, and often a full one, every few routes.
            gc.set_threshold(50_000, 20, 100)
        if config.observability.trace_file:
            self.tracer = Tracer.to_file(config.observability.trace_file)
        if config.observability.otlp_endpoint:
            self.tracer = self.spans = _span_tracer(
                config.observability.otlp_endpoint, lines=self.tracer
            )
        if self.tracer is not None:
            self.system.set_tracer(self.tracer)
        if config.cluster.embedded:
            await self._start_embedded()
        self.api = await make_api_client(
            kubeconfig=self.kubeconfig_path, in_cluster=config.cluster.in_cluster
        )
        served = await self._discover_kinds()
        self.http_route_resource = served.get("HTTPRoute")
        self._spawn_actors()
        if self.edge is not None:
            await self.edge.start()
        if self.gateways is not None:
            assert self.api is not None
            self.gateways.start(
                api=self.api,
                is_leader=lambda: self.elector is not None and self.elector.is_leader,
            )
        if self.mesh is not None:
            await self.mesh.start()
        self.informers = InformerSet([self._informer(resource) for resource in served.values()])
        self.elector = LeaderElector(
            self.api,
            namespace=config.leadership.namespace,
            name=config.leadership.name,
            identity=config.leadership.identity,
            lease_duration=config.leadership.duration,
            renew_deadline=config.leadership.renew_deadline,
            retry_period=config.leadership.retry_period,
            on_started_leading=self._started_leading,
            on_stopped_leading=self._stopped_leading,
        )
        self._tasks = [
            asyncio.create_task(self.informers.run(), name="informers"),
            asyncio.create_task(self.elector.run(), name="leader-election"),
            asyncio.create_task(self._initial_sync(), name="initial-sync"),
        ]
        self.policy_site = await _serve(
            build_policy_app(
                source=self.watches,
                wait_ready=self._synced.wait,
                is_ready=self._synced.is_set,
                counters=self.policy_counters,
                allowed_hosts=config.allowed_hosts.with_listening(config.policy.addr.host),
            ),
            config.policy.addr,
            flag="--policy-addr",
        )
        if config.linkerd.grpc_addr is not None:
            await self._serve_grpc(config.linkerd.grpc_addr)
        self.admin_site = await _serve(self._admin().app, config.admin.addr, flag="--admin-addr")

    async def _serve_grpc(self, address: Address) -> None:
        # Imported only when asked for: grpcio and protobuf are RSS a controller without
        # --grpc-addr never uses.
        from interlock.api.grpc.server import GrpcPolicyServer
        from interlock.api.grpc.target import DEFAULT_CLUSTER_NETWORKS

        assert self.service_addresses is not None
        server = GrpcPolicyServer(
            source=self.watches,
            addresses=self.service_addresses,
            wait_ready=self._synced.wait,
            counters=self.grpc_counters,
            cluster_domain=self.config.cluster.domain,
            cluster_networks=self.config.linkerd.cluster_networks or DEFAULT_CLUSTER_NETWORKS,
        )
        try:
            await server.start(address)
        except (OSError, RuntimeError) as error:
            raise StartupError(f"--grpc-addr {address}: cannot listen: {error}") from error
        self.grpc_server = server

    async def _discover_kinds(self) -> dict[str, Resource]:
        """By kind, the version its informer watches: every kind the halves that run read (the
        kinds table, ``controller/kinds.py``: :func:`watched`), the first of its row's versions
        the cluster serves. A kind it serves in none is not watched, logged with what that
        costs."""
        served: dict[str, Resource] = {}
        for kind, (row, *_) in watched(self._halves()).items():
            resource = await self._discover(row.resources)
            if resource is not None:
                served[kind] = resource
                continue
            what = (kind, row.resources[0].api_version)
            if row.absent is not None:
                logger.info("{} ({}): not served by this cluster; {}", *what, row.absent)
            else:
                logger.warning("{} ({}): not served by this cluster; {}", *what, ABSENT[row.half])
        return served

    async def _discover(self, candidates: tuple[Resource, ...]) -> Resource | None:
        """The served version among ``candidates``; ``served_resource`` already retries what an
        API server answers while busy or starting (no connection, 5xx, 429)."""
        try:
            return await served_resource(self.api, candidates)
        except KubeApiError as error:
            raise StartupError(
                f"cannot discover which {candidates[0].kind} version the API server serves: {error}"
            ) from error

    async def _start_embedded(self) -> None:
        from interlock.embedded import EmbeddedApiServer

        self.embedded = EmbeddedApiServer(
            host="127.0.0.1", port=0, allowed_hosts=self.config.allowed_hosts
        )
        await self.embedded.start()
        paths = [str(CRDS_DIR)] if CRDS_DIR.is_dir() else []
        paths.extend(self.config.cluster.manifests)
        if paths:
            report = await self.embedded.apply_manifests(paths)
            for failed in report.errors:
                logger.error(
                    "manifest {} document {}: {}", failed.source, failed.index, failed.error
                )
            logger.info(
                "embedded API server: applied {} documents ({} failed)",
                len(report.results),
                len(report.errors),
            )
        target = self.config.cluster.write_kubeconfig
        if target is None:
            self._tempdir = tempfile.TemporaryDirectory(prefix="interlock-")
            target = str(Path(self._tempdir.name) / "kubeconfig")
        self.kubeconfig_path = str(self.embedded.write_kubeconfig(target))

    def _informer(self, resource: Resource) -> Informer:
        namespaces = list(self.config.cluster.namespaces) or None
        backoff = BackoffPolicy(
            initial=self.config.cluster.reconnect_initial,
            maximum=self.config.cluster.reconnect_maximum,
            jitter=1.0,
        )
        return Informer(self.api, resource, sink=self._sink, namespaces=namespaces, backoff=backoff)

    def _sink(self, event: InformerEvent) -> None:
        change = object_changed(event)
        self.system.tell(INFORMER_ROUTER, change, correlation_id=change.identity)

    def _resync_object(self, kind: str, namespace: str, name: str) -> None:
        """A poison message about this object was dropped: tell the router its current state,
        read from the API server (the informers keep only what they delivered, not objects)."""
        task = asyncio.create_task(self._resync(kind, namespace, name), name="resync")
        self._resyncs.add(task)
        task.add_done_callback(self._resyncs.discard)

    async def _resync(self, kind: str, namespace: str, name: str) -> None:
        backoff = BackoffPolicy(
            initial=self.config.cluster.reconnect_initial,
            maximum=self.config.cluster.reconnect_maximum,
            jitter=1.0,
        )
        attempt = 0
        while True:
            try:
                obj = (
                    None
                    if self.informers is None
                    else await self.informers.fetch(kind, namespace, name)
                )
                break
            except KubeApiError as error:
                # Until it is read, the object's actors keep the state before the poison message.
                delay = backoff.delay(attempt, random.Random())
                attempt += 1
                logger.warning("resynchronizing: {} (retrying in {:.2f}s)", error, delay)
                await asyncio.sleep(delay)
        change = ObjectChanged(
            kind=kind,
            namespace=namespace,
            name=name,
            deleted=obj is None,
            resource_version="" if obj is None else resource_version(obj),
            obj=obj if obj is not None else {"metadata": {"namespace": namespace, "name": name}},
        )
        logger.warning("resynchronizing {} {}/{} from the API server", kind, namespace, name)
        self.system.tell(INFORMER_ROUTER, change, correlation_id=f"resync {change.identity}")

    def _spawn_actors(self) -> None:
        config = self.config
        assert self.api is not None
        route_resource = self.http_route_resource or HTTP_ROUTE_VERSIONS[0]
        patcher = self.patcher = StatusPatcher(self.api)
        recorder = self.recorder = EventRecorder(self.api, host=config.leadership.identity)
        sink = KubeStatusSink(patcher=patcher, recorder=recorder, route_resource=route_resource)

        def status_writer() -> StatusWriter:
            writer = StatusWriter(
                sink=sink,
                is_leader=lambda: self.elector is not None and self.elector.is_leader,
                backoff=BackoffPolicy(
                    initial=config.status.retry_initial, maximum=config.status.retry_maximum
                ),
                concurrency=config.status.concurrency,
            )
            self.status_writer = writer
            return writer

        def route_factory(kind: str) -> RouteFactory:
            def route_actor(namespace: str, name: str, outputs: RouteOutputs) -> RouteActor:
                actor = RouteActor(
                    namespace=namespace,
                    name=name,
                    controller_name=config.status.controller_name,
                    now=self._now,
                    outputs=outputs,
                    kind=kind,
                )
                if config.policy.lax_reference_grants:
                    actor.require_grants = False
                return actor

            return route_actor

        self.system.spawn(STATUS_WRITER, status_writer)
        # Fed by tell with informer events: durable, resynchronized from the informers.
        mailbox = durable_mailbox(self._resync_object)
        self.system.spawn(
            SERVICE_DIRECTORY,
            functools.partial(ServiceDirectory, addresses=self.service_addresses),
            mailbox=mailbox,
        )
        self.system.spawn(GRANTS_DIRECTORY, GrantsDirectory, mailbox=mailbox)
        forward = self._forward()
        self.system.spawn(
            INFORMER_ROUTER,
            lambda: InformerRouter(
                route_factory=route_factory("HTTPRoute"),
                grpc_route_factory=route_factory("GRPCRoute"),
                route_factories={kind: route_factory(kind) for kind in ("TLSRoute", "TCPRoute")},
                forward=forward,
            ),
            mailbox=mailbox,
        )

    def _halves(self) -> frozenset[Half]:
        """The halves that run: the outbound core, and those configured."""
        halves: set[Half] = {"outbound"}
        if self.edge is not None:
            halves.add("edge")
        if self.mesh is not None:
            halves.add("mesh")
        if self.gateways is not None:
            halves.add("gateway")
        return frozenset(halves)

    def _forward(self) -> dict[str, list[Callable[[ObjectChanged], None]]]:
        """By kind, the receivers the router tells each change to: the rows of the kinds table
        (``controller/kinds.py``) of the halves that run, other than the router's own."""
        gateways = self.gateways
        forward: dict[str, list[Callable[[ObjectChanged], None]]] = {}
        for row in rows_for(self._halves()):
            if row.receiver != ROUTER:
                follows = gateways.follows if row.follows and gateways is not None else None
                assert row.parser is not None, f"{row.kind}: a receiver's row names its parser"
                forward.setdefault(row.kind, []).append(
                    _teller(self.system, row.receiver, follows, row.parser)
                )
        return forward

    def _started_leading(self) -> None:
        # What this process wrote before says nothing about what another leader wrote since.
        if self.patcher is not None:
            self.patcher.cache.clear()
        self.system.tell(STATUS_WRITER, LeadershipChanged(True))
        if self.gateways is not None:
            self.gateways.leadership_changed(leading=True)

    def _stopped_leading(self) -> None:
        self.system.tell(STATUS_WRITER, LeadershipChanged(False))
        if self.gateways is not None:
            self.gateways.leadership_changed(leading=False)

    def _admin(self) -> AdminApp:
        admin = AdminApp(
            is_ready=lambda: self.ready,
            debug_from=self.config.admin.debug_from,
            allowed_hosts=self.config.allowed_hosts.with_listening(self.config.admin.addr.host),
        )
        sources = controller_sources(self)
        if self.config.linkerd.grpc_addr is not None:
            sources = dataclasses.replace(sources, grpc_api=self.grpc_counters.statistics)
        mount_metrics(admin.app, sources)
        admin.add_debug("controller", lambda: self.inspect().to_json())
        admin.add_debug_query("actors", self._debug_actors)
        admin.add_debug("watches", self.watches.debug)
        if self.informers is not None:
            admin.add_debug("informers", self.informers.statistics)
        admin.add_debug(
            "status", lambda: self.status_writer.statistics() if self.status_writer else None
        )
        if self.elector is not None:
            admin.add_debug("lease", self.elector.statistics)
        if self.edge is not None:
            admin.add_debug("edges", self.edge.debug)
        if self.gateways is not None:
            admin.add_debug("gateways", self.gateways.debug)
        if self.mesh is not None:
            admin.add_debug("mesh", self.mesh.debug)
        return admin

    def _debug_actors(self, query: Mapping[str, str]) -> dict[str, object]:
        """``/debug/actors``: totals per kind; ``?prefix=route/`` adds each matching actor."""
        view: dict[str, object] = {"system": self.system.statistics()}
        prefix = query.get("prefix")
        if prefix is not None:
            limit = int(query.get("limit", "1000")) if query.get("limit", "").isdigit() else 1000
            addresses = self.system.addresses(prefix)
            view["actors"] = [self.system.actor_statistics(a) for a in addresses[:limit]]
            view["matching"] = len(addresses)
        return view

    def inspect(self) -> ControllerView:
        """This controller at this instant, read-only (a :class:`ControllerView`): what tests
        and ``/debug/controller`` ask about, without reaching into its parts."""
        return ControllerView(
            ready=self.ready,
            leading=self.elector is not None and self.elector.is_leader,
            actors=self.system.statistics(),
            watches=tuple(self.watches.targets()),
            informers=MappingProxyType(
                {} if self.informers is None else self.informers.statistics()
            ),
            ended_tasks=tuple(task.get_name() for task in self._tasks if task.done()),
            status=None if self.status_writer is None else self.status_writer.statistics(),
            edge=None if self.edge is None else self.edge.inspect(),
        )

    def describe(self) -> list[str]:
        """Where this controller listens, one line each (``interlock run`` prints them)."""
        lines: list[str] = []
        if self.embedded is not None:
            lines.append(f"embedded API server at {self.embedded.url}")
        if self.config.cluster.embedded and self.kubeconfig_path:
            lines.append(f"kubeconfig written to {self.kubeconfig_path}")
        if self.policy_site is not None:
            lines.append(f"policy API listening on {self.policy_site.url}")
        if self.grpc_server is not None and self.grpc_server.address is not None:
            lines.append(f"Linkerd's proxy API (gRPC) listening on {self.grpc_server.address}")
        if self.admin_site is not None:
            lines.append(f"admin listening on {self.admin_site.url}")
        if self.edge is not None:
            lines.extend(self.edge.describe())
        if self.mesh is not None:
            lines.extend(self.mesh.describe())
        return lines

    async def stop(self) -> None:
        """Release the Lease, end watch streams, drain the edge (bounded), stop informers,
        drain actors, disconnect."""
        # Release first, so another replica leads at once instead of after the edge drained:
        # writes still queued are not ours to make once another replica may lead.
        if self.elector is not None:
            try:
                await asyncio.wait_for(self.elector.release(), _RELEASE_TIMEOUT)
            except TimeoutError:
                logger.warning(
                    "could not release the Lease in {:g} s; it expires", _RELEASE_TIMEOUT
                )
        self.watches.close()
        if self.grpc_server is not None:
            await self.grpc_server.stop()
            self.grpc_server = None
        for site in (self.policy_site, self.admin_site):
            if site is not None:
                await site.stop()
        self.policy_site = self.admin_site = None
        if self.gateways is not None:
            await self.gateways.stop()
        if self.edge is not None:
            await self.edge.stop()
        if self.mesh is not None:
            await self.mesh.stop()
        elector_tasks = [t for t in self._tasks if t.get_name() == "leader-election"]
        others = [t for t in self._tasks if t not in elector_tasks] + list(self._resyncs)
        for task in others:
            task.cancel()
        for task in others:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        await self.system.shutdown()
        for task in elector_tasks:
            with contextlib.suppress(asyncio.CancelledError, TimeoutError):
                await asyncio.wait_for(task, 5.0)
        self._tasks = []
        if self.api is not None:
            await close_api_client(self.api)
            self.api = None
        if self.embedded is not None:
            await self.embedded.stop()
        if self._tempdir is not None:
            self._tempdir.cleanup()
            self._tempdir = None
        if self.tracer is not None:
            self.tracer.close()
        if self.spans is not None:
            await _shutdown_spans(self.spans)
            self.spans = None
