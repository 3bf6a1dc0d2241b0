"""WebSocket pass-through through the edge, and the edge's request metrics: an Ingress to a
WebSocket backend, a real aiohttp WebSocket client, then the traffic on the admin ``/metrics``."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.kit.e2e_clients import eventually
from tests.kit.edge_env import Env
from tests.kit.edge_env import env as env  # the fixture
from tests.kit.edge_objects import ingress
from tests.kit.mesh_env import WsBackend, chat_backend

HOST = "ws.example"


@pytest.fixture
async def chat(env: Env) -> AsyncIterator[WsBackend]:
    async with chat_backend(env.kube.apply) as backend:
        await env.kube.apply(ingress("chat", HOST, backend="chat"))

        async def routed() -> bool:
            _, _, body = await env.request(HOST, "/")
            return body == b"plain http"

        await eventually(routed, message=f"{HOST} routed to the chat backend")
        yield backend


async def test_a_websocket_through_the_edge(env: Env, chat: WsBackend) -> None:
    async with env.http.ws_connect(
        env.edge_url + "/room/9", headers={"Host": HOST}, protocols=("chat.v2",)
    ) as ws:
        await chat.talk(ws, "/room/9", "hi", b"abc")
    seen = chat.handshakes[-1]
    assert seen["host"] == HOST
    assert seen["x-forwarded-host"] == HOST  # the edge's forwarding headers went along


async def test_edge_requests_are_counted_by_host_route_and_status_class(
    env: Env, chat: WsBackend
) -> None:
    for _ in range(3):
        assert await env.status_of(HOST, "/") == 200
    assert await env.status_of("unknown.example", "/") == 404
    admin = env.controller.admin_site
    assert admin is not None
    async with env.http.get(admin.url + "/metrics") as response:
        text = await response.text()
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
    }

    def value(name: str, **labels: str) -> float:
        return samples.get((name, tuple(sorted(labels.items()))), 0.0)

    ok = value(
        "interlock_http_requests_total",
        front="edge",
        target=HOST,
        route="Prefix:/",
        code_class="2xx",
    )
    assert ok >= 4  # the three, and the ones that waited for the route
    assert (
        value("interlock_http_requests_total", front="edge", target="", route="", code_class="4xx")
        >= 1
    )
    assert value("interlock_http_request_duration_seconds_count", front="edge", target=HOST) >= ok
