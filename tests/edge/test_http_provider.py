"""HttpEdge against a standalone data plane's admin API: same behaviour, errors mapped."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web

from interlock.dataplane.upstreams import StaticUpstreams
from interlock.edge.http_provider import HttpEdge, parse_retry_after
from interlock.edge.provider import (
    ApplyModules,
    BackendTarget,
    PermanentEdgeError,
    TransientEdgeError,
)
from interlock.edge.standalone import StandaloneEdge, admin_tls_context
from interlock.model.module_settings import module_settings
from interlock.model.moduleset import Modules, SecretValue
from interlock.model.service import ServicePortKey
from tests.kit.edge_routes import serve_route
from tests.kit.secrets_kit import BASIC_AUTH, PASSWORD, SECRETS, basic_header
from tests.kit.tls_certs import TestCa

from .conftest import BACKEND, HOST, Backend

ADMIN_TOKEN = SecretValue(b"edge-admin-token")
ROUTE = "default/web/0"  # route ids may hold slashes: they travel percent-encoded


class Remote:
    def __init__(
        self, standalone: StandaloneEdge, edge_url: str, admin_url: str, provider: HttpEdge
    ) -> None:
        self.standalone = standalone
        self.edge_url = edge_url
        self.admin_url = admin_url
        self.provider = provider

    async def get(self, path: str, **headers: str) -> int:
        async with (
            aiohttp.ClientSession() as client,
            client.get(self.edge_url + path, headers={"Host": HOST, **headers}) as response,
        ):
            return response.status


@pytest.fixture
async def remote(backend: Backend) -> AsyncIterator[Remote]:
    standalone = StandaloneEdge(
        admin_token=ADMIN_TOKEN,
        upstreams=StaticUpstreams({("default", "web", 80): [backend.address]}),
    )
    addresses = await standalone.start(listen="127.0.0.1:0", admin="127.0.0.1:0")
    host, port = addresses.admin
    admin_url = f"http://{host}:{port}"
    provider = HttpEdge(base_url=admin_url, token=ADMIN_TOKEN, timeout=60)
    assert addresses.edge.http is not None
    edge_host, edge_port = addresses.edge.http
    yield Remote(standalone, f"http://{edge_host}:{edge_port}", admin_url, provider)
    await provider.close()
    await standalone.stop()


async def test_remote_edge_serves_like_the_in_process_one(remote: Remote, backend: Backend) -> None:
    await remote.provider.apply_modules(
        ApplyModules(
            host=HOST,
            route_id=ROUTE,
            path="/",
            path_type="Prefix",
            modules=BASIC_AUTH,
            secrets=SECRETS,
        )
    )
    assert await remote.get("/") == 503
    await remote.provider.attach_backend(host=HOST, route_id=ROUTE, backend=BACKEND)
    assert await remote.get("/") == 401
    assert await remote.get("/", **basic_header()) == 200
    snapshot = await remote.provider.snapshot()
    assert snapshot == remote.standalone.edge.snapshot_now()
    route = snapshot.route(host=HOST, route_id=ROUTE)
    assert route is not None
    assert route.backend == BACKEND
    await remote.provider.detach_backend(host=HOST, route_id=ROUTE)
    assert await remote.get("/", **basic_header()) == 503
    await remote.provider.remove_route(host=HOST, route_id=ROUTE)
    assert await remote.get("/") == 404
    # Only what came through the edge: on a busy machine another process's poller (a
    # `GET /readyz` at a port it had before) can reach the backend's reused loopback port.
    through_edge = [seen for seen in backend.seen if seen.headers.get("x-forwarded-host") == [HOST]]
    assert len(through_edge) == 1


async def test_remote_errors_are_classified(remote: Remote) -> None:
    planted = b"planted-not-bcrypt-hash-value"
    with pytest.raises(PermanentEdgeError, match=r"422: .*basicAuth") as permanent:
        await serve_route(
            remote.provider,
            host=HOST,
            route_id=ROUTE,
            modules=BASIC_AUTH,
            secrets={("users", "htpasswd"): SecretValue(b"alice:" + planted)},
        )
    assert planted.decode() not in str(permanent.value)
    with pytest.raises(TransientEdgeError, match=r"503: .*'missing'"):
        await remote.provider.apply_modules(
            ApplyModules(
                host=HOST,
                route_id="other",
                path="/other",
                path_type="Prefix",
                modules=Modules.model_validate(
                    {"basicAuth": {"realm": "x", "secretRef": {"name": "missing", "key": "k"}}}
                ),
            )
        )
    with pytest.raises(PermanentEdgeError, match="no such route"):
        await remote.provider.attach_backend(host=HOST, route_id="ghost", backend=BACKEND)
    with pytest.raises(PermanentEdgeError, match="never applied"):
        await remote.provider.attach_backend(host=HOST, route_id=ROUTE, backend=BACKEND)
    assert await remote.get("/") == 503


async def test_remote_edge_refuses_settings_with_the_models_wording(remote: Remote) -> None:
    # The JSON of the admin API is checked by the model's module_settings, as a ModuleSet is:
    # the same words, and the same refusals (a nested repetition that translate refuses in an
    # Ingress's path is refused here too, though no Ingress sent it).
    for raw in (
        {"ipRestriction": {"allow": ["10.0.0.5/24"]}},
        {"ingressNginx": {"pathPattern": "/files/(a+)+$"}},
    ):
        modules = Modules.model_validate(raw)
        problems = module_settings(modules)
        assert isinstance(problems, list)
        with pytest.raises(PermanentEdgeError) as refused:
            await remote.provider.apply_modules(
                ApplyModules(
                    host=HOST, route_id=ROUTE, path="/", path_type="Prefix", modules=modules
                )
            )
        assert "422" in str(refused.value)
        assert str(problems[0]).removeprefix("spec.modules.") in str(refused.value)


async def test_remote_tls_rejects_an_unusable_certificate(remote: Remote) -> None:
    with pytest.raises(PermanentEdgeError, match=r"TLS for host app\.example\.com"):
        await remote.provider.set_tls(
            host=HOST, cert_pem=SecretValue(b"not a cert"), key_pem=SecretValue(PASSWORD.encode())
        )


class Misbehaving:
    """An admin API double that answers every call with a fixed status (or never)."""

    def __init__(self) -> None:
        self.status = 200
        self.headers: dict[str, str] = {}
        self.hang = asyncio.Event()

    async def handle(self, request: web.Request) -> web.StreamResponse:
        if self.status == 0:
            await self.hang.wait()
        return web.json_response({"error": "boom"}, status=self.status, headers=self.headers)


@pytest.fixture
async def misbehaving() -> AsyncIterator[tuple[Misbehaving, str]]:
    """The double and its base URL."""
    double = Misbehaving()
    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", double.handle)
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    port = runner.addresses[0][1]
    yield double, f"http://127.0.0.1:{port}"
    double.hang.set()
    await runner.cleanup()


@pytest.mark.parametrize(
    ("status", "headers", "expected", "retry_after"),
    [
        (429, {"Retry-After": "7"}, TransientEdgeError, 7.0),
        (503, {"Retry-After": "2"}, TransientEdgeError, 2.0),
        (500, {}, TransientEdgeError, None),
        (404, {}, PermanentEdgeError, None),
        (422, {}, PermanentEdgeError, None),
        (0, {}, TransientEdgeError, None),  # no answer within the timeout
    ],
)
async def test_http_answers_map_to_error_classes(
    misbehaving: tuple[Misbehaving, str],
    status: int,
    headers: dict[str, str],
    expected: type[Exception],
    retry_after: float | None,
) -> None:
    double, base_url = misbehaving
    double.status, double.headers = status, headers
    # Only the answer that never comes should meet the client's timeout: an answered request
    # gets a bound a loaded machine cannot reach (a stress run saw the 422 time out at 0.3 s).
    timeout = 0.3 if status == 0 else 60.0
    async with HttpEdge(base_url=base_url, token=None, timeout=timeout) as provider:
        with pytest.raises(expected) as error:
            await provider.detach_backend(host=HOST, route_id="r")
    if isinstance(error.value, TransientEdgeError):
        assert error.value.retry_after == retry_after


async def test_unreachable_admin_api_is_transient() -> None:
    probe = web.AppRunner(web.Application())
    await probe.setup()
    await web.TCPSite(probe, "127.0.0.1", 0).start()
    port = probe.addresses[0][1]
    await probe.cleanup()
    async with HttpEdge(base_url=f"http://127.0.0.1:{port}", token=None, timeout=2) as provider:
        with pytest.raises(TransientEdgeError):
            await provider.attach_backend(
                host=HOST, route_id="r", backend=BackendTarget(ServicePortKey("default", "web", 80))
            )


def test_retry_after_accepts_seconds_and_dates() -> None:
    assert parse_retry_after("120") == 120.0
    assert parse_retry_after("Wed, 21 Oct 2015 07:28:10 GMT", now=lambda: 1445412480.0) == 10.0
    assert parse_retry_after("soon") is None
    assert parse_retry_after(None) is None


async def test_admin_api_names_the_field_of_an_unreadable_request(remote: Remote) -> None:
    route = f"{remote.admin_url}/v1/hosts/{HOST}/routes/r"
    token = {"Authorization": "Bearer " + ADMIN_TOKEN.reveal().decode()}
    async with aiohttp.ClientSession(headers=token) as client:
        async with client.put(route + "/modules", data=b"not json") as response:
            assert response.status == 400
            assert "JSON object" in (await response.json())["error"]
        async with client.put(
            route + "/modules", json={"path": "/", "pathType": "Regex"}
        ) as response:
            assert response.status == 400
            assert "pathType" in (await response.json())["error"]
        async with client.put(
            route + "/modules",
            json={"path": "/", "pathType": "Prefix", "modules": {"rateLimit": {"requests": 0}}},
        ) as response:
            assert response.status == 422
            assert "modules.rateLimit.requests" in (await response.json())["error"]
        async with client.put(
            route + "/backend", json={"namespace": "default", "service": "web", "port": 70000}
        ) as response:
            assert response.status == 400
            assert "backend.port" in (await response.json())["error"]


async def test_secret_values_reach_no_log_error_or_snapshot(
    remote: Remote, caplog: pytest.LogCaptureFixture
) -> None:
    from loguru import logger

    planted = "PLANTED-7f3a9c"
    records: list[str] = []
    sink = logger.add(lambda message: records.append(str(message)), level="DEBUG")
    errors: list[str] = []
    try:
        hook = Modules.model_validate(
            {"webhookVerification": {"provider": "github", "secretRef": {"name": "h", "key": "k"}}}
        )
        await serve_route(
            remote.provider,
            host=HOST,
            route_id=ROUTE,
            modules=hook,
            secrets={("h", "k"): SecretValue(planted.encode())},
            backend=BACKEND,
        )
        assert await remote.get("/", **{"X-Hub-Signature-256": "sha256=00"}) == 401
        with pytest.raises(PermanentEdgeError) as error:
            await serve_route(
                remote.provider,
                host=HOST,
                route_id=ROUTE,
                modules=BASIC_AUTH,
                secrets={("users", "htpasswd"): SecretValue(f"{planted}:{planted}".encode())},
            )
        errors.append(str(error.value))
        snapshot = await remote.provider.snapshot()
    finally:
        logger.remove(sink)
    everything = "\n".join([*records, *errors, caplog.text, str(snapshot.to_json())])
    assert planted not in everything
    assert errors


async def test_the_admin_api_over_tls_is_reached_only_with_its_ca(tmp_path: Path) -> None:
    ca, other = TestCa("edge admin CA"), TestCa("another CA")
    served = ca.issue("edge-admin", ips=("127.0.0.1",))
    files = {"cert": served.cert_pem, "key": served.key_pem, "ca": ca.pem, "other": other.pem}
    for name, pem in files.items():
        (tmp_path / name).write_text(pem)
    standalone = StandaloneEdge(
        admin_token=ADMIN_TOKEN,
        admin_tls=admin_tls_context(str(tmp_path / "cert"), str(tmp_path / "key")),
    )
    addresses = await standalone.start(listen="127.0.0.1:0", admin="127.0.0.1:0")
    host, port = addresses.admin
    try:
        trusted = HttpEdge(
            base_url=f"https://{host}:{port}", token=ADMIN_TOKEN, ca_file=str(tmp_path / "ca")
        )
        async with trusted:
            assert (await trusted.snapshot()).hosts == ()
        # The token is not sent in clear: plain HTTP gets no answer from the TLS port, and a
        # server whose certificate another CA signed is not trusted.
        for url, ca_file in (
            (f"http://{host}:{port}", None),
            (f"https://{host}:{port}", str(tmp_path / "other")),
        ):
            async with HttpEdge(base_url=url, token=ADMIN_TOKEN, ca_file=ca_file) as refused:
                with pytest.raises(TransientEdgeError):
                    await refused.snapshot()
    finally:
        await standalone.stop()


async def test_the_instance_is_the_same_until_the_edge_restarts(remote: Remote) -> None:
    first = await remote.provider.instance()
    assert await remote.provider.instance() == first
    async with HttpEdge(base_url=remote.admin_url, token=SecretValue(b"another")) as stranger:
        with pytest.raises(PermanentEdgeError, match="401"):
            await stranger.instance()
    port = await restart(remote)
    async with HttpEdge(base_url=f"http://127.0.0.1:{port}", token=ADMIN_TOKEN) as again:
        assert await again.instance() != first


async def restart(remote: Remote) -> int:
    """Stop the remote edge's admin API and start a new one; its port."""
    await remote.standalone.stop()
    standalone = StandaloneEdge(admin_token=ADMIN_TOKEN)
    remote.standalone = standalone
    addresses = await standalone.start(listen="127.0.0.1:0", admin="127.0.0.1:0")
    return addresses.admin[1]
