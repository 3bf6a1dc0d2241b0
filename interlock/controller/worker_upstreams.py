"""The edge workers route as the controller's own edge: its upstream tables, pushed to each.

With ``--edge-workers N`` the data plane runs in ``interlock edge`` children that have no
informers. Each is started with ``--pushed-upstreams``, and :class:`UpstreamPusher` sends it
what the controller's edge index (:class:`~interlock.controller.upstreams.UpstreamIndex`)
resolves with: the outbound policy of every Service port an edge route sends to (an HTTPRoute
splitting it by weight; a backendRef to a missing Service, answered 500) and the ready
endpoints of every Service those policies name (:func:`edge_table`). The first push to a
worker replaces its table; later ones carry only the rows that changed, whenever the index or
the upstream cache tells the pusher something changed (a call, coalesced: a burst of
EndpointSlice events costs one push).

The fail-closed order reaches across processes: :class:`TablesFirst`, the provider the
EdgeActors program, attaches a backend only after its Service port's policy (and the endpoints
of the Services it names) is known and pushed to every worker; the worker itself refuses a
backend whose table it lacks (503, retried). A restarted worker gets the whole table before it
is reprogrammed (:meth:`UpstreamPusher.sync`, from
:class:`~interlock.edge.workers.EdgeWorkers`), so it never counts without it.

The same pusher serves a data plane in another process (``--edge-admin-url`` with
``--edge-push-upstreams``). That one restarts on its own, behind the same client: a ``PATCH``
names the epoch of the table it changes, an edge holding another answers 412
(:class:`~interlock.edge.http_provider.TableReplaced`), and the whole table is sent at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Sequence

from loguru import logger

from interlock.controller.upstreams import UpstreamIndex
from interlock.dataplane.source import UpstreamError
from interlock.edge.fanout import combined
from interlock.edge.http_provider import HttpEdge, TableReplaced
from interlock.edge.provider import (
    EdgeCall,
    EdgeError,
    EdgeProvider,
    ForwardingEdge,
    TransientEdgeError,
)
from interlock.model.meta import ObjectKey
from interlock.model.service import ServicePortKey
from interlock.model.upstream_table import (
    ServiceEndpoints,
    UpstreamTable,
    in_batches,
    table_changes,
)

BATCH_ROWS = 500
"""Rows per push request (a large table goes in several, under the admin API's body limit)."""

READY_WITHIN = 10.0
"""Seconds an attach waits for its backend's policy and endpoints before failing (retried)."""

RETRY_DELAY = 1.0
"""Seconds before the background push tries again after a worker refused or did not answer."""


def edge_table(index: UpstreamIndex) -> UpstreamTable:
    """What the edge resolves with now: the index's ready policies and, for every Service it
    follows, whether the cache read it, whether it exists and each port's ready addresses."""
    tables = index.tables
    services: dict[ObjectKey, ServiceEndpoints] = {}
    for key in index.tracked:
        service = tables.services.get(key)
        ports: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = ()
        if service is not None:
            ports = tuple(
                (
                    port.port,
                    tuple(
                        tables.addresses.get(ServicePortKey(key.namespace, key.name, port.port))
                        or ()
                    ),
                )
                for port in service.spec.ports
            )
        services[key] = ServiceEndpoints(
            known=key in tables.known, exists=service is not None, ports=ports
        )
    return UpstreamTable(policies=dict(index.ready_policies), services=services)


class UpstreamPusher:
    """Keeps every worker's upstream table equal to :func:`edge_table`; see the module doc."""

    def __init__(self, *, index: UpstreamIndex, clients: Callable[[], Sequence[HttpEdge]]) -> None:
        """``clients``: the admin API clients of the workers running now."""
        self._index = index
        self._clients = clients
        self._sent: dict[HttpEdge, tuple[str, UpstreamTable]] = {}
        """Each worker's epoch and what it holds after the last push that succeeded; absent:
        unknown (the next push sends the whole table)."""
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.pushes = 0
        """Requests that carried rows to a worker."""

    def start(self) -> None:
        """Listen for changes and push them in the background (in the event loop)."""
        self._index.listeners.append(self.wake)
        self._index.tables.listeners.append(self._service_changed)
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="edge workers: upstream tables"
        )
        self.wake()

    async def close(self) -> None:
        with contextlib.suppress(ValueError):
            self._index.listeners.remove(self.wake)
        with contextlib.suppress(ValueError):
            self._index.tables.listeners.remove(self._service_changed)
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    def wake(self) -> None:
        """Something changed: push soon."""
        self._wake.set()

    def _service_changed(self, key: ObjectKey) -> None:
        if key in self._index.tracked:
            self._wake.set()

    def in_sync(self) -> bool:
        """Whether every running worker's last push holds the table as it is now."""
        table = edge_table(self._index)
        return all(
            client in self._sent and self._sent[client][1] == table for client in self._clients()
        )

    async def flush(self) -> None:
        """Bring every running worker up to date now; raises an :class:`EdgeError` naming the
        workers that refused or did not answer (they get the whole table next time)."""
        clients = list(self._clients())
        async with self._lock:
            table = edge_table(self._index)
            results = await asyncio.gather(
                *(self._push(client, table) for client in clients), return_exceptions=True
            )
            for client in list(self._sent):
                if client not in clients:
                    del self._sent[client]
        errors: list[tuple[int, EdgeError]] = []
        for index, result in enumerate(results):
            if isinstance(result, EdgeError):
                errors.append((index, result))
            elif isinstance(result, BaseException):
                raise result
        if errors:
            raise combined(errors, total=len(clients))

    async def sync(self, client: HttpEdge) -> None:
        """Give one (restarted) worker the whole table; raises its :class:`EdgeError`."""
        async with self._lock:
            self._sent.pop(client, None)
            await self._push(client, edge_table(self._index))

    async def _push(self, client: HttpEdge, table: UpstreamTable) -> None:
        sent = self._sent.pop(client, None)
        try:
            epoch = await self._send(client, sent, table)
        except TableReplaced:  # it restarted since: the whole table, at once
            epoch = await self._send(client, None, table)
        self._sent[client] = (epoch, table)

    async def _send(
        self, client: HttpEdge, sent: tuple[str, UpstreamTable] | None, table: UpstreamTable
    ) -> str:
        epoch, old = (None, None) if sent is None else sent
        for batch in in_batches(table_changes(old, table), BATCH_ROWS):
            epoch = await client.push_upstreams(batch, epoch=epoch)
            self.pushes += 1
        assert epoch is not None  # a first push is a replace: at least one batch
        return epoch

    async def _run(self) -> None:
        while True:
            await self._wake.wait()
            self._wake.clear()
            try:
                await self.flush()
            except EdgeError as error:
                logger.warning("edge workers: cannot push the upstream tables: {}", error.message)
            except Exception:  # a bug: logged, and the loop keeps pushing later changes
                logger.exception("edge workers: pushing the upstream tables failed")
            else:
                continue
            await asyncio.sleep(RETRY_DELAY)
            self._wake.set()


class TablesFirst(ForwardingEdge):
    """The workers' provider: a backend is attached only once its Service port's policy and
    the endpoints it names are known and pushed to every worker."""

    def __init__(self, inner: EdgeProvider, *, index: UpstreamIndex, pusher: UpstreamPusher):
        super().__init__(inner)
        self._index = index
        self._pusher = pusher

    async def before(self, call: EdgeCall) -> None:
        backend = call.backend
        if backend is None or not backend.exists:
            return
        ready = await self._index.ready(backend.key, within=READY_WITHIN)
        if isinstance(ready, UpstreamError):
            raise TransientEdgeError(f"edge workers: {ready.message}")
        await self._pusher.flush()
