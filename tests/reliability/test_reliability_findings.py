"""What the reliability harness found in code this suite does not own.

Each test states the behaviour a user relies on. While the bug is open it is marked
``xfail(strict=True)`` with the file and function concerned: it runs on every CI run, and the day
the bug is fixed it *passes*, which strict mode reports, so the marker gets removed and the test
stays as a regression test.
"""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from interlock.actors.edge_messages import (
    DesiredModuleSetStatus,
    status_key,
)
from interlock.actors.messages import (
    LeadershipChanged,
)
from interlock.actors.status_writer import StatusWriter
from interlock.actors.topics import (
    MODULESET_STATUS_TOPIC,
)
from interlock.api.policy_json import policy_json
from interlock.kube.transport import KubeApiError
from interlock.mailbox import ActorSystem, BackoffPolicy
from interlock.model.meta import ObjectKey
from interlock.model.policy_watch import WatchTarget
from interlock.model.service import ServicePortKey
from tests.kit.edge_objects import ingress
from tests.kit.lanes import ControlPlane, lane_cluster
from tests.kit.outbound_objects import service
from tests.kit.reliability_kit import (
    CRDS,
    CrashPlan,
    crd_cluster,
    eventually,
    objects,
    policy_watch,
    ready_controller,
    write,
)
from tests.kit.reliability_objects import build


@pytest.mark.parametrize("host", ["bücher.example", "shop.example:8080"])
def test_the_embedded_api_server_refuses_an_ingress_host_a_real_one_refuses(
    host: str, tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """Found by the bad-input corpus: such hosts were accepted and served as given. Fixed in
    e0dec8c (interlock/embedded/validation.py validates Ingresses)."""

    async def scenario() -> None:
        async with lane_cluster(tmp_path, control_plane) as server:
            await server.apply_manifests([CRDS])
            with pytest.raises(KubeApiError) as refused:
                await server.create(ingress("shop", host))
            assert refused.value.code == 422 and "spec.rules[0].host" in str(refused.value)

    asyncio.run(scenario())


def test_the_embedded_api_server_refuses_an_endpoint_address_that_does_not_parse(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """Found by the bad-input corpus; fixed in e0dec8c (EndpointSlice addresses validated)."""

    async def scenario() -> None:
        async with lane_cluster(tmp_path, control_plane) as server:
            with pytest.raises(KubeApiError) as refused:
                await server.create(
                    {
                        "apiVersion": "discovery.k8s.io/v1",
                        "kind": "EndpointSlice",
                        "metadata": {"name": "s", "namespace": "default"},
                        "addressType": "IPv4",
                        "endpoints": [{"addresses": ["999.1.1.1"]}],
                        "ports": [{"name": "http", "port": 8080}],
                    }
                )
            assert "endpoints[0].addresses[0]" in str(refused.value)

    asyncio.run(scenario())


def test_a_crash_of_the_informer_router_does_not_lose_the_event_it_was_handling(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """Found by the harness: the router is fed by ``tell``, so a crash lost the event it was
    handling and the Service's policy stayed stale. Fixed in 6f28001 (journal and replay)."""
    target = WatchTarget(ServicePortKey("default", "late", 80), client_namespace="default")

    async def scenario() -> None:
        crashes = CrashPlan()
        async with crd_cluster(tmp_path, control_plane) as server:
            with crashes.installed():
                async with (
                    ready_controller(server, "finding") as controller,
                    policy_watch(controller, target) as slot,
                ):
                    await eventually(
                        lambda: slot.latest is not None, within=60.0, message="first policy"
                    )
                    crashes.arm("InformerRouter")
                    await write(server, service("late", port_names=("http",)))
                    await eventually(
                        lambda: crashes.crashed["InformerRouter"] == 1,
                        within=60.0,
                        message="the injected crash",
                    )

                    def backend_exists() -> bool:
                        update = slot.latest
                        assert update is not None
                        policy = policy_json(update.policy)
                        return bool(policy["routes"][0]["rules"][0]["backends"][0]["exists"])

                    await eventually(backend_exists, within=60.0, message="the Service is seen")

    asyncio.run(scenario())


def test_a_controller_starts_through_one_failed_discovery_request(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """Found by the harness (a replica started during a burst of 429s), fixed in 0cef80a."""

    async def scenario() -> None:
        async with crd_cluster(tmp_path, control_plane, ingress_class=False) as server:
            server.faults.fail_next(1, 429, path_contains="/apis/gateway.networking.k8s.io")
            async with ready_controller(server, "finding"):
                pass  # started and ready through the failed request

    asyncio.run(scenario())


class _SlowStatusSink:
    """A status sink whose first write waits until released (a slow API server)."""

    def __init__(self) -> None:
        self.forgotten: list[tuple[str, str, str]] = []
        self.release = asyncio.Event()
        self.writing = asyncio.Event()
        self.patched: list[tuple[str, dict[str, Any]]] = []

    def forget(self, *, kind: str, namespace: str, name: str) -> None:
        self.forgotten.append((kind, namespace, name))

    async def write_status(
        self, *, kind: str, namespace: str, name: str, status: dict[str, Any], uid: str = ""
    ) -> bool:
        if not self.writing.is_set():
            self.writing.set()
            await self.release.wait()
        self.patched.append((name, status))
        return True

    async def record_event(self, *, regarding: Any, type: str, reason: str, message: str) -> None:
        pass


def test_a_replica_that_lost_the_lease_writes_no_status_it_had_queued() -> None:
    """Found by the harness (a ModuleSet edited, one slow API request, a Lease handover): the
    old leader's EdgeStatusWriter was awaiting an Event when the Lease went to the new replica,
    then flushed a status queued before the edit, overwriting the new leader's; the new leader's
    patch cache said "written" and never repaired it. Fixed in the edge status writer's flush
    (leadership is checked before each write); the one StatusWriter keeps the rule: a status
    queued behind a slow call (here a write, the writer being at its concurrency) is not
    written once the Lease is gone."""

    async def scenario() -> None:
        sink = _SlowStatusSink()
        leading = [False]
        system = ActorSystem()
        system.spawn(
            "status",
            lambda: StatusWriter(
                sink=sink,  # type: ignore[arg-type]
                is_leader=lambda: leading[0],
                backoff=BackoffPolicy(initial=0.01, maximum=0.1),
                concurrency=1,
            ),
        )
        # While following: two statuses are pending.
        for name in ("ms-0", "ms-1"):
            key = ObjectKey(namespace="default", name=name)
            system.publish(
                MODULESET_STATUS_TOPIC,
                status_key(key),
                DesiredModuleSetStatus(key=key, conditions=[{"type": "Valid"}]),
            )
        await eventually(
            lambda: system.statistics().busy == 0, within=60.0, message="the writer is idle"
        )
        # Leading: the first is written, slowly...
        leading[0] = True
        system.tell("status", LeadershipChanged(True))
        await eventually(sink.writing.is_set, within=60.0, message="the slow write")
        leading[0] = False  # the Lease is released while the write is still in flight
        sink.release.set()
        await eventually(
            lambda: system.statistics().busy == 0, within=60.0, message="the writer is idle"
        )
        await system.shutdown()
        assert [name for name, _ in sink.patched] == ["ms-0"]

    asyncio.run(scenario())


def observed_generations(obj: dict[str, Any]) -> list[Any]:
    """``observedGeneration`` of every condition in a ModuleSet's or HTTPRoute's status."""
    status = obj.get("status") or {}
    conditions = list(status.get("conditions", []))
    for parent in status.get("parents", []):
        conditions.extend(parent.get("conditions", []))
    return [condition.get("observedGeneration") for condition in conditions]


@pytest.mark.parametrize(
    ("writer", "kind"), [("StatusWriter", "HTTPRoute"), ("StatusWriter", "ModuleSet")]
)
def test_a_status_writer_crash_loses_no_status(
    writer: str, kind: str, tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """Found by the harness with the status writers among the crash targets."""

    async def scenario() -> None:
        crashes = CrashPlan()
        async with crd_cluster(tmp_path, control_plane) as server:
            with crashes.installed():
                async with ready_controller(server, "finding") as controller:
                    await eventually(
                        lambda: controller.inspect().leading,
                        within=60.0,
                        message="leading",
                    )
                    await write(server, build("Service", "svc-a", 0))
                    await write(server, build("HTTPRoute", "r-0", 0))
                    await write(server, build("ModuleSet", "ms-0", 0))

                    async def written(generation: int) -> bool:
                        found = await objects(server, kind)
                        return bool(found) and all(
                            generation in observed_generations(o) for o in found
                        )

                    await eventually(lambda: written(1), within=60.0, message="first status")
                    await eventually(
                        lambda: controller.inspect().idle,
                        within=60.0,
                        message="idle",
                    )
                    # The next message the writer handles is the new desired status: it crashes.
                    crashes.arm(writer)
                    await write(server, build("HTTPRoute", "r-0", 3))
                    await write(server, build("ModuleSet", "ms-0", 1))
                    await eventually(
                        lambda: crashes.crashed[writer] == 1, within=60.0, message="the crash"
                    )
                    await eventually(lambda: written(2), within=60.0, message=f"{kind} status")

    asyncio.run(scenario())


def test_an_ingress_actor_that_crashes_on_its_first_message_still_serves(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """Found by the harness (two IngressActor crashes while a new replica started): the
    restarted instance numbered its InputsSettled markers from 1 again, took its predecessor's
    marker (still queued ahead of the re-delivered Ingress) for its own, concluded the Ingress
    was gone and stopped; the host was never served. Fixed in interlock/actors/ingress.py
    ``IngressActor._await_inputs`` (tokens unique across instances)."""

    async def scenario() -> None:
        crashes = CrashPlan()
        async with crd_cluster(tmp_path, control_plane) as server:
            await write(server, build("Service", "svc-a", 0))
            ingress = build("Ingress", "i-0", 0)
            ingress["metadata"]["annotations"] = {}
            await write(server, ingress)
            with crashes.installed():
                crashes.arm("IngressActor")
                async with ready_controller(server, "finding") as controller:
                    assert crashes.crashed["IngressActor"] == 1

                    def served() -> bool:
                        edge = controller.inspect().edge
                        assert edge is not None and edge.served is not None
                        host = edge.served.host("h0.example")
                        return host is not None and any(r.backend for r in host.routes)

                    await eventually(served, within=60.0, message="h0.example is served")

    asyncio.run(scenario())


def test_a_crash_of_an_edge_directory_does_not_lose_the_event_it_was_handling(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """Found by ``make reliability``: a ModuleSet edit handled by a crashing ModuleSetDirectory
    never reached the edges nor the ModuleSet's status. Fixed in interlock/controller/edge_half.py
    ``EdgeHalf.router_handlers`` and interlock/actors/directories.py ``_Directory`` (the events
    go through a durable mailbox, and a restarted directory replays them)."""

    async def scenario() -> None:
        crashes = CrashPlan()
        async with crd_cluster(tmp_path, control_plane) as server:
            await write(server, build("ModuleSet", "ms-0", 0))
            with crashes.installed():
                async with ready_controller(server, "finding") as controller:

                    async def status_of(generation: int) -> bool:
                        found = await objects(server, "ModuleSet")
                        return bool(found) and generation in observed_generations(found[0])

                    await eventually(lambda: status_of(1), within=60.0, message="status 1")
                    await eventually(
                        lambda: controller.inspect().idle,
                        within=60.0,
                        message="idle",
                    )
                    crashes.arm("EdgeDirectory")  # the next directory message: the edit
                    await write(server, build("ModuleSet", "ms-0", 1))
                    await eventually(
                        lambda: crashes.crashed["EdgeDirectory"] == 1,
                        within=60.0,
                        message="the crash",
                    )
                    await eventually(lambda: status_of(2), within=60.0, message="status 2")

    asyncio.run(scenario())


@pytest.mark.compaction
@pytest.mark.parametrize("kind", ["Ingress", "ModuleSet", "HTTPRoute"])
def test_an_object_deleted_and_created_again_unseen_gets_its_status_again(
    kind: str, tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """Found by the soak (``benchmarks/soak.py``): an Ingress deleted and created again under
    the same name while the controller did not see it (its watch down, the history compacted,
    so the relist shows the new object as an update of the old one; under load a coalescing
    mailbox does the same) kept an empty ``status.loadBalancer`` for good: the StatusWriter
    compared the desired status with what it had written to the *old* object, and so did the
    status patcher's cache. Fixed by the object's uid travelling with its desired status
    (``interlock/actors/status_writer.py``, ``interlock/kube/status.py`` ``StatusCache``);
    HTTPRoutes and ModuleSets are held to the same."""

    def status_written(found: list[dict[str, Any]]) -> bool:
        status = (found[0].get("status") or {}) if found else {}
        if kind == "Ingress":
            return bool((status.get("loadBalancer") or {}).get("ingress"))
        return bool(status.get("conditions" if kind == "ModuleSet" else "parents"))

    async def scenario() -> None:
        async with crd_cluster(tmp_path, control_plane) as server:
            await write(server, build("Service", "svc-a", 0))
            await write(server, build("ModuleSet", "ms-1", 0))
            ingress = build("Ingress", "i-0", 0)
            await write(server, ingress)
            await write(server, build("HTTPRoute", "r-0", 0))
            obj = {
                "Ingress": ingress,
                "ModuleSet": build("ModuleSet", "ms-1", 0),
                "HTTPRoute": build("HTTPRoute", "r-0", 0),
            }[kind]
            async with ready_controller(server, "finding"):

                async def written() -> bool:
                    return status_written(await objects(server, kind))

                await eventually(written, within=60.0, message=f"the {kind}'s status")
                async with server.faults.watches_cut():
                    await server.delete(obj)
                    await server.create(obj)
                    await server.faults.compact()
                    assert not status_written(await objects(server, kind))
                await eventually(written, within=60.0, message=f"the re-created {kind}'s status")

    asyncio.run(scenario())


def test_the_status_cache_does_not_keep_deleted_objects(
    tmp_path: Path, control_plane: ControlPlane | None
) -> None:
    """Found by the soak (``benchmarks/soak.py``): the status patcher's cache remembered every
    object ever written, so routes, Ingresses and ModuleSets coming and going under fresh names
    grew the controller without bound. Fixed: the StatusWriter has the sink forget an object
    when it stops wanting a status for it (``interlock/controller/status_sink.py``)."""

    async def scenario() -> None:
        async with crd_cluster(tmp_path, control_plane, ingress_class=False) as server:
            await write(server, build("Service", "svc-a", 0))
            async with ready_controller(server, "finding") as controller:
                patcher = controller.patcher
                assert patcher is not None
                routes = [build("HTTPRoute", f"gone-{n}", 0) for n in range(5)]
                for route in routes:
                    await write(server, route)
                await eventually(
                    lambda: patcher.cache.statistics().entries >= 5,
                    within=60.0,
                    message="the five statuses written",
                )
                for route in routes:
                    await server.delete(route)
                await eventually(
                    lambda: patcher.cache.statistics().entries == 0,
                    within=60.0,
                    message=lambda: f"cache entries: {patcher.cache.statistics().entries}",
                )

    asyncio.run(scenario())


@pytest.mark.parametrize(
    ("kind", "name", "variants"),
    [("HTTPRoute", "r-0", (0, 3, 0)), ("ModuleSet", "ms-0", (0, 1, 0))],
)
def test_a_status_write_in_flight_when_its_writer_crashes_does_not_win(
    kind: str,
    name: str,
    variants: tuple[int, int, int],
    tmp_path: Path,
    control_plane: ControlPlane | None,
) -> None:
    """Found by the harness on the real server (docs/reliability.md): the StatusWriter crashed
    with a status write held by a slow request; its restarted successor wrote the newer status;
    then the API server applied the held write, and the successor, believing its own write (and
    the patcher's cache agreeing), never repaired it. Here the write is held at the lane's proxy
    until the successor has written, then released. Fixed in ``interlock/actors/status_writer.py``
    (writes in flight finish and tell the successor, which checks the object again; a stored
    status changed by someone else is trusted over this replica's last write)."""
    plural = {"HTTPRoute": "httproutes", "ModuleSet": "modulesets"}[kind]

    async def scenario() -> None:
        crashes = CrashPlan()
        async with crd_cluster(tmp_path, control_plane) as server:
            for service_name in ("svc-a", "svc-b"):
                await write(server, build("Service", service_name, 0))
            await write(server, build(kind, name, variants[0]))

            async def status_has(generation: int) -> bool:
                found = [o for o in await objects(server, kind) if o["metadata"]["name"] == name]
                return bool(found) and set(observed_generations(found[0])) == {generation}

            with crashes.installed():
                async with ready_controller(server, "finding"):
                    await eventually(lambda: status_has(1), within=60.0, message="status 1")
                    held = server.faults.hold_next(
                        verbs=["patch"], path_contains=f"/{plural}/{name}/status"
                    )
                    await write(server, build(kind, name, variants[1]))
                    await eventually(held.arrived.is_set, within=60.0, message="status 2 in flight")
                    # The writer's next message is the newer desired status: it crashes, and
                    # its successor writes that status while status 2 is still in flight.
                    crashes.arm("StatusWriter")
                    await write(server, build(kind, name, variants[2]))
                    await eventually(
                        lambda: crashes.crashed["StatusWriter"] == 1,
                        within=60.0,
                        message="the crash",
                    )
                    await eventually(lambda: status_has(3), within=60.0, message="status 3")
                    held.release()
                    await eventually(
                        held.answered.is_set, within=60.0, message="status 2 applied late"
                    )
                    await eventually(lambda: status_has(3), within=60.0, message="status 3 again")

    asyncio.run(scenario())
