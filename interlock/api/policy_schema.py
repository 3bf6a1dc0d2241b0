"""The JSON Schema of the outbound policy document: the contract, checkable by machines.

``docs/policy-api.md`` describes every field for people; this schema says the same for
programs, is served by the policy API (``GET /v1/schema/outbound-policy.json``) so a client can
check what it was sent, and the tests validate every policy they are served against it, so the
document, the schema and the code cannot drift apart unnoticed. Fields are only ever added
(``additionalProperties`` is left open for clients to ignore what they do not know); a change
of meaning would need a new path.
"""

from __future__ import annotations

from typing import Any, get_args

from interlock.model.gateway import HTTPMethod

SCHEMA_PATH = "/v1/schema/outbound-policy.json"

_DURATION = {"type": ["string", "null"], "pattern": "^([0-9]{1,5}(h|m|s|ms)){1,4}$"}
_NULLABLE_STRING = {"type": ["string", "null"]}
_STRINGS = {"type": "array", "items": {"type": "string"}}
_HEADERS = {
    "type": "array",
    "items": {
        "type": "object",
        "required": ["name", "value"],
        "properties": {"name": {"type": "string"}, "value": {"type": "string"}},
    },
}
_HEADER_MODIFIER = {
    "type": "object",
    "required": ["set", "add", "remove"],
    "properties": {"set": _HEADERS, "add": _HEADERS, "remove": _STRINGS},
}
_PATH_MODIFIER = {
    "type": ["object", "null"],
    "required": ["type"],
    "properties": {
        "type": {"enum": ["ReplaceFullPath", "ReplacePrefixMatch"]},
        "replaceFullPath": _NULLABLE_STRING,
        "replacePrefixMatch": _NULLABLE_STRING,
    },
}
_FILTER = {
    "type": "object",
    "required": ["type"],
    "properties": {
        "type": {
            "enum": [
                "RequestHeaderModifier",
                "ResponseHeaderModifier",
                "RequestRedirect",
                "URLRewrite",
                "CORS",
            ]
        },
        "requestHeaderModifier": _HEADER_MODIFIER,
        "responseHeaderModifier": _HEADER_MODIFIER,
        "requestRedirect": {
            "type": "object",
            "properties": {
                "scheme": {"enum": ["http", "https"]},
                "hostname": {"type": "string"},
                "path": _PATH_MODIFIER,
                "port": {"type": "integer", "minimum": 1, "maximum": 65535},
                "statusCode": {"enum": [301, 302, 303, 307, 308]},
            },
        },
        "urlRewrite": {
            "type": "object",
            "properties": {"hostname": {"type": "string"}, "path": _PATH_MODIFIER},
        },
        "cors": {
            "type": "object",
            "required": ["allowOrigins", "allowMethods", "allowHeaders", "exposeHeaders", "maxAge"],
            "properties": {
                "allowOrigins": _STRINGS,
                "allowCredentials": {"type": ["boolean", "null"]},
                "allowMethods": _STRINGS,
                "allowHeaders": _STRINGS,
                "exposeHeaders": _STRINGS,
                "maxAge": {"type": "integer", "minimum": 1},
            },
        },
    },
    "oneOf": [
        {"properties": {"type": {"const": t}}, "required": [field]}
        for t, field in (
            ("RequestHeaderModifier", "requestHeaderModifier"),
            ("ResponseHeaderModifier", "responseHeaderModifier"),
            ("RequestRedirect", "requestRedirect"),
            ("URLRewrite", "urlRewrite"),
            ("CORS", "cors"),
        )
    ],
}
_VALUE_MATCH = {
    "type": "object",
    "required": ["type", "name", "value"],
    "properties": {
        "type": {"enum": ["Exact", "RegularExpression"]},
        "name": {"type": "string"},
        "value": {"type": "string"},
    },
}
_MATCH = {
    "type": "object",
    "required": ["path", "headers", "queryParams", "method"],
    "properties": {
        "path": {
            "type": "object",
            "required": ["type", "value"],
            "properties": {
                "type": {"enum": ["Exact", "PathPrefix", "RegularExpression"]},
                "value": {"type": "string"},
            },
        },
        "headers": {"type": "array", "items": _VALUE_MATCH},
        "queryParams": {"type": "array", "items": _VALUE_MATCH},
        "method": {"enum": [None, *get_args(HTTPMethod)]},
    },
}
_BACKEND = {
    "type": "object",
    "required": [
        "kind",
        "namespace",
        "name",
        "port",
        "weight",
        "exists",
        "failureInjector",
        "filters",
    ],
    "properties": {
        "kind": {"type": "string"},
        "namespace": {"type": "string"},
        "name": {"type": "string"},
        "port": {"type": ["integer", "null"], "minimum": 1, "maximum": 65535},
        "weight": {"type": "integer", "minimum": 0, "maximum": 1_000_000},
        "exists": {"type": "boolean"},
        "failureInjector": {
            "type": ["object", "null"],
            "required": ["status", "message"],
            "properties": {
                "status": {"type": "integer"},
                "message": {"type": "string"},
                "grpcStatus": {"type": "integer", "minimum": 0, "maximum": 16},
                "refuseConnection": {"const": True},
            },
        },
        "filters": {"type": "array", "items": _FILTER},
    },
    # A backend carries traffic exactly when it has no failure injector.
    "if": {"properties": {"exists": {"const": True}}},
    "then": {"properties": {"failureInjector": {"type": "null"}}},
    "else": {"properties": {"failureInjector": {"type": "object"}}},
}
_RETRY = {
    "type": ["object", "null"],
    "required": ["source", "codes", "statusRanges", "grpcCodes", "attempts", "backoff", "timeout"],
    "properties": {
        "source": {"enum": ["rule", "route", "service"]},
        "codes": {"type": "array", "items": {"type": "integer", "minimum": 400, "maximum": 599}},
        "statusRanges": {
            "type": "array",
            "items": {
                "type": "object",
                "required": ["min", "max"],
                "properties": {
                    "min": {"type": "integer", "minimum": 100, "maximum": 599},
                    "max": {"type": "integer", "minimum": 100, "maximum": 599},
                },
            },
        },
        "grpcCodes": _STRINGS,
        "attempts": {"type": ["integer", "null"], "minimum": 0},
        "backoff": _DURATION,
        "timeout": _DURATION,
    },
}
_RULE = {
    "type": "object",
    "required": [
        "name",
        "matches",
        "filters",
        "timeouts",
        "retry",
        "distribution",
        "backends",
    ],
    "properties": {
        "name": _NULLABLE_STRING,
        "matches": {"type": "array", "minItems": 1, "items": _MATCH},
        "filters": {"type": "array", "items": _FILTER},
        "timeouts": {
            "type": "object",
            "required": ["request", "backendRequest", "response", "idle"],
            "properties": {
                "request": _DURATION,
                "backendRequest": _DURATION,
                "response": _DURATION,
                "idle": _DURATION,
            },
        },
        "retry": _RETRY,
        "distribution": {"enum": ["FirstAvailable", "RandomWeighted"]},
        "backends": {"type": "array", "items": _BACKEND},
        "grpcMatches": {
            "type": "array",
            "items": {
                "type": "object",
                "properties": {
                    "method": {
                        "type": "object",
                        "required": ["type"],
                        "properties": {
                            "type": {"enum": ["Exact", "RegularExpression"]},
                            "service": {"type": "string"},
                            "method": {"type": "string"},
                        },
                    },
                    "headers": {"type": "array", "items": _VALUE_MATCH},
                },
            },
        },
    },
}
_ROUTE = {
    "type": "object",
    "required": ["kind", "group", "namespace", "name", "creationTimestamp", "hostnames", "rules"],
    "properties": {
        "kind": {"enum": ["HTTPRoute", "GRPCRoute", "TLSRoute", "TCPRoute", "Default"]},
        "group": {"type": "string"},
        "namespace": {"type": "string"},
        "name": {"type": "string"},
        "creationTimestamp": {"type": ["string", "null"], "format": "date-time"},
        "hostnames": _STRINGS,
        "rules": {"type": "array", "items": _RULE},
    },
}

OUTBOUND_POLICY_SCHEMA: dict[str, Any] = {
    "$schema": "https://json-schema.org/draft/2020-12/schema",
    "$id": SCHEMA_PATH,
    "title": "interlock outbound policy",
    "description": "The policy of one Service port as seen from one client namespace "
    "(docs/policy-api.md).",
    "type": "object",
    "required": [
        "namespace",
        "service",
        "port",
        "clientNamespace",
        "protocol",
        "failureAccrual",
        "routes",
    ],
    "properties": {
        "namespace": {"type": "string"},
        "service": {"type": "string"},
        "port": {"type": "integer", "minimum": 1, "maximum": 65535},
        "clientNamespace": {"type": "string"},
        "protocol": {"enum": ["detect", "http1", "http2", "grpc", "tls", "opaque"]},
        "failureAccrual": {
            "type": ["object", "null"],
            "required": ["kind", "maxFailures", "minPenalty", "maxPenalty", "jitterRatio"],
            "properties": {
                "kind": {"const": "consecutive"},
                "maxFailures": {"type": "integer", "minimum": 1},
                "minPenalty": _DURATION,
                "maxPenalty": _DURATION,
                "jitterRatio": {"type": "number", "minimum": 0, "maximum": 100},
            },
        },
        "routes": {"type": "array", "minItems": 1, "items": _ROUTE},
    },
}
"""The JSON Schema (draft 2020-12) every served policy document satisfies."""
