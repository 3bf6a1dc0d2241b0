"""A read-only view of a running controller: what tests and ``/debug/controller`` ask about it.

Questions such as "is it idle?", "does it lead?", "what does its edge serve?", "did an informer
relist?" each have an answer in some part the composition root wired together (the actor
system, the elector, the edge half's board and data plane, the informer set). Reaching for
those parts from outside (``controller.system``, ``controller.edge.board``,
``controller._tasks``) makes every test depend on how the wiring is done, and lets it change
what it only meant to read. :meth:`~interlock.controller.app.Controller.inspect` instead
answers all of them in one frozen value taken at one instant: copies and immutable snapshots,
so a view never changes after it is taken and cannot change the controller. ``/debug/controller``
serves the same view as JSON (:meth:`ControllerView.to_json`), so what a test checks is what an
operator sees.

A view holds no Secret value: the edge's routes are the board's secret-free state, the data
plane's snapshot names modules and backends only.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from interlock.actors.status_writer import StatusWriterStatistics
from interlock.config import Address
from interlock.kube.informer import InformerStatistics
from interlock.mailbox.statistics import SystemStatistics
from interlock.model.edge_board import RouteState
from interlock.model.policy_watch import WatchTarget

if TYPE_CHECKING:  # the edge package loads with the edge half (issue 29 item 5)
    from interlock.edge.provider import EdgeSnapshot


@dataclass(frozen=True, slots=True)
class EdgeView:
    """The controller's edge half at one instant."""

    remote: bool
    """The data plane runs in another process (``--edge-admin-url``): ``served`` is None."""
    url: str | None
    """The in-process data plane's HTTP URL (None: remote, or not listening yet)."""
    address: Address | None
    """Where the in-process data plane listens for HTTP (the bound port, not the flag's 0)."""
    tls_address: Address | None
    """Where it serves HTTPS (None: no ``--edge-tls-addr``)."""
    served: EdgeSnapshot | None
    """What the in-process data plane serves (None with a remote one: ask its admin API)."""
    routes: Mapping[str, Mapping[str, RouteState]]
    """Host → route id → the route as its EdgeActor knows it (applied modules, backend, last
    error, next retry); copies of the board's entries."""

    def route(self, *, host: str, route_id: str) -> RouteState | None:
        """One route as its EdgeActor knows it (None: the actor has no such route)."""
        return self.routes.get(host, {}).get(route_id)

    @property
    def served_hosts(self) -> frozenset[str]:
        """The hosts the in-process data plane serves (empty with a remote one)."""
        if self.served is None:
            return frozenset()
        return frozenset(host.host for host in self.served.hosts)

    def to_json(self) -> dict[str, Any]:
        return {
            "remote": self.remote,
            "url": self.url,
            "tlsAddress": None if self.tls_address is None else str(self.tls_address),
            "servedHosts": sorted(self.served_hosts),
            "routes": {
                host: sorted(routes) for host, routes in sorted(self.routes.items()) if routes
            },
        }


@dataclass(frozen=True, slots=True)
class ControllerView:
    """A running controller at one instant (see the module docstring)."""

    ready: bool
    """Every informer delivered its initial list and the actors settled on it."""
    leading: bool
    """This replica holds the Lease (it is the one writing status)."""
    actors: SystemStatistics
    """The actor system's totals, per kind of actor."""
    watches: tuple[WatchTarget, ...]
    """The Service ports whose policy is being watched (readers, or within the grace period)."""
    informers: Mapping[str, InformerStatistics]
    """Informer name → what it did so far (``objects`` is the size of its store)."""
    ended_tasks: tuple[str, ...]
    """Background tasks that ended although the controller runs (``informers``,
    ``leader-election``, ``initial-sync``: only the last one ends normally)."""
    status: StatusWriterStatistics | None
    """The status writer's counters (None before it is spawned)."""
    edge: EdgeView | None
    """The edge half (None: neither ``--edge-addr`` nor ``--edge-admin-url``)."""

    @property
    def idle(self) -> bool:
        """No actor has work: every message told so far has been handled."""
        return self.actors.busy == 0

    @property
    def relists(self) -> int:
        """Lists after the initial one, over every informer (each follows a 410 Gone)."""
        return sum(statistics.relists for statistics in self.informers.values())

    @property
    def reconnects(self) -> int:
        """Retries after a failure or a dropped watch, over every informer."""
        return sum(statistics.reconnects for statistics in self.informers.values())

    def to_json(self) -> dict[str, Any]:
        """``/debug/controller``: the view in one page (the details have their own ``/debug``)."""
        return {
            "ready": self.ready,
            "leading": self.leading,
            "idle": self.idle,
            "actors": {
                "total": self.actors.actors,
                "busy": self.actors.busy,
                "byKind": {kind: k.actors for kind, k in sorted(self.actors.kinds.items())},
            },
            "watches": sorted(str(target) for target in self.watches),
            "informers": {
                name: {"objects": s.objects, "relists": s.relists, "reconnects": s.reconnects}
                for name, s in sorted(self.informers.items())
            },
            "endedTasks": list(self.ended_tasks),
            "edge": None if self.edge is None else self.edge.to_json(),
        }
