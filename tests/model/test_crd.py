"""The ModuleSet CRD: valid for Kubernetes, accepts what the model accepts, refuses the rest."""

import re
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
import pytest
import yaml

from interlock.model.durations import InvalidDuration, parse_duration
from interlock.model.moduleset import (
    INTERNAL_MODULES,
    Modules,
    parse_module_set,
)

CRD_PATH = Path(__file__).resolve().parents[2] / "manifests" / "crds" / "moduleset.yaml"
CRD: dict[str, Any] = yaml.safe_load(CRD_PATH.read_text())
VERSION: dict[str, Any] = CRD["spec"]["versions"][0]
SCHEMA: dict[str, Any] = VERSION["schema"]["openAPIV3Schema"]
MODULES_SCHEMA: dict[str, Any] = SCHEMA["properties"]["spec"]["properties"]["modules"]

# The ModuleSet of the original design, every module at once, verbatim.
DESIGN_EXAMPLE = yaml.safe_load(
    """
apiVersion: interlock.dev/v1alpha1
kind: ModuleSet
metadata: {name: example, namespace: default}
spec:
  modules:
    ipRestriction: {allow: ["10.0.0.0/8"], deny: ["10.1.0.0/16"]}   # deny wins; empty allow = all
    basicAuth: {realm: "app", secretRef: {name: users, key: htpasswd}}  # htpasswd lines, bcrypt
    jwt: {issuer: "https://issuer", audiences: ["api"], jwksSecretRef: {name: jwks, key: jwks.json}}
    webhookVerification: {provider: github, secretRef: {name: hook, key: secret}}
    headers:
      request: {add: {X-Team: blue}, remove: [X-Debug]}
      response: {add: {X-Frame-Options: DENY}, remove: [Server]}
    compression: {enabled: true}
    circuitBreaker: {errorThresholdPercentage: 50, volumeThreshold: 20, rollingWindow: 10s, trippedDuration: 30s}
    rateLimit: {requests: 100, period: 1m}
"""  # noqa: E501
)


def schema_errors(instance: Any) -> list[str]:
    validator = jsonschema.Draft4Validator(SCHEMA)
    return [e.message for e in validator.iter_errors(instance)]


def unknown_fields(schema: dict[str, Any], value: Any, path: str = "") -> list[str]:
    """Fields the API server's strict field validation refuses (it would otherwise prune them)."""
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return []
    if isinstance(value, list):
        items = schema.get("items", {})
        return [f for i, v in enumerate(value) for f in unknown_fields(items, v, f"{path}[{i}]")]
    if not isinstance(value, dict) or schema.get("type") != "object":
        return []
    if "additionalProperties" in schema:
        extra = schema["additionalProperties"]
        return [f for k, v in value.items() for f in unknown_fields(extra, v, f"{path}.{k}")]
    properties = schema.get("properties")
    if properties is None:  # e.g. metadata: validated by the API server itself
        return []
    found: list[str] = []
    for key, sub in value.items():
        if key not in properties:
            found.append(f"{path}.{key}")
        else:
            found.extend(unknown_fields(properties[key], sub, f"{path}.{key}"))
    return found


def with_modules(modules: dict[str, Any]) -> dict[str, Any]:
    return {**DESIGN_EXAMPLE, "spec": {"modules": modules}}


def test_crd_is_a_valid_kubernetes_object() -> None:
    kubernetes_validate.validate(CRD, "1.32", strict=True)


def test_crd_shape() -> None:
    assert CRD["metadata"]["name"] == "modulesets.interlock.dev"
    assert CRD["spec"]["group"] == "interlock.dev"
    assert CRD["spec"]["scope"] == "Namespaced"
    assert CRD["spec"]["names"]["kind"] == "ModuleSet"
    assert [v["name"] for v in CRD["spec"]["versions"]] == ["v1alpha1"]
    assert VERSION["served"] is True
    assert VERSION["storage"] is True
    assert VERSION["subresources"] == {"status": {}}
    columns = {c["name"]: c["jsonPath"] for c in VERSION["additionalPrinterColumns"]}
    assert columns["Valid"] == '.status.conditions[?(@.type=="Valid")].status'
    assert columns["Age"] == ".metadata.creationTimestamp"


def test_design_example_is_accepted_by_schema_and_model() -> None:
    assert schema_errors(DESIGN_EXAMPLE) == []
    assert unknown_fields(SCHEMA, DESIGN_EXAMPLE) == []
    # The model agrees on every field; it only adds that the edge will not run basicAuth and
    # jwt together (both read the Authorization header), which a schema cannot express simply.
    problems = parse_module_set(DESIGN_EXAMPLE).problems
    assert [p.field for p in problems] == ["spec.modules"]
    assert "basicAuth and jwt" in problems[0].reason


def test_status_written_by_the_controller_is_accepted() -> None:
    status = {
        "conditions": [
            {
                "type": "Valid",
                "status": "False",
                "reason": "Invalid",
                "message": "spec.modules.rateLimit.requests: ...",
                "observedGeneration": 3,
                "lastTransitionTime": "2026-01-02T03:04:05Z",
            }
        ]
    }
    doc = {**DESIGN_EXAMPLE, "status": status}
    assert schema_errors(doc) == []
    assert unknown_fields(SCHEMA, doc) == []


def test_no_preserve_unknown_fields_under_spec() -> None:
    assert "x-kubernetes-preserve-unknown-fields" not in yaml.safe_dump(
        SCHEMA["properties"]["spec"]
    )


@pytest.mark.parametrize(
    ("modules", "unknown"),
    [
        ({"waf": {"mode": "block"}}, ".spec.modules.waf"),
        ({"ipRestriction": {"alow": ["10.0.0.0/8"]}}, ".spec.modules.ipRestriction.alow"),
        (
            {"basicAuth": {"secretRef": {"name": "u", "key": "k", "namespace": "other"}}},
            ".spec.modules.basicAuth.secretRef.namespace",
        ),
    ],
)
def test_unknown_fields_refused_by_strict_validation(modules: dict[str, Any], unknown: str) -> None:
    assert unknown_fields(SCHEMA, with_modules(modules)) == [unknown]
    # ... and reported by the controller for servers that do not validate.
    assert parse_module_set(with_modules(modules)).problems


@pytest.mark.parametrize(
    "modules",
    [
        {"webhookVerification": {"provider": "gitlab", "secretRef": {"name": "h", "key": "k"}}},
        {"webhookVerification": {"provider": "github"}},
        {"rateLimit": {"requests": 0}},
        {"rateLimit": {"period": "1m"}},
        {"rateLimit": {"requests": 5, "period": "1 minute"}},
        {"circuitBreaker": {"errorThresholdPercentage": 150}},
        {"circuitBreaker": {"volumeThreshold": 0}},
        {"circuitBreaker": {"rollingWindow": "10"}},
        {"basicAuth": {"realm": "app"}},
        {"basicAuth": {"secretRef": {"name": "users"}}},
        {"basicAuth": {"secretRef": {"name": "Users", "key": "htpasswd"}}},
        {"basicAuth": {"realm": 'a"b', "secretRef": {"name": "u", "key": "k"}}},
        {"jwt": {"jwksSecretRef": {"name": "jwks", "key": "k"}}},
        {"jwt": {"issuer": "", "jwksSecretRef": {"name": "jwks", "key": "k"}}},
        {"jwt": {"issuer": "i", "jwksSecretRef": {"name": "jwks", "key": "a/b"}}},
        {"headers": {"request": {"add": {"X-A": 1}}}},
        {"compression": {"enabled": "yes"}},
        {"ipRestriction": {"allow": "10.0.0.0/8"}},
    ],
)
def test_schema_and_model_both_refuse(modules: dict[str, Any]) -> None:
    assert schema_errors(with_modules(modules))
    assert parse_module_set(with_modules(modules)).problems


def test_every_module_and_field_of_the_model_is_in_the_schema_and_back() -> None:
    def names(model: Any) -> set[str]:
        return {info.alias or name for name, info in model.model_fields.items()}

    module_schemas = MODULES_SCHEMA["properties"]
    # The internal ingressNginx module is set by the Ingress annotations' translation only.
    internal = {Modules.model_fields[name].alias or name for name in INTERNAL_MODULES}
    assert set(module_schemas) == names(Modules) - internal
    for name, info in Modules.model_fields.items():
        if name in INTERNAL_MODULES:
            continue
        alias = info.alias or name
        model = next(a for a in info.annotation.__args__ if a is not type(None))  # type: ignore[union-attr]
        assert set(module_schemas[alias]["properties"]) == names(model), alias


DURATION_PATTERN = re.compile(
    MODULES_SCHEMA["properties"]["rateLimit"]["properties"]["period"]["pattern"]
)


@pytest.mark.parametrize(
    "text",
    [
        "0",
        "30s",
        "1m",
        "1h30m",
        "500ms",
        "1.5s",
        ".5s",
        "250us",
        "250µs",
        "",
        "10",
        "10x",
        "-1s",
        "1m 30s",
        "1d",
        "1.2.3s",
    ],
)
def test_schema_duration_pattern_agrees_with_parse_duration(text: str) -> None:
    try:
        parse_duration(text)
        parses = True
    except InvalidDuration:
        parses = False
    assert bool(DURATION_PATTERN.match(text)) is parses
