"""CRD schemas as kube-apiserver applies them: defaults, formats, list types and CEL rules.

The Gateway API CRDs say most of what a valid HTTPRoute is in ``x-kubernetes-validations``;
these tests pin the behaviour on small schemas, then on the real v1.6.1 HTTPRoute CRD when the
release is on disk (``INTERLOCK_GATEWAY_API_DIR``, default ``../shared/gateway-api/...``).
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest
import yaml

from interlock.embedded import ApiError, EmbeddedApiServer
from interlock.embedded.cel import escape_property, validate_rules
from interlock.embedded.schema import apply_defaults, list_type_errors, validate_schema
from tests.kit.outbound_objects import http_route

GATEWAY_API = Path(
    os.environ.get("INTERLOCK_GATEWAY_API_DIR")
    or Path(__file__).resolve().parents[2].parent / "shared/gateway-api/v1.6.1/standard"
)


def _fields(errors: list[Any]) -> list[tuple[str, str]]:
    return [(e.field, e.reason) for e in errors]


def test_rule_failure_names_the_field_and_the_rule_message() -> None:
    schema = {
        "type": "object",
        "properties": {"path": {"type": "object", "properties": {"value": {"type": "string"}}}},
    }
    schema["properties"]["path"]["x-kubernetes-validations"] = [
        {"rule": "self.value.startsWith('/')", "message": "must be absolute"}
    ]
    errors = validate_rules(schema, {"path": {"value": "api"}}, path="spec")
    assert [str(e) for e in errors] == ['spec.path: Invalid value: "object": must be absolute']
    assert validate_rules(schema, {"path": {"value": "/api"}}, path="spec") == []


def test_rule_without_message_reports_the_rule() -> None:
    schema = {"type": "integer", "x-kubernetes-validations": [{"rule": "self > 1"}]}
    assert [e.message for e in validate_rules(schema, 0, path="x")] == [
        'Invalid value: "integer": failed rule: self > 1'
    ]


def test_transition_rule_runs_only_with_an_old_value() -> None:
    schema = {"type": "string", "x-kubernetes-validations": [{"rule": "self == oldSelf"}]}
    assert validate_rules(schema, "a", path="spec.c") == []
    assert validate_rules(schema, "a", old="a", path="spec.c") == []
    assert _fields(validate_rules(schema, "b", old="a", path="spec.c")) == [
        ("spec.c", "FieldValueInvalid")
    ]


def test_reserved_property_names_are_escaped_as_kubernetes_does() -> None:
    assert escape_property("namespace") == "__namespace__"
    assert escape_property("a-b.c") == "a__dash__b__dot__c"
    schema = {
        "type": "object",
        "properties": {"namespace": {"type": "string"}},
        "x-kubernetes-validations": [{"rule": "self.__namespace__ != 'kube-system'"}],
    }
    assert len(validate_rules(schema, {"namespace": "kube-system"})) == 1


def test_kubernetes_library_functions() -> None:
    schema = {
        "type": "array",
        "items": {"type": "string"},
        "x-kubernetes-validations": [
            {"rule": "self.all(h, !isIP(h))", "message": "no IPs"},
            {"rule": "self.all(h, h.split('.')[0].substring(1).size() < 5)", "message": "long"},
        ],
    }
    assert [e.message for e in validate_rules(schema, ["10.0.0.1", "abcdefgh.x"])] == [
        'Invalid value: "array": no IPs',
        'Invalid value: "array": long',
    ]


def test_defaults_fill_absent_fields_and_nested_defaults() -> None:
    schema = {
        "type": "object",
        "properties": {
            "spec": {
                "type": "object",
                "properties": {
                    "rules": {
                        "type": "array",
                        "default": [{}],
                        "items": {
                            "type": "object",
                            "properties": {"weight": {"type": "integer", "default": 1}},
                        },
                    }
                },
            }
        },
    }
    obj: dict[str, Any] = {"spec": {}}
    apply_defaults(schema, obj)
    assert obj == {"spec": {"rules": [{"weight": 1}]}}
    obj = {"spec": {"rules": [{"weight": 5}, {}]}}
    apply_defaults(schema, obj)
    assert obj == {"spec": {"rules": [{"weight": 5}, {"weight": 1}]}}


def test_formats_and_list_types() -> None:
    assert _fields(validate_schema({"type": "string", "format": "date-time"}, "soon", path="t"))
    assert not validate_schema(
        {"type": "string", "format": "date-time"}, "2024-01-01T00:00:00Z", path="t"
    )
    assert _fields(validate_schema({"type": "string", "format": "ipv4"}, "::1", path="a"))
    headers = {
        "type": "array",
        "x-kubernetes-list-type": "map",
        "x-kubernetes-list-map-keys": ["name"],
        "items": {"type": "object"},
    }
    duplicate = [{"name": "a", "value": "1"}, {"name": "a", "value": "2"}]
    assert _fields(list_type_errors(headers, duplicate, path="h")) == [
        ("h[1]", "FieldValueDuplicate")
    ]


def _route(**backend: Any) -> dict[str, Any]:
    return http_route(
        "web",
        parents=[{"name": "web", "kind": "Service", "group": "", "port": 80}],
        backends=[{"name": "web", "port": 80, **backend}],
    )


@pytest.mark.skipif(not GATEWAY_API.is_dir(), reason=f"no Gateway API CRDs in {GATEWAY_API}")
async def test_real_httproute_crd_refuses_what_kube_apiserver_refuses() -> None:
    server = EmbeddedApiServer()
    crd = yaml.safe_load((GATEWAY_API / "gateway.networking.k8s.io_httproutes.yaml").read_text())
    server.store.update({**crd, "metadata": {**crd["metadata"], "resourceVersion": None}})
    with pytest.raises(ApiError) as weight:
        server.store.create(_route(weight=-5))
    assert weight.value.code == 422
    assert weight.value.details is not None
    assert [c["field"] for c in weight.value.details["causes"]] == [
        "spec.rules[0].backendRefs[0].weight"
    ]
    stored = server.store.create(_route())
    assert stored["spec"]["rules"][0]["backendRefs"][0] == {
        "group": "",
        "kind": "Service",
        "name": "web",
        "port": 80,
        "weight": 1,
    }
    assert stored["spec"]["rules"][0]["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    bad_path = _route()
    bad_path["metadata"]["name"] = "relative"
    bad_path["spec"]["rules"][0]["matches"] = [{"path": {"type": "PathPrefix", "value": "api"}}]
    with pytest.raises(ApiError) as path:
        server.store.create(bad_path)
    assert path.value.details is not None
    assert [c["field"] for c in path.value.details["causes"]] == ["spec.rules[0].matches[0].path"]
