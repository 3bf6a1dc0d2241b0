"""The machinery of the convergence harness: replicas, faults, outputs, and what they should be.

A history runs against one API server (either lane, ``tests/kit/lanes.py``; the harness writes as
cluster admin, the replicas use the controller's kubeconfig) with one or more *replicas* (real
:class:`~interlock.controller.app.Controller` instances with an edge). Each replica's edge provider
is wrapped in a :class:`~interlock.edge.faults.FaultyEdge`, whose served log is what the fail-closed
monitor reads. After the history, the outputs every replica produces are compared with two
independent answers computed from the *final* objects alone:

* the model's pure functions (``resolve_route``, ``build_outbound_policy``, ``desired_edges``,
  ``route_status``, ``module_set_conditions``), and
* a fresh replica started on the final state, which must converge to the same outputs and,
  once it holds the Lease, must find nothing to rewrite in any status.

Why both: the model alone would not notice a wiring bug that the actors share with a fresh
replica (say, a kind the informers never watch), and a fresh replica alone would not notice a
bug in the model that every replica repeats.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import json
import os
import signal
import sys
from collections import Counter
from collections.abc import AsyncIterator, Awaitable, Callable, Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, cast

import aiohttp

from interlock.actors.directories import _Directory
from interlock.actors.edge import EdgeActor
from interlock.actors.grants import GrantsDirectory
from interlock.actors.ingress import IngressActor
from interlock.actors.route import RouteActor
from interlock.actors.router import InformerRouter
from interlock.actors.service_directory import ServiceDirectory
from interlock.actors.service_port_watch import ServicePortWatch
from interlock.actors.status_writer import StatusWriter
from interlock.api.policy_json import policy_json
from interlock.config import (
    Address,
    AdminConfig,
    ClusterConfig,
    ControllerConfig,
    EdgeConfig,
    LeadershipConfig,
    PolicyApiConfig,
    StatusConfig,
)
from interlock.controller.app import Controller
from interlock.edge.faults import FaultyEdge, ServedConfig
from interlock.edge.modules import compile_modules
from interlock.edge.provider import BackendTarget
from interlock.kube.transport import KubeApiError
from interlock.mailbox import Actor, BackoffPolicy
from interlock.mailbox.slot import LatestValueSlot
from interlock.mailbox.testing import eventually as _eventually
from interlock.model.edge import EdgesResult, desired_edges
from interlock.model.gateway import HTTPRoute, parse_http_route, parse_reference_grant
from interlock.model.ingress import parse_ingress, parse_ingress_class
from interlock.model.meta import InvalidObject, ObjectKey, going_away
from interlock.model.moduleset import (
    module_set_conditions,
    parse_module_set,
    parse_secret,
)
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.policy_watch import PolicyUpdate, WatchTarget
from interlock.model.route_resolution import resolve_route
from interlock.model.route_status import route_status
from interlock.model.service import Service, ServicePortKey, parse_service
from tests.kit.lanes import LEASE_NAMESPACE, RESOURCES, ControlPlane, TestCluster, lane_cluster
from tests.kit.reliability_objects import INGRESS_CLASS, NAMESPACES, UNIVERSE, build

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
LOCAL = Address("127.0.0.1", 0)
CONTROLLER_NAME = "interlock.dev/policy-controller"

WATCHED: tuple[WatchTarget, ...] = tuple(
    WatchTarget(ServicePortKey(ns, svc, port), client_namespace=client)
    for ns, svc, port, client in (
        ("default", "svc-a", 80, "default"),
        ("default", "svc-a", 8080, "default"),
        ("default", "svc-b", 80, "default"),
        ("default", "svc-b", 80, "other"),
        ("default", "svc-b", 8080, "default"),
        ("other", "svc-c", 80, "default"),
        ("default", "ghost", 80, "default"),
    )
)
"""The service ports every replica watches from its start (as mesh clients would)."""

KINDS: dict[str, tuple[str, str]] = {
    "Service": ("v1", "Service"),
    "EndpointSlice": ("discovery.k8s.io/v1", "EndpointSlice"),
    "HTTPRoute": ("gateway.networking.k8s.io/v1", "HTTPRoute"),
    "ReferenceGrant": ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant"),
    "Ingress": ("networking.k8s.io/v1", "Ingress"),
    "IngressClass": ("networking.k8s.io/v1", "IngressClass"),
    "ModuleSet": ("interlock.dev/v1alpha1", "ModuleSet"),
    "Secret": ("v1", "Secret"),
}

Obj = dict[str, Any]


def replica_config(kubeconfig: str, identity: str) -> ControllerConfig:
    """Free ports, an edge, short grace periods and retry delays, and Leases that survive a
    loaded machine stalling the event loop (a stopped replica releases its Lease)."""
    return ControllerConfig(
        cluster=ClusterConfig(kubeconfig=kubeconfig, reconnect_initial=0.02, reconnect_maximum=0.2),
        policy=PolicyApiConfig(addr=LOCAL, watch_grace=0.2),
        admin=AdminConfig(addr=LOCAL),
        edge=EdgeConfig(addr=LOCAL),
        leadership=LeadershipConfig(
            namespace=LEASE_NAMESPACE,
            identity=identity,
            duration=8.0,
            renew_deadline=6.0,
            retry_period=0.2,
        ),
        status=StatusConfig(retry_initial=0.02, retry_maximum=0.2),
    )


async def eventually(
    condition: Callable[[], Awaitable[bool]] | Callable[[], bool],
    *,
    within: float,
    message: str | Callable[[], str],
) -> None:
    """Poll ``condition`` with short sleeps until it holds; fail naming what was awaited."""
    await _eventually(condition, within=within, message=message, interval=0.02)


# --- crashing a live actor's handler ------------------------------------------------------------


class InjectedCrash(RuntimeError):
    """Raised by a handler on purpose; the supervisor must restart the actor."""


CRASHABLE: dict[str, type[Actor]] = {
    "RouteActor": RouteActor,
    "ServicePortWatch": ServicePortWatch,
    "IngressActor": IngressActor,
    "EdgeActor": EdgeActor,
    "ServiceDirectory": ServiceDirectory,
    "InformerRouter": InformerRouter,
    "GrantsDirectory": GrantsDirectory,
    "EdgeDirectory": cast("type[Actor]", _Directory),  # abstract: its subclasses are crashed
    "StatusWriter": StatusWriter,
}
"""Actor classes a crash can be injected into. ``EdgeDirectory`` is the base of the Ingress,
IngressClass, ModuleSet, Secret and EndpointSlice directories: the next of them to handle a
message crashes."""

CRASH_TARGETS = tuple(sorted(CRASHABLE))
"""The actors a history may crash at any moment. The route, watch, Ingress and edge actors'
inputs, and since be6c6f8 the status writers' desired statuses, are retained pub/sub values that
a restart re-delivers (docs/design.md); the router, ServiceDirectory, GrantsDirectory and the
edge directories have durable mailboxes that re-deliver what a crash interrupted (first a
journal, 6f28001, and a finding of ``test_reliability_findings.py``; now the runtime's). All
these fixes answered findings of this harness."""


class CrashPlan:
    """Makes the next handled message of an actor class raise, once per arming.

    The class's ``receive`` is wrapped for the duration of :meth:`installed`; the fresh instance
    the supervisor builds is of the same class, so only armed calls raise. Crashes model
    independent transient faults: after one, that actor (by address: ``EdgeDirectory`` spans
    five of them) handles a message successfully before an armed crash fires in it again. Two
    crashes in a row on the same message would be a *poison* message, which the runtime's
    replay drops by design (6f28001) — not what is tested here.
    """

    def __init__(self) -> None:
        self.armed: Counter[str] = Counter()
        self.crashed: Counter[str] = Counter()
        self._recovering: set[str] = set()
        # The messages that crashed, kept alive so their ids stay unique: a replayed message
        # (the same object, from a durable mailbox) is never crashed a second time, even when
        # its actor handled a newer message before the replay.
        self._crashed_messages: dict[int, object] = {}

    def arm(self, kind: str) -> None:
        self.armed[kind] += 1

    @contextlib.contextmanager
    def installed(self) -> Iterator[CrashPlan]:
        # A Reconciler subclass inherits its ``receive`` (the runtime's): wrapped all the same,
        # so a crash may hit a reconcile as well as an input, and removed again after.
        originals = {kind: cls.__dict__.get("receive") for kind, cls in CRASHABLE.items()}

        def wrap(kind: str, original: Any) -> Any:
            async def receive(actor: Actor, message: object) -> object | None:
                if (
                    self.armed[kind] > 0
                    and actor.address not in self._recovering
                    and id(message) not in self._crashed_messages
                ):
                    self.armed[kind] -= 1
                    self.crashed[kind] += 1
                    self._recovering.add(actor.address)
                    self._crashed_messages[id(message)] = message
                    raise InjectedCrash(f"injected crash in {kind} at {actor.address}")
                result: object | None = await original(actor, message)
                self._recovering.discard(actor.address)
                return result

            return receive

        for kind, cls in CRASHABLE.items():
            setattr(cls, "receive", wrap(kind, cls.receive))  # noqa: B010
        try:
            yield self
        finally:
            for kind, cls in CRASHABLE.items():
                original = originals[kind]
                if original is None:
                    delattr(cls, "receive")
                else:
                    setattr(cls, "receive", original)  # noqa: B010


# --- replicas -----------------------------------------------------------------------------------


@dataclass
class Replica:
    """One running controller, its fault-injecting edge provider and its open policy watches."""

    controller: Controller
    edge: FaultyEdge
    slots: dict[WatchTarget, LatestValueSlot[Any]] = field(default_factory=dict)

    @property
    def identity(self) -> str:
        return self.controller.config.leadership.identity

    def policies(self) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for target, slot in self.slots.items():
            update = slot.latest
            result[str(target)] = None if update is None else policy_json(update.policy)
        return result

    def served(self) -> dict[str, dict[str, Any]]:
        """What the data plane serves now, by host and route id (hosts with no route left out)."""
        edge = self.controller.inspect().edge
        assert edge is not None and edge.served is not None
        hosts: dict[str, dict[str, Any]] = {}
        for host in edge.served.to_json()["hosts"]:
            routes = {route["routeId"]: route for route in host["routes"]}
            if routes:
                hosts[host["host"]] = routes
        return hosts

    def stuck_on_injected_permanent_faults(self) -> set[tuple[str, str]]:
        """(host, route id) of routes whose last step failed with an injected *permanent* fault.

        By design (``docs/modules.md``, "Errors: permanent and transient") such a route is not
        retried until one of its inputs changes, so it may rightly differ from a fresh replica's;
        the board must say why (the fault's message), and the fail-closed monitor still applies to
        it.
        """
        edge = self.controller.inspect().edge
        assert edge is not None
        return {
            (host, route_id)
            for host, routes in edge.routes.items()
            for route_id, state in routes.items()
            if state.permanent and "injected permanent fault" in (state.last_error or "")
        }

    def idle(self) -> bool:
        return self.controller.inspect().idle


@contextlib.asynccontextmanager
async def crd_cluster(
    tmp_path: Path, control_plane: ControlPlane | None, *, ingress_class: bool = True
) -> AsyncIterator[TestCluster]:
    """The lane's cluster (bookmarks every 0.2 s) with interlock's CRDs and, unless told
    otherwise, the IngressClass the edge serves."""
    async with lane_cluster(tmp_path, control_plane, bookmark_interval=0.2) as cluster:
        await cluster.apply_manifests([CRDS])
        if ingress_class:
            await write(cluster, INGRESS_CLASS)
        yield cluster


@contextlib.asynccontextmanager
async def ready_controller(
    cluster: TestCluster, identity: str, *, within: float = 60.0
) -> AsyncIterator[Controller]:
    """A replica on ``cluster``, started and ready; stopped when the block ends."""
    controller = Controller(replica_config(cluster.controller_kubeconfig, identity))
    await controller.start()
    try:
        await controller.wait_ready(within=within)
        yield controller
    finally:
        await controller.stop()


@contextlib.asynccontextmanager
async def policy_watch(
    controller: Controller, target: WatchTarget
) -> AsyncIterator[LatestValueSlot[PolicyUpdate]]:
    """A policy watch on ``target`` open for the block, as a policy API client's."""
    slot = controller.watches.open_watch(target)
    try:
        yield slot
    finally:
        controller.watches.close_watch(target, slot)


async def start_replica(kubeconfig: str, identity: str) -> Replica:
    """Start a replica; a start that fails on an injected API error is tried again, as the
    kubelet restarts a Pod whose process exited (``Controller.start`` does not retry discovery)."""
    attempts = 20
    for attempt in range(attempts):
        controller = Controller(replica_config(kubeconfig, identity))
        assert controller.edge is not None
        faulty = FaultyEdge(controller.edge.provider)
        controller.edge.provider = faulty
        controller.edge.backoff = BackoffPolicy(initial=0.01, maximum=0.1)
        try:
            await controller.start()
        except KubeApiError:
            await controller.stop()
            if attempt == attempts - 1:
                raise
            continue
        break
    replica = Replica(controller=controller, edge=faulty)
    for target in WATCHED:
        replica.slots[target] = controller.watches.open_watch(target)
    await controller.wait_ready(within=60.0)
    return replica


async def stop_replica(replica: Replica) -> None:
    for target, slot in replica.slots.items():
        replica.controller.watches.close_watch(target, slot)
    await replica.controller.stop()


# --- the cluster as the harness writes it --------------------------------------------------------


async def write(cluster: TestCluster, obj: Obj) -> None:
    """Create or replace ``obj`` (over HTTP, as admin; a replace carries the current
    resourceVersion, which custom resources require); an immutable field changed → delete and
    create."""
    try:
        await cluster.apply(obj)
    except KubeApiError as error:
        if error.code != 422:
            raise
        await remove(cluster, obj)
        await cluster.create(obj)


async def populate(cluster: TestCluster) -> None:
    """The harness's starting cluster: our CRDs, the second namespace, our IngressClass and
    variant 0 of every object of the universe (``reliability_objects.UNIVERSE``), so that a
    history's updates and deletes meet live objects. The convergence harness, the crash tests
    and the soak all start from it."""
    await cluster.apply_manifests([CRDS])
    await write(
        cluster, {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACES[1]}}
    )
    await write(cluster, INGRESS_CLASS)
    for kind, (names, _, _) in UNIVERSE.items():
        for name in names:
            await write(cluster, build(kind, name, 0))


async def remove(cluster: TestCluster, obj: Obj) -> None:
    with contextlib.suppress(KubeApiError):
        await cluster.delete(obj)


async def objects(cluster: TestCluster, kind: str) -> list[Obj]:
    return await cluster.list(RESOURCES[KINDS[kind]])


# --- what the outputs should be, from the final objects alone ------------------------------------


def _parsed(raws: list[Obj], parse: Callable[[Obj], Any]) -> list[Any]:
    parsed = []
    for raw in raws:
        try:
            parsed.append(parse(raw))
        except InvalidObject:
            continue
    return parsed


@dataclass
class ClusterState:
    """The parsed objects of the API server at one moment."""

    services: dict[ObjectKey, Service]
    routes: list[HTTPRoute]
    grants: list[Any]
    edges: EdgesResult
    module_sets: list[Any]
    raw_routes: list[Obj]


async def read_state(cluster: TestCluster) -> ClusterState:
    # A route or Ingress being deleted no longer applies (``going_away``), as for the controller.
    raw = {
        kind: [o for o in await objects(cluster, kind) if not going_away(kind, o)] for kind in KINDS
    }
    services = {s.key: s for s in _parsed(raw["Service"], parse_service)}
    routes = _parsed(raw["HTTPRoute"], parse_http_route)
    grants = _parsed(raw["ReferenceGrant"], parse_reference_grant)
    module_sets = _parsed(raw["ModuleSet"], parse_module_set)
    edges = desired_edges(
        _parsed(raw["Ingress"], parse_ingress),
        _parsed(raw["IngressClass"], parse_ingress_class),
        module_sets,
        _parsed(raw["Secret"], parse_secret),
        services.values(),
    )
    return ClusterState(
        services=services,
        routes=routes,
        grants=grants,
        edges=edges,
        module_sets=module_sets,
        raw_routes=raw["HTTPRoute"],
    )


def expected_policies(
    state: ClusterState, targets: Iterable[WatchTarget] = WATCHED
) -> dict[str, Any]:
    """The policy of each target (default: :data:`WATCHED`), from the final objects alone."""
    resolved = [resolve_route(route, state.services, state.grants) for route in state.routes]
    return {
        str(t): policy_json(
            build_outbound_policy(
                state.services.get(ObjectKey(namespace=t.key.namespace, name=t.key.name)),
                t.key.namespace,
                t.key.name,
                t.key.port,
                t.client_namespace,
                resolved,
            )
        )
        for t in targets
    }


@dataclass(frozen=True)
class Unsettled:
    """A route whose desired modules cannot apply: it may keep an earlier good configuration."""

    path: str
    path_type: str


def expected_served(state: ClusterState) -> dict[str, dict[str, Any]]:
    """Per host and route id: the exact served form, or :class:`Unsettled` (fail closed)."""
    hosts: dict[str, dict[str, Any]] = {}
    for host, edge in state.edges.edges.items():
        routes: dict[str, Any] = {}
        for route in edge.routes:
            if route.module_error is not None:
                routes[route.route_id] = Unsettled(route.path, route.path_type)
                continue
            backend = route.backend
            port = backend.port if backend.port >= 1 or backend.exists else 1
            routes[route.route_id] = {
                "routeId": route.route_id,
                "path": route.path,
                "pathType": route.path_type,
                "applied": True,
                "modules": compile_modules(route.modules, route.secrets).summary(),
                "backend": BackendTarget(
                    ServicePortKey(backend.namespace, backend.service, port), exists=backend.exists
                ).to_json(),
            }
        if routes:
            hosts[host] = routes
    return hosts


def _strip_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: _strip_times(v)
            for k, v in value.items()
            if k not in ("lastTransitionTime", "port", "ports")
        }
    if isinstance(value, list):
        return [_strip_times(v) for v in value]
    return value


async def written_statuses(cluster: TestCluster) -> dict[str, Any]:
    """Every status interlock writes, timestamps and the edge's (per-replica) port left out."""
    result: dict[str, Any] = {}
    for kind in ("HTTPRoute", "Ingress", "ModuleSet"):
        for raw in await objects(cluster, kind):
            meta = raw["metadata"]
            result[f"{kind} {meta['namespace']}/{meta['name']}"] = _strip_times(
                raw.get("status") or {}
            )
    return result


def expected_route_and_module_statuses(state: ClusterState) -> dict[str, Any]:
    now = datetime.now(UTC)
    result: dict[str, Any] = {}
    for route in state.routes:
        resolved = resolve_route(route, state.services, state.grants)
        parents = route_status(
            route, resolved, state.services, controller_name=CONTROLLER_NAME, now=now
        )
        key = f"HTTPRoute {route.metadata.namespace}/{route.metadata.name}"
        result[key] = _strip_times({"parents": parents}) if parents else {}
    # An Ingress serving at least one host reports where the edge listens (the port differs per
    # replica and is left out); an Ingress that wins no path still publishes its host part.
    serving = {r.ingress for e in state.edges.edges.values() for r in e.routes} | {
        c.ingress for c in state.edges.conflicts
    }
    for key_obj in serving:
        key = f"Ingress {key_obj.namespace}/{key_obj.name}"
        result[key] = {"loadBalancer": {"ingress": [{"ip": "127.0.0.1"}]}}
    for module_set in state.module_sets:
        key = f"ModuleSet {module_set.metadata.namespace}/{module_set.metadata.name}"
        conditions = module_set_conditions(module_set, now=now)
        result[key] = _strip_times({"conditions": conditions})
    return result


# --- comparing -----------------------------------------------------------------------------------


def served_differences(
    served: dict[str, dict[str, Any]],
    expected: dict[str, dict[str, Any]],
    *,
    history: list[ServedConfig],
    stuck: set[tuple[str, str]],
) -> list[str]:
    """Differences between what a replica serves and what it should; [] when they agree.

    An :class:`Unsettled` route must serve either nothing (a 503 reservation) or a configuration
    the same replica served before with its modules applied (its last good one).
    """
    problems: list[str] = []
    for host in sorted(set(served) | set(expected)):
        have, want = served.get(host, {}), expected.get(host, {})
        for route_id in sorted(set(have) | set(want)):
            got, wanted = have.get(route_id), want.get(route_id)
            where = f"edge {host} route {route_id}"
            if (host, route_id) in stuck:
                continue
            if isinstance(wanted, Unsettled):
                if got is None:
                    problems.append(f"{where}: missing (should at least answer 503)")
                elif got["applied"] or got["backend"] is not None:
                    earlier = [
                        c
                        for c in history
                        if c.host == host and c.route_id == route_id and c.applied
                    ]
                    if not any(
                        json.dumps(dict(c.modules), sort_keys=True)
                        == json.dumps(got["modules"], sort_keys=True)
                        for c in earlier
                    ):
                        problems.append(f"{where}: serves {got}, never a good configuration")
            elif got != wanted:
                problems.append(f"{where}: serves {got}, expected {wanted}")
    return problems


def dict_differences(label: str, have: dict[str, Any], want: dict[str, Any]) -> list[str]:
    return [
        f"{label} {key}: have {have.get(key)!r}, expected {want.get(key)!r}"
        for key in sorted(set(have) | set(want))
        if have.get(key) != want.get(key)
    ]


# --- the fail-closed monitor ----------------------------------------------------------------------


@dataclass
class ModuleHistory:
    """Every version the history gave each Ingress and ModuleSet (for the fail-closed check).

    The controller may combine an Ingress version with any ModuleSet version it saw (informers
    of different kinds run independently), so the module types a route may legitimately serve
    are those of *any* such combination whose sets were all valid.
    """

    claims: dict[tuple[str, str], set[tuple[str, ...]]] = field(default_factory=dict)
    """(host, route id) → the ModuleSet name lists of Ingress versions that claimed it."""
    set_types: dict[str, set[frozenset[str] | None]] = field(default_factory=dict)
    """ModuleSet name → module type sets of its valid versions (None: invalid or absent)."""

    async def record(self, cluster: TestCluster) -> None:
        for raw in await objects(cluster, "Ingress"):
            try:
                ingress = parse_ingress(raw)
            except InvalidObject:
                continue
            names = ingress.module_set_names()
            for rule in ingress.spec.rules:
                if not rule.host or rule.http is None:
                    continue
                for path in rule.http.paths:
                    route_path = (path.path or "/").rstrip("/") or "/"
                    self.claims.setdefault((rule.host, f"Prefix:{route_path}"), set()).add(names)
        present = {}
        for raw in await objects(cluster, "ModuleSet"):
            try:
                module_set = parse_module_set(raw)
            except InvalidObject:
                continue
            valid = not module_set.problems
            types = frozenset(module_set.spec.modules.model_dump(by_alias=True, exclude_none=True))
            present[module_set.metadata.name] = types if valid else None
        for name in {"ms-0", "ms-1"} | set(present):
            self.set_types.setdefault(name, set()).add(present.get(name))

    def allowed(self, host: str, route_id: str) -> set[frozenset[str]]:
        allowed: set[frozenset[str]] = set()
        for names in self.claims.get((host, route_id), set()):
            choices = [
                [t for t in self.set_types.get(name, {None}) if t is not None] for name in names
            ]
            for combo in itertools.product(*choices):
                allowed.add(frozenset().union(*combo))
        return allowed


def fail_closed_violations(served: list[ServedConfig], modules: ModuleHistory) -> list[str]:
    """Served configurations that had a backend without the modules their route required."""
    violations: list[str] = []
    for config in served:
        if config.backend is None:
            continue
        where = f"edge {config.host} route {config.route_id} after {config.method}"
        if not config.applied:
            violations.append(f"{where}: backend attached to a route whose modules never applied")
            continue
        order = config.modules.get("order")
        types = frozenset(order if isinstance(order, list) else ())
        allowed = modules.allowed(config.host, config.route_id)
        if types not in allowed:
            violations.append(
                f"{where}: backend attached with modules {sorted(types)}; "
                f"the history only ever required one of {[sorted(a) for a in allowed]}"
            )
    return violations


# --- `interlock run` as a real process ------------------------------------------------------------


@dataclass
class RunProcess:
    """``interlock run`` in a subprocess (as a Pod runs it), read without blocking the event
    loop: the lane's fault proxy and API client run in the test's loop too."""

    process: asyncio.subprocess.Process
    identity: str
    log: Path
    urls: dict[str, str] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)
    _reader: asyncio.Task[None] | None = None

    @classmethod
    async def start(
        cls, kubeconfig: str, identity: str, log: Path, *, lease_duration: float = 8.0
    ) -> RunProcess:
        argv = [
            sys.executable,
            "-m",
            "interlock",
            "run",
            "--kubeconfig",
            kubeconfig,
            "--policy-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
            "--edge-addr",
            "127.0.0.1:0",
            "--edge-workers",  # the edge in the controller's process: these tests are its Lease's
            "1",
            "--lease-namespace",
            LEASE_NAMESPACE,
            "--lease-identity",
            identity,
            "--lease-duration",
            str(lease_duration),
            "--lease-renew-deadline",
            str(lease_duration * 0.75),
            "--lease-retry-period",
            "0.2",
            "--watch-grace",
            "0.2",
        ]
        env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_")}
        env["PYTHONUNBUFFERED"] = "1"
        with open(log, "w") as stderr:
            process = await asyncio.create_subprocess_exec(
                *argv, stdout=asyncio.subprocess.PIPE, stderr=stderr, env=env
            )
        run = cls(process=process, identity=identity, log=log)
        run._reader = asyncio.get_running_loop().create_task(run._read())
        await eventually(
            lambda: {"policy", "admin", "edge"} <= set(run.urls) or process.returncode is not None,
            within=120.0,
            message=lambda: f"{identity} prints its addresses: {run.lines} {run.tail()}",
        )
        assert process.returncode is None, f"{identity} exited: {run.tail()}"
        return run

    async def _read(self) -> None:
        assert self.process.stdout is not None
        names = {"policy API": "policy", "admin": "admin", "edge data plane": "edge"}
        async for raw in self.process.stdout:
            line = raw.decode().rstrip("\n")
            self.lines.append(line)
            for prefix, name in names.items():
                if line.startswith(f"{prefix} listening on "):
                    self.urls[name] = line.rsplit(" ", 1)[1]

    def tail(self) -> str:
        return "stderr:\n" + self.log.read_text()[-3000:]

    async def get(self, server: str, path: str) -> Any:
        async with aiohttp.ClientSession() as http, http.get(self.urls[server] + path) as answer:
            assert answer.status == 200, f"{self.identity} {path}: {answer.status}"
            return await answer.json()

    async def ready(self) -> bool:
        try:
            async with (
                aiohttp.ClientSession() as http,
                http.get(self.urls["admin"] + "/readyz") as answer,
            ):
                return answer.status == 200
        except aiohttp.ClientError:
            return False

    async def leading(self) -> bool:
        return bool((await self.get("admin", "/debug/lease"))["is_leader"])

    async def idle(self) -> bool:
        actors = await self.get("admin", "/debug/actors")
        return int(actors["system"]["busy"]) == 0

    async def policies(self) -> dict[str, Any]:
        result: dict[str, Any] = {}
        for t in WATCHED:
            path = f"/v1/outbound/{t.key.namespace}/{t.key.name}/{t.key.port}"
            result[str(t)] = await self.get(
                "policy", f"{path}?clientNamespace={t.client_namespace}"
            )
        return result

    async def served(self) -> dict[str, dict[str, Any]]:
        hosts: dict[str, dict[str, Any]] = {}
        for host in (await self.get("admin", "/debug/edges"))["served"]:
            routes = {route["routeId"]: route for route in host["routes"]}
            if routes:
                hosts[host["host"]] = routes
        return hosts

    def send(self, signum: int) -> None:
        if self.process.returncode is None:
            self.process.send_signal(signum)

    async def stop(self, signum: int = signal.SIGTERM) -> int:
        """Send ``signum`` (a stopped process is continued first) and wait for the exit."""
        if self.process.returncode is None:
            self.process.send_signal(signum)
            if signum != signal.SIGKILL:
                self.process.send_signal(signal.SIGCONT)
            try:
                await asyncio.wait_for(self.process.wait(), 60)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        if self._reader is not None:
            await self._reader
        return self.process.returncode or 0
