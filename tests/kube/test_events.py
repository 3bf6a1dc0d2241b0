"""EventRecorder against the embedded API server: creation, aggregation, failures swallowed."""

from __future__ import annotations

import asyncio
from typing import Any

from interlock.kube.events import EventRecorder
from interlock.kube.resources import EVENT
from interlock.kube.transport import request_json

ROUTE = {
    "apiVersion": "gateway.networking.k8s.io/v1",
    "kind": "HTTPRoute",
    "namespace": "default",
    "name": "web",
    "uid": "uid-web",
}


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


async def events_in(api: Any, namespace: str) -> list[dict[str, Any]]:
    listing = await request_json(
        api, method="GET", path=EVENT.collection_path(namespace=namespace), what="list events"
    )
    items: list[dict[str, Any]] = listing["items"]
    return sorted(items, key=lambda item: item["metadata"]["name"])


async def test_an_event_names_its_object_and_source(api: Any) -> None:
    recorder = EventRecorder(api, host="node-1")
    await recorder.record(
        regarding=ROUTE, type="Warning", reason="BackendNotFound", message="api not found"
    )
    [event] = await events_in(api, "default")
    assert event["involvedObject"] == ROUTE
    assert (event["type"], event["reason"], event["message"]) == (
        "Warning",
        "BackendNotFound",
        "api not found",
    )
    assert event["source"] == {"component": "interlock", "host": "node-1"}
    assert event["count"] == 1
    assert event["firstTimestamp"] == event["lastTimestamp"]


async def test_repeats_within_the_window_increment_count(api: Any) -> None:
    clock = FakeClock()
    recorder = EventRecorder(api, host="node-1", window=60.0, clock=clock)
    for _ in range(3):
        await recorder.record(regarding=ROUTE, type="Warning", reason="Flap", message="same")
        clock.now += 10
    await recorder.record(regarding=ROUTE, type="Warning", reason="Flap", message="other")
    events = await events_in(api, "default")
    counts = sorted((event["message"], event["count"]) for event in events)
    assert counts == [("other", 1), ("same", 3)]
    clock.now += 61  # outside the window: a new Event object
    await recorder.record(regarding=ROUTE, type="Warning", reason="Flap", message="same")
    assert len(await events_in(api, "default")) == 3
    statistics = recorder.statistics()
    assert (statistics.created, statistics.aggregated, statistics.failed) == (3, 2, 0)


async def test_long_messages_are_truncated(api: Any) -> None:
    recorder = EventRecorder(api, host="node-1")
    await recorder.record(regarding=ROUTE, type="Normal", reason="Long", message="x" * 5000)
    [event] = await events_in(api, "default")
    assert len(event["message"].encode()) <= 1024


async def test_failures_are_counted_never_raised(api: Any, server: Any) -> None:
    recorder = EventRecorder(api, host="node-1")
    server.faults.fail_next(1, status=500)
    await recorder.record(regarding=ROUTE, type="Normal", reason="Synced", message="ok")
    assert recorder.statistics().failed == 1
    await recorder.record(regarding=ROUTE, type="Normal", reason="Synced", message="ok")
    assert recorder.statistics().created == 1


async def test_concurrent_identical_events_become_one_object(api: Any) -> None:
    recorder = EventRecorder(api, host="node-1")
    await asyncio.gather(
        *(
            recorder.record(regarding=ROUTE, type="Warning", reason="Flap", message="same")
            for _ in range(5)
        )
    )
    [event] = await events_in(api, "default")
    assert event["count"] == 5


async def test_cluster_scoped_objects_get_events_in_default(api: Any) -> None:
    recorder = EventRecorder(api, host="node-1")
    ingress_class = {"apiVersion": "networking.k8s.io/v1", "kind": "IngressClass", "name": "x"}
    await recorder.record(regarding=ingress_class, type="Normal", reason="Seen", message="ok")
    [event] = await events_in(api, "default")
    assert event["involvedObject"] == ingress_class
