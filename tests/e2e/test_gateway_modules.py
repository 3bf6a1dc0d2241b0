"""interlock's modules on Gateway routes: a ModuleSet named by an HTTPRoute rule's ExtensionRef.

The edge's promises hold for Gateway routes (both lanes): a rule's modules run before any
backend sees a request and only on that rule; a rule whose ModuleSet is missing serves nothing
(503) and its route says why (ResolvedRefs False, ModuleSetNotFound) until the ModuleSet
appears; a ModuleSet that turns invalid leaves the rule serving with its last good modules, and
the route says InvalidModuleSet. The same holds for the ModuleSets a Gateway's annotations
name for all its listeners or one: they run on every rule served there, before any backend,
and the Gateway's ``interlock.dev/ModuleSets`` condition says why they cannot apply.
"""

from __future__ import annotations

import json
from typing import Any

from tests.kit.e2e_clients import eventually
from tests.kit.edge_objects import module_set
from tests.kit.gateway_env import Env, gateway_obj, http_listener
from tests.kit.gateway_env import env as env

HOST = "app.example"


def extension(name: str) -> dict[str, Any]:
    return {
        "type": "ExtensionRef",
        "extensionRef": {"group": "interlock.dev", "kind": "ModuleSet", "name": name},
    }


def rule(path: str, backend: str, *filters: dict[str, Any]) -> dict[str, Any]:
    return {
        "matches": [{"path": {"type": "PathPrefix", "value": path}}],
        "filters": list(filters),
        "backendRefs": [{"name": backend, "port": 80}],
    }


def route(*rules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "app", "namespace": "default"},
        "spec": {"parentRefs": [{"name": "one"}], "hostnames": [HOST], "rules": list(rules)},
    }


async def fetch(env: Env, address: str, path: str, port: int = 80) -> tuple[int, dict[str, Any]]:
    async with env.http.get(f"http://{address}:{port}{path}", headers={"Host": HOST}) as response:
        body = await response.read()
        try:
            report = json.loads(body) if response.headers.get("X-Echo") else {}
        except ValueError:
            report = {}
        return response.status, report


def reached(env: Env, backend: str, prefix: str) -> int:
    return sum(1 for r in env.echoes[backend].received if r["path"].startswith(prefix))


async def resolved_refs(env: Env) -> tuple[str, str] | None:
    return (await env.parent_conditions("app", "one")).get("ResolvedRefs")


async def test_a_rules_modules_run_before_its_backend_and_only_on_that_rule(env: Env) -> None:
    await env.cluster.apply(module_set("office-only", {"ipRestriction": {"allow": ["10.0.0.0/8"]}}))
    await env.cluster.apply(gateway_obj("one", http_listener("http")))
    await env.cluster.apply(
        route(rule("/open", "blue"), rule("/admin", "green", extension("office-only")))
    )
    address = await env.address("one")

    async def open_served() -> bool:
        return (await fetch(env, address, "/open"))[0] == 200

    await eventually(open_served, message="the rule without modules serves")

    async def admin_refused() -> bool:
        return (await fetch(env, address, "/admin"))[0] == 403

    await eventually(admin_refused, message="the rule's ipRestriction refuses this client")
    assert reached(env, "green", "/admin") == 0

    async def resolved() -> bool:
        # The status is written after the data plane serves the rule, not before.
        return await resolved_refs(env) == ("True", "ResolvedRefs")

    await eventually(resolved, message="the route's ResolvedRefs is True")


async def test_missing_module_set_fails_closed_and_invalid_keeps_the_last_good(env: Env) -> None:
    await env.cluster.apply(gateway_obj("one", http_listener("http")))
    await env.cluster.apply(route(rule("/", "blue", extension("team-headers"))))
    address = await env.address("one")

    async def reserved() -> bool:
        return (await fetch(env, address, "/"))[0] == 503 and await resolved_refs(env) == (
            "False",
            "ModuleSetNotFound",
        )

    await eventually(reserved, message="a rule whose ModuleSet is missing serves nothing")
    assert reached(env, "blue", "/") == 0

    await env.cluster.apply(
        module_set("team-headers", {"headers": {"request": {"add": {"X-Team": "blue"}}}})
    )

    async def with_header() -> bool:
        status, report = await fetch(env, address, "/")
        return status == 200 and report.get("headers", {}).get("x-team") == ["blue"]

    await eventually(with_header, message="once the ModuleSet exists its modules apply")

    await env.cluster.apply(
        module_set(
            "team-headers",
            {
                "headers": {"request": {"add": {"X-Team": "red"}}},
                "ipRestriction": {"allow": ["10.0.0.0/33"]},
            },
        )
    )

    async def invalid_reported() -> bool:
        return await resolved_refs(env) == ("False", "InvalidModuleSet")

    await eventually(invalid_reported, message="the route says its ModuleSet is invalid")
    status, report = await fetch(env, address, "/")
    assert status == 200 and report["headers"]["x-team"] == ["blue"]


def annotated(gateway: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    gateway["metadata"]["annotations"] = annotations
    return gateway


async def gateway_modules_condition(env: Env) -> tuple[str, str, str] | None:
    obj = await env.read("Gateway", "one")
    for found in (obj or {}).get("status", {}).get("conditions", []):
        if found["type"] == "interlock.dev/ModuleSets":
            return found["status"], found["reason"], found["message"]
    return None


async def test_a_gateways_module_sets_run_on_every_rule_of_its_listeners(env: Env) -> None:
    await env.cluster.apply(
        module_set("gateway-headers", {"headers": {"request": {"add": {"X-Gateway": "one"}}}})
    )
    await env.cluster.apply(module_set("office-only", {"ipRestriction": {"allow": ["10.0.0.0/8"]}}))
    await env.cluster.apply(
        annotated(
            gateway_obj("one", http_listener("web"), http_listener("alt", port=8080)),
            {
                "interlock.dev/module-sets": "gateway-headers",
                "interlock.dev/module-sets.alt": "office-only",
            },
        )
    )
    await env.cluster.apply(
        route(rule("/open", "blue"), rule("/admin", "green", extension("office-only")))
    )
    address = await env.address("one")

    async def open_with_header() -> bool:
        status, report = await fetch(env, address, "/open")
        return status == 200 and report.get("headers", {}).get("x-gateway") == ["one"]

    await eventually(open_with_header, message="the Gateway's modules run on a plain rule")

    async def admin_refused() -> bool:
        return (await fetch(env, address, "/admin"))[0] == 403

    await eventually(admin_refused, message="the rule's own module runs after the Gateway's")

    async def alt_refused() -> bool:
        return (await fetch(env, address, "/open", port=8080))[0] == 403

    await eventually(alt_refused, message="the listener's ipRestriction refuses this client")
    assert reached(env, "green", "/admin") == 0
    assert reached(env, "blue", "/open") >= 1

    async def applied() -> bool:
        found = await gateway_modules_condition(env)
        return found is not None and found[:2] == ("True", "ModuleSetsApplied")

    await eventually(applied, message="the Gateway says its ModuleSets apply")


async def test_a_gateways_missing_module_set_fails_closed_and_invalid_keeps_the_last_good(
    env: Env,
) -> None:
    await env.cluster.apply(
        annotated(
            gateway_obj("one", http_listener("web")),
            {"interlock.dev/module-sets": "gateway-headers"},
        )
    )
    await env.cluster.apply(route(rule("/", "blue")))
    address = await env.address("one")

    async def reserved() -> bool:
        found = await gateway_modules_condition(env)
        return (
            (await fetch(env, address, "/"))[0] == 503
            and found is not None
            and found[:2] == ("False", "ModuleSetNotFound")
            and "gateway-headers" in found[2]
        )

    await eventually(reserved, message="a rule under a missing Gateway ModuleSet serves nothing")
    assert reached(env, "blue", "/") == 0

    await env.cluster.apply(
        module_set("gateway-headers", {"headers": {"request": {"add": {"X-Gateway": "one"}}}})
    )

    async def with_header() -> bool:
        status, report = await fetch(env, address, "/")
        return status == 200 and report.get("headers", {}).get("x-gateway") == ["one"]

    await eventually(with_header, message="once the ModuleSet exists the rule serves with it")

    await env.cluster.apply(
        module_set(
            "gateway-headers",
            {
                "headers": {"request": {"add": {"X-Gateway": "two"}}},
                "ipRestriction": {"allow": ["10.0.0.0/33"]},
            },
        )
    )

    async def invalid_reported() -> bool:
        found = await gateway_modules_condition(env)
        return found is not None and found[:2] == ("False", "InvalidModuleSet")

    await eventually(invalid_reported, message="the Gateway says its ModuleSet is invalid")
    status, report = await fetch(env, address, "/")
    assert status == 200 and report["headers"]["x-gateway"] == ["one"]


async def test_a_mirrored_rule_under_a_gateways_module_sets_serves_nothing(env: Env) -> None:
    await env.cluster.apply(module_set("office-only", {"ipRestriction": {"allow": ["10.0.0.0/8"]}}))
    await env.cluster.apply(
        annotated(
            gateway_obj("one", http_listener("web")),
            {"interlock.dev/module-sets.web": "office-only", "interlock.dev/module-sets.wbe": "x"},
        )
    )
    mirror = {
        "type": "RequestMirror",
        "requestMirror": {"backendRef": {"name": "green", "port": 80}},
    }
    await env.cluster.apply(route(rule("/copied", "blue", mirror), rule("/plain", "blue")))
    address = await env.address("one")

    async def refused_and_reserved() -> bool:
        return (await fetch(env, address, "/plain"))[0] == 403 and (
            await fetch(env, address, "/copied")
        )[0] == 503

    await eventually(
        refused_and_reserved, message="a copy would leave before the modules admit the request"
    )

    async def typo_reported() -> bool:
        found = await gateway_modules_condition(env)
        return found is not None and found[:2] == ("False", "ListenerNotFound")

    await eventually(typo_reported, message="an annotation naming no listener is reported")
    assert reached(env, "green", "/") == 0 and reached(env, "blue", "/") == 0
