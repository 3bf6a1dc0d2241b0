"""The edge half of a running controller, added to ``app.py``'s :class:`Controller` in one piece.

The outbound half (Services, HTTPRoutes, policies) runs without an edge; the edge half needs
the outbound half (its upstreams are the backend Services' policies). Keeping the edge's wiring
here lets ``app.py`` call a handful of methods instead of knowing every edge actor:

* the kinds it reads (Ingress, IngressClass, ModuleSet, Secret, EndpointSlice) are rows of the
  kinds table (``controller/kinds.py``), which says both what the controller watches (each
  only if the cluster serves it) and where their changes go (each to its directory);
* :meth:`EdgeHalf.start` — spawn the directories and start the edge's upstream index (over
  the controller's one upstream cache) and the data plane server on ``--edge-addr``;
  :meth:`EdgeHalf.stop`; with ``--edge-admin-url`` it starts no data plane: the edge actors
  program one running as its own process (``interlock edge``) through :class:`HttpEdge`, and
  since that process resolves upstreams itself (cluster DNS), no upstream index is built —
  unless ``--edge-push-upstreams``: then the index is pushed to it as to edge workers; an
  :class:`~interlock.controller.edge_instance.InstanceWatch` notices when that process
  restarted (empty), and its routes and tables are programmed again;
  with ``--edge-workers N`` (N > 1) it starts N ``interlock edge`` children on ``--edge-addr``
  (:class:`~interlock.edge.workers.EdgeWorkers`) and the actors program all of them as one
  (:class:`~interlock.edge.fanout.FanOutEdge`); the edge's upstream index is pushed to every
  worker (:mod:`~interlock.controller.worker_upstreams`), so they route as this process would,
  and a backend is attached only once every worker has its table;
* :meth:`EdgeHalf.debug` — ``/debug/edges``: every route's applied modules, backend, last error
  and next retry, and what the data plane serves (never a Secret value).

Ingress and ModuleSet status and the edge's Events are written by the controller's one
:class:`~interlock.actors.status_writer.StatusWriter`, like HTTPRoute status.
"""

from __future__ import annotations

import random
from collections.abc import Callable
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from loguru import logger
from yarl import URL

from interlock.actors.directories import (
    EndpointsDirectory,
    IngressClassDirectory,
    IngressDirectory,
    ModuleSetDirectory,
    SecretDirectory,
)
from interlock.actors.durable import ResyncObject, durable_mailbox
from interlock.actors.edge import DEFAULT_EDGE_BACKOFF, EdgeActor, EdgeSettings
from interlock.actors.edge_messages import (
    ENDPOINTS_DIRECTORY,
    INGRESS_CLASS_DIRECTORY,
    INGRESS_DIRECTORY,
    MODULESET_DIRECTORY,
    SECRET_DIRECTORY,
)
from interlock.actors.ingress import IngressActor
from interlock.actors.service_port_watch import ServicePortWatches
from interlock.cli.edge_limits import edge_limit_args
from interlock.config import Address, ControllerConfig
from interlock.controller.edge_instance import InstanceWatch
from interlock.controller.upstreams import SharedUpstreamCache, UpstreamIndex
from interlock.controller.view import EdgeView
from interlock.controller.worker_upstreams import TablesFirst, UpstreamPusher
from interlock.dataplane.metrics import Traffic, TrafficStatistics
from interlock.edge.http_provider import HttpEdge
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.provider import EdgeCall, EdgeProvider, ForwardingEdge, TransientEdgeError
from interlock.edge.server import EdgeServer
from interlock.edge.workers import EdgeWorkers
from interlock.mailbox import Actor, ActorSystem, BackoffPolicy
from interlock.model.edge_board import EdgeBoard
from interlock.model.load_balancer import edge_load_balancer_status, remote_load_balancer_status
from interlock.model.meta import ObjectKey

EDGE_MISSING_GRACE = 2.0
"""Seconds a new route's missing ModuleSet or Secret may take to arrive before a Warning: a
``kubectl apply -f`` of a folder creates its objects in file order, not in dependency order."""


def redacted_url(url: str) -> str:
    """``url`` without user information (a password must not reach logs or ``/debug``)."""
    return str(URL(url).with_user(None))


class UntilStopped(ForwardingEdge):
    """The remote data plane's client, refusing calls once the edge half stopped.

    ``Controller.stop`` stops the edge half before the actor system drains, so an EdgeActor may
    still retry a step after :class:`HttpEdge` closed its session; it would open a new one that
    nothing closes. After :meth:`stop` every call fails transiently instead (and is never
    retried: the actors are about to stop).
    """

    def __init__(self, inner: HttpEdge) -> None:
        super().__init__(inner)
        self._client = inner
        self._stopped = False

    async def stop(self) -> None:
        self._stopped = True
        await self._client.close()

    async def before(self, call: EdgeCall) -> None:
        if self._stopped:
            raise TransientEdgeError("edge admin API: the controller is stopping")


class TrackingProvider(ForwardingEdge):
    """An :class:`EdgeProvider` that starts following a backend before attaching it.

    By the time a route forwards, its backend's policy and endpoints are (almost always)
    already in the tables, so the first requests do not see "endpoints not known yet".
    """

    def __init__(self, inner: EdgeProvider, *, upstreams: UpstreamIndex) -> None:
        super().__init__(inner)
        self._upstreams = upstreams

    async def before(self, call: EdgeCall) -> None:
        backend = call.backend
        if backend is not None and backend.exists:
            self._upstreams.follow(backend.key)


class EdgeHalf:
    """Everything the edge adds to a controller; see the module docstring."""

    def __init__(
        self,
        *,
        config: ControllerConfig,
        system: ActorSystem,
        watches: ServicePortWatches,
        upstream_cache: SharedUpstreamCache,
        status_statistics: Callable[[], object] = lambda: None,
        rng: random.Random | None = None,
        resync_object: ResyncObject | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        """``upstream_cache``: the controller's one endpoint cache (the in-process data plane's
        upstream index reads it); ``status_statistics``: the status writer's, shown in
        ``/debug/edges``; ``traffic``: where the data plane counts (and logs) requests."""
        if not config.edge.runs:
            raise ValueError("EdgeHalf: config.edge.addr or config.edge.admin_url is required")
        self._config = config
        self._system = system
        self._status_statistics = status_statistics
        self._rng = rng or random.Random()
        self._directory_mailbox = durable_mailbox(resync_object)
        """Durable: an event a directory was handling when it crashed is handled again."""
        self.board = EdgeBoard()
        self.remote: UntilStopped | None = None
        """The client of a data plane in another process (``config.edge.admin_url``); ``None`` when
        this process serves the data plane."""
        self.data_plane: InProcessEdge | None = None
        """The data plane served from this process (``config.edge.addr``); ``None`` when remote."""
        self.upstreams: UpstreamIndex | None = None
        self.server: EdgeServer | None = None
        self.workers: EdgeWorkers | None = None
        """The data-plane worker processes (``config.edge.workers`` > 1); ``None`` otherwise."""
        self.pusher: UpstreamPusher | None = None
        """What keeps the workers' upstream tables equal to :attr:`upstreams`' (with workers)."""
        self.instance_watch: InstanceWatch | None = None
        """Notices that a remote data plane restarted, so that it is programmed again."""
        self.provider: EdgeProvider
        """What EdgeActors program; read when each one is spawned, so a test may wrap it (in a
        ``FaultyEdge``) after :meth:`start` and before Ingresses arrive."""
        if config.edge.admin_url is not None:
            client = HttpEdge(
                base_url=config.edge.admin_url,
                token=config.edge.admin_token,
                ca_file=config.edge.admin_ca,
            )
            self.remote = UntilStopped(client)
            self.provider = self.remote
            if config.edge.push_upstreams:
                self.upstreams = UpstreamIndex(
                    cache=upstream_cache, watches=watches, follower="edge"
                )
                self.pusher = UpstreamPusher(index=self.upstreams, clients=lambda: [client])
                self.provider = TablesFirst(self.remote, index=self.upstreams, pusher=self.pusher)
            pusher = self.pusher

            async def restarted() -> None:
                if pusher is not None:
                    await pusher.resend(client)

            self.instance_watch = InstanceWatch(
                client=client, publish=system.publish, restarted=restarted
            )
        elif config.edge.workers > 1:
            assert config.edge.addr is not None
            self.upstreams = UpstreamIndex(cache=upstream_cache, watches=watches, follower="edge")
            workers = self.workers = EdgeWorkers(
                count=config.edge.workers,
                listen=str(config.edge.addr),
                tls_listen=None if config.edge.tls_addr is None else str(config.edge.tls_addr),
                child_args=worker_args(config),
                drain_timeout=config.edge.limits.drain_timeout,
                pushed_upstreams=True,
                log_format=config.observability.log_format,
            )
            self.pusher = UpstreamPusher(
                index=self.upstreams, clients=lambda: [w.client for w in workers.workers]
            )
            workers.upstream_sync = self.pusher
            self.provider = TablesFirst(workers.provider, index=self.upstreams, pusher=self.pusher)
        else:
            self.data_plane = InProcessEdge(trusted_proxies=config.edge.trusted_proxies)
            self.upstreams = UpstreamIndex(cache=upstream_cache, watches=watches, follower="edge")
            self.server = EdgeServer(
                edge=self.data_plane,
                upstreams=self.upstreams,
                trusted_proxies=config.edge.trusted_proxies,
                limits=config.edge.limits,
                rng=self._rng,
                traffic=traffic,
            )
            self.provider = TrackingProvider(self.data_plane, upstreams=self.upstreams)
        self.backoff: BackoffPolicy = DEFAULT_EDGE_BACKOFF
        """Retry delays of transient provider failures (read when an EdgeActor is spawned)."""
        """Records the edge's Events once started (its statistics are for ``/metrics``)."""
        self.address: Address | None = None
        """Where the data plane listens once started (port 0 resolved)."""
        self.tls_address: Address | None = None
        """Where it serves HTTPS once started, when ``config.edge.tls_addr`` is set."""

    async def start(self) -> None:
        """Start the data plane and spawn the edge actors (before the informers run)."""
        admin_url = self._config.edge.admin_url
        if admin_url is not None:
            load_balancer = remote_load_balancer_status(admin_url)
        else:
            load_balancer = await self._serve()
        publish_service = self._config.edge.publish_service
        if publish_service is not None:
            load_balancer = None
        elif load_balancer is None:
            logger.warning(
                "edge: {} names no address clients can reach, so Ingress status.loadBalancer "
                "is not written; use --publish-service NAMESPACE/NAME (the Service in front "
                "of the edge) or listen on a specific address",
                redacted_url(admin_url) if admin_url is not None else self._config.edge.addr,
            )

        def edge_actor(host: str) -> Actor:
            settings = EdgeSettings(
                provider=self.provider,
                board=self.board,
                backoff=self.backoff,
                rng=self._rng,
                # A remote data plane outlives this process: it may still serve routes of
                # Ingresses deleted while the controller was away.
                adopt_on_spawn=self.remote is not None,
                missing_grace=EDGE_MISSING_GRACE,
            )
            return EdgeActor(host=host, settings=settings)

        def ingress_actor(key: ObjectKey) -> Actor:
            return IngressActor(
                key=key,
                edge_actor=edge_actor,
                load_balancer=load_balancer,
                publish_service=publish_service,
                ingress_nginx_annotations=self._config.edge.ingress_nginx_annotations,
            )

        if self.upstreams is not None:
            self.upstreams.start()
        if self.pusher is not None:
            self.pusher.start()
        if self.instance_watch is not None:
            self.instance_watch.start()
        mailbox = self._directory_mailbox
        spawn = self._system.spawn
        spawn(
            INGRESS_DIRECTORY,
            lambda: IngressDirectory(ingress_actor=ingress_actor),
            mailbox=mailbox,
        )
        spawn(INGRESS_CLASS_DIRECTORY, IngressClassDirectory, mailbox=mailbox)
        spawn(MODULESET_DIRECTORY, ModuleSetDirectory, mailbox=mailbox)
        spawn(SECRET_DIRECTORY, SecretDirectory, mailbox=mailbox)
        spawn(ENDPOINTS_DIRECTORY, EndpointsDirectory, mailbox=mailbox)

    async def _serve(self) -> dict[str, Any] | None:
        """Start this process's data plane, or its workers; its ``status.loadBalancer`` (None:
        a wildcard)."""
        assert self._config.edge.addr is not None
        addr, tls_addr = self._config.edge.addr, self._config.edge.tls_addr
        if self.workers is not None:
            addresses = await self.workers.start()
        else:
            assert self.server is not None
            addresses = await self.server.start(
                addr=str(addr), tls_addr=None if tls_addr is None else str(tls_addr)
            )
        assert addresses.http is not None  # a plain address was given
        self.address = Address(host=addr.host, port=addresses.http[1])
        if tls_addr is not None and addresses.https is not None:
            self.tls_address = Address(host=tls_addr.host, port=addresses.https[1])
        return edge_load_balancer_status(
            self.address.host,
            self.address.port,
            tls_port=None if self.tls_address is None else self.tls_address.port,
        )

    async def stop(self) -> None:
        """Stop serving and following policies, or close the connections to the remote data
        plane (before the actor system shuts down)."""
        if self.server is not None:
            await self.server.stop()
        if self.instance_watch is not None:
            await self.instance_watch.close()
        if self.pusher is not None:
            await self.pusher.close()
        if self.workers is not None:
            await self.workers.stop()
        if self.upstreams is not None:
            await self.upstreams.close()
        if self.remote is not None:
            await self.remote.stop()

    async def refresh_workers(self) -> None:
        """Read the workers' request counters (before ``/metrics`` answers); nothing without
        workers."""
        if self.workers is not None:
            await self.workers.refresh_traffic()

    def worker_traffic(self) -> list[TrafficStatistics]:
        """Each worker's request counters as last read (empty without workers)."""
        return [] if self.workers is None else self.workers.traffic()

    @property
    def url(self) -> str:
        if self.remote is not None:
            raise RuntimeError("the data plane runs in another process (config.edge.admin_url)")
        if self.address is None:
            raise RuntimeError("the edge is not started")
        host = "127.0.0.1" if self.address.host in ("0.0.0.0", "::", "") else self.address.host
        host = f"[{host}]" if ":" in host else host
        return f"http://{host}:{self.address.port}"

    def inspect(self) -> EdgeView:
        """This edge half at this instant (:class:`~interlock.controller.view.EdgeView`)."""
        return EdgeView(
            remote=self.remote is not None,
            url=None if self.remote is not None or self.address is None else self.url,
            address=self.address,
            tls_address=self.tls_address,
            served=None if self.data_plane is None else self.data_plane.snapshot_now(),
            routes=MappingProxyType(
                {
                    host: MappingProxyType(
                        {route_id: replace(route) for route_id, route in state.routes.items()}
                    )
                    for host, state in self.board.hosts.items()
                }
            ),
        )

    def describe(self) -> list[str]:
        if self._config.edge.admin_url is not None:
            shown = redacted_url(self._config.edge.admin_url)
            return [f"edge: programming the data plane whose admin API is {shown}"]
        lines = [] if self.address is None else [f"edge data plane listening on {self.url}"]
        if self.workers is not None and self.workers.workers:
            pids = ", ".join(str(worker.pid) for worker in self.workers.workers)
            lines.append(f"edge data plane: {self.workers.count} worker processes (pids {pids})")
        if self.tls_address is not None:
            lines.append(f"edge data plane serving HTTPS on {self.tls_address}")
        return lines

    def debug(self) -> dict[str, Any]:
        """``/debug/edges``: the actors' view per route, what is served, tracked upstreams.

        With a remote data plane, ``served`` is ``null`` (this view answers from memory,
        without a network call; the data plane's own ``GET /v1/snapshot`` shows what it
        serves), ``upstreams`` too unless it is pushed them (``--edge-push-upstreams``), and
        ``dataPlane`` names its admin API.
        """
        if self._config.edge.admin_url is not None:
            return {
                "edges": self.board.to_json()["hosts"],
                "served": None,
                "upstreams": None if self.upstreams is None else self.upstreams.debug(),
                "dataPlane": {
                    "adminUrl": redacted_url(self._config.edge.admin_url),
                    **({} if self.pusher is None else {"upstreamPushes": self.pusher.pushes}),
                },
                "status": self._status_statistics(),
            }
        if self.workers is not None:
            assert self.upstreams is not None
            return {
                "edges": self.board.to_json()["hosts"],
                "served": None,
                "upstreams": self.upstreams.debug(),
                "dataPlane": {
                    "workers": [
                        {"worker": w.index + 1, "pid": w.pid, "adminUrl": w.admin_url}
                        for w in self.workers.workers
                    ],
                    "restarts": self.workers.restarts,
                    "upstreamPushes": None if self.pusher is None else self.pusher.pushes,
                },
                "status": self._status_statistics(),
            }
        assert self.data_plane is not None and self.upstreams is not None
        return {
            "edges": self.board.to_json()["hosts"],
            "served": self.data_plane.snapshot_now().to_json()["hosts"],
            "upstreams": self.upstreams.debug(),
            "status": self._status_statistics(),
        }


def worker_args(config: ControllerConfig) -> list[str]:
    """The ``interlock edge`` flags every worker gets: the edge's limits, trusted proxies, the
    controller's log level and its access log (each worker writes the lines of the requests
    it served, naming itself)."""
    args = [*edge_limit_args(config.edge.limits), "--log-level", config.observability.log_level]
    if config.observability.access_log:
        args.append("--access-log")
    for cidr in config.edge.trusted_proxies:
        args += ["--trusted-proxy", cidr]
    return args
