"""The Gateway API schemas the embedded server installs by itself carry the upstream constraints.

Without the release on disk the embedded server still refuses what a real cluster refuses on
every HTTPRoute field interlock reads. The last test compares each constraint of ours with the
v1.6.1 CRD at the same place (when the release is on disk), so the two cannot drift apart.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from interlock.embedded import ApiError, EmbeddedApiServer
from interlock.embedded.gateway_schemas import (
    grpcroute_schema,
    httproute_schema,
    referencegrant_schema,
    stream_route_schema,
)

GATEWAY_API = Path(
    os.environ.get("INTERLOCK_GATEWAY_API_DIR")
    or Path(__file__).resolve().parents[2].parent / "shared/gateway-api/v1.6.1/standard"
)
_CONSTRAINTS = (
    "minimum",
    "maximum",
    "pattern",
    "enum",
    "maxItems",
    "minItems",
    "maxLength",
    "minLength",
    "default",
    "required",
    "format",
)


def _route(name: str, rule: dict[str, Any], **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": [{"name": "web", "kind": "Service", "group": "", "port": 80}],
            "rules": [rule],
            **spec,
        },
    }


def _causes(server: EmbeddedApiServer, route: dict[str, Any]) -> list[tuple[str, str]]:
    with pytest.raises(ApiError) as refused:
        server.store.create(route)
    assert refused.value.code == 422
    assert refused.value.details is not None
    return [(c["field"], c["reason"]) for c in refused.value.details["causes"]]


def test_builtin_httproute_schema_refuses_what_kube_apiserver_refuses() -> None:
    server = EmbeddedApiServer(gateway_api_constraints=True)
    backend = {"name": "api", "port": 80}
    assert _causes(server, _route("w", {"backendRefs": [{**backend, "weight": -5}]})) == [
        ("spec.rules[0].backendRefs[0].weight", "FieldValueInvalid")
    ]
    relative = {"matches": [{"path": {"type": "PathPrefix", "value": "api"}}]}
    assert _causes(server, _route("p", relative)) == [
        ("spec.rules[0].matches[0].path", "FieldValueInvalid")
    ]
    no_block = {"filters": [{"type": "RequestHeaderModifier"}], "backendRefs": [backend]}
    assert _causes(server, _route("f", no_block)) == [
        ("spec.rules[0].filters[0]", "FieldValueInvalid")
    ]
    assert _causes(server, _route("n", {"backendRefs": [{"name": "api"}]})) == [
        ("spec.rules[0].backendRefs[0]", "FieldValueInvalid")
    ]
    many = _route(
        "h", {"backendRefs": [backend]}, hostnames=[f"h{i}.example.com" for i in range(17)]
    )
    # Too many items stops the CEL rules, as on kube-apiserver (the "<nil>" cause says so).
    assert _causes(server, many) == [
        ("spec.hostnames", "FieldValueTooMany"),
        ("<nil>", "FieldValueInvalid"),
    ]


def test_builtin_stream_route_schemas_refuse_what_kube_apiserver_refuses() -> None:
    server = EmbeddedApiServer(gateway_api_constraints=True)
    tls = {**_route("t", {"backendRefs": [{"name": "db", "port": 5432}]}), "kind": "TLSRoute"}
    assert _causes(server, tls) == [
        ("spec.hostnames", "FieldValueRequired"),
        ("<nil>", "FieldValueInvalid"),
    ]
    ip = {**tls, "spec": {**tls["spec"], "hostnames": ["10.0.0.1"]}}
    assert _causes(server, ip) == [("spec.hostnames", "FieldValueInvalid")]
    tcp = {**_route("c", {"backendRefs": []}), "kind": "TCPRoute"}
    assert _causes(server, tcp) == [("spec.rules[0].backendRefs", "FieldValueInvalid")]
    stored = server.store.create(
        {**_route("c", {"backendRefs": [{"name": "db", "port": 5432}]}), "kind": "TCPRoute"}
    )
    assert stored["spec"]["rules"] == [
        {"backendRefs": [{"group": "", "kind": "Service", "name": "db", "port": 5432, "weight": 1}]}
    ]


def test_builtin_httproute_schema_fills_the_upstream_defaults() -> None:
    server = EmbeddedApiServer(gateway_api_constraints=True)
    stored = server.store.create(_route("r", {"backendRefs": [{"name": "api", "port": 80}]}))
    rule = stored["spec"]["rules"][0]
    assert rule["matches"] == [{"path": {"type": "PathPrefix", "value": "/"}}]
    assert rule["backendRefs"] == [
        {"group": "", "kind": "Service", "name": "api", "port": 80, "weight": 1}
    ]


def _constraints(schema: Any, path: str = "") -> Iterator[tuple[str, str, Any]]:
    if not isinstance(schema, dict):
        return
    for key in _CONSTRAINTS:
        if key in schema:
            yield path, key, schema[key]
    for name, child in (schema.get("properties") or {}).items():
        yield from _constraints(child, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _constraints(schema["items"], f"{path}[]")


def _at(schema: dict[str, Any], path: str) -> dict[str, Any]:
    for part in path.replace("[]", ".[]").split(".")[1:]:
        schema = schema["items"] if part == "[]" else schema["properties"][part]
    return schema


@pytest.mark.skipif(not GATEWAY_API.is_dir(), reason=f"no Gateway API CRDs in {GATEWAY_API}")
@pytest.mark.parametrize(
    ("plural", "ours"),
    [
        ("httproutes", httproute_schema()),
        ("grpcroutes", grpcroute_schema()),
        ("referencegrants", referencegrant_schema()),
        ("tlsroutes", stream_route_schema(tls=True)),
        ("tcproutes", stream_route_schema(tls=False)),
    ],
)
def test_builtin_constraints_are_the_upstream_ones(plural: str, ours: dict[str, Any]) -> None:
    def upstream_schema(channel: Path) -> dict[str, Any]:
        crd = yaml.safe_load((channel / f"gateway.networking.k8s.io_{plural}.yaml").read_text())
        return dict(crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"])

    standard = upstream_schema(GATEWAY_API)
    # Rule retry is an experimental-channel field: compared with the experimental CRD.
    experimental = upstream_schema(GATEWAY_API.parent / "experimental")
    differences = []
    for path, key, value in _constraints(ours):
        upstream = experimental if ".retry" in path else standard
        theirs = _at(upstream, path).get(key)
        if theirs != value:
            differences.append(f"{path} {key}: ours {value!r}, upstream {theirs!r}")
    assert not differences, "\n".join(differences)
