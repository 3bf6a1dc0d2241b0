"""RequestMirror filters of Gateway routes: taken out before parsing, resolved like backendRefs."""

from __future__ import annotations

from typing import Any

from interlock.model.gateway import parse_reference_grant
from interlock.model.gateway_mirrors import (
    RuleMirror,
    resolve_mirrors,
    take_mirror_filters,
)
from interlock.model.meta import ObjectKey
from interlock.model.service import parse_service


def mirror(name: str, *, namespace: str | None = None, **share: Any) -> dict[str, Any]:
    ref: dict[str, Any] = {"name": name, "port": 80}
    if namespace is not None:
        ref["namespace"] = namespace
    return {"type": "RequestMirror", "requestMirror": {"backendRef": ref, **share}}


def service(namespace: str, name: str) -> Any:
    return parse_service(
        {
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"ports": [{"name": "http", "port": 80}]},
        }
    )


def test_mirror_filters_are_taken_out_and_resolved_with_their_share() -> None:
    raw = {
        "metadata": {"name": "r", "namespace": "app"},
        "spec": {
            "rules": [
                {"filters": [mirror("copy", percent=25)], "backendRefs": [{"name": "a"}]},
                {"filters": [mirror("far", namespace="other")], "backendRefs": [{"name": "b"}]},
                {"filters": [mirror("gone", fraction={"numerator": 1, "denominator": 2})]},
            ]
        },
    }
    stripped, found = take_mirror_filters(raw)
    assert all(not rule.get("filters") for rule in stripped["spec"]["rules"])
    assert raw["spec"]["rules"][0]["filters"]  # the input is left as it was
    services = {
        ObjectKey("app", "copy"): service("app", "copy"),
        ObjectKey("other", "far"): service("other", "far"),
    }
    resolved, problem = resolve_mirrors("HTTPRoute", "app", found, services=services, grants=[])
    assert resolved == {0: (RuleMirror("app", "copy", 80, 0.25),)}
    assert problem is not None and problem.reason == "RefNotPermitted"
    grant = parse_reference_grant(
        {
            "metadata": {"name": "g", "namespace": "other"},
            "spec": {
                "from": [
                    {"group": "gateway.networking.k8s.io", "kind": "HTTPRoute", "namespace": "app"}
                ],
                "to": [{"group": "", "kind": "Service"}],
            },
        }
    )
    resolved, problem = resolve_mirrors(
        "HTTPRoute", "app", found, services=services, grants=[grant]
    )
    assert resolved[1] == (RuleMirror("other", "far", 80, 1.0),)
    assert problem is not None and problem.reason == "BackendNotFound"
