"""A provider that fails on purpose, and remembers what it served: :class:`FaultyEdge`.

Edge actors must retry transient failures, stop on permanent ones, and never attach a backend
whose modules did not apply. Testing that against a mock would test the mock; ``FaultyEdge`` is
an ordinary :class:`~interlock.edge.provider.EdgeProvider` wrapping a real one (as httpx's
``MockTransport`` is a real transport). It fails the next N calls of a method as told by a
:class:`FaultPlan` — before reaching the wrapped provider, so a failed call changes nothing — and
after each successful call it records the configuration the route is served with, so a
fail-closed monitor can check that no route ever had a backend without its modules.
"""

from __future__ import annotations

from collections import Counter, deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from interlock.dataplane.request_target import normalize_host
from interlock.edge.provider import (
    BackendTarget,
    EdgeCall,
    EdgeMethod,
    EdgeProvider,
    ForwardingEdge,
    PermanentEdgeError,
    TransientEdgeError,
)

Method = EdgeMethod
FaultKind = Literal["transient", "permanent"]


@dataclass(frozen=True, slots=True)
class Fault:
    """One injected failure."""

    kind: FaultKind
    retry_after: float | None = None
    """Passed on in the TransientEdgeError (a 429's Retry-After, say)."""


class FaultPlan:
    """Which calls fail next. Change it at any time, also while the provider is in use."""

    def __init__(self) -> None:
        self._pending: dict[str, deque[Fault]] = {}
        self.calls: Counter[str] = Counter()
        """Calls seen per method, failed ones included."""
        self.injected: Counter[str] = Counter()
        """Failures injected per method."""

    def fail_next(
        self,
        method: Method,
        count: int = 1,
        *,
        kind: FaultKind = "transient",
        retry_after: float | None = None,
    ) -> None:
        """Fail the next ``count`` calls of ``method`` (after those already planned)."""
        if count < 1:
            raise ValueError(f"fail_next({method!r}): count must be at least 1, not {count}")
        self._pending.setdefault(method, deque()).extend(
            [Fault(kind=kind, retry_after=retry_after)] * count
        )

    def pending(self, method: Method) -> int:
        return len(self._pending.get(method, ()))

    def clear(self) -> None:
        self._pending.clear()

    def check(self, method: Method, *, where: str) -> None:
        """Count the call; raise the next planned fault of ``method``, if any."""
        self.calls[method] += 1
        queue = self._pending.get(method)
        if not queue:
            return
        fault = queue.popleft()
        self.injected[method] += 1
        message = f"{where}: injected {fault.kind} fault in {method}"
        if fault.kind == "permanent":
            raise PermanentEdgeError(message)
        raise TransientEdgeError(message, retry_after=fault.retry_after)


@dataclass(frozen=True, slots=True)
class ServedConfig:
    """How a route was served right after a successful call."""

    method: Method
    host: str
    route_id: str
    exists: bool
    """False once the route was removed."""
    applied: bool
    """Whether the route's modules applied (False: a reservation answering 503)."""
    modules: Mapping[str, object]
    """The applied chain's summary."""
    backend: BackendTarget | None

    @property
    def backend_attached(self) -> bool:
        return self.backend is not None


class FaultyEdge(ForwardingEdge):
    """An :class:`EdgeProvider` that injects faults from ``plan`` into ``inner``."""

    def __init__(self, inner: EdgeProvider, *, plan: FaultPlan | None = None) -> None:
        super().__init__(inner)
        self.plan = plan if plan is not None else FaultPlan()
        self.served: list[ServedConfig] = []
        """Every configuration served after a successful route call, oldest first."""

    async def before(self, call: EdgeCall) -> None:
        self.plan.check(call.method, where=call.where)

    async def after(self, call: EdgeCall) -> None:
        if call.method not in ("set_tls", "snapshot"):
            await self._record(call.method, call.host, call.route_id)

    def served_routes(self, *, host: str, route_id: str) -> list[ServedConfig]:
        """The recorded configurations of one route, oldest first."""
        key = normalize_host(host)
        return [c for c in self.served if c.host == key and c.route_id == route_id]

    async def _record(self, method: Method, host: str, route_id: str) -> None:
        snapshot = await self.inner.snapshot()
        route = snapshot.route(host=host, route_id=route_id)
        key = normalize_host(host)
        if route is None:
            self.served.append(
                ServedConfig(method, key, route_id, False, False, {}, None),
            )
        else:
            self.served.append(
                ServedConfig(
                    method, key, route_id, True, route.applied, route.modules, route.backend
                )
            )
