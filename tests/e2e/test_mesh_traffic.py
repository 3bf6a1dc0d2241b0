"""Traffic you can see, through the mesh listener: the access log's JSON lines
and the request metrics on the admin ``/metrics``, after real requests."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest
from loguru import logger
from prometheus_client.parser import text_string_to_metric_families

from interlock.config import MeshConfig, ObservabilityConfig
from tests.kit.e2e_clients import LOCAL, Cluster, StartController
from tests.kit.mesh_env import MeshEnv

SECRET = "Bearer do-not-log-me"


@pytest.fixture
async def logged_mesh(
    cluster: Cluster, start_controller: StartController
) -> AsyncIterator[tuple[MeshEnv, list[dict[str, Any]]]]:
    lines: list[dict[str, Any]] = []
    raw: list[str] = []

    def sink(message: Any) -> None:
        record = message.record
        if record["extra"].get("logger") == "access":
            raw.append(record["message"])
            lines.append(json.loads(record["message"]))

    handle = logger.add(sink, level="INFO")
    controller = await start_controller(
        identity="mesh-traffic",
        mesh=MeshConfig(addr=LOCAL),
        observability=ObservabilityConfig(access_log=True),
    )
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        env = MeshEnv(cluster, controller, http)
        try:
            yield env, lines
        finally:
            logger.remove(handle)
            for echo in env.echoes:
                await echo.stop()
    assert not any("do-not-log-me" in line or "token=" in line for line in raw)


async def metrics(env: MeshEnv) -> dict[str, list[tuple[dict[str, str], float]]]:
    assert env.controller.admin_site is not None
    async with env.http.get(env.controller.admin_site.url + "/metrics") as response:
        text = await response.text()
    found: dict[str, list[tuple[dict[str, str], float]]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            found.setdefault(sample.name, []).append((sample.labels, sample.value))
    return found


async def test_each_request_is_one_access_log_line_and_counted(
    logged_mesh: tuple[MeshEnv, list[dict[str, Any]]],
) -> None:
    env, lines = logged_mesh
    echo = (await env.serve("web"))[80]
    await env.until_backend("web.default", "web")
    before = len(lines)
    reply = await env.call(
        "web.default.svc:80",
        "/orders/7?token=abc",
        via="proxy",
        method="POST",
        headers={"Authorization": SECRET, "Cookie": "session=do-not-log-me"},
    )
    assert reply.status == 200
    assert reply.echo["headers"]["authorization"] == SECRET  # forwarded, not logged
    missing = await env.call("nothing-here")
    assert missing.status == 404

    assert len(lines) == before + 2
    served, refused = lines[-2], lines[-1]
    assert served == {
        "front": "mesh",
        "host": "web.default.svc",  # as the client sent it (aiohttp leaves out :80)
        "target": "default/web:80",
        "route": "Default default/web rule 0",
        "method": "POST",
        "path": "/orders/7",
        "status": 200,
        "bytes": served["bytes"],
        "bytesReceived": 0,
        "durationMs": served["durationMs"],
        "upstream": f"{echo_host(env)}:{echo.port}",
        "retries": 0,
        "reason": "",
    }
    assert served["durationMs"] >= 0
    assert served["bytes"] > len(reply.body)  # headers included
    assert refused["status"] == 404
    assert refused["reason"] == "unknown-host"
    assert refused["target"] == ""

    found = await metrics(env)
    requests = {
        (labels["front"], labels["target"], labels["route"], labels["code_class"]): value
        for labels, value in found["interlock_http_requests_total"]
    }
    assert requests[("mesh", "default/web:80", "Default default/web rule 0", "2xx")] >= 2
    assert requests[("mesh", "", "", "4xx")] >= 1
    counts = {
        labels["target"]: value
        for labels, value in found["interlock_http_request_duration_seconds_count"]
    }
    # The histogram has no code label: it counts every answer for the target, including a 503
    # that until_backend may have met before the endpoints were read (the real lane's timing).
    assert counts["default/web:80"] == sum(
        value for (front, target, _, _), value in requests.items() if target == "default/web:80"
    )
    infinite = [
        value
        for labels, value in found["interlock_http_request_duration_seconds_bucket"]
        if labels["target"] == "default/web:80" and labels["le"] == "+Inf"
    ]
    assert infinite == [counts["default/web:80"]]


async def test_an_upstream_that_refuses_connections_is_a_connect_error(
    logged_mesh: tuple[MeshEnv, list[dict[str, Any]]],
) -> None:
    env, lines = logged_mesh
    echo = (await env.serve("gone"))[80]
    await env.until_backend("gone.default", "gone")
    await echo.stop()
    reply = await env.call("gone.default")
    assert reply.status == 502
    assert lines[-1]["status"] == 502
    assert lines[-1]["upstream"] == f"{echo_host(env)}:{echo.port}"
    found = await metrics(env)
    errors = {
        labels["target"]: value
        for labels, value in found["interlock_upstream_connect_errors_total"]
    }
    assert errors["default/gone:80"] == 1


def echo_host(env: MeshEnv) -> str:
    from tests.kit.lanes import ENDPOINT_HOST

    return ENDPOINT_HOST
