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

A change costs what changed, not the table: each call names the Service port or Service whose
rows changed, :class:`EdgeTable` reads only those rows again, and each worker is sent the rows
changed since the version it last took (a journal of keys by version). At 10,000 Services
followed, rebuilding the whole table and comparing it with the last one sent cost about as much
as ten thousand changes (``benchmarks/upstream_tables.py``); :func:`edge_table`, the whole
rebuild, is what the kept table must always equal (``tests/controller``'s property test).

The fail-closed order reaches across processes: :class:`TablesFirst`, the provider the
EdgeActors program, attaches a backend only after its Service port's policy (and the endpoints
of the Services it names) is known and pushed to every worker; the worker itself refuses a
backend whose table it lacks (503, retried). A restarted worker gets the whole table before it
is reprogrammed (:meth:`UpstreamPusher.sync`, from
:class:`~interlock.edge.workers.EdgeWorkers`), so it never counts without it, and what changed
since before each backend it is given again (:meth:`UpstreamPusher.catch_up`: a backend attached
to the others meanwhile has its table only since the sync).

The same pusher serves a data plane in another process (``--edge-admin-url`` with
``--edge-push-upstreams``). That one restarts on its own, behind the same client: the edge
half's :class:`~interlock.controller.edge_instance.InstanceWatch` notices its new instance and
calls :meth:`UpstreamPusher.resend` (the whole table, at once, with no change to wait for);
and a ``PATCH`` names the epoch of the table it changes, an edge holding another answers 412
(:class:`~interlock.edge.http_provider.TableReplaced`), and the whole table is sent at once.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections import OrderedDict
from collections.abc import Callable, Sequence
from typing import TypeVar

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
from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey
from interlock.model.upstream_table import (
    ServiceEndpoints,
    TableChanges,
    UpstreamTable,
    in_batches,
)

BATCH_ROWS = 500
"""Rows per push request (a large table goes in several, under the admin API's body limit)."""

READY_WITHIN = 10.0
"""Seconds an attach waits for its backend's policy and endpoints before failing (retried)."""

RETRY_DELAY = 1.0
"""Seconds before the background push tries again after a worker refused or did not answer."""


def edge_table(index: UpstreamIndex) -> UpstreamTable:
    """What the edge resolves with now, rebuilt whole: the index's ready policies and every
    Service it follows (:func:`service_row`). What :class:`EdgeTable` must always equal."""
    return UpstreamTable(
        policies=dict(index.ready_policies),
        services={key: service_row(index, key) for key in index.tracked},
    )


def service_row(index: UpstreamIndex, key: ObjectKey) -> ServiceEndpoints:
    """One followed Service's row: whether the cache read it, whether it exists and each
    port's ready addresses."""
    tables = index.tables
    service = tables.services.get(key)
    ports: tuple[tuple[int, tuple[tuple[str, int], ...]], ...] = ()
    if service is not None:
        ports = tuple(
            (
                port.port,
                tuple(
                    tables.addresses.get(ServicePortKey(key.namespace, key.name, port.port)) or ()
                ),
            )
            for port in service.spec.ports
        )
    return ServiceEndpoints(known=key in tables.known, exists=service is not None, ports=ports)


_K = TypeVar("_K")
_V = TypeVar("_V")

TableKey = ServicePortKey | ObjectKey
"""A row of the table: a Service port's policy, or a Service's endpoints."""


class EdgeTable:
    """:func:`edge_table`, kept by change: :meth:`mark` names a row that may have changed,
    :meth:`update` reads the marked rows again, and :meth:`changes_since` gives the rows changed
    after a version, from a journal of rows by the version they last changed at (oldest
    first), in O(rows changed)."""

    def __init__(self, index: UpstreamIndex) -> None:
        self._index = index
        self.policies: dict[ServicePortKey, OutboundPolicy] = {}
        self.services: dict[ObjectKey, ServiceEndpoints] = {}
        self.version = 0
        """Rows changed so far: what a worker's push holds is named by this number."""
        self._marked: set[TableKey] = {*index.ready_policies, *index.tracked}
        self._journal: OrderedDict[TableKey, int] = OrderedDict()
        """Each row changed after the oldest version a worker may still hold, and the version
        it last changed at, oldest first (a removed row stays until then: a removal to send)."""

    def mark(self, key: TableKey) -> None:
        """``key``'s row may have changed (read again by the next :meth:`update`)."""
        self._marked.add(key)

    def update(self) -> int:
        """Read the marked rows again; returns :attr:`version`."""
        marked, self._marked = self._marked, set()
        index = self._index
        for key in marked:
            if isinstance(key, ServicePortKey):
                policy = index.ready_policies.get(key)
                if not self._set(self.policies, key, policy):
                    continue
            else:
                row = service_row(index, key) if key in index.tracked else None
                if not self._set(self.services, key, row):
                    continue
            self.version += 1
            self._journal[key] = self.version
            self._journal.move_to_end(key)
        return self.version

    @staticmethod
    def _set(rows: dict[_K, _V], key: _K, value: _V | None) -> bool:
        """Set or remove one row; whether it changed."""
        old = rows.get(key)
        if value is None:
            return rows.pop(key, None) is not None
        if old is value or old == value:
            return False
        rows[key] = value
        return True

    def changes_since(self, version: int | None) -> TableChanges:
        """What turns the table at ``version`` into this one; None (unknown: a worker that
        just started or whose last push failed): the whole table, to replace what it holds."""
        if version is None:
            return TableChanges(
                policies=tuple(self.policies.items()),
                services=tuple(self.services.items()),
                replace=True,
            )
        policies: list[tuple[ServicePortKey, OutboundPolicy]] = []
        services: list[tuple[ObjectKey, ServiceEndpoints]] = []
        removed_policies: list[ServicePortKey] = []
        removed_services: list[ObjectKey] = []
        for key in reversed(self._journal):
            if self._journal[key] <= version:
                break
            if isinstance(key, ServicePortKey):
                policy = self.policies.get(key)
                if policy is None:
                    removed_policies.append(key)
                else:
                    policies.append((key, policy))
            else:
                row = self.services.get(key)
                if row is None:
                    removed_services.append(key)
                else:
                    services.append((key, row))
        return TableChanges(
            policies=tuple(policies),
            services=tuple(services),
            removed_policies=tuple(removed_policies),
            removed_services=tuple(removed_services),
        )

    def forget_until(self, version: int) -> None:
        """Drop the journal's rows changed at or before ``version`` (every worker holds them)."""
        journal = self._journal
        while journal:
            key, changed = next(iter(journal.items()))
            if changed > version:
                return
            del journal[key]

    def whole(self) -> UpstreamTable:
        """A copy of the table as it is."""
        return UpstreamTable(policies=dict(self.policies), services=dict(self.services))


class UpstreamPusher:
    """Keeps every worker's upstream table equal to :func:`edge_table`; see the module doc."""

    def __init__(self, *, index: UpstreamIndex, clients: Callable[[], Sequence[HttpEdge]]) -> None:
        """``clients``: the admin API clients of the workers running now. Hears the index's
        and the cache's changes from now on (until :meth:`close`)."""
        self._index = index
        self._clients = clients
        self.table = EdgeTable(index)
        """What every worker should hold, kept by change."""
        self._sent: dict[HttpEdge, tuple[str, int]] = {}
        """Each worker's epoch and the :attr:`EdgeTable.version` it holds after the last push
        that succeeded; absent: unknown (the next push sends the whole table)."""
        self._joining: set[HttpEdge] = set()
        """Workers synced (:meth:`sync`) that do not count yet: being reprogrammed."""
        self._lock = asyncio.Lock()
        self._wake = asyncio.Event()
        self._task: asyncio.Task[None] | None = None
        self.pushes = 0
        """Requests that carried rows to a worker."""
        index.listeners.append(self._row_changed)
        index.tables.listeners.append(self._service_changed)

    def start(self) -> None:
        """Push the changes in the background (in the event loop)."""
        self._task = asyncio.get_running_loop().create_task(
            self._run(), name="edge workers: upstream tables"
        )
        self.wake()

    async def close(self) -> None:
        with contextlib.suppress(ValueError):
            self._index.listeners.remove(self._row_changed)
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

    def _row_changed(self, key: TableKey) -> None:
        self.table.mark(key)
        self._wake.set()

    def _service_changed(self, key: ObjectKey) -> None:
        if key in self._index.tracked:  # one the index stops following, it names itself
            self.table.mark(key)
            self._wake.set()

    def in_sync(self) -> bool:
        """Whether every running worker's last push holds the table as it is now."""
        version = self.table.update()
        return all(
            client in self._sent and self._sent[client][1] == version for client in self._clients()
        )

    async def flush(self) -> None:
        """Bring every running worker up to date now; raises an :class:`EdgeError` naming the
        workers that refused or did not answer (they get the whole table next time)."""
        clients = list(self._clients())
        async with self._lock:
            self.table.update()
            results = await asyncio.gather(
                *(self._push(client) for client in clients), return_exceptions=True
            )
            self._joining.difference_update(clients)
            for client in list(self._sent):
                if client not in clients and client not in self._joining:
                    del self._sent[client]
            self._forget()
        errors: list[tuple[int, EdgeError]] = []
        for index, result in enumerate(results):
            if isinstance(result, EdgeError):
                errors.append((index, result))
            elif isinstance(result, BaseException):
                raise result
        if errors:
            raise combined(errors, total=len(clients))

    async def sync(self, client: HttpEdge) -> None:
        """Give one (restarted) worker the whole table; raises its :class:`EdgeError`. Until it
        counts (one of ``clients``), :meth:`catch_up` sends it what changed since."""
        async with self._lock:
            self._sent.pop(client, None)
            self._joining.add(client)
            self.table.update()
            await self._push(client)
            self._forget()

    async def catch_up(self, client: HttpEdge) -> None:
        """Send one worker what changed since its last push (nothing: no request); raises its
        :class:`EdgeError`."""
        async with self._lock:
            self.table.update()
            await self._push(client)
            self._forget()

    async def resend(self, client: HttpEdge) -> None:
        """``client``'s data plane restarted (its instance changed): the next push sends it
        the whole table, and one is due now."""
        async with self._lock:
            self._sent.pop(client, None)
        self.wake()

    def forget(self, client: HttpEdge) -> None:
        """A worker synced that will never count (stopped): keep nothing for it."""
        self._joining.discard(client)
        self._sent.pop(client, None)

    def _forget(self) -> None:
        """Keep in the journal only the rows some worker may still need."""
        held = [version for _, version in self._sent.values()]
        self.table.forget_until(min(held, default=self.table.version))

    async def _push(self, client: HttpEdge) -> None:
        # The version is read with the rows it names: the table may change while a push is in
        # flight (in_sync reads the marked rows), and a worker must never be recorded as
        # holding a later version than it was sent.
        sent = self._sent.pop(client, None)
        version = self.table.version
        if sent is not None and sent[1] == version:
            self._sent[client] = sent
            return
        try:
            epoch = await self._send(client, sent, self.table.changes_since(_held(sent)))
        except TableReplaced:  # it restarted since: the whole table, at once
            version = self.table.version
            epoch = await self._send(client, None, self.table.changes_since(None))
        self._sent[client] = (epoch, version)

    async def _send(
        self, client: HttpEdge, sent: tuple[str, int] | None, changes: TableChanges
    ) -> str:
        epoch = None if sent is None else sent[0]
        for batch in in_batches(changes, BATCH_ROWS):
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


def _held(sent: tuple[str, int] | None) -> int | None:
    return None if sent is None else sent[1]


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
