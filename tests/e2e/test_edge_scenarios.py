"""The edge's scenarios end to end: embedded API server → controller → edge → backend.

Objects are written through the real kubernetes-asyncio client; requests go over real HTTP to
the controller's edge data plane, which forwards to local aiohttp backends wired in through
Services and EndpointSlices exactly as pods would be.
"""

from __future__ import annotations

import asyncio
import base64
import gzip
import hashlib
import hmac
import json
import ssl
import time
from typing import Any

import aiohttp
import jwt
from cryptography.hazmat.primitives.asymmetric import rsa
from loguru import logger

from interlock.config import EdgeConfig
from interlock.controller.app import Controller
from interlock.edge.faults import FaultyEdge
from interlock.mailbox.testing import capture_trace
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.edge_env import (
    CRDS,
    GOOD_AUTH,
    HTPASSWD,
    PASSWORD,
    Env,
    Kube,
    endpoint_slice,
    secret,
)
from tests.kit.edge_env import (
    env as env,
)
from tests.kit.edge_objects import INGRESS_CLASS_OBJ, ingress, module_set, web_route
from tests.kit.tls_certs import self_signed, tls_secret

# --- scenario 1 (ngrok issue 208): fail closed, then serve, then keep the last good ------------


async def test_scenario_1_a_bad_cidr_serves_nothing_until_fixed_then_keeps_the_last_good(
    env: Env,
) -> None:
    web_backend = env.backends["web"]
    await env.kube.apply(module_set("guard", {"ipRestriction": {"allow": ["127.0.0.0/33"]}}))
    await env.kube.apply(ingress("shop", "shop.example", modules="guard"))
    await env.until_event("shop", "ModulesFailed")
    assert await env.status_of("shop.example") == 503
    assert web_backend.requests == []

    fixed = {
        "ipRestriction": {"allow": ["127.0.0.0/8"]},
        "headers": {"request": {"add": {"X-Team": "blue"}}},
    }
    await env.kube.apply(module_set("guard", fixed))
    await env.until_status("shop.example", 200)
    assert web_backend.requests[-1]["X-Team"] == "blue"

    # Enforced: a set that denies loopback refuses this client.
    await env.kube.apply(
        module_set(
            "guard",
            {**fixed, "ipRestriction": {"allow": ["127.0.0.0/8"], "deny": ["127.0.0.1/32"]}},
        )
    )
    await env.until_status("shop.example", 403)
    await env.kube.apply(module_set("guard", fixed))
    await env.until_status("shop.example", 200)

    # Broken again: the previous configuration keeps serving, with its modules.
    await env.kube.apply(module_set("guard", {"ipRestriction": {"allow": ["not-a-cidr"]}}))
    await env.until_route_error("shop.example", "not-a-cidr")
    status, _, _ = await env.request("shop.example")
    assert status == 200 and web_backend.requests[-1]["X-Team"] == "blue"


async def test_scenario_1_a_missing_basic_auth_secret_serves_nothing_until_created(
    env: Env,
) -> None:
    web_backend = env.backends["web"]
    auth = {"basicAuth": {"realm": "shop", "secretRef": {"name": "users", "key": "htpasswd"}}}
    await env.kube.apply(module_set("auth", auth))
    await env.kube.apply(ingress("shop", "shop.example", modules="auth"))
    await env.until_event("shop", "ModulesFailed")
    assert await env.status_of("shop.example") == 503
    assert await env.status_of("shop.example", headers=GOOD_AUTH) == 503
    assert web_backend.requests == []

    await env.kube.apply(secret("users", {"htpasswd": HTPASSWD}))
    await env.until_status("shop.example", 200, headers=GOOD_AUTH)
    status, headers, _ = await env.request("shop.example")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    reached = len(web_backend.requests)

    # Deleting the Secret keeps the last good configuration (auth still enforced).
    await env.kube.delete(secret("users", {}))
    await env.until_route_error("shop.example", "SecretNotFound")
    assert await env.status_of("shop.example") == 401
    assert await env.status_of("shop.example", headers=GOOD_AUTH) == 200
    assert len(web_backend.requests) == reached + 1


# --- scenario 2 (ngrok issue 219): no request gets through unauthenticated while being created ---


async def test_scenario_2_hammering_during_creation_never_reaches_the_backend_without_auth(
    env: Env,
) -> None:
    web_backend = env.backends["web"]
    results: list[tuple[int, bytes]] = []
    stop = asyncio.Event()

    async def hammer() -> None:
        while not stop.is_set():
            status, _, body = await env.request("secure.example")
            results.append((status, body))

    task = asyncio.create_task(hammer())
    try:
        await eventually(lambda: len(results) >= 5, message="the first requests")
        # The worst order: the Ingress first, then its ModuleSet, then the Secret.
        await env.kube.apply(ingress("secure", "secure.example", modules="auth"))
        auth = {"basicAuth": {"realm": "secure", "secretRef": {"name": "users", "key": "htpasswd"}}}
        await env.kube.apply(module_set("auth", auth))
        await env.kube.apply(secret("users", {"htpasswd": HTPASSWD}))
        await env.until_status("secure.example", 200, headers=GOOD_AUTH)
        seen = len(results)
        await eventually(lambda: len(results) >= seen + 20, message="more requests after")
    finally:
        stop.set()
        await task
    statuses = {status for status, _ in results}
    assert statuses <= {404, 503, 401}, statuses
    assert 401 in statuses
    assert not any(body.startswith(b"backend") for _, body in results)
    assert web_backend.requests and all(
        r.get("Authorization") == GOOD_AUTH["Authorization"] for r in web_backend.requests
    )


# --- scenario 3 (ngrok issue 287): a ModuleSet edit reaches every edge using it ------------------


async def test_scenario_3_editing_a_module_set_changes_every_edge_that_uses_it(env: Env) -> None:
    web_backend = env.backends["web"]
    blue = {"headers": {"request": {"add": {"X-Team": "blue"}}}}
    await env.kube.apply(module_set("shared", blue))
    await env.kube.apply(ingress("one", "one.example", modules="shared"))
    await env.kube.apply(ingress("two", "two.example", modules="shared"))
    for host in ("one.example", "two.example"):
        await env.until_status(host, 200)
        assert web_backend.requests[-1]["X-Team"] == "blue"

    await env.kube.apply(module_set("shared", {"headers": {"request": {"add": {"X-Team": "red"}}}}))
    for host in ("one.example", "two.example"):

        async def red(host: str = host) -> bool:
            await env.request(host)
            return web_backend.requests[-1].get("X-Team") == "red"

        await eventually(red, message=f"{host} sends X-Team: red")

    # Removing a module removes it.
    await env.kube.apply(module_set("shared", {"compression": {"enabled": True}}))
    for host in ("one.example", "two.example"):

        async def plain(host: str = host) -> bool:
            await env.request(host)
            return "X-Team" not in web_backend.requests[-1]

        await eventually(plain, message=f"{host} no longer sends X-Team")


# --- scenario 4 (ngrok issues 176, 428): conflicts and rules without http -----------------------


async def test_scenario_4_same_host_and_path_has_one_winner_and_a_conflict_event(env: Env) -> None:
    other = await env.serve("other")
    await env.kube.apply(ingress("alpha", "both.example", backend="web"))
    await env.until_status("both.example", 200)
    await env.kube.apply(ingress("beta", "both.example", backend="other"))
    (event,) = await env.until_event("beta", "Conflict")
    assert "default/alpha" in event["message"] and event["type"] == "Warning"
    for _ in range(5):
        status, _, body = await env.request("both.example")
        assert status == 200 and body.startswith(b"backend web")
    assert other.requests == []

    # The winner leaves: the other Ingress takes over.
    await env.kube.delete(ingress("alpha", "both.example"))

    async def served_by_other() -> bool:
        status, _, body = await env.request("both.example")
        return status == 200 and body.startswith(b"backend other")

    await eventually(served_by_other, message="beta serves once alpha is gone")


async def test_scenario_4_an_ingress_without_http_rules_is_reported_not_a_crash(env: Env) -> None:
    await env.kube.apply(ingress("empty", "empty.example", rules=[{"host": "empty.example"}]))
    (event,) = await env.until_event("empty", "InvalidRule")
    assert event["type"] == "Warning"
    assert "spec.rules[0].http" in event["message"]
    assert await env.status_of("empty.example") == 404
    # The controller goes on serving other Ingresses.
    await env.kube.apply(ingress("fine", "fine.example"))
    await env.until_status("fine.example", 200)


# --- scenario 5: a backend Service that does not exist yet --------------------------------------


async def test_scenario_5_a_missing_backend_answers_500_until_the_service_exists(env: Env) -> None:
    await env.kube.apply(ingress("late", "late.example", backend="later"))
    await env.until_status("late.example", 500)
    ingress_before = await env.kube.get(ingress("late", "late.example"))
    backend = await env.serve("later")
    await env.until_status("late.example", 200)
    assert backend.requests
    ingress_after = await env.kube.get(ingress("late", "late.example"))
    assert ingress_after["spec"] == ingress_before["spec"]
    # The Ingress reports where the edge listens.
    edge = env.controller.inspect().edge
    assert edge is not None and edge.address is not None

    async def load_balancer() -> bool:
        current = await env.kube.get(ingress("late", "late.example"))
        entries = current.get("status", {}).get("loadBalancer", {}).get("ingress", [])
        return bool(entries) and entries[0].get("ip") == "127.0.0.1"

    await eventually(load_balancer, message="status.loadBalancer")


# --- scenario 6: provider faults ---------------------------------------------------------------


def idle(controller: Controller) -> bool:
    return controller.inspect().idle


async def test_scenario_6_transient_faults_are_retried_and_permanent_ones_wait_for_a_change(
    env: Env,
) -> None:
    assert env.controller.edge is not None
    faulty = FaultyEdge(env.controller.edge.provider)
    env.controller.edge.provider = faulty
    web_backend = env.backends["web"]

    faulty.plan.fail_next("apply_modules", 2)
    faulty.plan.fail_next("attach_backend", retry_after=0.05)
    await env.kube.apply(module_set("team", {"headers": {"request": {"add": {"X-Team": "v1"}}}}))
    await env.kube.apply(ingress("flaky", "flaky.example", modules="team"))
    await env.until_status("flaky.example", 200)
    assert faulty.plan.injected["apply_modules"] == 2
    assert faulty.plan.injected["attach_backend"] == 1
    assert web_backend.requests[-1]["X-Team"] == "v1"

    faulty.plan.fail_next("apply_modules", kind="permanent")
    await env.kube.apply(module_set("team", {"headers": {"request": {"add": {"X-Team": "v2"}}}}))
    await env.until_route_error("flaky.example", "injected permanent fault")
    await eventually(lambda: idle(env.controller), message="the controller settles")
    calls = faulty.plan.calls["apply_modules"]
    served = len(faulty.served_routes(host="flaky.example", route_id="Prefix:/"))
    # Other changes do not retry it ...
    await env.serve("unrelated")
    await env.kube.apply(ingress("elsewhere", "elsewhere.example"))
    await env.until_status("elsewhere.example", 200)
    await eventually(lambda: idle(env.controller), message="the controller settles")
    assert faulty.plan.calls["apply_modules"] == calls + 1  # only the new Ingress's route
    assert len(faulty.served_routes(host="flaky.example", route_id="Prefix:/")) == served
    # ... and the route keeps serving its previous modules.
    assert await env.status_of("flaky.example") == 200
    assert web_backend.requests[-1]["X-Team"] == "v1"
    (failed,) = [
        e
        for e in await env.kube.events("flaky", "ModulesFailed")
        if "injected permanent fault" in e["message"]
    ]
    assert "keeps serving its previous modules and backend" in failed["message"]

    # Changing the ModuleSet tries again.
    await env.kube.apply(module_set("team", {"headers": {"request": {"add": {"X-Team": "v3"}}}}))

    async def v3() -> bool:
        await env.request("flaky.example")
        return web_backend.requests[-1].get("X-Team") == "v3"

    await eventually(v3, message="v3 applied")
    # Never a backend without its modules: every served configuration with a backend was applied.
    assert all(c.applied for c in faulty.served if c.backend_attached)


# --- scenario 7: every module through the whole controller ---------------------------------------


async def test_scenario_7_ip_restriction_headers_and_gzip(env: Env) -> None:
    web_backend = env.backends["web"]
    modules = {
        "ipRestriction": {"allow": ["127.0.0.0/8"], "deny": ["10.0.0.0/8"]},
        "headers": {
            "request": {"add": {"X-Team": "blue"}, "remove": ["X-Debug"]},
            "response": {"add": {"X-Frame-Options": "DENY"}, "remove": ["Server"]},
        },
        "compression": {"enabled": True},
    }
    await env.kube.apply(module_set("site", modules))
    await env.kube.apply(ingress("site", "site.example", modules="site"))
    await env.until_status("site.example", 200)
    status, headers, body = await env.request(
        "site.example", headers={"X-Debug": "1", "Accept-Encoding": "gzip"}
    )
    assert status == 200
    sent = web_backend.requests[-1]
    assert sent["X-Team"] == "blue" and "X-Debug" not in sent
    assert headers["X-Frame-Options"] == "DENY" and "Server" not in headers
    assert headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(body).startswith(b"backend web /")
    status, headers, body = await env.request(
        "site.example", headers={"Accept-Encoding": "identity"}
    )
    assert "Content-Encoding" not in headers and body.startswith(b"backend web")

    # Denied: loopback is no longer allowed.
    await env.kube.apply(
        module_set("site", {**modules, "ipRestriction": {"allow": ["10.0.0.0/8"]}})
    )
    await env.until_status("site.example", 403)
    reached = len(web_backend.requests)
    assert await env.status_of("site.example") == 403
    assert len(web_backend.requests) == reached


def jwks_and_signer() -> tuple[str, Any, Any]:
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    public = json.loads(jwt.algorithms.RSAAlgorithm.to_jwk(key.public_key()))
    public.update({"kid": "k1", "alg": "RS256", "use": "sig"})
    other = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    return json.dumps({"keys": [public]}), key, other


async def test_scenario_7_jwt_valid_expired_wrong_audience_bad_signature_unknown_key(
    env: Env,
) -> None:
    jwks, key, other = jwks_and_signer()
    await env.kube.apply(secret("jwks", {"jwks.json": jwks}))
    jwt_module = {
        "jwt": {
            "issuer": "https://issuer.example",
            "audiences": ["api"],
            "jwksSecretRef": {"name": "jwks", "key": "jwks.json"},
        }
    }
    await env.kube.apply(module_set("tokens", jwt_module))
    await env.kube.apply(ingress("api", "api.example", modules="tokens"))
    now = int(time.time())
    claims = {"iss": "https://issuer.example", "aud": "api", "exp": now + 300}

    def bearer(payload: dict[str, Any], *, signer: Any = key, kid: str = "k1") -> dict[str, str]:
        token = jwt.encode(payload, signer, algorithm="RS256", headers={"kid": kid})
        return {"Authorization": f"Bearer {token}"}

    await env.until_status("api.example", 200, headers=bearer(claims))
    status, headers, _ = await env.request("api.example")
    assert status == 401 and headers["WWW-Authenticate"] == "Bearer"
    for headers_sent, why in (
        (bearer({**claims, "exp": now - 120}), "token expired"),
        (bearer({**claims, "aud": "other"}), "wrong audience"),
        (bearer(claims, signer=other), "bad signature"),
        (bearer(claims, kid="k2"), "unknown signing key"),
    ):
        status, headers, _ = await env.request("api.example", headers=headers_sent)
        assert status == 401, why
        assert why in headers["WWW-Authenticate"]


async def test_scenario_7_webhook_signature_valid_and_invalid(env: Env) -> None:
    await env.kube.apply(secret("hook", {"secret": "hook-secret"}))
    hook = {
        "webhookVerification": {
            "provider": "github",
            "secretRef": {"name": "hook", "key": "secret"},
        }
    }
    await env.kube.apply(module_set("hook", hook))
    await env.kube.apply(ingress("hook", "hook.example", modules="hook"))
    body = b'{"action": "opened"}'
    good = "sha256=" + hmac.new(b"hook-secret", body, hashlib.sha256).hexdigest()
    await env.until_status(
        "hook.example", 200, method="POST", data=body, headers={"X-Hub-Signature-256": good}
    )
    bad = "sha256=" + hmac.new(b"wrong", body, hashlib.sha256).hexdigest()
    status, _, _ = await env.request(
        "hook.example", method="POST", data=body, headers={"X-Hub-Signature-256": bad}
    )
    assert status == 401
    status, _, _ = await env.request("hook.example", method="POST", data=body)
    assert status == 401


async def test_scenario_7_the_circuit_opens_and_half_opens(env: Env) -> None:
    failing = await env.serve("failing")
    failing.status = 500
    breaker = {
        "circuitBreaker": {
            "errorThresholdPercentage": 50,
            "volumeThreshold": 2,
            "rollingWindow": "10s",
            "trippedDuration": "1s",
        }
    }
    await env.kube.apply(module_set("breaker", breaker))
    await env.kube.apply(
        ingress("fragile", "fragile.example", backend="failing", modules="breaker")
    )
    await env.until_status("fragile.example", 500)
    await env.until_status("fragile.example", 503)  # open: the upstream is not contacted
    reached = len(failing.requests)
    status, headers, _ = await env.request("fragile.example")
    assert status == 503 and int(headers["Retry-After"]) >= 1
    assert len(failing.requests) == reached

    failing.status = 200
    await env.until_status("fragile.example", 200)  # half-open: the trial succeeds, closed again
    assert len(failing.requests) == reached + 1
    assert await env.status_of("fragile.example") == 200


async def test_scenario_7_rate_limit_answers_429_with_retry_after(env: Env) -> None:
    await env.kube.apply(module_set("limited", {"rateLimit": {"requests": 3, "period": "1m"}}))
    await env.kube.apply(ingress("limited", "limited.example", modules="limited"))
    await env.until_status("limited.example", 429)
    status, headers, _ = await env.request("limited.example")
    assert status == 429 and int(headers["Retry-After"]) >= 1


async def test_switching_basic_auth_to_jwt_never_serves_a_request_without_auth(env: Env) -> None:
    web_backend = env.backends["web"]
    jwks, _, _ = jwks_and_signer()
    await env.kube.apply(secret("users", {"htpasswd": HTPASSWD}))
    await env.kube.apply(secret("jwks", {"jwks.json": jwks}))
    auth = {"basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}}}
    await env.kube.apply(module_set("auth", auth))
    await env.kube.apply(ingress("switch", "switch.example", modules="auth"))
    await env.until_status("switch.example", 200, headers=GOOD_AUTH)

    statuses: list[int] = []
    stop = asyncio.Event()

    async def hammer() -> None:
        while not stop.is_set():
            statuses.append(await env.status_of("switch.example"))

    task = asyncio.create_task(hammer())
    try:
        jwt_module = {
            "jwt": {
                "issuer": "https://i.example",
                "jwksSecretRef": {"name": "jwks", "key": "jwks.json"},
            }
        }
        await env.kube.apply(module_set("auth", jwt_module))

        async def jwt_in_force() -> bool:
            _, headers, _ = await env.request("switch.example")
            return headers.get("WWW-Authenticate", "").startswith("Bearer")

        await eventually(jwt_in_force, message="jwt applied")
        seen = len(statuses)
        await eventually(lambda: len(statuses) >= seen + 10, message="more requests")
    finally:
        stop.set()
        await task
    assert set(statuses) == {401}
    assert all("Authorization" in r for r in web_backend.requests)


# --- upstreams: the backend Service port's outbound policy splits the edge's traffic ------------


def split_route(*backends: tuple[str, int]) -> dict[str, Any]:
    return web_route(
        [{"backendRefs": [{"name": name, "port": 80, "weight": w} for name, w in backends]}]
    )


async def test_an_http_route_on_the_backend_service_splits_the_edge_traffic(env: Env) -> None:
    blue, green = await env.serve("blue"), await env.serve("green")
    await env.kube.apply(ingress("split", "split.example"))
    await env.until_status("split.example", 200)
    await env.kube.apply(split_route(("blue", 1), ("green", 1)))

    async def both_reached() -> bool:
        await env.request("split.example")
        return bool(blue.requests) and bool(green.requests)

    await eventually(both_reached, message="both weighted backends receive traffic")

    # A backendRef to a Service that does not exist takes its share as 500s.
    await env.kube.apply(split_route(("blue", 1), ("ghost", 1)))
    statuses: set[int] = set()

    async def ghost_share() -> bool:
        statuses.add(await env.status_of("split.example"))
        return 500 in statuses

    await eventually(ghost_share, message="the missing backend's share answers 500")
    await env.kube.apply(split_route(("green", 1)))

    async def only_green() -> bool:
        before = len(green.requests)
        status = await env.status_of("split.example")
        return status == 200 and len(green.requests) == before + 1

    await eventually(only_green, message="all traffic to green")
    reached = len(blue.requests)
    for _ in range(5):
        assert await env.status_of("split.example") == 200
    assert len(blue.requests) == reached


async def test_no_ready_endpoint_answers_503(env: Env) -> None:
    idle_backend = await env.serve("idle")
    await env.kube.apply(ingress("idle", "idle.example", backend="idle"))
    await env.until_status("idle.example", 200)
    unready = endpoint_slice(idle_backend)
    unready["endpoints"][0]["conditions"]["ready"] = False
    await env.kube.apply(unready)
    await env.until_status("idle.example", 503)
    reached = len(idle_backend.requests)
    assert await env.status_of("idle.example") == 503
    assert len(idle_backend.requests) == reached


# --- secrets stay secret; /debug/edges ---------------------------------------------------------


async def test_debug_edges_shows_each_route_and_no_secret_reaches_logs_traces_or_events(
    env: Env,
) -> None:
    log_lines: list[str] = []
    sink = logger.add(lambda message: log_lines.append(str(message)), level="DEBUG")
    try:
        with capture_trace(env.controller.system) as trace:
            await env.kube.apply(secret("users", {"htpasswd": HTPASSWD}))
            auth = {"basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}}}
            await env.kube.apply(module_set("auth", auth))
            await env.kube.apply(ingress("private", "private.example", modules="auth"))
            await env.kube.apply(
                module_set("broken", {"ipRestriction": {"allow": ["300.0.0.0/8"]}})
            )
            await env.kube.apply(ingress("broken", "broken.example", modules="broken"))
            await env.until_status("private.example", 200, headers=GOOD_AUTH)
            await env.until_event("broken", "ModulesFailed")
    finally:
        logger.remove(sink)
    assert env.controller.admin_site is not None
    async with env.http.get(env.controller.admin_site.url + "/debug/edges") as response:
        assert response.status == 200
        debug = await response.json()
    edges = {edge["host"]: edge for edge in debug["edges"]}
    (private,) = edges["private.example"]["routes"]
    assert private["modules"] == ["basicAuth"] and private["backend"] == "default/web:80"
    assert private["lastError"] is None
    (broken,) = edges["broken.example"]["routes"]
    assert broken["backend"] is None and broken["reserved"] and broken["permanent"]
    assert "300.0.0.0/8" in broken["lastError"]
    events = json.dumps(await env.kube.events("private")) + json.dumps(
        await env.kube.events("broken")
    )
    everything = json.dumps(debug) + trace.text() + "\n".join(log_lines) + events
    hashed = HTPASSWD.split(":", 1)[1]
    assert hashed not in everything
    assert base64.b64encode(HTPASSWD.encode()).decode() not in everything
    assert PASSWORD not in everything


async def test_module_set_status_reports_valid_and_invalid(env: Env) -> None:
    await env.kube.apply(module_set("checked", {"ipRestriction": {"allow": ["10.0.0.0/33"]}}))

    async def condition(status: str) -> bool:
        current = await env.kube.get(module_set("checked", {}))
        conditions = current.get("status", {}).get("conditions", [])
        return bool(conditions) and conditions[0]["status"] == status

    await eventually(lambda: condition("False"), message="Valid False")
    current = await env.kube.get(module_set("checked", {}))
    (valid,) = current["status"]["conditions"]
    assert valid["reason"] == "Invalid" and "10.0.0.0/33" in valid["message"]
    # The ModuleSet gets its own Events beside its condition, the newest saying how it is now.
    (invalid,) = await env.until_event("checked", "InvalidModuleSet")
    assert invalid["type"] == "Warning" and invalid["involvedObject"]["kind"] == "ModuleSet"
    assert "spec.modules.ipRestriction.allow[0]" in invalid["message"]
    await env.kube.apply(module_set("checked", {"ipRestriction": {"allow": ["10.0.0.0/8"]}}))
    await eventually(lambda: condition("True"), message="Valid True")
    (recovered,) = await env.until_event("checked", "Valid")
    assert recovered["type"] == "Normal"


async def test_with_two_replicas_both_serve_and_only_the_leader_reports(
    env: Env, start_controller: StartController
) -> None:
    second = await start_controller(identity="edge-replica-2", edge=EdgeConfig(addr=LOCAL))
    second_edge = second.inspect().edge
    assert second_edge is not None and second_edge.url is not None
    await env.kube.apply(module_set("guard", {"ipRestriction": {"allow": ["not-a-cidr"]}}))
    await env.kube.apply(ingress("shared", "shared.example", modules="guard"))
    await env.kube.apply(ingress("ok", "ok.example"))
    await env.until_event("shared", "ModulesFailed")
    await env.until_event("ok", "BackendAttached")

    async def second_serves() -> bool:
        async with env.http.get(second_edge.url, headers={"Host": "ok.example"}) as response:
            return response.status == 200

    await eventually(second_serves, message="the second replica serves ok.example")
    await eventually(lambda: idle(env.controller) and idle(second), message="both settle")
    leaders = [
        c.config.leadership.identity for c in (env.controller, second) if c.inspect().leading
    ]
    assert len(leaders) == 1
    events = await env.kube.events("shared", "ModulesFailed") + await env.kube.events("ok")
    assert events and {e["reportingInstance"] for e in events} == set(leaders)
    assert all(e["count"] == 1 for e in events)


# --- TLS from the Ingress's Secret ---------------------------------------------------------------


async def test_https_with_the_certificate_from_the_ingress_tls_secret(
    env: Env, start_controller: StartController
) -> None:
    tls_controller = await start_controller(
        identity="tls-replica", edge=EdgeConfig(addr=LOCAL, tls_addr=LOCAL)
    )
    edge = tls_controller.edge
    assert edge is not None and edge.tls_address is not None
    cert, key = self_signed("tls.example")
    obj = ingress("tls", "tls.example")
    obj["spec"]["tls"] = [{"hosts": ["tls.example"], "secretName": "tls-cert"}]
    await env.kube.apply(obj)
    trusted = ssl.create_default_context(cadata=cert)
    url = f"https://127.0.0.1:{edge.tls_address.port}/"

    async def https_status() -> int | None:
        try:
            async with env.http.get(
                url, ssl=trusted, server_hostname="tls.example", headers={"Host": "tls.example"}
            ) as response:
                return response.status
        except aiohttp.ClientError:
            return None

    assert await https_status() is None  # no certificate for the host yet: no handshake
    await env.kube.apply(tls_secret("tls-cert", cert, key))

    async def served() -> bool:
        return await https_status() == 200

    await eventually(served, message="HTTPS with the Ingress's certificate")
    assert "BEGIN" not in json.dumps(edge.debug(), default=str)


async def test_x_forwarded_for_is_believed_only_from_a_trusted_proxy(
    cluster: Cluster, start_controller: StartController
) -> None:
    await cluster.apply_manifests([CRDS])
    # This replica trusts the loopback peer as a proxy (a load balancer in front of the edge).
    controller = await start_controller(
        identity="proxied-edge", edge=EdgeConfig(addr=LOCAL, trusted_proxies=("127.0.0.1/32",))
    )
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        env = Env(controller, Kube(cluster.api), http, {})
        try:
            await env.kube.apply(INGRESS_CLASS_OBJ)
            await env.serve("web")
            guard = {"ipRestriction": {"allow": ["10.1.0.0/16"]}}
            await env.kube.apply(module_set("guard", guard))
            await env.kube.apply(ingress("proxied", "proxied.example", modules="guard"))
            inside = {"X-Forwarded-For": "10.1.2.3"}
            await env.until_status("proxied.example", 200, headers=inside)
            assert await env.status_of("proxied.example") == 403
            outside = {"X-Forwarded-For": "192.168.7.7"}
            assert await env.status_of("proxied.example", headers=outside) == 403
        finally:
            for backend in env.backends.values():
                await backend.stop()


async def test_x_forwarded_for_from_an_untrusted_peer_is_ignored(env: Env) -> None:
    await env.kube.apply(module_set("guard", {"ipRestriction": {"allow": ["10.1.0.0/16"]}}))
    await env.kube.apply(ingress("direct", "direct.example", modules="guard"))
    await env.until_status("direct.example", 403)
    reached = len(env.backends["web"].requests)
    forged = {"X-Forwarded-For": "10.1.2.3"}
    assert await env.status_of("direct.example", headers=forged) == 403
    assert len(env.backends["web"].requests) == reached
