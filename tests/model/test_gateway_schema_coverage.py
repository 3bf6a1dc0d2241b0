"""Every field of the Gateway API v1.6.1 schemas has a place in our parsers.

The models ignore unknown fields (an API server may add some), so a field the parser does not
know would be skipped silently — what the Gateway API forbids for anything that changes
traffic. This walks the CRDs' OpenAPI schemas (standard HTTPRoute, GRPCRoute, TLSRoute,
TCPRoute and ReferenceGrant, and the experimental HTTPRoute ``retry``) next to the pydantic
models and fails naming each schema field no model field reads.
"""

from __future__ import annotations

import os
import types
import typing
from pathlib import Path
from typing import Any

import pytest
import yaml
from pydantic import BaseModel

from interlock.model.gateway import HTTPRouteRule, HTTPRouteSpec, ReferenceGrantSpec
from interlock.model.grpc_route import GRPCRouteSpec
from interlock.model.stream_routes import TCPRouteSpec, TLSRouteSpec

RELEASE = Path(
    os.environ.get("INTERLOCK_GATEWAY_API_RELEASE")
    or Path(__file__).resolve().parents[2].parent / "shared/gateway-api/v1.6.1"
)

pytestmark = pytest.mark.skipif(
    not RELEASE.is_dir(), reason=f"Gateway API release not on disk at {RELEASE}"
)


def _spec_schema(channel: str, plural: str) -> dict[str, Any]:
    crd = yaml.safe_load(
        (RELEASE / channel / f"gateway.networking.k8s.io_{plural}.yaml").read_text()
    )
    (storage,) = [v for v in crd["spec"]["versions"] if v.get("storage")]
    spec: dict[str, Any] = storage["schema"]["openAPIV3Schema"]["properties"]["spec"]
    return spec


def _models_in(annotation: Any) -> list[type[BaseModel]]:
    """The pydantic models an annotation holds (through Optional, tuple, Annotated, unions)."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_models_in(arg))
    return found


def _is_opaque(annotation: Any) -> bool:
    # A dict field holds the object as written (a refused experimental feature).
    origin = typing.get_origin(annotation)
    if origin is dict:
        return True
    if origin in (typing.Union, types.UnionType):
        return any(_is_opaque(a) for a in typing.get_args(annotation))
    return False


def _missing(schema: dict[str, Any], model: type[BaseModel], path: str) -> list[str]:
    if "items" in schema:
        schema = schema["items"]
    properties: dict[str, Any] = schema.get("properties") or {}
    by_alias = {(f.alias or name): f for name, f in model.model_fields.items()}
    missing: list[str] = []
    for name, child in properties.items():
        field = by_alias.get(name)
        if field is None:
            missing.append(f"{path}.{name}")
            continue
        if _is_opaque(field.annotation):
            continue
        child_schema = child.get("items", child)
        if child_schema.get("properties"):
            models = _models_in(field.annotation)
            if not models:
                missing.append(f"{path}.{name} (an object read as a scalar)")
                continue
            for sub in models:
                missing.extend(_missing(child_schema, sub, f"{path}.{name}"))
    return missing


CASES = [
    ("standard", "httproutes", HTTPRouteSpec),
    ("standard", "grpcroutes", GRPCRouteSpec),
    ("standard", "tlsroutes", TLSRouteSpec),
    ("standard", "tcproutes", TCPRouteSpec),
    ("standard", "referencegrants", ReferenceGrantSpec),
]


@pytest.mark.parametrize(("channel", "plural", "model"), CASES, ids=[c[1] for c in CASES])
def test_every_schema_field_is_read(channel: str, plural: str, model: type[BaseModel]) -> None:
    assert _missing(_spec_schema(channel, plural), model, "spec") == []


def test_experimental_httproute_retry_is_read_and_session_persistence_refused() -> None:
    # Experimental filter types (ExternalAuth) are outside the filter type enum we accept, so
    # they are refused by the parser; the rule's own experimental fields must be known.
    rule = _spec_schema("experimental", "httproutes")["properties"]["rules"]["items"]
    experimental = {
        "type": "object",
        "properties": {k: rule["properties"][k] for k in ("retry", "sessionPersistence")},
    }
    assert _missing(experimental, HTTPRouteRule, "spec.rules[]") == []
