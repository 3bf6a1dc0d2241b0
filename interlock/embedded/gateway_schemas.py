"""The Gateway API schemas the embedded server installs when given no CRDs.

``interlock run --embedded`` and most tests start without the Gateway API release on disk, so
the server pre-creates the HTTPRoute, GRPCRoute, TLSRoute, TCPRoute and ReferenceGrant CRDs
itself. Their schemas carry the upstream (v1.6.1)
constraints, defaults and the CEL rules on every field interlock reads — parent and backend
references, hostnames, matches, the four filters it implements, timeouts — so that a route the
embedded server admits is one a real cluster admits too (a backend weight of -5, a relative path
or a filter without its block are refused at the API, as they are by kube-apiserver, instead of
reaching the controller). Fields interlock does not read (the CORS, mirror and extension
filters, status) are kept as they come. Applying the real CRDs replaces these schemas.
"""

from __future__ import annotations

from typing import Any

Schema = dict[str, Any]

_DNS_SUBDOMAIN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
_GROUP = {"type": "string", "maxLength": 253, "pattern": r"^$|" + _DNS_SUBDOMAIN}
_KIND = {
    "type": "string",
    "minLength": 1,
    "maxLength": 63,
    "pattern": r"^[a-zA-Z]([-a-zA-Z0-9]*[a-zA-Z0-9])?$",
}
_NAME = {"type": "string", "minLength": 1, "maxLength": 253}
_NAMESPACE = {
    "type": "string",
    "minLength": 1,
    "maxLength": 63,
    "pattern": r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$",
}
_PORT = {"type": "integer", "format": "int32", "minimum": 1, "maximum": 65535}
_HOSTNAME = {"type": "string", "minLength": 1, "maxLength": 253, "pattern": _DNS_SUBDOMAIN}
_HEADER_NAME = {
    "type": "string",
    "minLength": 1,
    "maxLength": 256,
    "pattern": r"^[A-Za-z0-9!#$%&'*+\-.^_\x60|~]+$",
}
_DURATION = {"type": "string", "pattern": r"^([0-9]{1,5}(h|m|s|ms)){1,4}$"}
_KEPT: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def _object(properties: dict[str, Any], **extra: Any) -> Schema:
    return {"type": "object", "properties": properties, **extra}


def _array(items: Schema, max_items: int, **extra: Any) -> Schema:
    return {"type": "array", "items": items, "maxItems": max_items, **extra}


def _map_list(items: Schema, max_items: int) -> Schema:
    return _array(
        items,
        max_items,
        **{"x-kubernetes-list-type": "map", "x-kubernetes-list-map-keys": ["name"]},
    )


def _rules(*pairs: tuple[str, str]) -> list[dict[str, str]]:
    return [{"rule": rule, "message": message} for rule, message in pairs]


_PATH_RULES = _rules(
    (
        "(self.type in ['Exact','PathPrefix']) ? self.value.startsWith('/') : true",
        "value must be an absolute path and start with '/' when type one of ['Exact', "
        "'PathPrefix']",
    ),
    *(
        (
            f"(self.type in ['Exact','PathPrefix']) ? !self.value.contains('{part}') : true",
            f"must not contain '{part}' when type one of ['Exact', 'PathPrefix']",
        )
        for part in ("//", "/./", "/../", "%2f", "%2F", "#")
    ),
    *(
        (
            f"(self.type in ['Exact','PathPrefix']) ? !self.value.endsWith('{end}') : true",
            f"must not end with '{end}' when type one of ['Exact', 'PathPrefix']",
        )
        for end in ("/..", "/.")
    ),
)

_HEADER = _object(
    {"name": _HEADER_NAME, "value": {"type": "string", "minLength": 1, "maxLength": 4096}},
    required=["name", "value"],
)
_HEADER_FILTER = _object(
    {
        "add": _map_list(_HEADER, 16),
        "set": _map_list(_HEADER, 16),
        "remove": _array({"type": "string"}, 16, **{"x-kubernetes-list-type": "set"}),
    }
)
_PATH_MODIFIER = _object(
    {
        "type": {"type": "string", "enum": ["ReplaceFullPath", "ReplacePrefixMatch"]},
        "replaceFullPath": {"type": "string", "maxLength": 1024},
        "replacePrefixMatch": {"type": "string", "maxLength": 1024},
    },
    required=["type"],
    **{
        "x-kubernetes-validations": _rules(
            (
                "self.type == 'ReplaceFullPath' ? has(self.replaceFullPath) : true",
                "replaceFullPath must be specified when type is set to 'ReplaceFullPath'",
            ),
            (
                "has(self.replaceFullPath) ? self.type == 'ReplaceFullPath' : true",
                "type must be 'ReplaceFullPath' when replaceFullPath is set",
            ),
            (
                "self.type == 'ReplacePrefixMatch' ? has(self.replacePrefixMatch) : true",
                "replacePrefixMatch must be specified when type is set to 'ReplacePrefixMatch'",
            ),
            (
                "has(self.replacePrefixMatch) ? self.type == 'ReplacePrefixMatch' : true",
                "type must be 'ReplacePrefixMatch' when replacePrefixMatch is set",
            ),
        )
    },
)
_FILTER_FIELDS = {
    "RequestHeaderModifier": "requestHeaderModifier",
    "ResponseHeaderModifier": "responseHeaderModifier",
    "RequestMirror": "requestMirror",
    "RequestRedirect": "requestRedirect",
    "URLRewrite": "urlRewrite",
    "ExtensionRef": "extensionRef",
    "CORS": "cors",
}


def _filter_rules(fields: dict[str, str] = _FILTER_FIELDS) -> list[dict[str, str]]:
    pairs = []
    for filter_type, field in fields.items():
        pairs.append(
            (
                f"!(has(self.{field}) && self.type != '{filter_type}')",
                f"filter.{field} must be nil if the filter.type is not {filter_type}",
            )
        )
        pairs.append(
            (
                f"!(!has(self.{field}) && self.type == '{filter_type}')",
                f"filter.{field} must be specified for {filter_type} filter.type",
            )
        )
    return _rules(*pairs)


_FILTER = _object(
    {
        "type": {"type": "string", "enum": list(_FILTER_FIELDS)},
        "requestHeaderModifier": _HEADER_FILTER,
        "responseHeaderModifier": _HEADER_FILTER,
        "requestRedirect": _object(
            {
                "scheme": {"type": "string", "enum": ["http", "https"]},
                "hostname": _HOSTNAME,
                "path": _PATH_MODIFIER,
                "port": _PORT,
                "statusCode": {
                    "type": "integer",
                    "default": 302,
                    "enum": [301, 302, 303, 307, 308],
                },
            }
        ),
        "urlRewrite": _object({"hostname": _HOSTNAME, "path": _PATH_MODIFIER}),
        "requestMirror": _KEPT,
        "extensionRef": _KEPT,
        "cors": _KEPT,
    },
    required=["type"],
    **{"x-kubernetes-validations": _filter_rules()},
)


def _filters() -> Schema:
    pairs = [
        (
            "!(self.exists(f, f.type == 'RequestRedirect') && self.exists(f, f.type == "
            "'URLRewrite'))",
            "May specify either httpRouteFilterRequestRedirect or httpRouteFilterRequestRewrite, "
            "but not both",
        )
    ]
    for filter_type in ("RequestHeaderModifier", "ResponseHeaderModifier", "RequestRedirect"):
        pairs.append(
            (
                f"self.filter(f, f.type == '{filter_type}').size() <= 1",
                f"{filter_type} filter cannot be repeated",
            )
        )
    pairs.append(
        (
            "self.filter(f, f.type == 'URLRewrite').size() <= 1",
            "URLRewrite filter cannot be repeated",
        )
    )
    return _array(
        _FILTER,
        16,
        **{"x-kubernetes-list-type": "atomic", "x-kubernetes-validations": _rules(*pairs)},
    )


_BACKEND_REF = _object(
    {
        "group": {**_GROUP, "default": ""},
        "kind": {**_KIND, "default": "Service"},
        "name": _NAME,
        "namespace": _NAMESPACE,
        "port": _PORT,
        "weight": {
            "type": "integer",
            "format": "int32",
            "default": 1,
            "minimum": 0,
            "maximum": 1000000,
        },
        "filters": _filters(),
    },
    required=["name"],
    **{
        "x-kubernetes-validations": _rules(
            (
                "(size(self.group) == 0 && self.kind == 'Service') ? has(self.port) : true",
                "Must have port for Service reference",
            )
        )
    },
)
_MATCH_TYPE = {"type": "string", "default": "Exact", "enum": ["Exact", "RegularExpression"]}
_MATCH = _object(
    {
        "path": _object(
            {
                "type": {
                    "type": "string",
                    "default": "PathPrefix",
                    "enum": ["Exact", "PathPrefix", "RegularExpression"],
                },
                "value": {"type": "string", "default": "/", "maxLength": 1024},
            },
            default={"type": "PathPrefix", "value": "/"},
            **{"x-kubernetes-validations": _PATH_RULES},
        ),
        "headers": _map_list(
            _object(
                {
                    "type": _MATCH_TYPE,
                    "name": _HEADER_NAME,
                    "value": {"type": "string", "minLength": 1, "maxLength": 4096},
                },
                required=["name", "value"],
            ),
            16,
        ),
        "queryParams": _map_list(
            _object(
                {
                    "type": _MATCH_TYPE,
                    "name": _HEADER_NAME,
                    "value": {"type": "string", "minLength": 1, "maxLength": 1024},
                },
                required=["name", "value"],
            ),
            16,
        ),
        "method": {
            "type": "string",
            "enum": [
                "GET",
                "HEAD",
                "POST",
                "PUT",
                "DELETE",
                "CONNECT",
                "OPTIONS",
                "TRACE",
                "PATCH",
            ],
        },
    }
)
_DEFAULT_MATCHES = [{"path": {"type": "PathPrefix", "value": "/"}}]
_RULE = _object(
    {
        "name": {**_HOSTNAME},
        "matches": _array(_MATCH, 64, default=_DEFAULT_MATCHES),
        "filters": _filters(),
        "backendRefs": _array(_BACKEND_REF, 16),
        # The experimental channel's rule retry (v1.6.1; interlock serves it): kept here so a server
        # with no CRDs given admits what the experimental CRD admits, not only the standard one.
        "retry": _object(
            {
                "codes": {
                    "type": "array",
                    "items": {"type": "integer", "minimum": 400, "maximum": 599},
                },
                "attempts": {"type": "integer", "minimum": 1},
                "backoff": _DURATION,
            }
        ),
        "timeouts": _object(
            {"request": _DURATION, "backendRequest": _DURATION},
            **{
                "x-kubernetes-validations": _rules(
                    (
                        "!(has(self.request) && has(self.backendRequest) && "
                        "duration(self.request) != duration('0s') && "
                        "duration(self.backendRequest) > duration(self.request))",
                        "backendRequest timeout cannot be longer than request timeout",
                    )
                )
            },
        ),
    },
    **{
        "x-kubernetes-validations": _rules(
            (
                "(has(self.backendRefs) && size(self.backendRefs) > 0) ? (!has(self.filters) || "
                "self.filters.all(f, !has(f.requestRedirect))): true",
                "RequestRedirect filter must not be used together with backendRefs",
            )
        )
    },
)
_PARENT_REF = _object(
    {
        "group": {**_GROUP, "default": "gateway.networking.k8s.io"},
        "kind": {**_KIND, "default": "Gateway"},
        "namespace": _NAMESPACE,
        "name": _NAME,
        "sectionName": {**_HOSTNAME},
        "port": _PORT,
    },
    required=["name"],
)


_SAME_PARENT = (
    "p1.group == p2.group && p1.kind == p2.kind && p1.name == p2.name && "
    "(((!has(p1.__namespace__) || p1.__namespace__ == '') && (!has(p2.__namespace__) || "
    "p2.__namespace__ == '')) || (has(p1.__namespace__) && has(p2.__namespace__) && "
    "p1.__namespace__ == p2.__namespace__ ))"
)
_PARENT_REFS = _array(
    _PARENT_REF,
    32,
    **{
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-validations": _rules(
            (
                f"self.all(p1, self.all(p2, {_SAME_PARENT} ? ((!has(p1.sectionName) || "
                "p1.sectionName == '') == (!has(p2.sectionName) || p2.sectionName == '')) : true))",
                "sectionName must be specified when parentRefs includes 2 or more references to "
                "the same parent",
            ),
            (
                f"self.all(p1, self.exists_one(p2, {_SAME_PARENT} && (((!has(p1.sectionName) || "
                "p1.sectionName == '') && (!has(p2.sectionName) || p2.sectionName == '')) || "
                "(has(p1.sectionName) && has(p2.sectionName) && p1.sectionName == "
                "p2.sectionName))))",
                "sectionName must be unique when parentRefs includes 2 or more references to the "
                "same parent",
            ),
        ),
    },
)
"""Every route kind's ``spec.parentRefs``: two references to one parent need distinct
sectionNames (the upstream CEL rules, identical in the four route CRDs)."""


def httproute_schema() -> Schema:
    """HTTPRoute (v1 and v1beta1 share it): spec constrained, status kept as written."""
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": _object(
                {
                    "parentRefs": _PARENT_REFS,
                    "hostnames": _array(
                        {
                            **_HOSTNAME,
                            "pattern": r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                            r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                        },
                        16,
                    ),
                    "rules": _array(_RULE, 16, minItems=1, default=[{"matches": _DEFAULT_MATCHES}]),
                }
            ),
            "status": _KEPT,
        },
        "required": ["spec"],
    }


def referencegrant_schema() -> Schema:
    """ReferenceGrant: who (``from``) may refer to what (``to``) in the grant's namespace."""
    peer = {"group": _GROUP, "kind": _KIND}
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": _object(
                {
                    "from": _array(
                        _object(
                            {**peer, "namespace": _NAMESPACE},
                            required=["group", "kind", "namespace"],
                        ),
                        16,
                        minItems=1,
                    ),
                    "to": _array(
                        _object(
                            {**peer, "name": _NAME},
                            required=["group", "kind"],
                        ),
                        16,
                        minItems=1,
                    ),
                },
                required=["from", "to"],
            ),
        },
    }


_STREAM_BACKEND_REF = _object(
    {k: v for k, v in _BACKEND_REF["properties"].items() if k != "filters"},
    required=["name"],
    **{"x-kubernetes-validations": _BACKEND_REF["x-kubernetes-validations"]},
)
_STREAM_RULE = _object(
    {
        "name": {**_HOSTNAME},
        "backendRefs": _array(
            _STREAM_BACKEND_REF, 16, minItems=1, **{"x-kubernetes-list-type": "atomic"}
        ),
    },
    required=["backendRefs"],
)
_LABEL = r"[a-z0-9]([-a-z0-9]*[a-z0-9])?"
_RFC1123 = rf"^({_LABEL}(\\.{_LABEL})*)$"
_SNI_HOSTNAMES = _array(
    {**_HOSTNAME, "pattern": rf"^(\*\.)?{_LABEL}(\.{_LABEL})*$"},
    1024,
    minItems=1,
    **{
        "x-kubernetes-list-type": "atomic",
        "x-kubernetes-validations": _rules(
            ("self.all(h, !isIP(h))", "Hostnames cannot contain an IP"),
            (
                f"self.all(h, !h.contains('*') ? h.matches('{_RFC1123}') : true)",
                "Hostnames must be valid based on RFC-1123",
            ),
            (
                "self.all(h, h.contains('*') ? (h.startsWith('*.') && "
                f"h.substring(2).matches('{_RFC1123}')) : true)",
                "Wildcards on hostnames must be the first label, and the rest of hostname must "
                "be valid based on RFC-1123",
            ),
        ),
    },
)


def stream_route_schema(*, tls: bool) -> Schema:
    """TLSRoute (``tls``: with its required SNI hostnames) or TCPRoute, v1: one rule of 1-16
    weighted backends without filters; status kept as written."""
    properties: dict[str, Any] = {
        "parentRefs": _PARENT_REFS,
        "rules": _array(_STREAM_RULE, 1, minItems=1, **{"x-kubernetes-list-type": "atomic"}),
    }
    if tls:
        properties = {"hostnames": _SNI_HOSTNAMES, **properties}
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": _object(properties, required=["hostnames", "rules"] if tls else ["rules"]),
            "status": _KEPT,
        },
        "required": ["spec"],
    }


_GRPC_FILTER_FIELDS = {
    "RequestHeaderModifier": "requestHeaderModifier",
    "ResponseHeaderModifier": "responseHeaderModifier",
    "RequestMirror": "requestMirror",
    "ExtensionRef": "extensionRef",
}
_GRPC_FILTER = _object(
    {
        "extensionRef": _KEPT,
        "requestHeaderModifier": _HEADER_FILTER,
        "requestMirror": _KEPT,
        "responseHeaderModifier": _HEADER_FILTER,
        "type": {
            "type": "string",
            "enum": [
                "ResponseHeaderModifier",
                "RequestHeaderModifier",
                "RequestMirror",
                "ExtensionRef",
            ],
        },
    },
    required=["type"],
    **{"x-kubernetes-validations": _filter_rules(_GRPC_FILTER_FIELDS)},
)


def _grpc_filters() -> Schema:
    return _array(
        _GRPC_FILTER,
        16,
        **{
            "x-kubernetes-list-type": "atomic",
            "x-kubernetes-validations": _rules(
                *(
                    (
                        f"self.filter(f, f.type == '{filter_type}').size() <= 1",
                        f"{filter_type} filter cannot be repeated",
                    )
                    for filter_type in ("RequestHeaderModifier", "ResponseHeaderModifier")
                )
            ),
        },
    )


_GRPC_METHOD = _object(
    {
        "method": {"type": "string", "maxLength": 1024},
        "service": {"type": "string", "maxLength": 1024},
        "type": {"type": "string", "default": "Exact", "enum": ["Exact", "RegularExpression"]},
    },
    **{
        "x-kubernetes-validations": _rules(
            (
                "has(self.type) ? has(self.service) || has(self.method) : true",
                "One or both of 'service' or 'method' must be specified",
            ),
            (
                "(!has(self.type) || self.type == 'Exact') && has(self.service) ? "
                'self.service.matches(r"""^(?i)\\.?[a-z_][a-z_0-9]*'
                '(\\.[a-z_][a-z_0-9]*)*$"""): true',
                "service must only contain valid characters (matching "
                "^(?i)\\.?[a-z_][a-z_0-9]*(\\.[a-z_][a-z_0-9]*)*$)",
            ),
            (
                "(!has(self.type) || self.type == 'Exact') && has(self.method) ? "
                'self.method.matches(r"""^[A-Za-z_][A-Za-z_0-9]*$"""): true',
                "method must only contain valid characters (matching ^[A-Za-z_][A-Za-z_0-9]*$)",
            ),
        )
    },
)
_GRPC_MATCH = _object(
    {
        "headers": _map_list(
            _object(
                {
                    "name": _HEADER_NAME,
                    "type": _MATCH_TYPE,
                    "value": {"type": "string", "minLength": 1, "maxLength": 4096},
                },
                required=["name", "value"],
            ),
            16,
        ),
        "method": _GRPC_METHOD,
    }
)
_GRPC_BACKEND_REF = _object(
    {
        **{k: v for k, v in _BACKEND_REF["properties"].items() if k != "filters"},
        "filters": _grpc_filters(),
    },
    required=["name"],
    **{"x-kubernetes-validations": _BACKEND_REF["x-kubernetes-validations"]},
)
_GRPC_RULE = _object(
    {
        "backendRefs": _array(_GRPC_BACKEND_REF, 16, **{"x-kubernetes-list-type": "atomic"}),
        "filters": _grpc_filters(),
        "matches": _array(_GRPC_MATCH, 64, **{"x-kubernetes-list-type": "atomic"}),
        "name": {**_HOSTNAME},
    }
)


def _total_matches_rule(rules: int = 16) -> str:
    return (
        " + ".join(
            f"(self.size() > {i} ? (has(self[{i}].matches) ? self[{i}].matches.size() : 0) : 0)"
            for i in range(rules)
        )
        + " <= 128"
    )


def grpcroute_schema() -> Schema:
    """GRPCRoute (v1): spec constrained as upstream (method and header matches, the four filter
    types with their one-block rules, weighted backends with their own filters, rule names, at
    most 128 matches in all); status kept as written."""
    return {
        "type": "object",
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object"},
            "spec": _object(
                {
                    "hostnames": _array(
                        {
                            **_HOSTNAME,
                            "pattern": r"^(\*\.)?[a-z0-9]([-a-z0-9]*[a-z0-9])?"
                            r"(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$",
                        },
                        16,
                        **{"x-kubernetes-list-type": "atomic"},
                    ),
                    "parentRefs": _PARENT_REFS,
                    "rules": _array(
                        _GRPC_RULE,
                        16,
                        **{
                            "x-kubernetes-list-type": "atomic",
                            "x-kubernetes-validations": _rules(
                                (
                                    _total_matches_rule(),
                                    "While 16 rules and 64 matches per rule are allowed, the "
                                    "total number of matches across all rules in a route must "
                                    "be less than 128",
                                )
                            ),
                        },
                    ),
                }
            ),
            "status": _KEPT,
        },
        "required": ["spec"],
    }
