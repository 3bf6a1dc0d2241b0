"""A controller with both front doors, the edge and the mesh listener, keeps one endpoint cache:
each EndpointSlice is held once, and a change of it reaches both."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from interlock.actors.topics import (
    ENDPOINTS,
)
from interlock.actors.upstream_cache import UPSTREAM_CACHE
from interlock.config import MeshConfig
from interlock.model.meta import ObjectKey
from tests.kit.dataplane_env import EdgeEnv, edge_env, slice_obj
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually


@pytest.fixture
async def both(cluster: Cluster, start_controller: StartController) -> AsyncIterator[EdgeEnv]:
    async with edge_env(cluster, start_controller, mesh=MeshConfig(addr=LOCAL)) as env:
        yield env


async def _mesh_echo(env: EdgeEnv) -> str | None:
    """Which echo backend a mesh client calling ``web.default`` reaches."""
    assert env.controller.mesh is not None
    async with env.http.get(
        env.controller.mesh.url + "/", headers={"Host": "web.default:80"}
    ) as response:
        return response.headers.get("X-Echo")


async def test_one_cache_and_a_slice_change_reaches_the_edge_and_the_mesh(both: EdgeEnv) -> None:
    async def mesh_reaches(name: str) -> bool:
        return await _mesh_echo(both) == name

    async def edge_reaches(name: str) -> bool:
        return (await both.get("/")).headers.get("X-Echo") == name

    await eventually(lambda: mesh_reaches("web"), message="the mesh listener reaches web")
    assert await edge_reaches("web")
    # Both front doors follow Service web: its EndpointSlices have one subscriber, the one
    # cache (a cache per front door would be two).
    topic = ENDPOINTS.topic(ObjectKey(namespace="default", name="web"))
    assert both.controller.system.subscribers(topic) == [UPSTREAM_CACHE]
    # web's slice now points at v2's echo server: both front doors follow it.
    await both.cluster.apply(slice_obj("web", both.echoes["v2"].port))
    await eventually(lambda: edge_reaches("v2"), message="the edge follows web's new endpoint")
    await eventually(lambda: mesh_reaches("v2"), message="the mesh follows web's new endpoint")
