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

The actor is a :class:`~interlock.mailbox.Reconciler` keyed by route id (and
:data:`~interlock.model.edge_plan.TLS_KEY`): a route whose desired value changed is requested,
and each reconcile takes one step for its route, then requests it again to look once more. The
runtime reconciles one key per message, with its reminder at the back of the mailbox: newer
desired states queued meanwhile (coalesced per Ingress) are handled before the next step, so
every step is chosen from the latest desired state, never a stale one.

What a failure does:

* a route whose desired modules cannot be resolved (``ModuleError`` from the model) is never
  given a backend: a new one is only *reserved* (created with no modules and no backend, so its
  path answers 503 instead of falling through to a shorter prefix); an existing one keeps the
  modules and backend it has;
* a :class:`PermanentEdgeError` (or a permanent ``ModuleError``) is recorded, reported as an
  Event and not retried until the step's inputs change;
* a :class:`TransientEdgeError` is retried by the runtime after the :class:`BackoffPolicy` delay
  with jitter (or the provider's ``retry_after``); a changed input retries at once. A missing
  Secret or ModuleSet needs no timer: it arrives as a new desired state the moment it appears.

What failed on which inputs is the planner's to know (:class:`StepFailure`); when to try again
is the runtime's (attempts, backoff, timers). Per-route state (applied modules, backend, last
error, next retry) is kept on an :class:`EdgeBoard` shared with ``/debug/edges``; it never holds
a Secret value.
"""

from __future__ import annotations

import random
from dataclasses import dataclass, field
from typing import Literal

from loguru import logger

from interlock.actors.edge_messages import (
    HostPart,
    PartsChanged,
    RecordEvent,
    SecretData,
    ingress_reference,
)
from interlock.actors.messages import (
    STATUS_WRITER,
)
from interlock.actors.topics import (
    EDGE_INSTANCE_TOPIC,
    HOST,
    SECRET,
)
from interlock.edge.provider import (
    ApplyModules,
    BackendTarget,
    EdgeError,
    EdgeProvider,
    PermanentEdgeError,
    TransientEdgeError,
)
from interlock.mailbox import (
    DONE,
    BackoffPolicy,
    Published,
    ReconcileError,
    Reconciler,
    RequeueAfter,
    TerminalError,
    TransientError,
    Unpublished,
)
from interlock.mailbox.reconciler import Result
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
    adopt_on_spawn: bool = False
    """Read what the provider serves for the host when an EdgeActor is first spawned, not only
    after a restart: for a data plane that outlives the controller (``HttpEdge``), whose routes
    of Ingresses deleted meanwhile must be removed. Reading costs a whole snapshot per host."""
    missing_grace: float = 0.0
    """Seconds a new route's missing ModuleSet or Secret is given to arrive before it is
    reported: objects applied together (``kubectl apply -f dir/``) arrive in any order, and a
    Warning about one that arrives a moment later only alarms. 0 reports at once."""


# --- the actor -------------------------------------------------------------------------------


def _module_names(modules: Modules) -> tuple[str, ...]:
    dumped = modules.model_dump(by_alias=True, exclude_none=True)
    return tuple(sorted(dumped))


_MISSING_INPUTS = frozenset({"ModuleSetNotFound", "SecretNotFound"})


@dataclass(frozen=True, slots=True)
class MissingGrace:
    """The reconciler key of a new route's grace for missing references (``missing_grace``):
    reconciled once to wait the grace out (``RequeueAfter``), then to report what is still
    missing. Beside the route's own key, so that the route's steps cannot cut it short."""

    route_id: str


@dataclass(frozen=True, slots=True)
class Readopt:
    """The reconciler key of taking what the data plane serves for the host again, once it
    restarted (``edge-instance``): retried with backoff until its snapshot is read."""


READOPT = Readopt()

EdgeKey = str | MissingGrace | Readopt
"""A route id (or :data:`TLS_KEY`), a route's :class:`MissingGrace`, or :data:`READOPT`."""

Grace = Literal["new", "armed", "waiting"]
"""A new route's grace: not yet requested, requested, waited out by the runtime's requeue."""


def _describe_backend(target: BackendTarget) -> str:
    text = str(target.key)
    return text if target.exists else f"{text} (does not exist)"


class EdgeActor(Reconciler[EdgeKey]):
    """Reconciles one host's edge; see the module docstring."""

    def __init__(self, *, host: str, settings: EdgeSettings) -> None:
        super().__init__(backoff=settings.backoff, rng=settings.rng)
        self._host = host
        self._settings = settings
        self._provider = settings.provider
        self._parts: dict[str, HostPart] = {}
        self._parts_changed = False
        self._desired = DesiredEdge(host=host, routes=())
        self._desired_by_id: dict[str, DesiredRoute] = {}
        self._conflicts: tuple[Conflict, ...] = ()
        self._served: dict[str, ServedRoute] = {}
        self._failures: dict[tuple[str, str], StepFailure] = {}
        self._model_errors: dict[str, tuple[str, str]] = {}
        self._in_grace: dict[str, Grace] = {}
        """New routes whose missing references are not reported yet (``missing_grace``)."""
        self._tls_topic: str | None = None
        self._tls_wanted: tuple[SecretValue, SecretValue] | None = None
        self._tls_served: tuple[SecretValue, SecretValue] | None = None
        self._data_plane: str | None = None
        """The data plane's instance last seen (``edge-instance``, with ``adopt_on_spawn``)."""

    # --- lifecycle ----------------------------------------------------------------------------

    async def started(self) -> None:
        self.subscribe(HOST.topic(self._host))
        if self._settings.adopt_on_spawn:
            self.subscribe(EDGE_INSTANCE_TOPIC)
        # After a restart the provider still serves what the previous instance applied; learn
        # which routes exist so the ones no longer desired are removed, and the others re-applied.
        # A host on the board had an actor before (it is removed from the board on stop).
        if self._host not in self._settings.board.hosts and not self._settings.adopt_on_spawn:
            return
        error = await self._adopt()
        if error is not None:
            logger.warning("edge {}: cannot read what the provider serves: {}", self._host, error)

    async def _adopt(self) -> EdgeError | None:
        """Take what the provider serves for the host as what is served, and look at every
        route: the ones no longer desired are removed, the others applied (again)."""
        try:
            snapshot = await self._provider.snapshot()
        except EdgeError as error:
            return error
        edge = snapshot.host(self._host)
        self._served = {
            route.route_id: ServedRoute(
                modules=None, secrets={}, backend=route.backend, reserved=not route.applied
            )
            for route in (edge.routes if edge is not None else ())
        }
        # Take a step even if no retained value arrives: when the predecessor crashed handling
        # the last part's removal, nothing else would make this one remove the routes.
        for route_id in sorted({*self._served, *self._desired_by_id}):
            self.request(route_id)
        self.request(TLS_KEY)  # with nothing served, the look that lets the actor stop
        return None

    def _take_instance(self, message: Published | Unpublished) -> None:
        """The data plane's instance (``edge-instance``): another one than the last seen means
        it restarted and holds nothing, so the host is adopted again (:data:`READOPT`)."""
        instance = message.value if isinstance(message, Published) else None
        if not isinstance(instance, str) or instance == self._data_plane:
            return
        seen, self._data_plane = self._data_plane, instance
        if seen is not None:  # the first one seen: adopted on spawn already
            self.request(READOPT)

    async def _readopt(self) -> Result:
        error = await self._adopt()
        if error is not None:
            raise TransientError(
                f"reading what the restarted data plane serves: {error.message}",
                retry_after=error.retry_after if isinstance(error, TransientEdgeError) else None,
            )
        logger.info("edge {}: the data plane restarted; programming the host again", self._host)
        self._tls_served = None
        for route_id in self._desired_by_id:
            self._update_route_board(route_id)
        return DONE

    async def handle(self, message: object) -> object | None:
        if isinstance(message, Published | Unpublished):
            if message.topic == HOST.topic(self._host):
                self._take_part(message)
                self.tell(self.address, PartsChanged())
            elif message.topic == self._tls_topic:
                self._take_tls(message)
            elif message.topic == EDGE_INSTANCE_TOPIC:
                self._take_instance(message)
            return None
        self._combine_if_changed()
        return None

    def _combine_if_changed(self) -> None:
        if self._parts_changed:
            # Once per burst of parts (the PartsChanged queued behind them, or the next
            # reconcile, whichever comes first), not once per part: combining is O(routes of
            # the host), and a host may have many Ingresses.
            self._combine_parts()

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
                    self._in_grace.setdefault(route_id, "new")
        for route_id in left:
            if self._in_grace.pop(route_id, "new") != "new":
                self.forget(MissingGrace(route_id))
            if route_id not in self._served:
                self._forget_failures(route_id)
        for route_id in [*left, *changed, TLS_KEY]:
            self.request(route_id)
        self._report_conflicts(tuple(conflicts))
        self._report_model_errors()
        self._follow_tls_secret()
        state = self.board_host()
        state.conflicts = tuple(str(c) for c in self._conflicts)
        for route_id in [*left, *changed]:
            self._update_route_board(route_id)

    def _follow_tls_secret(self) -> None:
        secret = self._desired.tls_secret
        topic = None if secret is None else SECRET.topic(secret)
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
        self.request(TLS_KEY)
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

    def _plan(self, key: str) -> EdgeStep | None:
        """The step ``key`` needs, as the planner (``model.edge_plan.plan``) chooses it."""
        return plan(
            key,
            desired=self._desired_by_id,
            served=self._served,
            failures=self._failures,
            tls_wanted=self._tls_wanted,
            tls_served=self._tls_served,
        )

    async def reconcile(self, key: EdgeKey) -> Result:
        """One step for ``key``; after a success the key is requested again (more may be due,
        and the last step of the host may let the actor stop)."""
        self._combine_if_changed()
        if isinstance(key, MissingGrace):
            return self._grace(key)
        if isinstance(key, Readopt):
            return await self._readopt()
        # The runtime calls this when the key's retry is due or its inputs changed: whatever
        # failed before may run again (on unchanged inputs, a permanent failure still may not).
        for slot, failure in self._failures.items():
            if slot[1] == key:
                failure.waiting = False
        step = self._plan(key)
        if step is None:
            if not self.requested():
                self._maybe_stop()
            return DONE
        error = await self._attempt(step)
        if error is None:
            self.request(key)
            return DONE
        if step.kind == "modules" and step.route_id not in self._served:
            # Failed modules on a new route: the planner reserves its path (fail closed) at
            # once, before the retry, so it cannot fall through to a shorter prefix meanwhile.
            reserve = self._plan(key)
            if reserve is not None and reserve.kind == "reserve":
                failed = await self._attempt(reserve)
                if isinstance(failed, TransientError):
                    error = failed
        raise error

    async def _attempt(self, step: EdgeStep) -> TransientError | TerminalError | None:
        """Run ``step`` and record what came of it; the error to raise when it failed."""
        failure: TransientError | TerminalError | None
        try:
            await self._run(step)
        except PermanentEdgeError as error:
            outcome = "failed_permanent"
            self._failed(step, error, permanent=True)
            failure = TerminalError(f"{step.kind} {step.route_id}: {error.message}")
        except TransientEdgeError as error:
            outcome = "failed_transient"
            self._failed(step, error, permanent=False)
            failure = TransientError(
                f"{step.kind} {step.route_id}: {error.message}", retry_after=error.retry_after
            )
        else:
            outcome = STEP_OUTCOMES[step.kind]
            failure = None
            self._succeeded(step)
        self._settings.board.reconciles[outcome] += 1
        self._update_route_board(step.route_id)
        return failure

    def _grace(self, key: MissingGrace) -> Result:
        grace = self._in_grace.get(key.route_id)
        if grace == "armed":
            self._in_grace[key.route_id] = "waiting"
            return RequeueAfter(self._settings.missing_grace)
        if grace == "waiting":
            del self._in_grace[key.route_id]
            self._report_model_errors()
        return DONE

    def reconcile_failed(
        self, key: EdgeKey, error: ReconcileError, *, attempt: int, retry_in: float | None
    ) -> None:
        if retry_in is None:
            logger.warning(
                "edge {} {}: permanent failure, not retried until its inputs change",
                self._host,
                error.message,
            )
        else:
            logger.warning(
                "edge {} {}: transient failure (attempt {}), retrying in {:.2f} s",
                self._host,
                error.message,
                attempt,
                retry_in,
            )
        # The board shows when the retry is due, known only now.
        if isinstance(key, str):
            self._update_route_board(key)

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

    def _succeeded(self, step: EdgeStep) -> None:
        self._clear_failure(step.slot)
        if step.kind == "modules":
            # Applied modules supersede a reservation of the same route that failed meanwhile:
            # its failure would otherwise be reported on a healthy route.
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

    def _failed(self, step: EdgeStep, error: EdgeError, *, permanent: bool) -> None:
        previous = self._failures.get(step.slot)
        first = previous is None or previous.inputs != step.inputs
        self._failures[step.slot] = StepFailure(
            inputs=step.inputs, permanent=permanent, message=error.message, waiting=not permanent
        )
        if step.kind == "tls":
            self.board_host().tls_error = error.message
        if step.kind in ("modules", "reserve") and step.route is not None and first:
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

    def _maybe_stop(self) -> None:
        # Stop only when nothing is served and no Ingress claims the host any more. The topic is
        # read directly: a part published after this check spawns a fresh actor, because the
        # address is free the moment ``stop_self`` returns.
        if self._served or self._tls_served is not None:
            return
        if self._parts or self.system.retained(HOST.topic(self._host)):
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
            grace = self._in_grace.get(route.route_id)
            if grace is not None and (error is None or error.reason not in _MISSING_INPUTS):
                # Complete (on arrival, or once the missing object came) or wrong in another
                # way: no grace to give, and no requeue left to fire for nothing.
                del self._in_grace[route.route_id]
                if grace != "new":
                    self.forget(MissingGrace(route.route_id))
                grace = None
            if error is None:
                continue
            if grace is not None and error.reason in _MISSING_INPUTS:
                if grace == "new":
                    self._in_grace[route.route_id] = "armed"
                    self.request(MissingGrace(route.route_id))
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
            retry = self.retry_state(route_id)
            if retry is not None:
                entry.attempts = max(1, retry.attempts)
                entry.next_retry = retry.due
        return entry
