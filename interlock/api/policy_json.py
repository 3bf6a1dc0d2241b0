"""The outbound policy as JSON: the document of ``docs/policy-api.md``, beside its schema.

:mod:`interlock.api.policy_schema` says what a policy document may hold; this module writes it
from the model (:class:`~interlock.model.outbound.OutboundPolicy`), camelCase keys and all. The
two live side by side so that a field added to one is seen to be missing from the other, and
the tests validate every document written here against the schema. The model knows nothing of
its JSON: the gRPC API (:mod:`interlock.api.grpc.encode`) is a second encoding of the same
policy, and neither is the model's.

:func:`policy_body` is the bytes a policy watch shares with every reader of one policy (the
composition root hands it to the watches, which ``api/`` may not import).
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Any

from interlock.model.gateway import HTTPRouteTimeouts
from interlock.model.outbound import (
    Backend,
    FailureInjector,
    OutboundPolicy,
    OutboundRoute,
    ResolvedRule,
    RouteFilter,
)

_encode = json.JSONEncoder(separators=(",", ":"), ensure_ascii=False).encode


def policy_body(policy: OutboundPolicy) -> bytes:
    """The policy's JSON document, compact, as UTF-8 bytes."""
    return _encode(policy_json(policy)).encode()


def policy_json(policy: OutboundPolicy) -> dict[str, Any]:
    """The policy in the wire shape of ``docs/policy-api.md`` (camelCase keys)."""
    return {
        "namespace": policy.namespace,
        "service": policy.service,
        "port": policy.port,
        "clientNamespace": policy.client_namespace,
        "protocol": policy.protocol,
        "failureAccrual": None
        if policy.failure_accrual is None
        else policy.failure_accrual.to_json(),
        "routes": [route_json(route) for route in policy.routes],
    }


def route_json(route: OutboundRoute) -> dict[str, Any]:
    return {
        "kind": route.kind,
        "group": route.group,
        "namespace": route.namespace,
        "name": route.name,
        "creationTimestamp": _rfc3339(route.creation_timestamp),
        "hostnames": list(route.hostnames),
        "rules": [rule_json(rule) for rule in route.rules],
    }


def rule_json(rule: ResolvedRule) -> dict[str, Any]:
    """A rule as served: its own timeouts and retry over those of annotations."""
    timeouts = rule.timeouts or HTTPRouteTimeouts()
    annotated = dict(rule.annotated_timeouts)
    retry = rule.effective_retry
    return {
        "name": rule.name,
        "matches": [m.model_dump(mode="json", by_alias=True) for m in rule.matches],
        "filters": filters_json(rule.filters),
        "timeouts": {
            "request": timeouts.request or annotated.get("request"),
            "backendRequest": timeouts.backend_request,
            "response": annotated.get("response"),
            "idle": annotated.get("idle"),
        },
        "retry": None if retry is None else retry.to_json(),
        "distribution": rule.distribution,
        "backends": [backend_json(b) for b in rule.backends],
        **(
            {}
            if rule.grpc_matches is None
            else {
                "grpcMatches": [
                    m.model_dump(mode="json", by_alias=True, exclude_none=True)
                    for m in rule.grpc_matches
                ]
            }
        ),
    }


def backend_json(backend: Backend) -> dict[str, Any]:
    """A backend without its ``tls`` (how a Gateway reaches it is not part of this API)."""
    return {
        "kind": backend.kind,
        "namespace": backend.namespace,
        "name": backend.name,
        "port": backend.port,
        "weight": backend.weight,
        "exists": backend.exists,
        "failureInjector": (
            None
            if backend.failure_injector is None
            else failure_injector_json(backend.failure_injector)
        ),
        "filters": filters_json(backend.filters),
    }


def failure_injector_json(injector: FailureInjector) -> dict[str, Any]:
    found: dict[str, Any] = {"status": injector.status, "message": injector.message}
    if injector.grpc_status is not None:
        found["grpcStatus"] = injector.grpc_status
    if injector.refuse_connection:
        found["refuseConnection"] = True
    return found


def filters_json(filters: Iterable[RouteFilter]) -> list[dict[str, Any]]:
    """Filters in API spelling, each with its ``type`` and the one config field it uses."""
    return [f.model_dump(mode="json", by_alias=True, exclude_none=True) for f in filters]


def _rfc3339(moment: datetime | None) -> str | None:
    if moment is None:
        return None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
