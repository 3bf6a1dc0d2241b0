"""EdgeActor: one per host, programming the edge data plane one step at a time.

This is where the fail-closed promise of ``docs/design.md`` is kept (ngrok's ingress controller
failed open when a module could not be applied). Which step comes next is decided by the pure
planner :func:`~interlock.model.edge_plan.plan`; the actor keeps the state, performs the step
and records its outcome. The actor combines the Ingresses' parts of its host
(``host:<host>``) with :func:`~interlock.model.edge.edge_from_parts` and then reconciles the
:class:`~interlock.edge.provider.EdgeProvider` towards that desired edge by **single steps**:

1. remove a route no longer desired;
2. for a desired route, apply its modules; only when they are applied as desired,
3. attach its backend;
4. install the host's TLS certificate.

One provider call per handled message, then a :class:`Reconcile` reminder goes to the back of
the mailbox. Newer desired states queued meanwhile (coalesced per Ingress) are handled before the
next step, so every step is chosen from the latest desired state, never a stale one.

What a failure does:

* a route whose desired modules cannot be resolved (``ModuleError`` from the model) is never
  given a backend: a new one is only *reserved* (created with no modules and no backend, so its
  path answers 503 instead of falling through to a shorter prefix); an existing one keeps the
  modules and backend it has;
* a :class:`PermanentEdgeError` (or a permanent ``ModuleError``) is recorded, reported as an
  Event and not retried until the step's inputs change;
* a :class:`TransientEdgeError` is retried after the :class:`BackoffPolicy` delay with jitter
  (or the provider's ``retry_after``); a changed input retries at once. A missing Secret or
  ModuleSet needs no timer: it arrives as a new desired state the moment it appears.

Per-route state (applied modules, backend, last error, next retry) is kept on an
:class:`EdgeBoard` shared with ``/debug/edges``; it never holds a Secret value.
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Literal

from loguru import logger

from interlock.actors.edge_messages import (
    HostPart,
    Reconcile,
    RecordEvent,
    RetryDue,
    SecretData,
    host_topic,
    ingress_reference,
    secret_topic,
)
from interlock.actors.messages import STATUS_WRITER
from interlock.edge.provider import (
    ApplyModules,
    BackendTarget,
    EdgeError,
    EdgeProvider,
    PermanentEdgeError,
    TransientEdgeError,
)
from interlock.mailbox import Actor, BackoffPolicy, Published, Unpublished
from interlock.model.edge import Conflict, DesiredEdge, DesiredRoute, edge_from_parts
from interlock.model.edge_board import STEP_OUTCOMES, EdgeBoard, HostState, RouteState
from interlock.model.edge_plan import (
    TLS_KEY,
    EdgeStep,
    ServedRoute,
    StepFailure,
    plan,
)
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import Modules, SecretValue

DEFAULT_EDGE_BACKOFF = BackoffPolicy(initial=0.5, maximum=60.0, jitter=0.5)
"""Retry delays of transient provider failures: 0.5 s doubling to 60 s, plus up to 50 %."""


@dataclass(frozen=True, slots=True)
class EdgeSettings:
    """What every EdgeActor shares: the provider, the debug board, and injected time."""

    provider: EdgeProvider
    board: EdgeBoard
    backoff: BackoffPolicy = DEFAULT_EDGE_BACKOFF
    rng: random.Random = field(default_factory=random.Random)
    clock: Callable[[], float] = time.monotonic
    """Tells when a retry is due, for ``/debug/edges`` (the retry itself is a runtime timer,
    waited out by the actor system's injected timer sleep)."""
    adopt_on_spawn: bool = False
    """Read what the provider serves for the host when an EdgeActor is first spawned, not only
    after a restart: for a data plane that outlives the controller (``HttpEdge``), whose routes
    of Ingresses deleted meanwhile must be removed. Reading costs a whole snapshot per host."""
    missing_grace: float = 0.0
    """Seconds a new route's missing ModuleSet or Secret is given to arrive before it is
    reported: objects applied together (``kubectl apply -f dir/``) arrive in any order, and a
    Warning about one that arrives a moment later only alarms. 0 reports at once."""


# --- the actor -------------------------------------------------------------------------------


def _retry_timer(slot: tuple[str, str]) -> tuple[str, str, str]:
    """The name of a slot's retry timer (one per slot: re-arming replaces it)."""
    return ("retry", *slot)


def _module_names(modules: Modules) -> tuple[str, ...]:
    dumped = modules.model_dump(by_alias=True, exclude_none=True)
    return tuple(sorted(dumped))


_MISSING_INPUTS = frozenset({"ModuleSetNotFound", "SecretNotFound"})


@dataclass(frozen=True, slots=True)
class ReportMissing:
    """Timer: a new route's grace for missing references is over; report them if still missing."""

    route_id: str


def _describe_backend(target: BackendTarget) -> str:
    text = str(target.key)
    return text if target.exists else f"{text} (does not exist)"


class EdgeActor(Actor):
    """Reconciles one host's edge; see the module docstring."""

    def __init__(self, *, host: str, settings: EdgeSettings) -> None:
        self._host = host
        self._settings = settings
        self._provider = settings.provider
        self._parts: dict[str, HostPart] = {}
        self._parts_changed = False
        self._desired = DesiredEdge(host=host, routes=())
        self._desired_by_id: dict[str, DesiredRoute] = {}
        # Route ids (and TLS_KEY) that may need a step, in the order they are looked at: a route in
        # sync is dropped once looked at, so a step costs O(1) amortized, not O(routes).
        self._pending: dict[str, None] = {}
        self._conflicts: tuple[Conflict, ...] = ()
        self._served: dict[str, ServedRoute] = {}
        self._failures: dict[tuple[str, str], StepFailure] = {}
        self._model_errors: dict[str, tuple[str, str]] = {}
        self._in_grace: dict[str, bool] = {}
        """New routes whose missing references are not reported yet (``missing_grace``), and
        whether their timer is armed."""
        self._tls_topic: str | None = None
        self._tls_wanted: tuple[SecretValue, SecretValue] | None = None
        self._tls_served: tuple[SecretValue, SecretValue] | None = None
        self._next_retry: dict[tuple[str, str], float] = {}

    # --- lifecycle ----------------------------------------------------------------------------

    async def started(self) -> None:
        self.subscribe(host_topic(self._host))
        # After a restart the provider still serves what the previous instance applied; learn
        # which routes exist so the ones no longer desired are removed, and the others re-applied.
        # A host on the board had an actor before (it is removed from the board on stop).
        if self._host not in self._settings.board.hosts and not self._settings.adopt_on_spawn:
            return
        try:
            snapshot = await self._provider.snapshot()
        except EdgeError as error:
            logger.warning("edge {}: cannot read what the provider serves: {}", self._host, error)
            return
        edge = snapshot.host(self._host)
        for route in edge.routes if edge is not None else ():
            self._served[route.route_id] = ServedRoute(
                modules=None, secrets={}, backend=route.backend, reserved=not route.applied
            )
        # Take a step even if no retained value arrives: when the predecessor crashed handling
        # the last part's removal, nothing else would make this one remove the routes.
        self._pending.update(dict.fromkeys(sorted(self._served)))
        self.tell(self.address, Reconcile())

    async def receive(self, message: object) -> object | None:
        if isinstance(message, Published | Unpublished):
            if message.topic == host_topic(self._host):
                self._take_part(message)
            elif message.topic == self._tls_topic:
                self._take_tls(message)
            self.tell(self.address, Reconcile())
            return None
        if self._parts_changed:
            # Once per burst of parts (the Reconcile queued behind them), not once per part:
            # combining is O(routes of the host), and a host may have many Ingresses.
            self._combine_parts()
        if isinstance(message, ReportMissing):
            self._in_grace.pop(message.route_id, None)
            self._report_model_errors()
            return None
        if isinstance(message, RetryDue):
            failure = self._failures.get(message.slot)
            if failure is not None and failure.attempts == message.attempt:
                failure.waiting = False
            self._next_retry.pop(message.slot, None)
            self._pending[message.slot[1]] = None
        elif not isinstance(message, Reconcile):
            return None
        await self._step()
        return None

    # --- desired state ------------------------------------------------------------------------

    def _take_part(self, message: Published | Unpublished) -> None:
        if isinstance(message, Published) and isinstance(message.value, HostPart):
            self._parts[message.key] = message.value
        else:
            self._parts.pop(message.key, None)
        self._parts_changed = True

    def _combine_parts(self) -> None:
        self._parts_changed = False
        parts = {part.ingress: part.routes for part in self._parts.values()}
        self._desired, conflicts = edge_from_parts(self._host, parts)
        previous = self._desired_by_id
        self._desired_by_id = {route.route_id: route for route in self._desired.routes}
        # Only routes whose desired value changed need a look (an unchanged Ingress's part
        # holds the very same route objects): a change costs O(its routes), not O(host).
        left = [route_id for route_id in previous if route_id not in self._desired_by_id]
        changed = [
            route_id
            for route_id, route in self._desired_by_id.items()
            if previous.get(route_id) is not route
        ]
        if self._settings.missing_grace > 0:
            for route_id in changed:
                if route_id not in previous and route_id not in self._served:
                    self._in_grace.setdefault(route_id, False)
        for route_id in left:
            if self._in_grace.pop(route_id, None):
                self.cancel_timer(("report-missing", route_id))
            if route_id not in self._served:
                self._forget_failures(route_id)
        self._pending.update(dict.fromkeys([*left, *changed, TLS_KEY]))
        self._report_conflicts(tuple(conflicts))
        self._report_model_errors()
        self._follow_tls_secret()
        state = self.board_host()
        state.conflicts = tuple(str(c) for c in self._conflicts)
        for route_id in [*left, *changed]:
            self._update_route_board(route_id)

    def _follow_tls_secret(self) -> None:
        secret = self._desired.tls_secret
        topic = None if secret is None else secret_topic(secret.namespace, secret.name)
        if topic == self._tls_topic:
            return
        if self._tls_topic is not None:
            self.unsubscribe(self._tls_topic)
        self._tls_topic = topic
        self._tls_wanted = None
        # Until its retained value arrives (if it exists at all) the Secret counts as missing.
        self.board_host().tls_error = None if secret is None else f"TLS Secret {secret} not found"
        if topic is not None:
            self.subscribe(topic)

    def _take_tls(self, message: Published | Unpublished) -> None:
        self._pending[TLS_KEY] = None
        value = message.value if isinstance(message, Published) else None
        state = self.board_host()
        secret = self._desired.tls_secret
        if not isinstance(value, SecretData):
            self._tls_wanted = None
            state.tls_error = f"TLS Secret {secret} not found"
            return
        cert, key = value.value("tls.crt"), value.value("tls.key")
        if cert is None or key is None:
            self._tls_wanted = None
            state.tls_error = f"TLS Secret {secret} needs the keys tls.crt and tls.key"
            return
        self._tls_wanted = (cert, key)
        state.tls_error = None

    # --- steps --------------------------------------------------------------------------------

    def _next_step(self) -> EdgeStep | None:
        """The next step towards the desired edge, as the planner (``model.edge_plan.plan``)
        chooses it: removals first, then routes in matching order, then TLS. A pending key the
        planner has no step for is dropped; it comes back when the desired state changes or its
        retry timer fires."""
        while self._pending:
            key = next(iter(self._pending))
            step = plan(
                key,
                desired=self._desired_by_id,
                served=self._served,
                failures=self._failures,
                tls_wanted=self._tls_wanted,
                tls_served=self._tls_served,
            )
            if step is not None:
                return step
            del self._pending[key]
        return None

    async def _step(self) -> None:
        step = self._next_step()
        if step is None:
            self._maybe_stop()
            return
        try:
            await self._run(step)
        except PermanentEdgeError as error:
            outcome = "failed_permanent"
            self._failed(step, error, permanent=True, retry_after=None)
        except TransientEdgeError as error:
            outcome = "failed_transient"
            self._failed(step, error, permanent=False, retry_after=error.retry_after)
        else:
            outcome = STEP_OUTCOMES[step.kind]
            self._succeeded(step)
        self._settings.board.reconciles[outcome] += 1
        self._update_route_board(step.route_id)
        self.tell(self.address, Reconcile())

    async def _run(self, step: EdgeStep) -> None:
        host, route_id, route = self._host, step.route_id, step.route
        if step.kind == "remove":
            await self._provider.remove_route(host=host, route_id=route_id)
            self._served.pop(route_id, None)
        elif step.kind in ("reserve", "modules"):
            assert route is not None
            # A reserved route is created with no modules (it answers 503) until they apply.
            reserve = step.kind == "reserve"
            await self._provider.apply_modules(
                ApplyModules(
                    host=host,
                    route_id=route_id,
                    path=route.path,
                    path_type=route.path_type,
                    modules=Modules() if reserve else route.modules,
                    secrets={} if reserve else route.secrets,
                )
            )
            if reserve:
                served = ServedRoute(modules=None, secrets={}, backend=None, reserved=True)
            else:
                previous = self._served.get(route_id)
                served = ServedRoute(
                    modules=route.modules,
                    secrets=dict(route.secrets),
                    backend=None if previous is None else previous.backend,
                    names=_module_names(route.modules),
                )
            self._served[route_id] = served
        elif step.kind == "backend":
            assert step.target is not None
            await self._provider.attach_backend(host=host, route_id=route_id, backend=step.target)
            self._served[route_id].backend = step.target
        else:
            wanted = self._tls_wanted
            await self._provider.set_tls(
                host=host,
                cert_pem=None if wanted is None else wanted[0],
                key_pem=None if wanted is None else wanted[1],
            )
            self._tls_served = wanted

    def _clear_failure(self, slot: tuple[str, str]) -> None:
        self._failures.pop(slot, None)
        self.cancel_timer(_retry_timer(slot))
        self._next_retry.pop(slot, None)

    def _succeeded(self, step: EdgeStep) -> None:
        self._clear_failure(step.slot)
        if step.kind == "modules":
            # Applied modules supersede a reservation of the same route that failed meanwhile:
            # its failure (and retry timer) would otherwise be reported on a healthy route.
            self._clear_failure(("reserve", step.route_id))
        route = step.route
        where = f"edge {self._host} route {step.route_id}"
        if step.kind == "modules" and route is not None:
            names = ", ".join(_module_names(route.modules)) or "none"
            logger.info("{}: modules applied ({})", where, names)
            self._event(route, "Normal", "ModulesApplied", f"{where}: modules applied ({names})")
        elif step.kind == "backend" and route is not None and step.target is not None:
            backend = _describe_backend(step.target)
            logger.info("{}: backend {} attached", where, backend)
            if step.target.exists:
                self._event(
                    route, "Normal", "BackendAttached", f"{where}: backend {backend} attached"
                )
            else:
                service = step.target.key.service_key()
                self._event(
                    route,
                    "Warning",
                    "BackendNotFound",
                    f"{where}: backend Service {service} does not "
                    f"exist; the route answers 500 until it is created",
                )
        elif step.kind == "remove":
            logger.info("{}: removed", where)
            self._forget_failures(step.route_id)
        elif step.kind == "tls":
            self.board_host().tls_error = None

    def _failed(
        self, step: EdgeStep, error: EdgeError, *, permanent: bool, retry_after: float | None
    ) -> None:
        previous = self._failures.get(step.slot)
        attempts = 1
        if previous is not None and previous.inputs == step.inputs:
            attempts = previous.attempts + 1
        failure = StepFailure(
            inputs=step.inputs,
            permanent=permanent,
            message=error.message,
            attempts=attempts,
            waiting=not permanent,
        )
        self._failures[step.slot] = failure
        kind = "permanent" if permanent else "transient"
        if not permanent:
            delay = retry_after
            if delay is None:
                delay = self._settings.backoff.delay(attempts - 1, self._settings.rng)
            self._arm_timer(step.slot, attempts, delay)
            logger.warning(
                "edge {} {} {}: {} failure (attempt {}), retrying in {:.2f} s: {}",
                self._host,
                step.kind,
                step.route_id,
                kind,
                attempts,
                delay,
                error.message,
            )
        else:
            logger.warning(
                "edge {} {} {}: permanent failure, not retried until its inputs change: {}",
                self._host,
                step.kind,
                step.route_id,
                error.message,
            )
        if step.kind == "tls":
            self.board_host().tls_error = error.message
        if step.kind in ("modules", "reserve") and step.route is not None and attempts == 1:
            keeps = (
                "it keeps serving its previous modules and backend"
                if self._served.get(step.route_id, ServedRoute(None, {}, None)).backend is not None
                else "it serves 503 until they apply"
            )
            reason = "ProviderRejected" if permanent else "ProviderUnavailable"
            self._event(
                step.route, "Warning", "ModulesFailed", f"{reason}: {error.message}; {keeps}"
            )

    def _forget_failures(self, route_id: str) -> None:
        """Drop what is known of a route's failures once it is neither desired nor served: if
        it comes back it is a new route, tried at once (and reserved if it fails again)."""
        for slot in [slot for slot in self._failures if slot[1] == route_id]:
            del self._failures[slot]
            self._next_retry.pop(slot, None)
            self.cancel_timer(_retry_timer(slot))

    def _arm_timer(self, slot: tuple[str, str], attempt: int, delay: float) -> None:
        self._next_retry[slot] = self._settings.clock() + delay
        self.tell_after(delay, RetryDue(slot=slot, attempt=attempt), key=_retry_timer(slot))

    def _maybe_stop(self) -> None:
        # Stop only when nothing is served and no Ingress claims the host any more. The topic is
        # read directly: a part published after this check spawns a fresh actor, because the
        # address is free the moment ``stop_self`` returns.
        if self._served or self._tls_served is not None:
            return
        if self._parts or self.system.retained(host_topic(self._host)):
            return
        self._settings.board.forget(self._host)
        self.stop_self()

    # --- reporting ----------------------------------------------------------------------------

    def board_host(self) -> HostState:
        return self._settings.board.host(self._host)

    def _event(
        self, route: DesiredRoute, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        self._event_for(route.ingress, type_, reason, message)

    def _event_for(
        self, ingress: ObjectKey, type_: Literal["Normal", "Warning"], reason: str, message: str
    ) -> None:
        part = self._parts.get(str(ingress))
        uid = "" if part is None else part.uid
        self.tell(
            STATUS_WRITER,
            RecordEvent(
                regarding=ingress_reference(ingress, uid),
                type=type_,
                reason=reason,
                message=message,
            ),
        )

    def _report_conflicts(self, conflicts: tuple[Conflict, ...]) -> None:
        for conflict in conflicts:
            if conflict not in self._conflicts:
                logger.warning("{}", conflict)
                self._event_for(conflict.ingress, "Warning", "Conflict", str(conflict))
        self._conflicts = conflicts

    def _report_model_errors(self) -> None:
        errors: dict[str, tuple[str, str]] = {}
        for route in self._desired.routes:
            error = route.module_error
            armed = self._in_grace.get(route.route_id)
            if armed is not None and (error is None or error.reason not in _MISSING_INPUTS):
                # Complete (on arrival, or once the missing object came) or wrong in another
                # way: no grace to give, and no timer left to fire for nothing.
                del self._in_grace[route.route_id]
                if armed:
                    self.cancel_timer(("report-missing", route.route_id))
                armed = None
            if error is None:
                continue
            if armed is not None and error.reason in _MISSING_INPUTS:
                if not armed:
                    self._in_grace[route.route_id] = True
                    self.tell_after(
                        self._settings.missing_grace,
                        ReportMissing(route.route_id),
                        key=("report-missing", route.route_id),
                    )
                continue
            errors[route.route_id] = (error.reason, error.message)
            if self._model_errors.get(route.route_id) == errors[route.route_id]:
                continue
            served = self._served.get(route.route_id)
            keeps = (
                "it keeps serving its previous modules and backend"
                if served is not None and served.backend is not None
                else "it serves 503 until they apply"
            )
            retry = (
                "not retried until the ModuleSet changes"
                if error.permanent
                else "applied as soon as the missing object appears"
            )
            where = f"edge {self._host} route {route.route_id}"
            logger.warning("{}: {}: {}; {}, {}", where, error.reason, error.message, keeps, retry)
            self._event(
                route, "Warning", "ModulesFailed", f"{error.reason}: {error.message}; {keeps}"
            )
        for route_id, (reason, _message) in self._model_errors.items():
            fixed = self._desired_by_id.get(route_id)
            if route_id not in errors and fixed is not None:
                # The newest Event must not stay a Warning about something already fixed.
                where = f"edge {self._host} route {route_id}"
                logger.info("{}: {} resolved, its modules are valid again", where, reason)
                self._event(
                    fixed,
                    "Normal",
                    "ModulesRecovered",
                    f"{where}: {reason} resolved; its modules are valid again",
                )
        self._model_errors = errors

    def _update_route_board(self, route_id: str) -> None:
        if route_id == TLS_KEY:
            return
        routes = self.board_host().routes
        if route_id in self._desired_by_id or route_id in self._served:
            routes[route_id] = self._route_state(route_id)
        else:
            routes.pop(route_id, None)

    def _route_state(self, route_id: str) -> RouteState:
        route = self._desired_by_id.get(route_id)
        served = self._served.get(route_id)
        entry = RouteState(
            route_id=route_id,
            ingress="" if route is None else str(route.ingress),
            desired=route is not None,
            reserved=served is not None and served.reserved,
            modules=None if served is None else served.names,
            backend=(
                None
                if served is None or served.backend is None
                else _describe_backend(served.backend)
            ),
        )
        slot = next(
            (
                slot
                for slot in (
                    ("modules", route_id),
                    ("reserve", route_id),
                    ("backend", route_id),
                    ("remove", route_id),
                )
                if slot in self._failures
            ),
            None,
        )
        failure = None if slot is None else self._failures[slot]
        if route is not None and route.module_error is not None:
            entry.last_error = f"{route.module_error.reason}: {route.module_error.message}"
            entry.permanent = route.module_error.permanent
        elif failure is not None:
            entry.last_error = failure.message
            entry.permanent = failure.permanent
            entry.attempts = failure.attempts
            entry.next_retry = self._next_retry.get(slot) if slot is not None else None
        return entry
