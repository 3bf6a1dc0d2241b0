"""Security as tests, over one full scenario of a real controller with its edge
(``docs/reliability.md``, "Security as tests").

The scenario plants Secret values (an htpasswd line, a webhook key, a JWKS document, and a
malformed htpasswd whose bad line holds a marker), uses them through ModuleSets and Ingresses,
sends requests through the real edge server (good and bad credentials, forged
``X-Forwarded-For``), edits a broken ModuleSet so Events repeat, and then collects everything
the controller exposed: every log line (loguru, DEBUG), every trace line, every Event, every
status, ``/metrics``, every ``/debug`` view and the policy API. It also records every request
the controller made to the API server (verb and resource) for the RBAC comparison.

* no planted Secret value (raw or base64) appears in anything collected;
* ``manifests/rbac.yaml`` grants exactly the verbs used (both ways);
* ipRestriction looks at the TCP peer: a forged ``X-Forwarded-For`` (or ``Forwarded``,
  ``X-Real-IP``) from an untrusted peer changes nothing, and the backend is never reached;
* basicAuth runs exactly one bcrypt check for an unknown user, as for a known user with a wrong
  password (the time does not tell which users exist; calls are counted, not timed).
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import random
from collections import Counter
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import aiohttp
import bcrypt
import pytest
import yaml
from aiohttp import web
from loguru import logger

from interlock.config import GatewayConfig
from interlock.controller.app import Controller
from interlock.model.gateway_class import GATEWAY_CONTROLLER_NAME
from tests.kit.echo_backends import LocalBackend, local_slice
from tests.kit.edge_objects import ingress, module_set
from tests.kit.lanes import EVENT, REAL, ControlPlane, ControlPlanes, TestCluster, lane_cluster
from tests.kit.outbound_objects import service
from tests.kit.reliability_kit import CRDS, eventually, objects, replica_config, write
from tests.kit.reliability_objects import (
    HTPASSWD,
    INGRESS_CLASS,
    PLANTED_PASSWORD,
    PLANTED_SECRET_MARKER,
)
from tests.kit.tls_certs import self_signed

RBAC = Path(__file__).resolve().parents[2] / "manifests" / "rbac.yaml"
JWKS_MARKER = "planted-jwks-Wq8r"
BAD_LINE_MARKER = "planted-badline-Hn2c"
CLIENT_KEY_MARKER = "planted-client-key-Vd5m"
PLANTED = {
    "htpasswd": HTPASSWD,
    "webhook key": PLANTED_SECRET_MARKER,
    "jwks": JWKS_MARKER,
    "bad htpasswd line": BAD_LINE_MARKER,
    "password": PLANTED_PASSWORD,
    "Gateway client key": CLIENT_KEY_MARKER,
}


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def _forbidden() -> dict[str, str]:
    """Every planted value in the forms it could leak in (raw, base64, the bcrypt hash)."""
    forms = {}
    for what, value in PLANTED.items():
        forms[what] = value
        forms[f"{what} (base64)"] = _b64(value)
    forms["bcrypt hash"] = HTPASSWD.partition(":")[2]
    return forms


def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "type": "Opaque",
        "data": {key: _b64(value) for key, value in data.items()},
    }


@dataclass
class Collected:
    """Everything the scenario saw the controller expose or do."""

    texts: dict[str, str] = field(default_factory=dict)
    """Where → text (logs, trace, Events, statuses, /metrics, /debug views, policies)."""
    calls: Counter[tuple[str, str, str]] = field(default_factory=Counter)
    """(API group, resource[/subresource], verb) → requests the controller made."""
    statuses: dict[str, int] = field(default_factory=dict)
    """Request name → HTTP status the edge answered."""
    backend_hits: list[dict[str, str]] = field(default_factory=list)
    bcrypt_calls: dict[str, int] = field(default_factory=dict)


def api_call(verb: str, path: str) -> tuple[str, str, str] | None:
    """(group, resource, verb) of an API request path; None for discovery and other URLs."""
    parts = [p for p in urlsplit(path).path.split("/") if p]
    if parts[:1] == ["api"] and len(parts) >= 3:
        group, rest = "", parts[2:]
    elif parts[:1] == ["apis"] and len(parts) >= 4:
        group, rest = parts[1], parts[3:]
    else:
        return None
    if rest[:1] == ["namespaces"] and len(rest) >= 3:
        rest = rest[2:]
    elif rest[:1] == ["namespaces"]:
        return (group, "namespaces", verb)
    resource = rest[0]
    if len(rest) >= 3:
        resource += "/" + rest[2]
    return (group, resource, verb)


class Backend(LocalBackend):
    def __init__(self) -> None:
        self.hits: list[dict[str, str]] = []
        self.port = 0
        self.runner = None

    async def handle(self, request: web.Request) -> web.Response:
        self.hits.append(dict(request.headers))
        return web.Response(text="backend")


async def scenario(tmp: Path, plane: ControlPlane | None) -> Collected:
    collected = Collected()
    logs: list[str] = []
    sink = logger.add(lambda m: logs.append(str(m)), level="DEBUG", format="{message} {extra}")
    backend = Backend()
    await backend.start()
    trace_file = tmp / "trace.jsonl"
    try:
        async with lane_cluster(tmp, plane, bookmark_interval=0.2) as server:
            await server.apply_manifests([CRDS])
            await write(server, INGRESS_CLASS)
            kubeconfig = server.controller_kubeconfig
            config = replica_config(kubeconfig, "security")
            # A Gateway address of its own (a loopback address no other run picks), so the
            # scenario also uses the gatewayclasses/status, gateways/status and
            # listenersets/status grants.
            pool = (f"127.{random.randint(64, 250)}.{random.randint(0, 255)}.7",)
            controller = Controller(
                replace(
                    config,
                    observability=replace(config.observability, trace_file=str(trace_file)),
                    gateways=GatewayConfig(addresses=pool),
                )
            )
            await controller.start()
            try:
                await controller.wait_ready(within=60.0)
                await run_requests(server, controller, backend, collected)
                await collect_outputs(server, controller, collected)
                await every_grant_used(server)
            finally:
                await controller.stop()
            # What the controller asked the API server (through the lane's proxy: its requests
            # only). On the real lane it ran as the controller identity, so the real RBAC also
            # refused whatever manifests/rbac.yaml does not grant.
            for verb, path in server.faults.proxy.calls:
                call = api_call(verb, path)
                if call is not None:
                    collected.calls[call] += 1
            collected.texts["events"] = json.dumps(await server.list(EVENT, namespace="default"))
    finally:
        logger.remove(sink)
        await backend.stop()
    collected.texts["logs"] = "\n".join(logs)
    collected.texts["trace"] = trace_file.read_text()
    collected.backend_hits = backend.hits
    return collected


def used_calls(server: TestCluster) -> set[tuple[str, str, str]]:
    """(API group, resource, verb) of every request the controller made so far."""
    calls = (api_call(verb, path) for verb, path in server.faults.proxy.calls)
    return {call for call in calls if call is not None}


async def every_grant_used(server: TestCluster) -> None:
    """Give the controller time to make every call the manifests grant (a Lease renewal, a
    relist after a watch ends): on a loaded machine the scenario can finish first. Waits for
    the condition, not for time; on timeout it returns, and the RBAC test says what is missing
    (a wait here must not turn a real finding into an error of the whole module)."""
    with contextlib.suppress(AssertionError):
        await eventually(
            lambda: rbac_grants() <= used_calls(server),
            within=60.0,
            message="every granted verb used",
        )


async def run_requests(
    server: TestCluster, controller: Controller, backend: Backend, collected: Collected
) -> None:
    await write(server, service("web", port_names=("http",)))
    await write(server, local_slice("web", {"http": backend.port}, name="web-slice"))
    await write(
        server,
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "web-route", "namespace": "default"},
            "spec": {
                "parentRefs": [{"group": "core", "kind": "Service", "name": "web"}],
                "rules": [
                    {"backendRefs": [{"name": "web", "port": 80}, {"name": "gone", "port": 80}]}
                ],
            },
        },
    )
    # A GRPCRoute, a TLSRoute and a TCPRoute too, so the scenario uses the grpcroutes/status,
    # tlsroutes/status and tcproutes/status grants the manifests hold; each on its own parent (on
    # web a GRPCRoute would take precedence over web-route for the edge's traffic).
    for kind, parent, extra in (
        ("GRPCRoute", "grpc", {}),
        ("TLSRoute", "tls", {"hostnames": ["web.example"]}),
        ("TCPRoute", "tcp", {}),
    ):
        await write(
            server,
            {
                "apiVersion": "gateway.networking.k8s.io/v1",
                "kind": kind,
                "metadata": {"name": f"web-{parent}", "namespace": "default"},
                "spec": {
                    "parentRefs": [{"group": "core", "kind": "Service", "name": parent}],
                    **extra,
                    "rules": [{"backendRefs": [{"name": "web", "port": 80}]}],
                },
            },
        )
    await write(
        server,
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "GatewayClass",
            "metadata": {"name": "interlock-security"},
            "spec": {"controllerName": GATEWAY_CONTROLLER_NAME},
        },
    )
    await write(
        server,
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "metadata": {"name": "web-gateway", "namespace": "default"},
            "spec": {
                "gatewayClassName": "interlock-security",
                "listeners": [{"name": "http", "port": 18080, "protocol": "HTTP"}],
                "allowedListeners": {"namespaces": {"from": "Same"}},
                # Its backend client certificate: the key travels to the data plane, and must
                # never reach a log or the trace.
                "tls": {"backend": {"clientCertificateRef": {"name": "gateway-client"}}},
            },
        },
    )
    client_cert, client_key = self_signed("gateway-client")
    await write(
        server,
        secret(
            "gateway-client",
            {"tls.crt": client_cert, "tls.key": f"{CLIENT_KEY_MARKER}\n{client_key}"},
        ),
    )
    # A ListenerSet on it, so the scenario uses the listenersets/status grant too.
    await write(
        server,
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "ListenerSet",
            "metadata": {"name": "web-listeners", "namespace": "default"},
            "spec": {
                "parentRef": {"name": "web-gateway"},
                "listeners": [
                    {"name": "team", "port": 18080, "protocol": "HTTP", "hostname": "team.test"}
                ],
            },
        },
    )
    # A route of that Gateway to a Service a BackendTLSPolicy names, its CA in a ConfigMap: the
    # configmaps, backendtlspolicies and backendtlspolicies/status grants (the policy's status
    # names the Gateway).
    await write(server, service("tls-web", ports=(443,), port_names=("https",)))
    await write(
        server,
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "tls-web-ca", "namespace": "default"},
            "data": {"ca.crt": self_signed("tls-web.example")[0]},
        },
    )
    await write(
        server,
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "HTTPRoute",
            "metadata": {"name": "tls-web-route", "namespace": "default"},
            "spec": {
                "parentRefs": [{"name": "web-gateway"}],
                "rules": [{"backendRefs": [{"name": "tls-web", "port": 443}]}],
            },
        },
    )
    await write(
        server,
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "BackendTLSPolicy",
            "metadata": {"name": "tls-web", "namespace": "default"},
            "spec": {
                "targetRefs": [{"group": "", "kind": "Service", "name": "tls-web"}],
                "validation": {
                    "caCertificateRefs": [{"group": "", "kind": "ConfigMap", "name": "tls-web-ca"}],
                    "hostname": "tls-web.example",
                },
            },
        },
    )
    await write(server, secret("users", {"htpasswd": HTPASSWD}))
    await write(server, secret("hook", {"key": PLANTED_SECRET_MARKER}))
    await write(server, secret("jwks", {"jwks.json": '{"keys": [' + JWKS_MARKER}))
    await write(server, secret("users-bad", {"htpasswd": f"{BAD_LINE_MARKER}-no-colon\n"}))
    auth = {"basicAuth": {"realm": "shop", "secretRef": {"name": "users", "key": "htpasswd"}}}
    sets = {
        "auth": auth,
        "hook": {
            "webhookVerification": {
                "provider": "github",
                "secretRef": {"name": "hook", "key": "key"},
            }
        },
        "jwt": {
            "jwt": {
                "issuer": "https://issuer.example",
                "audiences": ["api"],
                "jwksSecretRef": {"name": "jwks", "key": "jwks.json"},
            }
        },
        "bad-auth": {
            "basicAuth": {"realm": "x", "secretRef": {"name": "users-bad", "key": "htpasswd"}}
        },
        "guard": {"ipRestriction": {"allow": ["10.0.0.0/8"]}},
        "deny-local": {"ipRestriction": {"deny": ["127.0.0.0/8"]}},
    }
    for name, modules in sets.items():
        await write(server, module_set(name, modules))
    hosts = {
        "shop.example": "auth",
        "hook.example": "hook",
        "jwt.example": "jwt",
        "bad.example": "bad-auth",
        "guard.example": "guard",
        "deny.example": "deny-local",
        "open.example": "",
    }
    for number, (host, modules) in enumerate(hosts.items()):
        await write(server, ingress(f"ing-{number}", host, modules=modules))
    edge = controller.inspect().edge
    assert edge is not None and edge.url is not None
    edge_url = edge.url
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:

        async def status(name: str, host: str, headers: dict[str, str] | None = None) -> int:
            async with http.get(edge_url + "/", headers={"Host": host, **(headers or {})}) as r:
                await r.read()
                collected.statuses[name] = r.status
                return r.status

        async def answers(host: str, code: int, headers: dict[str, str] | None = None) -> None:
            async def check() -> bool:
                return await status("wait", host, headers) == code

            await eventually(check, within=60.0, message=f"{host} answers {code}")

        good = {"Authorization": "Basic " + _b64(f"alice:{PLANTED_PASSWORD}")}
        await answers("open.example", 200)
        await answers("shop.example", 200, good)
        await answers("guard.example", 403)
        await answers("deny.example", 403)
        hits_before = len(backend.hits)
        for forged in (
            {"X-Forwarded-For": "10.1.2.3"},
            {"X-Forwarded-For": "10.1.2.3, 10.9.9.9"},
            {"Forwarded": "for=10.1.2.3"},
            {"X-Real-IP": "10.1.2.3"},
        ):
            await status(f"guard {forged}", "guard.example", forged)
        for forged in ({"X-Forwarded-For": "8.8.8.8"}, {"X-Real-IP": "8.8.8.8"}):
            await status(f"deny {forged}", "deny.example", forged)
        collected.statuses["backend hits from forged requests"] = len(backend.hits) - hits_before

        calls: list[str] = []
        real_checkpw = bcrypt.checkpw

        def counting(password: bytes, hashed: bytes) -> bool:
            calls.append("check")
            return real_checkpw(password, hashed)

        bcrypt.checkpw = counting  # type: ignore[assignment]
        try:
            for label, user, password in (
                ("known user, wrong password", "alice", "wrong-1"),
                ("unknown user", "mallory", "wrong-2"),
                ("unknown user, long password", "eve", "x" * 200),
            ):
                before = len(calls)
                header = {"Authorization": "Basic " + _b64(f"{user}:{password}")}
                await status(label, "shop.example", header)
                collected.bcrypt_calls[label] = len(calls) - before
        finally:
            bcrypt.checkpw = real_checkpw  # type: ignore[assignment]

        # A set that breaks and is repaired twice: the second identical "modules applied"
        # Event is aggregated with a patch (the RBAC grant for events/patch must be used).
        def guard_error() -> str:
            edge = controller.inspect().edge
            assert edge is not None
            state = edge.route(host="guard.example", route_id="Prefix:/")
            return "" if state is None else state.last_error or ""

        for _ in range(2):
            await write(server, module_set("guard", {"ipRestriction": {"allow": ["10.0.0.0/40"]}}))
            await eventually(lambda: "/40" in guard_error(), within=60.0, message="broken")
            await write(server, module_set("guard", {"ipRestriction": {"allow": ["10.0.0.0/8"]}}))
            await eventually(lambda: guard_error() == "", within=60.0, message="repaired")
        # Wait for that patch; if it never comes, the RBAC comparison names events/patch.
        with contextlib.suppress(AssertionError):
            await eventually(
                lambda: any(
                    verb == "patch" and "/events/" in path
                    for verb, path in server.faults.proxy.calls
                ),
                within=60.0,
                message="the repeated Event aggregated with a patch",
            )
        await write(server, module_set("guard", {"ipRestriction": {"allow": ["10.0.0.0/8"]}}))
        await answers("guard.example", 403)

    # The Service interlock keeps for a Gateway: created (services/create), updated once it
    # exists (services/patch), deleted with its Gateway (services/delete).
    spare = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "Gateway",
        "metadata": {"name": "spare-gateway", "namespace": "default"},
        "spec": {
            "gatewayClassName": "interlock-security",
            "listeners": [{"name": "http", "port": 18081, "protocol": "HTTP"}],
        },
    }
    spare_service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "spare-gateway-interlock-gateway", "namespace": "default"},
    }

    async def spare_labelled(value: str | None) -> bool:
        found = await server.get(spare_service)
        if found is None:
            return False
        return value is None or found["metadata"].get("labels", {}).get("team") == value

    await write(server, spare)
    await eventually(lambda: spare_labelled(None), within=60.0, message="the Gateway's Service")
    spare["spec"]["infrastructure"] = {"labels": {"team": "security"}}
    await write(server, spare)
    await eventually(lambda: spare_labelled("security"), within=60.0, message="its Service updated")
    await server.delete(spare)

    async def spare_gone() -> bool:
        return await server.get(spare_service) is None

    await eventually(spare_gone, within=60.0, message="the Gateway's Service deleted with it")


async def collect_outputs(
    server: TestCluster, controller: Controller, collected: Collected
) -> None:
    await eventually(lambda: controller.inspect().idle, within=60.0, message="idle")
    for kind in ("HTTPRoute", "Ingress", "ModuleSet"):
        collected.texts[f"{kind} statuses"] = json.dumps(
            [o.get("status") for o in await objects(server, kind)]
        )
    assert controller.admin_site is not None and controller.policy_site is not None
    async with aiohttp.ClientSession() as http:
        for path in (
            "/metrics",
            "/debug/",
            "/debug/actors",
            "/debug/watches",
            "/debug/informers",
            "/debug/status",
            "/debug/lease",
            "/debug/edges",
        ):
            async with http.get(controller.admin_site.url + path) as response:
                collected.texts[path] = await response.text()
        async with http.get(controller.policy_site.url + "/v1/outbound/default/web/80") as response:
            collected.texts["policy"] = await response.text()


@pytest.fixture(scope="module")
def collected(tmp_path_factory: pytest.TempPathFactory, control_planes: ControlPlanes) -> Collected:
    plane = control_planes.get(watch_cache=True) if REAL else None
    return asyncio.run(scenario(tmp_path_factory.mktemp("security"), plane))


def test_no_planted_secret_value_appears_in_any_output(collected: Collected) -> None:
    assert collected.texts["logs"] and collected.texts["trace"] and collected.texts["events"]
    assert "bad.example" in collected.texts["/debug/edges"]
    leaks = [
        f"{what} in {where}"
        for where, text in collected.texts.items()
        for what, value in _forbidden().items()
        if value in text
    ]
    assert leaks == []


def test_the_scenario_reported_the_broken_secrets_by_name(collected: Collected) -> None:
    # The errors must still say *which* Secret and key is wrong, only never its content.
    assert "users-bad" in collected.texts["logs"] + collected.texts["events"]
    assert "jwks" in collected.texts["logs"] + collected.texts["events"]


def rbac_grants() -> set[tuple[str, str, str]]:
    grants: set[tuple[str, str, str]] = set()
    for doc in yaml.safe_load_all(RBAC.read_text()):
        if doc["kind"] not in ("ClusterRole", "Role"):
            continue
        for rule in doc["rules"]:
            for group in rule["apiGroups"]:
                for resource in rule["resources"]:
                    for verb in rule["verbs"]:
                        grants.add((group, resource, verb))
    return grants


def test_rbac_grants_exactly_the_verbs_the_controller_uses(collected: Collected) -> None:
    used = set(collected.calls)
    assert ("coordination.k8s.io", "leases", "update") in used  # the scenario renewed its Lease
    granted = rbac_grants()
    assert used - granted == set(), "used but not granted"
    assert granted - used == set(), "granted but never used"


def test_ip_restriction_ignores_forwarded_headers_from_an_untrusted_peer(
    collected: Collected,
) -> None:
    forged = {k: v for k, v in collected.statuses.items() if k.startswith(("guard ", "deny "))}
    assert len(forged) == 6 and set(forged.values()) == {403}, forged
    assert collected.statuses["backend hits from forged requests"] == 0


def test_basic_auth_runs_one_bcrypt_check_whether_or_not_the_user_exists(
    collected: Collected,
) -> None:
    assert collected.bcrypt_calls == {
        "known user, wrong password": 1,
        "unknown user": 1,
        "unknown user, long password": 1,
    }
    assert collected.statuses["unknown user"] == 401
    assert collected.statuses["known user, wrong password"] == 401
