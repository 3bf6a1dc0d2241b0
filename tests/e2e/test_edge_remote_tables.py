"""``interlock run --edge-admin-url … --edge-push-upstreams``: a data plane in another process
(``interlock edge --pushed-upstreams``) gets the controller's upstream tables, as edge workers
do, and routes by them: an HTTPRoute on the backend Service, EndpointSlice moves, and a
restarted edge (an empty table under a new epoch) gets the whole table again."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest

from interlock.cli import build_parser
from interlock.cli.run import config_from_args
from interlock.config import EdgeConfig
from interlock.dataplane.pushed_upstreams import PushedUpstreams
from interlock.edge.standalone import StandaloneEdge
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
    def __init__(self, env: Env, url: str, pushed: PushedUpstreams) -> None:
        self.env, self.url, self.pushed = env, url, pushed

    async def answer(self, path: str) -> tuple[int, str]:
        async with (
            aiohttp.ClientSession() as session,
            session.get(self.url + path, headers={"Host": HOST}) as response,
        ):
            return response.status, (await response.text()).split("\n", 1)[0]


@pytest.fixture
async def remote(cluster: Cluster, start_controller: StartController) -> AsyncIterator[Remote]:
    await cluster.apply_manifests([CRDS])
    pushed = PushedUpstreams()
    standalone = StandaloneEdge(admin_token=TOKEN, pushed=pushed)
    addresses = await standalone.start(listen="127.0.0.1:0", admin="127.0.0.1:0")
    assert addresses.edge.http is not None
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
            yield Remote(env, f"http://127.0.0.1:{addresses.edge.http[1]}", pushed)
    finally:
        await standalone.stop()


async def test_a_remote_edge_routes_by_the_pushed_tables_and_gets_them_whole_after_a_restart(
    remote: Remote,
) -> None:
    env = remote.env
    await env.serve("blue")
    await env.kube.apply(ingress("remote", HOST))
    await env.kube.apply(
        web_route(
            [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": "/blue"}}],
                    "backendRefs": [{"name": "blue", "port": 80}],
                }
            ]
        )
    )

    async def routed() -> bool:
        return await remote.answer("/blue/a") == (200, "backend blue /blue/a")

    await eventually(routed, message="the remote edge sends /blue to the blue Service")
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
