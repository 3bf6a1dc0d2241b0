"""UpstreamIndex as the edge uses it: upstreams from policies and EndpointSlices, read
synchronously; and beside it the mesh listener's, over the same UpstreamCache: an EndpointSlice
is cached once, a change of it reaches both, and one index releasing a Service does not take
its endpoints from the other."""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass

import pytest

from interlock.actors.messages import (
    SERVICE_KEY,
)
from interlock.actors.service_port_watch import ServicePortWatches
from interlock.actors.topics import (
    ENDPOINTS,
    SERVICE,
)
from interlock.actors.upstream_cache import UPSTREAM_CACHE
from interlock.api.policy_json import policy_body
from interlock.controller.upstreams import SharedUpstreamCache, UpstreamIndex
from interlock.controller.worker_upstreams import UpstreamPusher, edge_table
from interlock.dataplane import Answer, RequestInfo, compile_policy, decide
from interlock.dataplane.upstreams import UpstreamError
from interlock.mailbox import ActorSystem
from interlock.mailbox.testing import wait_until
from interlock.model.meta import ObjectKey
from interlock.model.service import ServicePortKey, parse_endpoint_slice, parse_service
from interlock.model.upstream_table import UpstreamTable

GET = RequestInfo(
    method="GET",
    path="/",
    forward_path="/",
    query="",
    query_params={},
    headers={},
    scheme="http",
    host="web",
)


@dataclass
class Running:
    system: ActorSystem
    watches: ServicePortWatches
    upstreams: UpstreamIndex

    def resolve(
        self, service: str = "web", port: int = 80
    ) -> list[tuple[str, int]] | UpstreamError:
        """What the engine would send a GET / to: the policy's backend's addresses."""
        target = ServicePortKey("default", service, port)
        policy = self.upstreams.policy(target)
        if policy is not None:
            decided = decide(compile_policy(policy), GET, 0.5)
            if isinstance(decided, Answer):
                return UpstreamError(decided.status, decided.detail)
            target = decided.target
        found = self.upstreams.addresses(target)
        return found if isinstance(found, UpstreamError) else list(found)

    def service(self, name: str = "web", port_name: str = "http") -> None:
        service = parse_service(
            {
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"ports": [{"name": port_name, "port": 80}]},
            }
        )
        self.system.publish(
            SERVICE.topic(ObjectKey(namespace="default", name=name)), SERVICE_KEY, service
        )

    def endpoints(self, *, ready: bool = True, port_name: str = "http") -> None:
        endpoint_slice = parse_endpoint_slice(
            {
                "metadata": {
                    "name": "web-1",
                    "namespace": "default",
                    "labels": {"kubernetes.io/service-name": "web"},
                },
                "addressType": "IPv4",
                "endpoints": [
                    {"addresses": ["10.0.0.1"], "conditions": {"ready": ready}},
                    {"addresses": ["10.0.0.2"]},
                ],
                "ports": [{"name": port_name, "port": 8080}],
            }
        )
        self.system.publish(
            ENDPOINTS.topic(ObjectKey(namespace="default", name="web")), "web-1", endpoint_slice
        )


@pytest.fixture
async def running() -> AsyncIterator[Running]:
    system = ActorSystem()
    watches = ServicePortWatches(system, grace=0.05, encode=policy_body)
    upstreams = UpstreamIndex(cache=SharedUpstreamCache(system), watches=watches, follower="edge")
    upstreams.start()
    yield Running(system, watches, upstreams)
    watches.close()
    await upstreams.close()
    await system.shutdown()


async def test_ready_endpoints_of_the_named_port(running: Running) -> None:
    running.service()
    running.endpoints(ready=False)
    running.upstreams.follow(ServicePortKey("default", "web", 80))
    await wait_until(lambda: running.resolve() == [("10.0.0.2", 8080)])
    running.endpoints(ready=True)
    await wait_until(lambda: running.resolve() == [("10.0.0.1", 8080), ("10.0.0.2", 8080)])


async def test_a_service_that_does_not_exist_answers_500_and_recovers(running: Running) -> None:
    first = running.resolve()
    assert isinstance(first, UpstreamError) and first.status == 503  # not known yet

    def status() -> int | None:
        result = running.resolve()
        return result.status if isinstance(result, UpstreamError) else None

    await wait_until(lambda: status() == 500)
    running.service()
    running.endpoints()
    await wait_until(lambda: status() is None)


async def test_no_ready_endpoint_answers_503(running: Running) -> None:
    running.service(port_name="other")
    running.endpoints()

    def message() -> str:
        result = running.resolve()
        return result.message if isinstance(result, UpstreamError) else ""

    await wait_until(lambda: "has no ready endpoint" in message())
    result = running.resolve()
    assert isinstance(result, UpstreamError) and result.status == 503
    assert running.upstreams.debug()[0]["service"] == "default/web:80"


WEB = ServicePortKey("default", "web", 80)


@pytest.fixture
async def mesh(running: Running) -> AsyncIterator[UpstreamIndex]:
    """The mesh listener's index beside the edge's, as a controller with both runs them."""
    index = UpstreamIndex(
        cache=running.upstreams.cache,
        watches=running.watches,
        follower="mesh listener",
        client_namespace="default",
        idle_release=600.0,
    )
    index.start()  # finds the edge's cache running: spawns none
    yield index
    await index.close()


async def test_one_cache_serves_both_indexes_and_a_slice_change_reaches_both(
    running: Running, mesh: UpstreamIndex
) -> None:
    running.service()
    running.endpoints(ready=False)
    assert running.upstreams.policy(WEB) is None  # the first ask follows it
    policy = await mesh.ready(WEB, within=30.0)
    assert not isinstance(policy, UpstreamError), policy
    await wait_until(lambda: running.upstreams.policy(WEB) is not None)
    # One subscriber of the Service's endpoints: the one cache, holding the slice once.
    assert running.system.subscribers(
        ENDPOINTS.topic(ObjectKey(namespace="default", name="web"))
    ) == [UPSTREAM_CACHE]
    assert mesh.tables is running.upstreams.tables
    assert running.upstreams.addresses(WEB) == mesh.addresses(WEB) == [("10.0.0.2", 8080)]
    running.endpoints(ready=True)
    both = [("10.0.0.1", 8080), ("10.0.0.2", 8080)]
    await wait_until(lambda: running.upstreams.addresses(WEB) == both)
    assert mesh.addresses(WEB) == both


async def test_the_mesh_releasing_a_service_leaves_the_edge_its_endpoints(
    running: Running, mesh: UpstreamIndex
) -> None:
    running.service()
    running.endpoints(ready=False)
    await mesh.ready(WEB, within=30.0)
    running.upstreams.follow(WEB)
    await wait_until(lambda: running.upstreams.policy(WEB) is not None)
    mesh.release(WEB)
    running.endpoints(ready=True)  # still followed for the edge: the change arrives
    both = [("10.0.0.1", 8080), ("10.0.0.2", 8080)]
    await wait_until(lambda: running.upstreams.addresses(WEB) == both)
    assert running.system.subscribers(
        ENDPOINTS.topic(ObjectKey(namespace="default", name="web"))
    ) == [UPSTREAM_CACHE]
    assert running.upstreams.tables.followers[ObjectKey(namespace="default", name="web")] == (
        "edge",
    )


async def test_every_change_of_the_edges_rows_is_told_to_its_kept_table(
    running: Running, mesh: UpstreamIndex
) -> None:
    """The edge workers' table (EdgeTable) reads only the rows it is told of: after each change
    of the index or the cache, it equals the whole rebuild. Among them the rows no cache change
    announces: a Service the mesh already follows, followed by the edge too, and released."""
    edge = running.upstreams
    pusher = UpstreamPusher(index=edge, clients=list)
    key = WEB.service_key()

    def kept_is_whole() -> bool:
        pusher.table.update()
        return pusher.table.whole() == edge_table(edge)

    try:
        running.service()
        running.endpoints()
        await mesh.ready(WEB, within=30.0)  # the cache follows web, for the mesh
        edge.endpoints(key)  # and now the edge: nothing changes at the cache
        assert key in edge_table(edge).services and kept_is_whole()

        running.endpoints(ready=False)
        await wait_until(lambda: edge.addresses(WEB) == [("10.0.0.2", 8080)])
        assert kept_is_whole()

        moved = parse_service(
            {
                "metadata": {"name": "web", "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 81}]},
            }
        )
        running.system.publish(SERVICE.topic(key), SERVICE_KEY, moved)  # port 80 gone
        target_81 = ServicePortKey("default", "web", 81)
        await wait_until(lambda: target_81 in edge.tables.addresses)
        assert WEB not in edge.tables.addresses and kept_is_whole()

        edge.follow(WEB)
        await wait_until(lambda: edge.policy(WEB) is not None)
        assert kept_is_whole() and WEB in pusher.table.policies

        edge.release(WEB)  # its policy, and the Service only it needed (the mesh keeps it)
        assert edge_table(edge) == UpstreamTable() and kept_is_whole()
    finally:
        await pusher.close()
