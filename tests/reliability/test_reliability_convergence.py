"""The outputs depend only on the cluster's final state, whatever the order and faults
(``docs/reliability.md``, "Convergence harness").

Hypothesis generates a history — creates, updates and deletes of Services, EndpointSlices,
HTTPRoutes, ReferenceGrants, Ingresses, ModuleSets and Secrets from a small universe (see
``reliability_objects.py``) — interleaved with faults: watches dropped, history compacted (410 on
the next watch), API requests failing with 500 or 429 or held back, the edge provider failing
transiently or permanently, an actor's handler raising (its supervisor restarts it), and a
replica replaced by another (Lease handover). The real controller runs against the lane's API
server (``tests/kit/lanes.py``: embedded, or a real kube-apiserver with the controller identity)
the whole time.

After the history every output — the policy of every watched service port, every edge's routes
with their modules and backends, every HTTPRoute/Ingress/ModuleSet status — must equal what the
model computes from the final objects *and* what a fresh replica serves; the fresh replica, once
it leads, must find no status to change. All along, the fail-closed monitor checks that no route
was ever served with a backend while a module its desired state required was not applied.

``INTERLOCK_RELIABILITY_EXAMPLES`` sets the number of histories (``make reliability``: 200).
``INTERLOCK_RELIABILITY_SHARD=i/N`` makes this process run only the histories whose digest falls
in shard ``i`` of ``N`` (``make reliability-real-sharded`` runs N processes, each with its own
real cluster: one process needs about two hours for 200 real-lane histories). In exploring runs a
failing history is recorded and the run goes on (no shrinking: each try is a whole history), and
``INTERLOCK_RELIABILITY_LOG`` names a JSON-lines file that gets one line per history run.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import json
import os
import time
import traceback
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from hypothesis import HealthCheck, Phase, event, given, reject, settings
from hypothesis import strategies as st
from hypothesis.errors import InvalidArgument

from interlock.edge.faults import ServedConfig
from interlock.edge.provider import BackendTarget
from interlock.model.service import ServicePortKey
from tests.kit.lanes import ControlPlane, TestCluster, lane_cluster
from tests.kit.reliability_kit import (
    CRASH_TARGETS,
    WATCHED,
    ClusterState,
    CrashPlan,
    ModuleHistory,
    Replica,
    dict_differences,
    eventually,
    expected_policies,
    expected_route_and_module_statuses,
    expected_served,
    fail_closed_violations,
    populate,
    read_state,
    remove,
    served_differences,
    start_replica,
    stop_replica,
    write,
    written_statuses,
)
from tests.kit.reliability_objects import UNIVERSE, build

EXAMPLES = int(os.environ.get("INTERLOCK_RELIABILITY_EXAMPLES", "6"))
EXPLORE = "INTERLOCK_RELIABILITY_EXAMPLES" in os.environ
"""``make reliability`` explores new histories on every run; the default (CI) run replays the
same derandomized ones, so a rare new finding shows up there, not as a flaky CI failure."""
SHARD = os.environ.get("INTERLOCK_RELIABILITY_SHARD", "0/1")
LOG = os.environ.get("INTERLOCK_RELIABILITY_LOG", "")
CONVERGE_WITHIN = 60.0
"""A deadline only bounds a failure (it costs nothing when a history converges): on a loaded
machine against a real kube-apiserver, 20 s was not always enough."""
STEP_GAP = 0.003
"""A moment after each write, so the controller sees intermediate states (longer ones come
from ``pause`` steps); without it the whole history would reach the informers at once."""

# --- the steps of a history ---------------------------------------------------------------------

Step = tuple[Any, ...]

_object_kinds = sorted(UNIVERSE)


@st.composite
def object_step(draw: st.DrawFn) -> Step:
    kind = draw(st.sampled_from(_object_kinds))
    names, count, _ = UNIVERSE[kind]
    name = draw(st.sampled_from(names))
    if draw(st.integers(0, 4)) == 0:
        return ("delete", kind, name)
    return ("apply", kind, name, draw(st.integers(0, count - 1)))


fault_step: st.SearchStrategy[Step] = st.one_of(
    st.just(("drop_watches",)),
    st.just(("compact",)),
    st.tuples(
        st.just("api_fail"),
        st.sampled_from([500, 429]),
        st.integers(1, 4),
        st.sampled_from(["list", "watch", "patch", "update", "create", "get"]),
    ),
    st.tuples(st.just("api_slow"), st.integers(1, 4), st.sampled_from([0.05, 0.2])),
    st.tuples(
        st.just("edge_fail"),
        st.sampled_from(["apply_modules", "attach_backend", "detach_backend", "remove_route"]),
        st.sampled_from(["transient", "transient", "permanent"]),
        st.integers(1, 3),
    ),
    st.tuples(st.just("crash"), st.sampled_from(CRASH_TARGETS)),
    st.just(("handover",)),
)

pause_step: st.SearchStrategy[Step] = st.tuples(st.just("pause"), st.integers(1, 10))

history_strategy = st.lists(
    st.one_of(object_step(), object_step(), object_step(), fault_step, pause_step),
    min_size=4,
    max_size=28,
)


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` → ``(i, N)`` with ``0 <= i < N``."""
    index, _, count = text.partition("/")
    try:
        shard = (int(index), int(count))
    except ValueError:
        shard = (0, 0)
    if not 0 <= shard[0] < shard[1]:
        raise ValueError(f"INTERLOCK_RELIABILITY_SHARD={text!r}: expected i/N with 0 <= i < N")
    return shard


def history_shard(history: list[Step], shards: int) -> int:
    """Which of ``shards`` shards runs ``history``: a digest of its steps, the same in every
    process (``hash()`` of strings is salted per process), so shards never share a history."""
    digest = hashlib.sha256(repr(history).encode()).digest()
    return int.from_bytes(digest[:8], "big") % shards


# --- running one history ------------------------------------------------------------------------


@dataclass
class Run:
    cluster: TestCluster
    kubeconfig: str
    crashes: CrashPlan
    replicas: list[Replica] = field(default_factory=list)
    retired: list[Replica] = field(default_factory=list)
    modules: ModuleHistory = field(default_factory=ModuleHistory)
    handovers: int = 0

    @property
    def current(self) -> Replica:
        return self.replicas[-1]

    async def step(self, step: Step) -> None:
        cluster = self.cluster
        if step[0] not in ("apply", "delete", "pause"):
            note(f"fault injected: {step[0]}")
        match step:
            case ("apply", kind, name, variant):
                await write(cluster, build(kind, name, variant))
                await asyncio.sleep(STEP_GAP)
            case ("delete", kind, name):
                await remove(cluster, build(kind, name, 0))
                await asyncio.sleep(STEP_GAP)
            case ("drop_watches",):
                cluster.faults.drop_watches()
            case ("compact",):
                await cluster.faults.compact()
            case ("api_fail", status, count, verb):
                cluster.faults.fail_next(
                    count, status, verbs=[verb], retry_after=1 if status == 429 else None
                )
            case ("api_slow", count, seconds):
                cluster.faults.delay_next(count, seconds)
            case ("edge_fail", method, kind, count):
                self.current.edge.plan.fail_next(method, count, kind=kind)
            case ("crash", kind):
                self.crashes.arm(kind)
            case ("handover",):
                if self.handovers >= 1:
                    return  # one per history keeps a history short
                self.handovers += 1
                fresh = await start_replica(self.kubeconfig, f"replica-{len(self.replicas) + 1}")
                old = self.current
                self.replicas.append(fresh)
                await stop_replica(old)
                self.replicas.remove(old)
                self.retired.append(old)
            case ("pause", ticks):
                for _ in range(ticks):
                    await asyncio.sleep(0.005)
        await self.modules.record(cluster)


def describe_differences(replica: Replica, state: ClusterState) -> list[str]:
    problems = dict_differences(
        f"{replica.identity} policy", replica.policies(), expected_policies(state)
    )
    problems += served_differences(
        replica.served(),
        expected_served(state),
        history=replica.edge.served,
        stuck=replica.stuck_on_injected_permanent_faults(),
    )
    return problems


def status_differences(state: ClusterState, written: dict[str, Any]) -> list[str]:
    expected = expected_route_and_module_statuses(state)
    return dict_differences("status", {k: v for k, v in written.items() if k in expected}, expected)


async def converged(
    replica: Replica, run: Run, *, statuses: bool, within: float = CONVERGE_WITHIN
) -> None:
    differences: list[str] = ["not idle yet"]

    async def settled() -> bool:
        if not replica.idle():
            return False
        state = await read_state(run.cluster)
        differences[:] = describe_differences(replica, state)
        if statuses:
            differences.extend(status_differences(state, await written_statuses(run.cluster)))
        return not differences

    def report() -> str:
        lines = differences
        return f"{replica.identity} differs from the final state:\n  " + "\n  ".join(lines)

    await eventually(settled, within=within, message=report)


async def served_over_http(replica: Replica) -> dict[str, Any]:
    site = replica.controller.policy_site
    assert site is not None
    result: dict[str, Any] = {}
    async with aiohttp.ClientSession() as http:
        for target in WATCHED:
            url = (
                f"{site.url}/v1/outbound/{target.key.namespace}/{target.key.name}/{target.key.port}"
            )
            params = {"clientNamespace": target.client_namespace}
            async with http.get(url, params=params) as response:
                assert response.status == 200, await response.text()
                result[str(target)] = await response.json()
    return result


NOTES: list[str] = []
"""The current history's events, for its line in ``INTERLOCK_RELIABILITY_LOG`` (hypothesis's
own statistics do not cover a ``@given`` function run inside a test)."""


def note(text: str) -> None:
    """A hypothesis event when a generated history runs (the fixed history runs without one)."""
    NOTES.append(text)
    with contextlib.suppress(InvalidArgument):
        event(text)


def record_what_happened(run: Run, survivor: Replica) -> None:
    """Hypothesis events (``--hypothesis-show-statistics``): which paths the histories took."""
    for kind, count in run.crashes.crashed.items():
        if count:
            note(f"handler crashed and restarted: {kind}")
    view = survivor.controller.inspect()
    if view.relists:
        note("an informer relisted (410 or failed watch)")
    if view.reconnects:
        note("an informer reconnected")
    for replica in [*run.retired, *run.replicas]:
        if sum(replica.edge.plan.injected.values()):
            note("edge provider call failed (injected)")
        if replica.stuck_on_injected_permanent_faults():
            note("route held by an injected permanent edge fault (not retried)")
    if run.handovers:
        note("Lease handed over to a new replica")


async def run_history(
    history: list[Step],
    tmp: Path,
    plane: ControlPlane | None,
    *,
    within: float = CONVERGE_WITHIN,
) -> None:
    crashes = CrashPlan()
    async with lane_cluster(tmp, plane, bookmark_interval=0.2) as cluster:
        await populate(cluster)
        kubeconfig = cluster.controller_kubeconfig
        run = Run(cluster=cluster, kubeconfig=kubeconfig, crashes=crashes)
        await run.modules.record(cluster)
        with crashes.installed():
            run.replicas.append(await start_replica(kubeconfig, "replica-1"))
            try:
                for step in history:
                    await run.step(step)
                # The history is over: API and edge faults not yet consumed are withdrawn, so
                # that what remains to check is convergence, not the faults' own timing.
                cluster.faults.clear()
                run.current.edge.plan.clear()
                survivor = run.current
                # Crashes still armed fire while the survivor converges: a restart then must
                # re-deliver what the actor needs just the same.
                await converged(survivor, run, statuses=True, within=within)
                crashes.armed.clear()
                record_what_happened(run, survivor)

                fresh = await start_replica(kubeconfig, "fresh")
                run.replicas.append(fresh)
                await converged(fresh, run, statuses=False, within=within)
                assert fresh.policies() == survivor.policies()
                # And what mesh clients read over HTTP is that same policy.
                for replica in (survivor, fresh):
                    assert await served_over_http(replica) == replica.policies()
                before = await written_statuses(cluster)
                await stop_replica(survivor)
                run.replicas.remove(survivor)
                run.retired.append(survivor)
                await eventually(
                    lambda: fresh.controller.inspect().leading,
                    within=CONVERGE_WITHIN,
                    message="the fresh replica takes the Lease",
                )
                await converged(fresh, run, statuses=True, within=within)
                assert await written_statuses(cluster) == before
            finally:
                for replica in reversed(run.replicas):
                    await stop_replica(replica)
        violations = [
            v
            for replica in [*run.retired, *run.replicas]
            for v in fail_closed_violations(replica.edge.served, run.modules)
        ]
        assert violations == [], "\n".join(violations)


def record_history(history: list[Step], started: float, error: BaseException | None) -> None:
    """One JSON line per history run in ``INTERLOCK_RELIABILITY_LOG`` (when set)."""
    events = sorted(set(NOTES))
    NOTES.clear()
    if not LOG:
        return
    line = {
        "shard": SHARD,
        "history": [list(step) for step in history],
        "seconds": round(time.monotonic() - started, 1),
        "outcome": "passed" if error is None else "failed",
        "events": events,
        "error": "" if error is None else "".join(traceback.format_exception(error))[-4000:],
    }
    with open(LOG, "a", encoding="utf-8") as log:
        log.write(json.dumps(line) + "\n")


@pytest.mark.compaction
def test_every_output_equals_what_the_final_state_gives(
    tmp_path_factory: pytest.TempPathFactory, control_plane: ControlPlane | None
) -> None:
    index, shards = parse_shard(SHARD)
    failures: list[str] = []
    # Histories run already: different draws can give the same history (a step drawn from
    # either of two equal strategies), which an exploring run would count twice.
    seen: set[str] = set()

    @settings(
        max_examples=EXAMPLES,
        derandomize=not EXPLORE,
        deadline=None,
        # Exploring: a failure is recorded and the next history runs (shrinking one on a real
        # server costs a whole history per try); CI replays and shrinks as usual.
        phases=[Phase.explicit, Phase.reuse, Phase.generate] if EXPLORE else list(Phase),
        suppress_health_check=[
            HealthCheck.function_scoped_fixture,
            HealthCheck.too_slow,
            HealthCheck.filter_too_much,
        ],
        print_blob=True,
    )
    @given(history=history_strategy)
    def one_history(history: list[Step]) -> None:
        if shards > 1 and history_shard(history, shards) != index:
            reject()
        if EXPLORE:
            if repr(history) in seen:
                reject()
            seen.add(repr(history))
        started = time.monotonic()
        NOTES.clear()
        try:
            asyncio.run(run_history(history, tmp_path_factory.mktemp("history"), control_plane))
        except Exception as error:
            record_history(history, started, error)
            if not EXPLORE:
                raise
            failures.append(f"{history!r}:\n{error}")
        else:
            record_history(history, started, None)

    one_history()
    assert failures == [], f"{len(failures)} histories failed:\n\n" + "\n\n".join(failures)


@pytest.mark.compaction
@pytest.mark.parametrize("seed_history", ["all_faults"])
def test_a_history_with_every_fault_converges(
    seed_history: str, tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """One fixed history that injects every kind of fault, so each runs on every CI run."""
    history: list[Step] = [
        ("apply", "Service", "svc-a", 0),
        ("apply", "Secret", "users", 0),
        ("apply", "ModuleSet", "ms-0", 3),
        ("apply", "Ingress", "i-0", 0),
        ("pause", 5),
        ("edge_fail", "apply_modules", "transient", 2),
        ("apply", "HTTPRoute", "r-0", 1),
        ("crash", "RouteActor"),
        ("apply", "Service", "svc-b", 1),
        ("drop_watches",),
        ("apply", "ServiceOther", "svc-c", 0),
        ("apply", "ReferenceGrant", "grant", 0),
        ("compact",),
        ("api_fail", 500, 2, "watch"),
        ("api_fail", 429, 2, "list"),
        ("api_slow", 3, 0.05),
        ("apply", "HTTPRoute", "r-1", 2),
        ("crash", "EdgeActor"),
        ("apply", "ModuleSet", "ms-0", 2),
        ("pause", 10),
        ("edge_fail", "attach_backend", "permanent", 1),
        ("apply", "Ingress", "i-1", 1),
        ("handover",),
        ("apply", "ModuleSet", "ms-0", 0),
        ("crash", "ServicePortWatch"),
        ("delete", "Service", "svc-a"),
        ("apply", "EndpointSlice", "svc-b", 0),
        ("crash", "IngressActor"),
        ("apply", "Ingress", "i-0", 1),
    ]
    asyncio.run(run_history(history, tmp_path, control_plane))


def test_the_fail_closed_monitor_flags_a_backend_served_without_its_modules() -> None:
    """The monitor itself can fail: a backend on a reservation, or on a chain missing a module
    every version of the history required, is a violation; the required chain is not."""
    history = ModuleHistory(
        claims={("h0.example", "Prefix:/"): {("ms-0",)}},
        set_types={"ms-0": {frozenset({"basicAuth"}), None}},
    )
    backend = BackendTarget(ServicePortKey("default", "svc-a", 80))

    def served(applied: bool, order: list[str]) -> ServedConfig:
        modules = {"order": order} if applied else {}
        return ServedConfig(
            "attach_backend", "h0.example", "Prefix:/", True, applied, modules, backend
        )

    assert fail_closed_violations([served(True, ["basicAuth"])], history) == []
    assert len(fail_closed_violations([served(False, [])], history)) == 1
    assert len(fail_closed_violations([served(True, [])], history)) == 1
    assert len(fail_closed_violations([served(True, ["headers"])], history)) == 1


def test_shards_split_the_histories_between_them() -> None:
    """Every history belongs to exactly one shard, the same in every process."""
    histories: list[list[Step]] = [[("pause", n), ("compact",)] for n in range(40)]
    owners = [history_shard(history, 4) for history in histories]
    assert set(owners) == {0, 1, 2, 3}
    assert owners == [history_shard(list(history), 4) for history in histories]
    assert parse_shard("2/4") == (2, 4)
    for bad in ("4/4", "x", "1/0", "-1/3"):
        with pytest.raises(ValueError, match="INTERLOCK_RELIABILITY_SHARD"):
            parse_shard(bad)
