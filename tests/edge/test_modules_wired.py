"""Module chains run inside the data plane: real requests, refusals before the upstream."""

from __future__ import annotations

import gzip
import hashlib
import hmac

from interlock.edge.inprocess import InProcessEdge
from interlock.model.moduleset import Modules
from tests.kit.edge_routes import serve_route
from tests.kit.secrets_kit import BASIC_AUTH, JWT, SECRETS, WEBHOOK_KEY, basic_header, bearer_header

from .conftest import BACKEND, HOST, Backend, EdgeHarness, body_json


async def serve_with(harness: EdgeHarness, modules: Modules) -> None:
    await serve_route(harness.edge, host=HOST, modules=modules, secrets=SECRETS, backend=BACKEND)


async def test_ip_restriction_denies_before_the_backend(
    harness: EdgeHarness, backend: Backend
) -> None:
    await serve_with(harness, Modules.model_validate({"ipRestriction": {"deny": ["127.0.0.0/8"]}}))
    assert (await harness.get("/"))[0] == 403
    assert backend.seen == []
    await serve_with(harness, Modules.model_validate({"ipRestriction": {"allow": ["127.0.0.1"]}}))
    assert (await harness.get("/"))[0] == 200


async def test_forged_forwarded_for_does_not_bypass_ip_restriction(
    harness: EdgeHarness, backend: Backend
) -> None:
    await serve_with(harness, Modules.model_validate({"ipRestriction": {"allow": ["10.0.0.0/8"]}}))
    status, _, _ = await harness.get("/", headers={"X-Forwarded-For": "10.1.2.3"})
    assert status == 403
    assert backend.seen == []


async def test_trusted_proxy_forwarded_for_is_honoured(backend: Backend) -> None:
    from interlock.dataplane.upstreams import StaticUpstreams
    from interlock.edge.server import EdgeServer

    edge = InProcessEdge(trusted_proxies=["127.0.0.1/32"])
    upstreams = StaticUpstreams({("default", "web", 80): [backend.address]})
    server = EdgeServer(edge=edge, upstreams=upstreams, trusted_proxies=["127.0.0.1/32"])
    await server.start(addr="127.0.0.1:0")
    import aiohttp

    try:
        async with aiohttp.ClientSession() as client:
            harness = EdgeHarness(edge=edge, upstreams=upstreams, server=server, client=client)
            await serve_with(
                harness, Modules.model_validate({"ipRestriction": {"allow": ["10.0.0.0/8"]}})
            )
            assert (await harness.get("/echo"))[0] == 403
            status, _, body = await harness.get(
                "/echo", headers={"X-Forwarded-For": "10.1.2.3", "X-Forwarded-Proto": "https"}
            )
            assert status == 200
            headers = body_json(body)["headers"]
            assert isinstance(headers, dict)
            assert headers["x-forwarded-for"] == ["10.1.2.3, 127.0.0.1"]
            assert headers["x-forwarded-proto"] == ["https"]
    finally:
        await server.stop()


async def test_basic_auth_challenges_and_admits(harness: EdgeHarness, backend: Backend) -> None:
    await serve_with(harness, BASIC_AUTH)
    status, headers, _ = await harness.get("/")
    assert status == 401
    assert headers["WWW-Authenticate"].startswith('Basic realm="app"')
    assert (await harness.get("/", headers=basic_header(password="wrong")))[0] == 401
    assert backend.seen == []
    assert (await harness.get("/", headers=basic_header()))[0] == 200


async def test_jwt_admits_a_valid_token_only(harness: EdgeHarness, backend: Backend) -> None:
    await serve_with(harness, JWT)
    status, headers, _ = await harness.get("/")
    assert status == 401
    assert headers["WWW-Authenticate"].startswith("Bearer")
    assert backend.seen == []
    assert (await harness.get("/", headers=bearer_header()))[0] == 200


async def test_headers_are_changed_both_ways(harness: EdgeHarness, backend: Backend) -> None:
    await serve_with(
        harness,
        Modules.model_validate(
            {
                "headers": {
                    "request": {"add": {"X-Team": "blue"}, "remove": ["X-Debug"]},
                    "response": {"add": {"X-Frame-Options": "DENY"}, "remove": ["Server"]},
                }
            }
        ),
    )
    status, headers, _ = await harness.get("/echo", headers={"X-Debug": "1", "X-Team": "forged"})
    assert status == 200
    sent = backend.seen[-1].headers
    assert sent["x-team"] == ["blue"]
    assert "x-debug" not in sent
    assert headers["X-Frame-Options"] == "DENY"
    assert "Server" not in headers


async def test_compression_gzips_when_accepted(harness: EdgeHarness, backend: Backend) -> None:
    await serve_with(harness, Modules.model_validate({"compression": {"enabled": True}}))
    status, headers, body = await harness.get("/text", headers={"Accept-Encoding": "gzip"})
    assert status == 200
    assert headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body) == b"compress me " * 500
    status, headers, body = await harness.get("/text", headers={"Accept-Encoding": "identity"})
    assert "Content-Encoding" not in headers
    assert body == b"compress me " * 500


async def test_webhook_verification_reads_and_forwards_the_body(
    harness: EdgeHarness, backend: Backend
) -> None:
    await serve_with(
        harness,
        Modules.model_validate(
            {
                "webhookVerification": {
                    "provider": "generic",
                    "secretRef": {"name": "hook", "key": "secret"},
                }
            }
        ),
    )
    payload = b'{"event": "push"}' * 1000
    signature = hmac.new(WEBHOOK_KEY, payload, hashlib.sha256).hexdigest()
    status, _, _ = await harness.request(
        "POST", "/upload", data=payload, headers={"X-Signature": "sha256=" + "0" * 64}
    )
    assert status == 401
    assert backend.seen == []
    status, _, body = await harness.request(
        "POST", "/upload", data=payload, headers={"X-Signature": f"sha256={signature}"}
    )
    assert status == 200
    assert body_json(body)["size"] == len(payload)


async def test_rate_limit_answers_429_with_retry_after(
    harness: EdgeHarness, backend: Backend
) -> None:
    await serve_with(
        harness, Modules.model_validate({"rateLimit": {"requests": 2, "period": "1m"}})
    )
    statuses = [(await harness.get("/"))[0] for _ in range(2)]
    status, headers, _ = await harness.get("/")
    assert statuses == [200, 200]
    assert status == 429
    assert int(headers["Retry-After"]) > 0
    assert len(backend.seen) == 2


async def test_circuit_breaker_opens_on_upstream_errors(
    harness: EdgeHarness, backend: Backend
) -> None:
    await serve_with(
        harness,
        Modules.model_validate(
            {"circuitBreaker": {"errorThresholdPercentage": 50, "volumeThreshold": 3}}
        ),
    )
    for _ in range(3):
        assert (await harness.get("/status/502"))[0] == 502
    assert (await harness.get("/"))[0] == 503
    assert len(backend.seen) == 3
