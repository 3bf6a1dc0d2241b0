"""What ``/debug/edges`` and the metrics show of the edges: per host and route, what its EdgeActor
knows (applied modules, backend, last error, next retry), and the steps taken by outcome.

Plain data written by the EdgeActors and read by the HTTP layer: it lives in ``model/`` so that
``api/`` reads it without importing the actors. It never holds a Secret value. The clock that
turns a retry's due time into "in N seconds" is injected.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the plan's models load with the edge half, not with the board's metrics
    from interlock.model.edge_plan import StepKind

STEP_OUTCOMES: Mapping[StepKind, str] = {
    "modules": "applied",
    "reserve": "reserved",
    "backend": "attached",
    "remove": "removed",
    "tls": "tls_set",
}
RECONCILE_OUTCOMES: tuple[str, ...] = (
    *STEP_OUTCOMES.values(),
    "failed_transient",
    "failed_permanent",
)
"""What an edge step can end in (the ``outcome`` of ``interlock_edge_reconciles_total``): a
route's modules applied, a route reserved (created with none, answering 503), a backend
attached, a route removed, the host's TLS certificate set; or the provider call failed."""


@dataclass(slots=True)
class RouteState:
    """One route of one edge as its actor knows it; secret-free."""

    route_id: str
    ingress: str = ""
    desired: bool = True
    reserved: bool = False
    """Created without modules or backend because its modules never applied (answers 503)."""
    modules: tuple[str, ...] | None = None
    """Module types applied (None: none applied yet)."""
    backend: str | None = None
    """The attached backend, ``ns/svc:port`` (None: none, the route answers 503)."""
    last_error: str | None = None
    permanent: bool = False
    attempts: int = 0
    next_retry: float | None = None
    """When the failed step is retried, on the settings' clock (None: not scheduled)."""

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "routeId": self.route_id,
            "ingress": self.ingress,
            "desired": self.desired,
            "reserved": self.reserved,
            "modules": None if self.modules is None else list(self.modules),
            "backend": self.backend,
            "lastError": self.last_error,
            "permanent": self.permanent,
            "attempts": self.attempts,
            "nextRetryInSeconds": (
                None if self.next_retry is None else round(max(0.0, self.next_retry - now), 3)
            ),
        }


@dataclass(slots=True)
class HostState:
    host: str
    routes: dict[str, RouteState] = field(default_factory=dict)
    conflicts: tuple[str, ...] = ()
    tls_error: str | None = None

    def to_json(self, now: float) -> dict[str, Any]:
        return {
            "host": self.host,
            "routes": [self.routes[r].to_json(now) for r in sorted(self.routes)],
            "conflicts": list(self.conflicts),
            "tlsError": self.tls_error,
        }


class EdgeBoard:
    """The state of every edge, written by EdgeActors and read by ``/debug/edges``."""

    def __init__(self, *, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self.hosts: dict[str, HostState] = {}
        self.reconciles: Counter[str] = Counter()
        """Provider steps taken by every edge actor, by outcome (:data:`RECONCILE_OUTCOMES`)."""

    def host(self, host: str) -> HostState:
        state = self.hosts.get(host)
        if state is None:
            state = self.hosts[host] = HostState(host)
        return state

    def forget(self, host: str) -> None:
        self.hosts.pop(host, None)

    def route(self, *, host: str, route_id: str) -> RouteState | None:
        state = self.hosts.get(host)
        return None if state is None else state.routes.get(route_id)

    def to_json(self) -> dict[str, Any]:
        now = self._clock()
        return {"hosts": [self.hosts[h].to_json(now) for h in sorted(self.hosts)]}
