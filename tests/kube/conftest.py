"""Fixtures for kube tests: the lane's API server and a real kubernetes-asyncio client to it.

``server`` is the lane's :class:`~lanes.TestCluster` (its ``faults`` and ``write_kubeconfig``);
``api`` is a client as cluster admin through those faults (on the real lane: through the fault
proxy), so the kube layer under test meets the same dropped watches and injected errors on
both lanes. RBAC is proven by the e2e and reliability tests, where the controller runs as its
own identity.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import pytest

from interlock.kube.client import make_api_client
from interlock.kube.informer import Deleted, InformerEvent, Upserted
from interlock.kube.resources import Resource
from interlock.kube.transport import KubeApiError, request_json
from interlock.mailbox.testing import eventually as _eventually
from tests.kit.lanes import TestCluster


@pytest.fixture
def embedded_server_options() -> dict[str, Any]:
    return {}


@pytest.fixture
def server(test_cluster: TestCluster) -> TestCluster:
    return test_cluster


@pytest.fixture
async def api(server: Any, tmp_path: Path) -> AsyncIterator[Any]:
    kubeconfig = tmp_path / "kubeconfig"
    server.write_kubeconfig(kubeconfig)
    client = await make_api_client(kubeconfig=str(kubeconfig), in_cluster=False)
    try:
        yield client
    finally:
        await client.close()


async def wait_for(
    condition: Callable[[], bool], *, within: float = 60.0, what: str = "condition"
) -> None:
    """Poll ``condition`` with short sleeps until it holds; fail after ``within`` seconds."""
    await _eventually(condition, within=within, message=what)


async def until(
    condition: Callable[[], Awaitable[bool]], *, within: float = 60.0, what: str = "condition"
) -> None:
    """Like :func:`wait_for` for an async condition."""
    await _eventually(condition, within=within, message=what, interval=0.02)


def service(namespace: str, name: str, port: int = 80) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"namespace": namespace, "name": name},
        "spec": {"ports": [{"name": "http", "port": port, "protocol": "TCP"}]},
    }


async def create(api: Any, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    namespace = obj["metadata"].get("namespace")
    return await request_json(
        api,
        method="POST",
        path=resource.collection_path(namespace=namespace),
        what=f"create {obj['metadata']['name']}",
        body=obj,
    )


async def get(api: Any, resource: Resource, namespace: str, name: str) -> dict[str, Any]:
    return await request_json(
        api,
        method="GET",
        path=resource.object_path(namespace=namespace, name=name),
        what=f"get {name}",
    )


async def replace(api: Any, resource: Resource, obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj["metadata"]
    return await request_json(
        api,
        method="PUT",
        path=resource.object_path(namespace=meta.get("namespace"), name=meta["name"]),
        what=f"replace {meta['name']}",
        body=obj,
    )


async def delete(api: Any, resource: Resource, namespace: str, name: str) -> None:
    await request_json(
        api,
        method="DELETE",
        path=resource.object_path(namespace=namespace, name=name),
        what=f"delete {name}",
    )


async def ensure_namespace(api: Any, name: str) -> None:
    """Create a namespace (the embedded server may already have it)."""
    try:
        await request_json(
            api,
            method="POST",
            path="/api/v1/namespaces",
            what=f"create namespace {name}",
            body={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}},
        )
    except KubeApiError as error:
        if error.code != 409:
            raise


class Collector:
    """A sink that records every event and the state they add up to."""

    def __init__(self) -> None:
        self.events: list[InformerEvent] = []
        self.state: dict[str, dict[str, Any]] = {}

    def __call__(self, event: InformerEvent) -> None:
        self.events.append(event)
        if isinstance(event, Upserted):
            self.state[event.key] = event.obj
        elif isinstance(event, Deleted):
            self.state.pop(event.key, None)

    def versions(self) -> dict[str, str]:
        return {key: obj["metadata"]["resourceVersion"] for key, obj in sorted(self.state.items())}

    def keys_of(self, kind: type[Upserted] | type[Deleted]) -> list[str]:
        return [event.key for event in self.events if isinstance(event, kind)]
