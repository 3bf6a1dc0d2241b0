"""``interlock run`` killed and restarted, a leader replaced: real processes
(``docs/reliability.md``, "Crash and restart, Lease takeover").

The convergence harness replaces replicas in-process and always stops them cleanly. A Pod dies
harder: ``kill -9`` in the middle of a burst of changes, then the kubelet starts it again; a
node freezes with the leader on it and the Lease must expire before anyone else writes. Here
``interlock run`` runs as a subprocess (``reliability_kit.RunProcess``) against the lane's API
server (embedded, or a real kube-apiserver with the controller's RBAC identity) and:

* killed with SIGKILL halfway through a burst of writes, then restarted under the same identity
  (as a restarted container keeps its Pod name), it converges: every watched policy, every
  served edge route and every HTTPRoute / Ingress / ModuleSet status equals what the model
  computes from the final objects, a fresh replica serves the same, and the Events are not a
  storm — one Event object per (object, reason, message) and process lifetime at most: the
  recorder aggregates repeats into ``count``, as the API server's dedup rules expect;
* with two replicas, the leader frozen (SIGSTOP: it holds the Lease, writes nothing), the other
  takes the Lease only after it expired — never two leaders at once, checked on the Lease's own
  renew and acquire times — and then writes the statuses the changes made meanwhile need; when
  the frozen one is continued it writes nothing stale over them.
"""

from __future__ import annotations

import asyncio
import signal
from collections import Counter
from datetime import datetime
from pathlib import Path
from typing import Any

from interlock.kube.resources import EVENT, Resource
from tests.kit.lanes import LEASE_NAMESPACE, ControlPlane, TestCluster, lane_cluster
from tests.kit.reliability_kit import (
    RunProcess,
    dict_differences,
    eventually,
    expected_policies,
    expected_route_and_module_statuses,
    expected_served,
    populate,
    read_state,
    served_differences,
    start_replica,
    stop_replica,
    write,
    written_statuses,
)
from tests.kit.reliability_objects import NAMESPACES, build

LEASE = Resource("coordination.k8s.io", "v1", "leases", "Lease", namespaced=True)
CONVERGE_WITHIN = 120.0


def burst() -> list[dict[str, Any]]:
    """Writes that touch every kind: new routes and Ingresses, a ModuleSet turned invalid (a
    Warning Event and a False condition), Services and EndpointSlices changed."""
    objects: list[dict[str, Any]] = []
    for n in range(12):
        objects.append(build("HTTPRoute", f"b-{n}", n))
    objects.append(build("ModuleSet", "ms-0", 2))  # invalid (/33): not used by any Ingress
    for n in range(4):
        ingress = build("Ingress", f"bi-{n}", n)
        ingress["metadata"]["annotations"] = {"interlock.dev/modules": "ms-1"}
        objects.append(ingress)
    objects += [build("Service", "svc-b", 1), build("EndpointSlice", "svc-a", 2)]
    objects += [build("HTTPRoute", f"r-{n}", n + 3) for n in range(3)]
    return objects


async def differences(cluster: TestCluster, run: RunProcess) -> list[str]:
    """What ``run`` serves and what the API server holds, against the model; [] when equal."""
    if not await run.idle():
        return ["not idle"]
    state = await read_state(cluster)
    problems = dict_differences("policy", await run.policies(), expected_policies(state))
    problems += served_differences(
        await run.served(), expected_served(state), history=[], stuck=set()
    )
    expected = expected_route_and_module_statuses(state)
    written = await written_statuses(cluster)
    problems += dict_differences(
        "status", {k: v for k, v in written.items() if k in expected}, expected
    )
    return problems


async def converged(cluster: TestCluster, run: RunProcess) -> None:
    found: list[str] = []

    async def none() -> bool:
        found[:] = await differences(cluster, run)
        return not found

    await eventually(
        none,
        within=CONVERGE_WITHIN,
        message=lambda: f"{run.identity} differs:\n  " + "\n  ".join(found) + run.tail(),
    )


async def events(cluster: TestCluster) -> list[dict[str, Any]]:
    return [e for ns in NAMESPACES for e in await cluster.list(EVENT, namespace=ns)]


def groups(found: list[dict[str, Any]]) -> Counter[tuple[str, str, str, str]]:
    """Event objects per (kind, name, reason, message)."""
    return Counter(
        (
            e["involvedObject"].get("kind", ""),
            e["involvedObject"].get("name", ""),
            e.get("reason", ""),
            e.get("message", ""),
        )
        for e in found
    )


def test_kill_9_in_a_burst_then_a_restart_converges_without_an_event_storm(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    async def scenario() -> None:
        async with lane_cluster(tmp_path, control_plane, bookmark_interval=0.2) as cluster:
            await populate(cluster)
            kubeconfig = cluster.controller_kubeconfig
            first = await RunProcess.start(kubeconfig, "crashy", tmp_path / "first.log")
            try:
                await eventually(first.ready, within=CONVERGE_WITHIN, message="first ready")
                await eventually(first.leading, within=CONVERGE_WITHIN, message="first leads")
                writes = burst()
                for n, obj in enumerate(writes):
                    await write(cluster, obj)
                    if n == len(writes) // 2:
                        first.send(signal.SIGKILL)
                assert await first.stop(signal.SIGKILL) == -signal.SIGKILL
            finally:
                await first.stop(signal.SIGKILL)
            before_restart = groups(await events(cluster))

            second = await RunProcess.start(kubeconfig, "crashy", tmp_path / "second.log")
            try:
                await eventually(second.ready, within=CONVERGE_WITHIN, message="second ready")
                await converged(cluster, second)
                fresh = await start_replica(kubeconfig, "fresh")
                try:

                    async def same() -> bool:
                        return fresh.idle() and fresh.policies() == await second.policies()

                    await eventually(same, within=CONVERGE_WITHIN, message="fresh == restarted")
                    assert fresh.served() == await second.served()
                finally:
                    await stop_replica(fresh)
                after = groups(await events(cluster))
            finally:
                await second.stop()
            # Not a storm: an (object, reason, message) has at most one Event object from each
            # process (repeats bump its count), and some Event was recorded (ms-0 went invalid).
            stormy = {key: n for key, n in after.items() if n > 2}
            assert not stormy, f"Event objects repeated: {stormy}"
            invalid = [k for k in after if k[:2] == ("ModuleSet", "ms-0")]
            assert invalid, f"no Event for the invalid ModuleSet: {dict(after)}"
            assert all(after[k] - before_restart.get(k, 0) <= 1 for k in after)

    asyncio.run(scenario())


def _time(value: str) -> datetime:
    return datetime.fromisoformat(value.replace("Z", "+00:00"))


def test_a_frozen_leader_is_replaced_after_its_lease_expires_and_writes_nothing_stale(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    lease_duration = 8.0

    async def scenario() -> None:
        async with lane_cluster(tmp_path, control_plane, bookmark_interval=0.2) as cluster:
            await populate(cluster)
            kubeconfig = cluster.controller_kubeconfig
            leader = await RunProcess.start(
                kubeconfig, "a", tmp_path / "a.log", lease_duration=lease_duration
            )
            follower: RunProcess | None = None
            try:
                await eventually(leader.leading, within=CONVERGE_WITHIN, message="a leads")
                follower = await RunProcess.start(
                    kubeconfig, "b", tmp_path / "b.log", lease_duration=lease_duration
                )
                await eventually(follower.ready, within=CONVERGE_WITHIN, message="b ready")
                await converged(cluster, follower)
                assert not await follower.leading()

                leader.send(signal.SIGSTOP)
                lease_obj = {
                    "apiVersion": "coordination.k8s.io/v1",
                    "kind": "Lease",
                    "metadata": {"name": "interlock", "namespace": LEASE_NAMESPACE},
                }
                frozen = await cluster.get(lease_obj)
                assert frozen is not None and frozen["spec"]["holderIdentity"] == "a"
                # Changes whose statuses only a leader may write: pending until b leads.
                await write(cluster, build("ModuleSet", "ms-1", 4))
                await write(cluster, build("HTTPRoute", "r-0", 4))
                await write(cluster, build("Ingress", "i-1", 1))

                async def b_holds() -> bool:
                    lease = await cluster.get(lease_obj)
                    return lease is not None and lease["spec"].get("holderIdentity") == "b"

                await eventually(b_holds, within=CONVERGE_WITHIN, message="b takes the Lease")
                taken = await cluster.get(lease_obj)
                assert taken is not None
                # a's last renewal is the one in the Lease when it froze (it renews no more);
                # b may acquire only once that renewal plus the duration has passed.
                last_renew = _time(frozen["spec"]["renewTime"])
                acquired = _time(taken["spec"]["acquireTime"])
                gap = (acquired - last_renew).total_seconds()
                assert gap >= lease_duration - 1.0, f"b acquired {gap:.2f} s after a renewed"
                print(f"takeover: b acquired the Lease {gap:.2f} s after a's last renewal")
                await converged(cluster, follower)

                settled = await written_statuses(cluster)
                leader.send(signal.SIGCONT)

                async def a_follows() -> bool:
                    return not await leader.leading() and await leader.idle()

                await eventually(a_follows, within=CONVERGE_WITHIN, message="a follows")
                await converged(cluster, leader)  # a catches up, as a follower
                assert await written_statuses(cluster) == settled
                # b still holds the Lease; its own view may lag a late renewal on a loaded
                # machine (``is_leader`` is False past the renew deadline until the next one).
                held = await cluster.get(lease_obj)
                assert held is not None and held["spec"]["holderIdentity"] == "b"
                await eventually(follower.leading, within=CONVERGE_WITHIN, message="b leads")
            finally:
                await leader.stop()
                if follower is not None:
                    await follower.stop()

    asyncio.run(scenario())
