"""The engine on the wire, behind a minimal front door with no edge modules (the mesh's shape).

Each test builds a policy for ``shop/web:80``, serves it from a ``StaticUpstreams`` and sends
real HTTP through a tiny aiohttp server whose handler is just ``engine.route`` +
``engine.forward``: timeouts (504), retries, failure accrual and response filters.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from interlock.dataplane import REASON_HEADER, Answer, RequestInfo
from interlock.dataplane.engine import Engine
from interlock.dataplane.proxy import Forwarder, without_hop_by_hop
from interlock.dataplane.upstreams import StaticUpstreams
from interlock.dataplane.wire import answer_response
from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey
from tests.kit.echo_backends import Echo
from tests.kit.outbound_objects import ACCRUAL
from tests.kit.policies import policy

WEB = ServicePortKey("shop", "web", 80)


@dataclass
class FrontDoor:
    echo: Echo
    upstreams: StaticUpstreams
    engine: Engine
    client: aiohttp.ClientSession
    url: str

    def serve(self, served: OutboundPolicy) -> None:
        self.upstreams.set_policy(served)

    async def get(self, path: str, **kwargs: Any) -> tuple[int, dict[str, str], bytes]:
        async with self.client.get(self.url + path, **kwargs) as response:
            return response.status, dict(response.headers), await response.read()


@pytest.fixture
async def door() -> AsyncIterator[FrontDoor]:
    echo = Echo("v1", read_body=True)
    await echo.start()
    upstreams = StaticUpstreams(
        {("shop", name, 80): [echo.address] for name in ("web", "v1", "v2")}
    )
    forwarder = Forwarder()
    await forwarder.start()
    engine = Engine(source=upstreams, forwarder=forwarder, body_timeout=5.0)

    async def handle(request: web.BaseRequest) -> web.StreamResponse:
        path, _, query = request.raw_path.partition("?")
        info = RequestInfo(
            method=request.method,
            path=path,
            forward_path=path,
            query=query,
            query_params=request.query,
            headers=request.headers,
            scheme="http",
            host=request.host,
        )
        decision = engine.route(WEB, info)
        if isinstance(decision, Answer):
            return answer_response(decision, with_detail=True)
        result = await engine.forward(
            request,
            decision,
            query=query,
            headers=without_hop_by_hop(request.headers),
            body=None,
            where="test",
        )
        return answer_response(result, with_detail=True) if isinstance(result, Answer) else result

    runner = web.ServerRunner(web.Server(handle), access_log=None, shutdown_timeout=0.1)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = int(runner.addresses[0][1])
    client = aiohttp.ClientSession()
    yield FrontDoor(echo, upstreams, engine, client, f"http://127.0.0.1:{port}")
    await client.close()
    await runner.cleanup()
    await forwarder.close()
    await echo.stop()


def backend(name: str = "v1") -> dict[str, Any]:
    return {"name": name, "port": 80}


async def test_backend_request_timeout_answers_504(door: FrontDoor) -> None:
    door.serve(policy({"backendRefs": [backend()], "timeouts": {"backendRequest": "200ms"}}))
    status, headers, _ = await door.get("/slow?stall=1")
    assert door.echo.stalled.is_set()
    assert (status, headers[REASON_HEADER]) == (504, "upstream-timeout")


async def test_request_timeout_answers_504(door: FrontDoor) -> None:
    door.serve(policy({"backendRefs": [backend()], "timeouts": {"request": "200ms"}}))
    status, headers, _ = await door.get("/slow?stall=1")
    assert (status, headers[REASON_HEADER]) == (504, "upstream-timeout")


async def test_retry_sends_again_on_a_listed_status(door: FrontDoor) -> None:
    door.serve(
        policy(
            {"backendRefs": [backend()], "retry": {"codes": [503], "attempts": 2, "backoff": "1ms"}}
        )
    )
    status, _, _ = await door.get("/x?fail_first=2")
    assert status == 200
    assert door.echo.seen["fail_first=2"] == 3
    # More failures than attempts: the last answer is relayed.
    status, _, _ = await door.get("/x?fail_first=5")
    assert status == 503
    assert door.echo.seen["fail_first=5"] == 3


async def test_a_rules_retry_sends_again_a_try_cut_by_its_timeout_whatever_its_codes(
    door: FrontDoor,
) -> None:
    door.serve(
        policy(
            {
                "backendRefs": [backend()],
                # Long enough for each try to reach the backend on a loaded machine (it counts
                # the tries it saw); the backend stalls, so every try ends by this timeout.
                "timeouts": {"backendRequest": "400ms"},
                "retry": {"codes": [503], "attempts": 2, "backoff": "1ms"},
            }
        )
    )
    status, headers, _ = await door.get("/slow?stall=1")
    assert (status, headers[REASON_HEADER]) == (504, "upstream-timeout")
    assert door.echo.seen["stall=1"] == 3


async def test_linkerds_retry_annotations_retry_only_the_statuses_they_list(
    door: FrontDoor,
) -> None:
    door.serve(
        policy(
            {"backendRefs": [backend()]},
            annotations={
                "retry.linkerd.io/http": "503",
                "retry.linkerd.io/limit": "2",
                "retry.linkerd.io/timeout": "400ms",  # the try must reach the stalling backend
            },
        )
    )
    status, headers, _ = await door.get("/slow?stall=1")
    assert (status, headers[REASON_HEADER]) == (504, "upstream-timeout")
    assert door.echo.seen["stall=1"] == 1


async def test_no_retry_without_a_retry_policy_or_for_other_statuses(door: FrontDoor) -> None:
    door.serve(policy({"backendRefs": [backend()]}))
    assert (await door.get("/x?fail_first=1"))[0] == 503
    assert door.echo.seen["fail_first=1"] == 1
    door.serve(
        policy(
            {"backendRefs": [backend()], "retry": {"codes": [502], "attempts": 3, "backoff": "1ms"}}
        )
    )
    assert (await door.get("/x?fail_first=1&b"))[0] == 503
    assert door.echo.seen["fail_first=1&b"] == 1


async def test_a_streamed_body_is_not_retried(door: FrontDoor) -> None:
    door.serve(
        policy(
            {"backendRefs": [backend()], "retry": {"codes": [503], "attempts": 2, "backoff": "1ms"}}
        )
    )

    async def body() -> AsyncIterator[bytes]:
        yield b"chunk"

    async with door.client.post(door.url + "/x?fail_first=1", data=body()) as response:
        assert response.status == 503
    assert door.echo.seen["fail_first=1"] == 1
    # A small body with a length is read whole, so it is retried.
    async with door.client.post(door.url + "/x?fail_first=1&small", data=b"small") as response:
        assert response.status == 200
    assert door.echo.seen["fail_first=1&small"] == 2
    assert door.echo.received[-1]["body"] == "small"


async def test_failure_accrual_ejects_a_failing_endpoint(door: FrontDoor) -> None:
    door.serve(
        policy(
            {"backendRefs": [backend()]},
            annotations=ACCRUAL,
        )
    )
    assert (await door.get("/x?status=500"))[0] == 500
    assert (await door.get("/x?status=500"))[0] == 500
    status, headers, _ = await door.get("/x")
    assert (status, headers[REASON_HEADER]) == (503, "endpoints-failing")
    assert len(door.echo.received) == 2


async def test_response_header_filters_reach_the_client(door: FrontDoor) -> None:
    door.serve(
        policy(
            {
                "backendRefs": [backend()],
                "filters": [
                    {
                        "type": "ResponseHeaderModifier",
                        "responseHeaderModifier": {
                            "set": [{"name": "X-Backend", "value": "hidden"}],
                            "add": [{"name": "X-Added", "value": "yes"}],
                        },
                    }
                ],
            }
        )
    )
    status, headers, _ = await door.get("/x")
    assert (status, headers["X-Backend"], headers["X-Added"]) == (200, "hidden", "yes")
    assert REASON_HEADER not in headers


@pytest.mark.parametrize(
    ("annotations", "rule_timeouts"),
    [
        ({"timeout.linkerd.io/idle": "300ms"}, None),
        ({}, {"request": "300ms"}),
    ],
    ids=["idle", "request"],
)
async def test_a_body_that_stalls_past_a_timeout_is_cut(
    door: FrontDoor, annotations: dict[str, str], rule_timeouts: dict[str, str] | None
) -> None:
    rule: dict[str, Any] = {"backendRefs": [backend()]}
    if rule_timeouts is not None:
        rule["timeouts"] = rule_timeouts
    door.serve(policy(rule, annotations=annotations))
    # The proxy's own read timeout is 60 s: a client giving up first (30 s, a ServerTimeoutError,
    # not a payload error) means the policy's timeout did not cut the body.
    within = aiohttp.ClientTimeout(sock_read=30)
    async with door.client.get(door.url + "/x?trickle=1", timeout=within) as response:
        assert response.status == 200  # the headers came in time
        with pytest.raises(aiohttp.ClientPayloadError):
            await response.read()
    assert door.echo.stalled.is_set()
