"""manifests/examples: the objects `interlock demo` loads are valid and mean what the docs say."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import yaml
from multidict import CIMultiDict

from interlock.api.policy_json import policy_json
from interlock.demo.runner import BACKENDS, CLUSTER_ONLY, example_manifests
from interlock.edge.modules.chain import compile_modules
from interlock.edge.modules.view import RequestView
from interlock.embedded import running_api_server
from interlock.model.gateway import parse_http_route
from interlock.model.ingress import parse_ingress
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import parse_module_set, parse_secret
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.service import parse_service

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "manifests" / "examples"


def _documents() -> list[dict[str, Any]]:
    docs: list[dict[str, Any]] = []
    for path in sorted(EXAMPLES.glob("*.yaml")):
        docs.extend(doc for doc in yaml.safe_load_all(path.read_text()) if doc)
    return docs


def _one(kind: str, name: str) -> dict[str, Any]:
    (doc,) = [d for d in _documents() if d["kind"] == kind and d["metadata"]["name"] == name]
    return doc


def _auth(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


async def test_the_examples_the_demo_loads_apply_to_the_embedded_api_server_without_errors() -> (
    None
):
    loaded = example_manifests(ROOT / "manifests")
    async with running_api_server() as server:
        report = await server.apply_manifests([ROOT / "manifests" / "crds", *loaded])
    assert report.errors == []
    kinds = sorted(
        str(result.kind) for result in report.results if result.kind != "CustomResourceDefinition"
    )
    assert kinds == [
        "Gateway",
        "GatewayClass",
        "HTTPRoute",
        "HTTPRoute",
        "Ingress",
        "IngressClass",
        "ModuleSet",
        "Secret",
        "Service",
        "Service",
        "Service",
    ]


def test_the_cluster_only_examples_are_the_deployments_behind_the_echo_services() -> None:
    """In a cluster the echo Services need Pods; the demo's own echo processes replace these."""
    skipped = [EXAMPLES / name for name in sorted(CLUSTER_ONLY)]
    deployments = [doc for path in skipped for doc in yaml.safe_load_all(path.read_text()) if doc]
    assert {doc["kind"] for doc in deployments} == {"Deployment"}
    for name in BACKENDS:
        service = _one("Service", name)
        (deployment,) = [d for d in deployments if d["metadata"]["name"] == name]
        pod = deployment["spec"]["template"]
        labels = pod["metadata"]["labels"]
        # The Service selects this Deployment's Pods (and only the backend's own version).
        assert service["spec"]["selector"].items() <= labels.items()
        ports = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        assert {p["targetPort"] for p in service["spec"]["ports"]} <= ports
    # The parent Service `echo` selects both versions.
    echo = _one("Service", "echo")["spec"]["selector"]
    assert all(
        echo.items() <= d["spec"]["template"]["metadata"]["labels"].items() for d in deployments
    )


def test_route_splits_echo_80_20_between_v1_and_v2() -> None:
    route = parse_http_route(_one("HTTPRoute", "echo-split"))
    services = {
        ObjectKey(namespace="default", name=name): parse_service(_one("Service", name))
        for name in ("echo", "echo-v1", "echo-v2")
    }
    resolved = resolve_route(route, services, [])
    policy = policy_json(
        build_outbound_policy(
            services[ObjectKey(namespace="default", name="echo")],
            "default",
            "echo",
            80,
            "default",
            [resolved],
        )
    )
    (served,) = policy["routes"]
    (rule,) = served["rules"]
    split = {(b["name"], b["weight"], b["exists"]) for b in rule["backends"]}
    assert split == {("echo-v1", 80, True), ("echo-v2", 20, True)}


def test_module_set_lets_demo_demo_in_from_loopback_only_and_adds_the_header() -> None:
    module_set = parse_module_set(_one("ModuleSet", "demo"))
    assert module_set.problems == ()
    secret = parse_secret(_one("Secret", "demo-users"))
    value = secret.value("htpasswd")
    assert value is not None
    chain = compile_modules(module_set.spec.modules, {("demo-users", "htpasswd"): value})

    def check(peer: str, authorization: str | None) -> int | None:
        headers = CIMultiDict({"Host": "demo.localhost"})
        if authorization is not None:
            headers["Authorization"] = authorization
        view = RequestView(method="GET", path="/hello", headers=headers, peer_ip=peer)
        rejection = chain.check_request(view)
        return None if rejection is None else rejection.status

    assert check("127.0.0.1", _auth("demo", "demo")) is None
    assert check("::1", _auth("demo", "demo")) is None
    assert check("127.0.0.1", None) == 401
    assert check("127.0.0.1", _auth("demo", "wrong")) == 401
    assert check("192.0.2.7", _auth("demo", "demo")) == 403
    upstream: dict[str, str] = {}
    chain.upstream_request_headers(upstream)
    assert upstream["X-Interlock"] == "demo"


def test_ingress_is_ours_for_demo_localhost_with_the_module_set() -> None:
    ingress = parse_ingress(_one("Ingress", "demo"))
    assert ingress.spec.ingress_class_name == "interlock"
    assert ingress.module_set_names() == ("demo",)
    (rule,) = ingress.spec.rules
    assert rule.host == "demo.localhost"
