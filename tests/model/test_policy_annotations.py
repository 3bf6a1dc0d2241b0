"""Timeouts, retries, failure accrual and protocol in the policy, and the policy's schema.

Linkerd's annotations with Linkerd's defaults; one precedence (rule field > route annotation >
Service annotation); malformed values named on the route's status with the rest unaffected;
and every policy these tests build validates against the JSON Schema the API serves.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from interlock.api.policy_json import policy_json
from interlock.api.policy_schema import OUTBOUND_POLICY_SCHEMA
from interlock.model.durations import parse_duration
from interlock.model.gateway import HTTPRoute, parse_http_route
from interlock.model.outbound import OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.policy_annotations import format_duration
from interlock.model.route_resolution import resolve_route
from interlock.model.route_status import route_status
from interlock.model.service import Service, parse_service
from tests.kit.outbound_objects import served_retry

VALIDATOR = Draft202012Validator(OUTBOUND_POLICY_SCHEMA)
NOW = datetime(2024, 5, 1, tzinfo=UTC)


def web(annotations: dict[str, str] | None = None, **port: Any) -> Service:
    return parse_service(
        {
            "metadata": {"name": "web", "namespace": "shop", "annotations": annotations or {}},
            "spec": {"ports": [{"name": "http", "port": 80, **port}]},
        }
    )


def route(
    annotations: dict[str, str] | None = None, rule: dict[str, Any] | None = None
) -> HTTPRoute:
    return parse_http_route(
        {
            "metadata": {
                "name": "r",
                "namespace": "shop",
                "annotations": annotations or {},
                "creationTimestamp": "2024-01-01T00:00:00Z",
            },
            "spec": {
                "parentRefs": [{"group": "core", "kind": "Service", "name": "web"}],
                "rules": [rule or {}],
            },
        }
    )


def policy(service: Service, *routes: HTTPRoute) -> OutboundPolicy:
    known = {service.key: service}
    resolved = [resolve_route(r, known, []) for r in routes]
    built = build_outbound_policy(service, "shop", "web", 80, "shop", resolved)
    VALIDATOR.validate(policy_json(built))
    return built


def first_rule(p: OutboundPolicy) -> dict[str, Any]:
    rule: dict[str, Any] = policy_json(p)["routes"][0]["rules"][0]
    return rule


def test_service_annotations_apply_to_the_default_route() -> None:
    service = web(
        {
            "retry.linkerd.io/http": "5xx,429",
            "retry.linkerd.io/limit": "3",
            "retry.linkerd.io/timeout": "300ms",
            "timeout.linkerd.io/request": "10s",
            "timeout.linkerd.io/idle": "1m30s",
        }
    )
    rule = first_rule(policy(service))
    assert rule["distribution"] == "FirstAvailable"
    assert rule["timeouts"] == {
        "request": "10s",
        "backendRequest": None,
        "response": None,
        "idle": "1m30s",
    }
    assert rule["retry"] == {
        "source": "service",
        "codes": [],
        "statusRanges": [{"min": 500, "max": 599}, {"min": 429, "max": 429}],
        "grpcCodes": [],
        "attempts": 3,
        "backoff": None,
        "timeout": "300ms",
    }


def test_route_annotations_override_the_service_and_rule_fields_override_both() -> None:
    service = web({"timeout.linkerd.io/request": "10s", "timeout.linkerd.io/response": "3s"})
    annotated = route({"timeout.linkerd.io/request": "20s", "retry.linkerd.io/grpc": "unavailable"})
    rule = first_rule(policy(service, annotated))
    assert rule["distribution"] == "RandomWeighted"
    # Per timeout key: the route's request, the Service's response.
    assert (rule["timeouts"]["request"], rule["timeouts"]["response"]) == ("20s", "3s")
    assert rule["retry"]["source"] == "route"
    assert rule["retry"]["grpcCodes"] == ["unavailable"]
    assert rule["retry"]["attempts"] == 1  # Linkerd's default limit
    fields = route(
        {"timeout.linkerd.io/request": "20s", "retry.linkerd.io/http": "5xx"},
        {"timeouts": {"request": "5s"}, "retry": {"codes": [503], "attempts": 2}},
    )
    rule = first_rule(policy(service, fields))
    assert rule["timeouts"]["request"] == "5s"
    assert rule["retry"] == served_retry(codes=[503], attempts=2)


def test_failure_accrual_uses_linkerds_defaults_and_knobs() -> None:
    assert policy_json(policy(web()))["failureAccrual"] is None
    defaults = policy(web({"balancer.linkerd.io/failure-accrual": "consecutive"}))
    assert policy_json(defaults)["failureAccrual"] == {
        "kind": "consecutive",
        "maxFailures": 7,
        "minPenalty": "1s",
        "maxPenalty": "1m",
        "jitterRatio": 0.5,
    }
    tuned = policy(
        web(
            {
                "balancer.linkerd.io/failure-accrual": "consecutive",
                "balancer.linkerd.io/failure-accrual-consecutive-max-failures": "3",
                "balancer.linkerd.io/failure-accrual-consecutive-min-penalty": "500ms",
                "balancer.linkerd.io/failure-accrual-consecutive-max-penalty": "2m",
                "balancer.linkerd.io/failure-accrual-consecutive-jitter-ratio": "0.1",
            }
        )
    )
    assert policy_json(tuned)["failureAccrual"] == {
        "kind": "consecutive",
        "maxFailures": 3,
        "minPenalty": "500ms",
        "maxPenalty": "2m",
        "jitterRatio": 0.1,
    }


@pytest.mark.parametrize(
    ("app_protocol", "annotations", "protocol"),
    [
        (None, {}, "detect"),
        ("http", {}, "http1"),
        ("kubernetes.io/h2c", {}, "http2"),
        ("linkerd.io/opaque", {}, "opaque"),
        ("http", {"config.linkerd.io/opaque-ports": "25,80-81"}, "opaque"),
        (None, {"config.linkerd.io/opaque-ports": "3306"}, "detect"),
    ],
)
def test_protocol_from_app_protocol_and_opaque_ports(
    app_protocol: str | None, annotations: dict[str, str], protocol: str
) -> None:
    port = {"appProtocol": app_protocol} if app_protocol else {}
    assert policy_json(policy(web(annotations, **port)))["protocol"] == protocol


def test_malformed_annotations_are_named_on_the_status_and_the_rest_applies() -> None:
    service = web(
        {"timeout.linkerd.io/idle": "forever", "balancer.linkerd.io/failure-accrual": "sometimes"}
    )
    bad = route({"retry.linkerd.io/limit": "many", "timeout.linkerd.io/request": "2s"})
    rule = first_rule(policy(service, bad))
    assert rule["timeouts"]["request"] == "2s"  # the well-formed one still applies
    assert rule["timeouts"]["idle"] is None
    known = {service.key: service}
    (entry,) = route_status(bad, resolve_route(bad, known, []), known, now=NOW)
    accepted = next(c for c in entry["conditions"] if c["type"] == "Accepted")
    assert accepted["status"] == "True"
    for text in (
        "HTTPRoute shop/r: annotation retry.linkerd.io/limit: 'many' is not a whole number",
        "Service shop/web: annotation timeout.linkerd.io/idle: 'forever' is not a duration",
        "Service shop/web: annotation balancer.linkerd.io/failure-accrual: 'sometimes'",
    ):
        assert text in accepted["message"]


@pytest.mark.parametrize("text", ["0s", "500ms", "1s", "1m30s", "2h", "1h0m0s", "1.5s"])
def test_durations_are_served_in_the_gateway_format(text: str) -> None:
    served = format_duration(parse_duration(text))
    assert parse_duration(served) == parse_duration(text)
    assert re.fullmatch(r"([0-9]{1,5}(h|m|s|ms)){1,4}", served)


_ANNOTATION_VALUES = st.fixed_dictionaries(
    {},
    optional={
        "retry.linkerd.io/http": st.sampled_from(["5xx", "gateway-error", "500-504", "x"]),
        "retry.linkerd.io/grpc": st.sampled_from(["unavailable", "internal,cancelled", "?"]),
        "retry.linkerd.io/limit": st.sampled_from(["0", "2", "-1"]),
        "retry.linkerd.io/timeout": st.sampled_from(["100ms", "1.5s", "soon"]),
        "timeout.linkerd.io/request": st.sampled_from(["10s", "1h", "bad"]),
        "timeout.linkerd.io/response": st.sampled_from(["1s", ""]),
        "timeout.linkerd.io/idle": st.sampled_from(["5m"]),
        "balancer.linkerd.io/failure-accrual": st.sampled_from(["consecutive", "other"]),
        "balancer.linkerd.io/failure-accrual-consecutive-max-failures": st.sampled_from(
            ["1", "0", "x"]
        ),
        "balancer.linkerd.io/failure-accrual-consecutive-jitter-ratio": st.sampled_from(
            ["0.5", "200"]
        ),
        "config.linkerd.io/opaque-ports": st.sampled_from(["80", "1-100", "a"]),
    },
)


@settings(max_examples=60, deadline=None)
@given(service_annotations=_ANNOTATION_VALUES, route_annotations=_ANNOTATION_VALUES)
def test_every_policy_matches_the_schema(
    service_annotations: dict[str, str], route_annotations: dict[str, str]
) -> None:
    # policy() validates; any combination of good and bad annotations gives a valid document.
    p = policy(web(service_annotations), route(route_annotations))
    # An opaque port (here port 80 by opaque-ports) serves no HTTPRoute: its Default route.
    opaque = service_annotations.get("config.linkerd.io/opaque-ports") in ("80", "1-100")
    assert [r.name for r in p.routes] == (["web"] if opaque else ["r"])
