"""``interlock run --edge-admin-url … --edge-push-upstreams``: a data plane in another process
(``interlock edge --pushed-upstreams``) gets the controller's upstream tables, as edge workers
do, and routes by them: an HTTPRoute on the backend Service, EndpointSlice moves, and a
restarted edge (an empty table under a new epoch) gets the whole table again: at the next
change, or at once, with its routes, when the controller notices its new instance."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from interlock.cli import build_parser
from interlock.cli.run import config_from_args
from interlock.config import EdgeConfig
from interlock.dataplane.pushed_upstreams import PushedUpstreams
from interlock.edge.standalone import StandaloneAddresses, StandaloneEdge
from interlock.model.moduleset import SecretValue
from interlock.model.service import ServicePortKey
from interlock.model.upstream_table import TableChanges
from tests.kit.e2e_clients import Cluster, StartController, eventually
from tests.kit.edge_env import CRDS, Backend, Env, edge_env, endpoint_slice
from tests.kit.edge_objects import ingress, web_route
from tests.kit.lanes import ENDPOINT_HOST

pytestmark = pytest.mark.timeout(300)

TOKEN = SecretValue(b"remote-tables-token")
HOST = "remote.example"


def test_the_flag_needs_an_edge_admin_url(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("remote-tables-token\n")
    remote = ["run", "--edge-admin-url", "http://edge:9091", "--edge-admin-token-file", str(token)]
    parsed = config_from_args(build_parser().parse_args([*remote, "--edge-push-upstreams"]))
    assert parsed.edge.push_upstreams
    with pytest.raises(SystemExit, match="--edge-push-upstreams needs --edge-admin-url"):
        config_from_args(build_parser().parse_args(["run", "--edge-push-upstreams"]))


class Remote:
    def __init__(self, env: Env, standalone: StandaloneEdge, addresses: StandaloneAddresses):
        self.env, self.standalone, self.addresses = env, standalone, addresses
        assert addresses.edge.http is not None
        self.url = f"http://127.0.0.1:{addresses.edge.http[1]}"

    @property
    def pushed(self) -> PushedUpstreams:
        assert self.standalone.pushed is not None
        return self.standalone.pushed

    async def restart(self) -> None:
        """Stop the edge and start a new one on the same ports: no route, no table."""
        await self.standalone.stop()
        assert self.addresses.edge.http is not None
        self.standalone = StandaloneEdge(admin_token=TOKEN, pushed=PushedUpstreams())
        await self.standalone.start(
            listen=f"127.0.0.1:{self.addresses.edge.http[1]}",
            admin=f"127.0.0.1:{self.addresses.admin[1]}",
        )

    async def route_blue(self) -> Backend:
        """The blue Service, an Ingress for HOST and an HTTPRoute sending /blue to blue; once
        the edge routes by them."""
        blue = await self.env.serve("blue")
        await self.env.kube.apply(ingress("remote", HOST))
        await self.env.kube.apply(
            web_route(
                [
                    {
                        "matches": [{"path": {"type": "PathPrefix", "value": "/blue"}}],
                        "backendRefs": [{"name": "blue", "port": 80}],
                    }
                ]
            )
        )
        await eventually(self.routed, message="the remote edge sends /blue to the blue Service")
        return blue

    async def routed(self) -> bool:
        return await self.answer("/blue/a") == (200, "backend blue /blue/a")

    async def answer(self, path: str) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(self.url + path, headers={"Host": HOST}) as response,
        ):
            return response.status, (await response.text()).split("\n", 1)[0]


@pytest.fixture
async def remote(cluster: Cluster, start_controller: StartController) -> AsyncIterator[Remote]:
    await cluster.apply_manifests([CRDS])
    standalone = StandaloneEdge(admin_token=TOKEN, pushed=PushedUpstreams())
    addresses = await standalone.start(listen="127.0.0.1:0", admin="127.0.0.1:0")
    remote: Remote | None = None
    try:
        controller = await start_controller(
            identity="remote-tables",
            edge=EdgeConfig(
                admin_url=f"http://127.0.0.1:{addresses.admin[1]}",
                admin_token=TOKEN,
                push_upstreams=True,
            ),
        )
        async with edge_env(cluster, controller) as env:
            remote = Remote(env, standalone, addresses)
            yield remote
    finally:
        await (standalone if remote is None else remote.standalone).stop()


async def test_a_remote_edge_routes_by_the_pushed_tables_and_gets_them_whole_after_a_restart(
    remote: Remote,
) -> None:
    env = remote.env
    await remote.route_blue()
    assert (await remote.answer("/other"))[0] == 404  # the HTTPRoute's rules, not the Service

    edge = env.controller.edge
    assert edge is not None and edge.pusher is not None and edge.upstreams is not None
    pusher, tables = edge.pusher, edge.upstreams.tables

    async def moved_to(backend: Backend) -> None:
        await backend.start()
        env.backends[f"blue-{backend.port}"] = backend
        await env.kube.apply(endpoint_slice(backend))

        def pushed() -> bool:
            blue = tables.addresses.get(ServicePortKey("default", "blue", 80))
            return blue == [(ENDPOINT_HOST, backend.port)] and pusher.in_sync()

        await eventually(pushed, message="the remote edge holds blue's new endpoint")
        reached = len(backend.requests)
        assert await remote.answer("/blue/a") == (200, "backend blue /blue/a")
        assert len(backend.requests) == reached + 1

    await moved_to(Backend("blue"))

    # The edge restarts: an empty table under a new epoch. The next change is refused as rows
    # of another table (412) and the whole table is sent instead.
    remote.pushed.apply(TableChanges(replace=True))
    remote.pushed.epoch = "restarted"
    pushes = pusher.pushes
    await moved_to(Backend("blue"))
    assert remote.pushed.has_policy(ServicePortKey("default", "web", 80))
    assert pusher.pushes >= pushes + 1


async def test_a_remote_edge_restarted_while_nothing_changes_is_programmed_again(
    remote: Remote,
) -> None:
    env = remote.env
    blue = await remote.route_blue()
    edge = env.controller.edge
    assert edge is not None and edge.instance_watch is not None
    watch = edge.instance_watch
    await eventually(lambda: watch.instance is not None, message="the watch saw the instance")

    # The edge process restarts: no route, no table. Nothing changes in the cluster after it.
    await remote.restart()
    assert (await remote.answer("/blue/a"))[0] == 404
    reached = len(blue.requests)
    await eventually(remote.routed, message="the restarted edge is programmed again")
    assert len(blue.requests) > reached
    assert watch.restarts == 1
    assert remote.pushed.has_policy(ServicePortKey("default", "web", 80))
