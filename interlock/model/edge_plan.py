"""The edge planner: the next single step that brings what a provider serves for one host
closer to the desired edge.

Why a pure function: this is where the fail-closed promise is decided (modules before the
backend; a route whose modules cannot be resolved is reserved, never served; a failed step is
not repeated until its inputs change or its retry is due). Kept inside the EdgeActor, that
decision could only be tested through a provider, a mailbox and timers; here it is a table of
(desired, served, failures) → step (``tests/model/test_edge_plan.py``). The actor keeps the
state, performs the step the planner chose and records what came of it.

One key at a time: a route id, or :data:`TLS_KEY` for the host's certificate. The actor asks
for the keys that may need work in its order (removals first, routes in matching order, TLS
last) and drops a key the planner has nothing for, so a step costs O(1), not O(routes).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from interlock.model.edge import DesiredRoute, EdgeBackend, PathType
from interlock.model.moduleset import Modules, SecretValue
from interlock.model.service import ServicePortKey

TLS_KEY = ""
"""The planner key of the host's TLS certificate (no route id is empty)."""

StepKind = Literal["remove", "reserve", "modules", "backend", "tls"]
"""Remove an undesired route; reserve a new route's path (no modules, no backend: 503);
apply a route's modules; attach its backend; install the host's TLS certificate."""

TlsPair = tuple[SecretValue, SecretValue]
"""A certificate and its key, PEM."""


@dataclass(frozen=True, slots=True)
class BackendTarget:
    """The Service port a route forwards to; ``exists=False`` makes the route answer 500."""

    key: ServicePortKey
    exists: bool = True

    def to_json(self) -> dict[str, Any]:
        """The admin API form: the fields by name."""
        key = self.key
        return {
            "namespace": key.namespace,
            "service": key.name,
            "port": key.port,
            "exists": self.exists,
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> BackendTarget:
        """Parse the admin API form; raises ValueError naming the field that is wrong."""
        namespace, service, port = data.get("namespace"), data.get("service"), data.get("port")
        exists = data.get("exists", True)
        if not isinstance(namespace, str) or not namespace:
            raise ValueError("backend.namespace: a non-empty string is required")
        if not isinstance(service, str) or not service:
            raise ValueError("backend.service: a non-empty string is required")
        if isinstance(port, bool) or not isinstance(port, int) or not 1 <= port <= 65535:
            raise ValueError("backend.port: an integer between 1 and 65535 is required")
        if not isinstance(exists, bool):
            raise ValueError("backend.exists: a boolean is required")
        return cls(ServicePortKey(namespace, service, port), exists=exists)


def backend_target(backend: EdgeBackend) -> BackendTarget:
    """The provider's view of a desired backend."""
    # A backend that does not exist answers 500 whatever its port; a port name that matched no
    # Service port resolves to 0, which no provider accepts, so it is sent as 1.
    port = backend.port if backend.port >= 1 or backend.exists else 1
    return BackendTarget(
        ServicePortKey(backend.namespace, backend.service, port), exists=backend.exists
    )


@dataclass(slots=True)
class ServedRoute:
    """What the actor believes the provider serves for one route."""

    modules: Modules | None
    """None: unknown (learned from a snapshot) or a reservation."""
    secrets: Mapping[tuple[str, str], SecretValue]
    backend: BackendTarget | None
    reserved: bool = False
    names: tuple[str, ...] | None = None
    """The applied module types (for the board), computed once when applied."""


StepInputs = (
    TlsPair
    | tuple[str, PathType]
    | tuple[str, PathType, Modules, dict[tuple[str, str], SecretValue]]
    | BackendTarget
    | None
)
"""What a step depends on, by kind: the TLS pair to install; a reservation's path and path
type; those, the modules and their Secrets to apply; the backend to attach; nothing to remove.
(A precise type, not ``object``: mypyc cannot compile a dataclass field typed ``object``.)"""


@dataclass(slots=True)
class StepFailure:
    """The last failure of one step slot; ``inputs`` tells whether the inputs changed since."""

    inputs: StepInputs
    permanent: bool
    message: str
    waiting: bool
    """A transient failure whose retry is not due yet (the runtime's timer has not fired, and
    no changed input superseded it)."""


@dataclass(frozen=True, slots=True)
class EdgeStep:
    """One provider call: what to do to which route, with the inputs it was chosen from."""

    kind: StepKind
    route_id: str
    inputs: StepInputs
    """What the step depends on: a failure is not repeated while these stay equal."""
    route: DesiredRoute | None = None
    target: BackendTarget | None = None

    @property
    def slot(self) -> tuple[str, str]:
        """Where its failure is kept: one per (kind, route)."""
        return (self.kind, self.route_id)


def plan(
    key: str,
    *,
    desired: Mapping[str, DesiredRoute],
    served: Mapping[str, ServedRoute],
    failures: Mapping[tuple[str, str], StepFailure],
    tls_wanted: TlsPair | None = None,
    tls_served: TlsPair | None = None,
) -> EdgeStep | None:
    """The step ``key`` (a route id, or :data:`TLS_KEY`) needs now, or ``None`` when it is in
    sync or its step may not run (it failed for good, or waits for its retry, on these very
    inputs)."""
    step = _step_for(key, desired, served, failures, tls_wanted, tls_served)
    if step is not None and eligible(step, failures):
        return step
    return None


def eligible(step: EdgeStep, failures: Mapping[tuple[str, str], StepFailure]) -> bool:
    """Whether ``step`` may run: it never failed on these inputs, or its retry is due."""
    failure = failures.get(step.slot)
    if failure is None or failure.inputs != step.inputs:
        return True
    return not (failure.permanent or failure.waiting)


def _step_for(
    key: str,
    desired: Mapping[str, DesiredRoute],
    served: Mapping[str, ServedRoute],
    failures: Mapping[tuple[str, str], StepFailure],
    tls_wanted: TlsPair | None,
    tls_served: TlsPair | None,
) -> EdgeStep | None:
    if key == TLS_KEY:
        return EdgeStep("tls", TLS_KEY, tls_wanted) if tls_wanted != tls_served else None
    route = desired.get(key)
    if route is not None:
        return _route_step(route, served.get(key), failures)
    if key in served:
        return EdgeStep("remove", key, None)
    return None


def _route_step(
    route: DesiredRoute,
    served: ServedRoute | None,
    failures: Mapping[tuple[str, str], StepFailure],
) -> EdgeStep | None:
    reserve = EdgeStep("reserve", route.route_id, (route.path, route.path_type), route)
    if route.module_error is not None:
        # Modules that cannot be resolved are never applied: a new route is only reserved (its
        # path answers 503 instead of falling through to a shorter prefix), an old one kept.
        return reserve if served is None else None
    if served is None or served.modules != route.modules or served.secrets != route.secrets:
        # Until the desired modules are applied the backend waits, whatever happens.
        inputs = (route.path, route.path_type, route.modules, dict(route.secrets))
        step = EdgeStep("modules", route.route_id, inputs, route)
        if served is None and not eligible(step, failures):
            # They failed on a new route. Providers promise to reserve its path then, but one
            # that failed before doing anything (a timeout, an injected fault) did not: reserve
            # it here so the path cannot fall through to a shorter prefix.
            return reserve
        return step
    target = backend_target(route.backend)
    if served.backend != target:
        return EdgeStep("backend", route.route_id, target, route, target)
    return None
