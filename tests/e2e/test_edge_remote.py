"""``interlock run --edge-admin-url``: the controller programs a data plane in another process.

A :class:`StandaloneEdge` (what ``interlock edge`` runs) serves the traffic, with its upstreams
from a :class:`StaticUpstreams` table pointing at a local backend instead of cluster DNS. The
controller reaches its admin API through :class:`AdminSwitch`, a pass-through that a test can
switch off (connection refused) and on again, as when the edge process restarts.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from interlock.cli import build_parser
from interlock.cli.run import config_from_args
from interlock.config import ControllerConfig, EdgeConfig
from interlock.controller.app import Controller
from interlock.controller.edge_half import EdgeHalf
from interlock.dataplane.upstreams import StaticUpstreams
from interlock.edge.provider import TransientEdgeError
from interlock.edge.standalone import StandaloneEdge
from interlock.kube.transport import request_json
from interlock.mailbox import BackoffPolicy
from interlock.model.load_balancer import remote_load_balancer_status
from interlock.model.moduleset import SecretValue
from tests.kit.e2e_clients import Cluster, controller_config, eventually, object_events
from tests.kit.edge_env import CRDS, GOOD_AUTH, HTPASSWD, RESOURCES, secret
from tests.kit.edge_objects import INGRESS_CLASS_OBJ, backend_service, ingress, module_set

ADMIN_TOKEN = SecretValue(b"remote-edge-admin-token")


# --- the flag ------------------------------------------------------------------------------------


def parse(argv: list[str]) -> ControllerConfig:
    return config_from_args(build_parser().parse_args(argv))


@pytest.fixture
def token_file(tmp_path: Path) -> str:
    path = tmp_path / "edge-admin-token"
    path.write_text("remote-edge-admin-token\n")
    return str(path)


def test_edge_admin_url_flag_and_environment(
    monkeypatch: pytest.MonkeyPatch, token_file: str
) -> None:
    config = parse(
        [
            "run",
            "--edge-admin-url",
            "http://edge.ingress.svc:9091",
            "--edge-admin-token-file",
            token_file,
        ]
    )
    assert config.edge.admin_url == "http://edge.ingress.svc:9091"
    assert config.edge.admin_token == ADMIN_TOKEN  # the file's content, without the newline
    assert config.edge.addr is None
    assert parse(["run"]).edge.admin_url is None
    monkeypatch.setenv("INTERLOCK_EDGE_ADMIN_URL", "http://127.0.0.1:9091")
    monkeypatch.setenv("INTERLOCK_EDGE_ADMIN_TOKEN_FILE", token_file)
    assert parse(["run"]).edge.admin_url == "http://127.0.0.1:9091"


def test_edge_admin_url_needs_the_token_file(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match="--edge-admin-token-file"):
        parse(["run", "--edge-admin-url", "http://edge:9091"])
    empty = tmp_path / "empty"
    empty.write_text("\n")
    spaced = tmp_path / "spaced"
    spaced.write_text("two words\n")
    with pytest.raises(SystemExit, match="printable ASCII without spaces"):
        parse(
            ["run", "--edge-admin-url", "http://edge:9091", "--edge-admin-token-file", str(spaced)]
        )
    with pytest.raises(SystemExit, match="the file is empty"):
        parse(
            ["run", "--edge-admin-url", "http://edge:9091", "--edge-admin-token-file", str(empty)]
        )


@pytest.mark.parametrize(
    "extra",
    [
        ["--edge-addr", "0.0.0.0:8080"],
        ["--edge-tls-addr", "0.0.0.0:8443"],
        ["--trusted-proxy", "10.0.0.0/8"],
    ],
)
def test_edge_admin_url_excludes_the_in_process_data_plane_flags(
    extra: list[str], token_file: str
) -> None:
    with pytest.raises(SystemExit) as exit_:
        parse(
            [
                "run",
                "--edge-admin-url",
                "http://edge:9091",
                "--edge-admin-token-file",
                token_file,
                *extra,
            ]
        )
    message = str(exit_.value)
    assert "--edge-admin-url" in message and extra[0] in message


def test_a_bad_edge_admin_url_is_reported_by_name_without_its_password(token_file: str) -> None:
    token = ["--edge-admin-token-file", token_file]
    with pytest.raises(SystemExit) as exit_:
        parse(["run", "--edge-admin-url", "ftp://admin:hunter2@edge:9091", *token])
    message = str(exit_.value)
    assert message.startswith("--edge-admin-url: 'edge' is not an http(s) URL")
    assert "hunter2" not in message
    with pytest.raises(SystemExit, match="--edge-admin-url: 'edge:9091' is not an http"):
        parse(["run", "--edge-admin-url", "edge:9091", *token])


# --- the environment -----------------------------------------------------------------------------


@dataclass
class Backend:
    """An HTTP server standing in for pods: records the headers it receives, answers 200."""

    requests: list[dict[str, str]] = field(default_factory=list)
    runner: web.AppRunner | None = None
    port: int = 0

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(dict(request.headers))
        return web.Response(text=f"backend {request.path}\n")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        await web.TCPSite(self.runner, "127.0.0.1", 0).start()
        self.port = self.runner.addresses[0][1]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


class AdminSwitch:
    """A pass-through to the standalone edge's admin API whose listener can be closed (the
    controller's calls are refused) and opened again on the same port."""

    def __init__(self, target: str) -> None:
        self._target = target
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.port = 0

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def _forward(self, request: web.Request) -> web.Response:
        assert self._session is not None
        async with self._session.request(
            request.method,
            self._target + request.path_qs,
            data=await request.read(),
            headers={
                "Content-Type": request.headers.get("Content-Type", "application/json"),
                "Authorization": request.headers.get("Authorization", ""),
            },
        ) as answer:
            headers = {
                k: v for k, v in answer.headers.items() if k in ("Content-Type", "Retry-After")
            }
            return web.Response(status=answer.status, body=await answer.read(), headers=headers)

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        await self.switch_on()

    async def switch_on(self) -> None:
        assert self._runner is None
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self._forward)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, "127.0.0.1", self.port, reuse_address=True).start()
        self.port = self._runner.addresses[0][1]

    async def switch_off(self) -> None:
        """Close the listener and the connections open (a kept-alive one would still answer)."""
        assert self._runner is not None
        await self._runner.cleanup()
        self._runner = None

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()


FIXED_OBJECTS = [
    INGRESS_CLASS_OBJ,
    backend_service("web"),
    secret("users", {"htpasswd": HTPASSWD}),
]


@dataclass
class Remote:
    controller: Controller
    edge: EdgeHalf
    standalone_url: str
    switch: AdminSwitch
    backend: Backend
    http: aiohttp.ClientSession
    api: Any
    """The test's (admin) API client: what the test writes with."""

    async def create(self, obj: dict[str, Any]) -> None:
        resource = RESOURCES[obj["kind"]]
        path = resource.collection_path(namespace=obj["metadata"].get("namespace"))
        await request_json(self.api, method="POST", path=path, what="create", body=obj)

    async def get(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = RESOURCES[obj["kind"]]
        meta = obj["metadata"]
        path = resource.object_path(namespace=meta.get("namespace"), name=meta["name"])
        return await request_json(self.api, method="GET", path=path, what="get")

    async def events(self, name: str, reason: str) -> list[dict[str, Any]]:
        return await object_events(self.api, name, reason)

    async def request(self, host: str, **kwargs: Any) -> tuple[int, dict[str, str]]:
        headers = {"Host": host, **kwargs.pop("headers", {})}
        async with self.http.get(self.standalone_url, headers=headers, **kwargs) as response:
            await response.read()
            return response.status, dict(response.headers)

    async def until_status(self, host: str, status: int, **kwargs: Any) -> None:
        async def check() -> bool:
            return (await self.request(host, **kwargs))[0] == status

        await eventually(check, message=f"{host} answers {status} through the standalone edge")


async def start_remote_controller(config: ControllerConfig) -> Controller:
    """A controller programming the data plane at ``config.edge.admin_url``."""
    controller = Controller(config)
    assert controller.edge is not None, "edge.admin_url alone must build the edge half"
    await controller.start()
    await controller.wait_ready(within=60.0)
    return controller


@pytest.fixture
async def remote(cluster: Cluster, kubeconfig: str) -> AsyncIterator[Remote]:
    await cluster.apply_manifests([CRDS])
    backend = Backend()
    await backend.start()
    standalone = StandaloneEdge(
        admin_token=ADMIN_TOKEN,
        upstreams=StaticUpstreams({("default", "web", 80): [("127.0.0.1", backend.port)]}),
    )
    addresses = await standalone.start(listen="127.0.0.1:0", admin="127.0.0.1:0")
    switch = AdminSwitch(f"http://127.0.0.1:{addresses.admin[1]}")
    await switch.start()
    config = controller_config(
        kubeconfig,
        identity="remote-edge-replica",
        edge=EdgeConfig(admin_url=switch.url, admin_token=ADMIN_TOKEN),
    )
    controller = await start_remote_controller(config)
    try:
        assert controller.edge is not None
        controller.edge.backoff = BackoffPolicy(initial=0.02, maximum=0.2)
        async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
            running = Remote(
                controller=controller,
                edge=controller.edge,
                standalone_url=f"http://127.0.0.1:{addresses.edge.http[1]}/",
                switch=switch,
                backend=backend,
                http=http,
                api=cluster.api,
            )
            for obj in FIXED_OBJECTS:
                await running.create(obj)
            yield running
    finally:
        await controller.stop()
        await switch.stop()
        await standalone.stop()
        await backend.stop()


# --- behaviour -----------------------------------------------------------------------------------


async def test_basic_auth_is_enforced_by_the_remote_data_plane(remote: Remote) -> None:
    auth = {"basicAuth": {"realm": "shop", "secretRef": {"name": "users", "key": "htpasswd"}}}
    await remote.create(module_set("auth", auth))
    await remote.create(ingress("shop", "shop.example", modules="auth"))
    await remote.until_status("shop.example", 200, headers=GOOD_AUTH)
    status, headers = await remote.request("shop.example")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    assert remote.backend.requests
    assert all(
        r.get("Authorization") == GOOD_AUTH["Authorization"] for r in remote.backend.requests
    )
    # The controller serves no data plane of its own.
    assert remote.edge.data_plane is None and remote.edge.server is None
    view = remote.controller.inspect().edge
    assert view is not None and view.remote and view.served is None and view.url is None
    assert remote.controller.describe()[-1] == (
        f"edge: programming the data plane whose admin API is {remote.switch.url}"
    )

    # status.loadBalancer: the admin URL's host, the only address the controller knows.
    async def load_balancer() -> bool:
        current = await remote.get(ingress("shop", "shop.example"))
        return current.get("status", {}).get("loadBalancer") == {"ingress": [{"ip": "127.0.0.1"}]}

    await eventually(load_balancer, message="status.loadBalancer")

    # /debug/edges: the actors' view of the remote routes, and no Secret.
    assert remote.controller.admin_site is not None
    async with remote.http.get(remote.controller.admin_site.url + "/debug/edges") as response:
        debug = await response.json()
    (edge,) = [e for e in debug["edges"] if e["host"] == "shop.example"]
    (route,) = edge["routes"]
    assert route["modules"] == ["basicAuth"] and route["backend"] == "default/web:80"
    assert debug["dataPlane"] == {"adminUrl": remote.switch.url} and debug["served"] is None
    assert HTPASSWD.split(":", 1)[1] not in json.dumps(debug)


async def test_an_invalid_cidr_fails_closed_with_a_modules_failed_event(remote: Remote) -> None:
    await remote.create(module_set("guard", {"ipRestriction": {"allow": ["127.0.0.0/33"]}}))
    await remote.create(ingress("guarded", "guarded.example", modules="guard"))

    async def failed() -> bool:
        return bool(await remote.events("guarded", "ModulesFailed"))

    await eventually(failed, message="ModulesFailed on default/guarded")
    (event,) = await remote.events("guarded", "ModulesFailed")
    assert "127.0.0.0/33" in event["message"]
    await remote.until_status("guarded.example", 503)
    assert remote.backend.requests == []


async def test_a_data_plane_admin_api_outage_is_retried_until_it_answers(remote: Remote) -> None:
    await remote.switch.switch_off()
    await remote.create(ingress("flaky", "flaky.example"))

    def refused_twice() -> bool:
        state = remote.edge.inspect().route(host="flaky.example", route_id="Prefix:/")
        return (
            state is not None
            and state.attempts >= 2
            and not state.permanent
            and "edge admin API" in (state.last_error or "")
        )

    await eventually(refused_twice, message="the refused admin API calls are retried")
    assert (await remote.request("flaky.example"))[0] == 404  # nothing reached the data plane

    await remote.switch.switch_on()
    await remote.until_status("flaky.example", 200)
    state = remote.edge.inspect().route(host="flaky.example", route_id="Prefix:/")
    assert state is not None and state.backend == "default/web:80" and state.modules == ()


async def test_after_stop_the_remote_client_refuses_calls_instead_of_reconnecting(
    remote: Remote,
) -> None:
    assert remote.edge.remote is not None
    await remote.edge.stop()
    with pytest.raises(TransientEdgeError, match="the controller is stopping"):
        await remote.edge.provider.snapshot()


def test_load_balancer_status_names_the_admin_host_without_ports() -> None:
    assert remote_load_balancer_status("http://edge.ingress.svc:9091") == {
        "ingress": [{"hostname": "edge.ingress.svc"}]
    }
    assert remote_load_balancer_status("http://[fd00::5]:9091/") == {"ingress": [{"ip": "fd00::5"}]}
