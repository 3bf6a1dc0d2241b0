"""HTTPRoute and ReferenceGrant parsing: Gateway API defaults, and bad values named by field."""

import copy
from typing import Any

import pytest

from interlock.model.gateway import (
    GATEWAY_GROUP,
    HTTPRoute,
    parse_gateway_duration,
    parse_http_route,
    parse_reference_grant,
)
from interlock.model.meta import InvalidObject, ObjectKey


def _route(spec: dict[str, Any], version: str = "v1") -> dict[str, Any]:
    return {
        "apiVersion": f"gateway.networking.k8s.io/{version}",
        "kind": "HTTPRoute",
        "metadata": {"name": "web", "namespace": "shop", "generation": 3},
        "spec": spec,
    }


FULL_SPEC: dict[str, Any] = {
    "parentRefs": [
        {"group": "core", "kind": "Service", "name": "web", "port": 80},
        {"name": "edge-gateway", "sectionName": "https"},
    ],
    "hostnames": ["web.shop.svc"],
    "rules": [
        {
            "name": "api",
            "matches": [
                {
                    "path": {"type": "Exact", "value": "/api"},
                    "headers": [{"name": "x-user", "value": "a"}],
                    "queryParams": [{"type": "RegularExpression", "name": "v", "value": "[0-9]+"}],
                    "method": "POST",
                }
            ],
            "filters": [
                {
                    "type": "RequestHeaderModifier",
                    "requestHeaderModifier": {
                        "set": [{"name": "x-a", "value": "1"}],
                        "remove": ["x-b"],
                    },
                },
                {
                    "type": "URLRewrite",
                    "urlRewrite": {"path": {"type": "ReplaceFullPath", "replaceFullPath": "/v2"}},
                },
            ],
            "backendRefs": [
                {"name": "api", "port": 8080, "weight": 0},
                {
                    "name": "api-canary",
                    "namespace": "canary",
                    "port": 8080,
                    "filters": [
                        {
                            "type": "ResponseHeaderModifier",
                            "responseHeaderModifier": {"add": [{"name": "x-c", "value": "y"}]},
                        }
                    ],
                },
            ],
            "timeouts": {"request": "1m30s", "backendRequest": "10s"},
        },
        {
            "filters": [
                {
                    "type": "RequestRedirect",
                    "requestRedirect": {"scheme": "https", "statusCode": 301},
                }
            ]
        },
    ],
    "unknownField": {"ignored": True},
}


@pytest.mark.parametrize("version", ["v1", "v1beta1"])
def test_full_route_is_read_with_gateway_defaults(version: str) -> None:
    route = parse_http_route(_route(FULL_SPEC, version))
    assert route.key == ObjectKey(namespace="shop", name="web")
    assert route.metadata.generation == 3
    service_parent, gateway_parent = route.spec.parent_refs
    # Kept as written, so the status can echo it; "core" still names the core group.
    assert (service_parent.group, service_parent.is_service) == ("core", True)
    assert (gateway_parent.group, gateway_parent.kind) == (GATEWAY_GROUP, "Gateway")
    assert not gateway_parent.is_service
    assert gateway_parent.section_name == "https"
    api, redirect = route.spec.rules
    assert api.name == "api"
    match = api.matches[0]
    assert (match.path.type, match.path.value, match.method) == ("Exact", "/api", "POST")
    assert match.headers[0].type == "Exact"
    assert match.query_params[0].type == "RegularExpression"
    first, second = api.backend_refs
    assert (first.group, first.kind, first.weight, first.namespace) == ("", "Service", 0, None)
    assert (second.weight, second.namespace) == (1, "canary")
    assert second.filters[0].response_header_modifier is not None
    assert api.timeouts is not None
    assert (api.timeouts.request, api.timeouts.backend_request) == ("1m30s", "10s")
    assert redirect.matches[0].path.type == "PathPrefix"
    assert redirect.matches[0].path.value == "/"
    assert redirect.filters[0].request_redirect is not None
    assert redirect.filters[0].request_redirect.status_code == 301


def test_wildcard_hostnames_are_accepted() -> None:
    route = parse_http_route(_route({"hostnames": ["*.shop.example", "web"]}))
    assert route.spec.hostnames == ("*.shop.example", "web")


def test_empty_route_gets_one_catch_all_rule() -> None:
    route = parse_http_route(_route({}))
    assert len(route.spec.rules) == 1
    (match,) = route.spec.rules[0].matches
    assert (match.path.type, match.path.value) == ("PathPrefix", "/")
    assert route.spec.rules[0].backend_refs == ()


def test_empty_matches_mean_match_everything() -> None:
    route = parse_http_route(_route({"rules": [{"matches": []}]}))
    assert route.spec.rules[0].matches[0].path.value == "/"


def test_status_parents_are_kept_verbatim() -> None:
    raw = _route({})
    entry = {
        "parentRef": {"name": "gw"},
        "controllerName": "example.com/gateway",
        "conditions": [{"type": "Accepted", "status": "True", "futureField": 1}],
    }
    raw["status"] = {"parents": [entry]}
    route = parse_http_route(raw)
    assert route.status.parents == (entry,)


def _with(path: list[str | int], value: Any) -> dict[str, Any]:
    spec = copy.deepcopy(FULL_SPEC)
    target: Any = spec
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    return spec


BAD_ROUTES = [
    (_with(["rules", 0, "backendRefs", 0, "weight"], -1), "spec.rules[0].backendRefs[0].weight"),
    (
        _with(["rules", 0, "backendRefs", 1, "weight"], 1_000_001),
        "spec.rules[0].backendRefs[1].weight",
    ),
    (_with(["rules", 0, "backendRefs", 0, "port"], 0), "spec.rules[0].backendRefs[0].port"),
    (_with(["rules", 0, "backendRefs", 0, "name"], ""), "spec.rules[0].backendRefs[0].name"),
    (_with(["parentRefs", 0, "port"], 65536), "spec.parentRefs[0].port"),
    (_with(["rules", 0, "matches", 0, "path", "value"], "api"), "spec.rules[0].matches[0].path"),
    (
        _with(["rules", 0, "matches", 0, "path"], {"type": "Glob", "value": "/a*"}),
        "spec.rules[0].matches[0].path.type",
    ),
    (
        _with(["rules", 0, "matches", 0, "path"], {"type": "RegularExpression", "value": "/(a"}),
        "spec.rules[0].matches[0].path",
    ),
    (
        _with(["rules", 0, "matches", 0, "headers", 0, "type"], "Prefix"),
        "spec.rules[0].matches[0].headers[0].type",
    ),
    (_with(["rules", 0, "matches", 0, "method"], "FETCH"), "spec.rules[0].matches[0].method"),
    (
        _with(["rules", 0, "filters", 1, "type"], "Bogus"),
        "spec.rules[0].filters[1].type",
    ),
    (
        _with(["rules", 0, "filters", 1, "type"], "RequestHeaderModifier"),
        "spec.rules[0].filters[1]",
    ),
    (
        _with(["rules", 0, "backendRefs", 1, "filters", 0, "type"], "Bogus"),
        "spec.rules[0].backendRefs[1].filters[0].type",
    ),
    (
        _with(["rules", 1, "filters", 0, "requestRedirect", "statusCode"], 304),
        "spec.rules[1].filters[0].requestRedirect.statusCode",
    ),
    (
        _with(
            ["rules", 0, "filters", 1, "urlRewrite", "path"],
            {"type": "ReplaceFullPath", "replacePrefixMatch": "/x"},
        ),
        "spec.rules[0].filters[1].urlRewrite.path",
    ),
    (_with(["rules", 0, "timeouts", "request"], "10 seconds"), "spec.rules[0].timeouts.request"),
    # Paths a proxy would normalize into something else than what the match compares.
    (_with(["rules", 0, "matches", 0, "path", "value"], "/a//b"), "spec.rules[0].matches[0].path"),
    (
        _with(["rules", 0, "matches", 0, "path", "value"], "/a/../b"),
        "spec.rules[0].matches[0].path",
    ),
    (_with(["rules", 0, "matches", 0, "path", "value"], "/a%2Fb"), "spec.rules[0].matches[0].path"),
    (_with(["rules", 0, "matches", 0, "path", "value"], "/a/.."), "spec.rules[0].matches[0].path"),
    (_with(["rules", 0, "matches", 0, "path", "value"], "/a#b"), "spec.rules[0].matches[0].path"),
    (_with(["hostnames", 0], "Web.Shop"), "spec.hostnames"),
    (_with(["hostnames", 0], "web..shop"), "spec.hostnames"),
    (
        _with(["rules", 1, "filters", 0, "requestRedirect", "hostname"], "*.shop"),
        "spec.rules[1].filters[0].requestRedirect.hostname",
    ),
    (
        _with(["rules", 0, "matches", 0, "headers", 0, "name"], "x user"),
        "spec.rules[0].matches[0].headers[0].name",
    ),
    # The CRD's size limits bound the work one route can cause.
    (_with(["rules"], [{}] * 17), "spec.rules"),
    (
        _with(["rules", 0, "backendRefs"], [{"name": "a", "port": 80}] * 17),
        "spec.rules[0].backendRefs",
    ),
    (
        _with(["rules", 0, "matches", 0, "path", "value"], "/" + "a" * 1024),
        "spec.rules[0].matches[0].path.value",
    ),
    # Header injection through a filter must be impossible.
    (
        _with(
            ["rules", 0, "filters", 0, "requestHeaderModifier", "set", 0, "value"],
            "1\r\nX-Admin: yes",
        ),
        "spec.rules[0].filters[0].requestHeaderModifier.set[0].value",
    ),
    (
        _with(["rules", 0, "filters", 0, "requestHeaderModifier", "set", 0, "name"], "x:a"),
        "spec.rules[0].filters[0].requestHeaderModifier.set[0].name",
    ),
    (
        _with(["rules", 0, "filters", 0, "requestHeaderModifier", "remove", 0], "x\nb"),
        "spec.rules[0].filters[0].requestHeaderModifier.remove",
    ),
    (
        _with(["rules", 0, "timeouts", "backendRequest"], "1.5s"),
        "spec.rules[0].timeouts.backendRequest",
    ),
]


# Values the CRDs' patterns refuse only through their final ``$``, here without and then with a
# trailing newline. The patterns are checked with Python's ``re`` (KubeModel's
# ``regex_engine``), whose ``$`` would accept the newline; ``\Z`` must end every pattern.
CORS = {"type": "CORS", "cors": {"allowOrigins": ["https://a.example"], "allowHeaders": ["X-A"]}}
NEWLINE_ENDED: list[tuple[list[str | int], str]] = [
    (["parentRefs", 0, "group"], "core"),
    (["parentRefs", 0, "kind"], "Service"),
    (["parentRefs", 0, "namespace"], "shop"),
    (["parentRefs", 1, "sectionName"], "https"),
    (["rules", 0, "name"], "api"),
    (["rules", 0, "backendRefs", 1, "namespace"], "canary"),
    (["rules", 0, "backendRefs", 0, "kind"], "Service"),
    (["rules", 0, "matches", 0, "queryParams", 0, "name"], "v"),
    (["rules", 1, "filters", 0, "cors", "allowOrigins", 0], "https://a.example"),
    (["rules", 1, "filters", 0, "cors", "allowHeaders", 0], "X-A"),
]


@pytest.mark.parametrize(("path", "value"), NEWLINE_ENDED)
def test_a_value_ending_in_a_newline_does_not_match_a_crd_pattern(
    path: list[str | int], value: str
) -> None:
    spec = _with(["rules", 1, "filters"], [copy.deepcopy(CORS)])
    target: Any = spec
    for part in path[:-1]:
        target = target[part]
    target[path[-1]] = value
    parse_http_route(_route(copy.deepcopy(spec)))
    target[path[-1]] = value + "\n"
    with pytest.raises(InvalidObject) as err:
        parse_http_route(_route(spec))
    field = "spec" + "".join(f"[{p}]" if isinstance(p, int) else f".{p}" for p in path)
    assert err.value.field == field


REDIRECT = {"type": "RequestRedirect", "requestRedirect": {"scheme": "https"}}
REWRITE = {"type": "URLRewrite", "urlRewrite": {"hostname": "x"}}
PREFIX_REWRITE = {
    "type": "URLRewrite",
    "urlRewrite": {"path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/v2"}},
}

# The HTTPRoute CRD's CEL rules, reported at the rule.
BAD_RULES = [
    ({"filters": [REWRITE, REWRITE]}, "may appear at most once"),
    ({"filters": [REDIRECT, REWRITE]}, "cannot be used together"),
    ({"filters": [REDIRECT], "backendRefs": [{"name": "a", "port": 80}]}, "backendRefs"),
    (
        {"filters": [PREFIX_REWRITE], "matches": [{"path": {"type": "Exact", "value": "/a"}}]},
        "exactly one match, of type PathPrefix",
    ),
    (
        {
            "filters": [PREFIX_REWRITE],
            "matches": [{"path": {"value": "/a"}}, {"path": {"value": "/b"}}],
        },
        "exactly one match, of type PathPrefix",
    ),
    ({"timeouts": {"request": "10s", "backendRequest": "11s"}}, "must not be longer"),
]


@pytest.mark.parametrize(("rule", "reason"), BAD_RULES)
def test_rules_the_crd_would_reject_are_reported(rule: dict[str, Any], reason: str) -> None:
    with pytest.raises(InvalidObject) as err:
        parse_http_route(_route({"rules": [{}, rule]}))
    assert err.value.field.startswith("spec.rules[1]")
    assert reason in err.value.reason


@pytest.mark.parametrize(
    "rule",
    [
        {"filters": [PREFIX_REWRITE], "matches": [{"path": {"value": "/a"}}]},
        {"filters": [REDIRECT]},
        {"timeouts": {"request": "0s", "backendRequest": "1h"}},
        {"timeouts": {"request": "1s", "backendRequest": "1000ms"}},
        {"matches": [{"path": {"type": "Exact", "value": "/a.b/c..d/.well-known"}}]},
        {"matches": [{"headers": [{"name": "X-Custom_header.1~", "value": "a b"}]}]},
    ],
)
def test_rules_the_crd_accepts_are_accepted(rule: dict[str, Any]) -> None:
    parse_http_route(_route({"rules": [rule]}))


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("0s", 0), ("10s", 10), ("1m30s", 90), ("1h", 3600), ("500ms", 0.5), ("1h1m1s1ms", 3661.001)],
)
def test_gateway_durations(text: str, seconds: float) -> None:
    assert parse_gateway_duration(text).total_seconds() == seconds


@pytest.mark.parametrize("text", ["", "1", "1.5s", "1d", "-1s", "1s1s1s1s1s"])
def test_bad_gateway_durations(text: str) -> None:
    with pytest.raises(ValueError, match="duration"):
        parse_gateway_duration(text)


@pytest.mark.parametrize(("spec", "field"), BAD_ROUTES)
def test_bad_route_is_reported_with_object_and_field_path(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidObject) as err:
        parse_http_route(_route(spec))
    assert err.value.field == field
    assert str(err.value).startswith(f"HTTPRoute shop/web: {field}: ")


def test_unknown_filter_type_names_the_valid_ones() -> None:
    spec = _with(["rules", 0, "filters", 1, "type"], "Bogus")
    with pytest.raises(InvalidObject) as err:
        parse_http_route(_route(spec))
    assert "URLRewrite" in err.value.reason
    assert "RequestMirror" in err.value.reason


@pytest.mark.parametrize(
    "unimplemented",
    [
        {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "shadow", "port": 80}}},
        {"type": "ExtensionRef", "extensionRef": {"group": "x.io", "kind": "Thing", "name": "t"}},
    ],
    ids=["RequestMirror", "ExtensionRef"],
)
def test_valid_but_unimplemented_filter_is_refused_naming_what_is_supported(
    unimplemented: dict[str, Any],
) -> None:
    spec = _with(["rules", 0, "filters"], [unimplemented])
    with pytest.raises(InvalidObject) as err:
        parse_http_route(_route(spec))
    assert err.value.field == "spec.rules[0].filters[0]"
    assert f"filter type {unimplemented['type']} is valid but not implemented" in err.value.reason
    assert "supported: RequestHeaderModifier" in err.value.reason


def test_malformed_unimplemented_filter_is_reported_as_malformed() -> None:
    bad = {"type": "RequestMirror", "requestMirror": {"backendRef": {"name": "s"}, "percent": 101}}
    with pytest.raises(InvalidObject) as err:
        parse_http_route(_route(_with(["rules", 0, "filters"], [bad])))
    assert err.value.field == "spec.rules[0].filters[0].requestMirror.percent"


def test_route_without_namespace_is_reported() -> None:
    raw = _route({})
    del raw["metadata"]["namespace"]
    with pytest.raises(InvalidObject) as err:
        parse_http_route(raw)
    assert err.value.field == "metadata.namespace"


def _grant(spec: dict[str, Any], namespace: str = "canary") -> dict[str, Any]:
    return {
        "apiVersion": "gateway.networking.k8s.io/v1beta1",
        "kind": "ReferenceGrant",
        "metadata": {"name": "allow-shop", "namespace": namespace},
        "spec": spec,
    }


GRANT_SPEC = {
    "from": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": "shop"}],
    "to": [{"group": "", "kind": "Service", "name": "api-canary"}],
}


@pytest.mark.parametrize(
    ("grant", "permitted"),
    [
        (_grant(GRANT_SPEC), True),
        (_grant({**GRANT_SPEC, "to": [{"group": "core", "kind": "Service"}]}), True),
        (_grant(GRANT_SPEC, namespace="shop"), False),
        (
            _grant(
                {**GRANT_SPEC, "from": [{"group": "", "kind": "HTTPRoute", "namespace": "shop"}]}
            ),
            False,
        ),
        (
            _grant(
                {
                    **GRANT_SPEC,
                    "from": [{"group": GATEWAY_GROUP, "kind": "GRPCRoute", "namespace": "shop"}],
                }
            ),
            False,
        ),
        (
            _grant(
                {
                    **GRANT_SPEC,
                    "from": [{"group": GATEWAY_GROUP, "kind": "HTTPRoute", "namespace": "other"}],
                }
            ),
            False,
        ),
        (_grant({**GRANT_SPEC, "to": [{"group": "apps", "kind": "Service"}]}), False),
        (_grant({**GRANT_SPEC, "to": [{"group": "", "kind": "Secret"}]}), False),
        (_grant({**GRANT_SPEC, "to": [{"group": "", "kind": "Service", "name": "api"}]}), False),
    ],
)
def test_reference_grant_permits_only_what_it_names(grant: dict[str, Any], permitted: bool) -> None:
    parsed = parse_reference_grant(grant)
    assert (
        parsed.permits(
            from_group=GATEWAY_GROUP,
            from_kind="HTTPRoute",
            from_namespace="shop",
            to_group="",
            to_kind="Service",
            to_namespace="canary",
            to_name="api-canary",
        )
        is permitted
    )


@pytest.mark.parametrize(
    ("spec", "field"),
    [
        ({"to": GRANT_SPEC["to"]}, "spec.from"),
        ({**GRANT_SPEC, "from": []}, "spec.from"),
        ({**GRANT_SPEC, "from": [{"group": "", "kind": "HTTPRoute"}]}, "spec.from[0].namespace"),
        ({**GRANT_SPEC, "to": [{"kind": "Service"}]}, "spec.to[0].group"),
    ],
)
def test_bad_reference_grant_is_reported_with_field_path(spec: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidObject) as err:
        parse_reference_grant(_grant(spec))
    assert err.value.field == field
    assert str(err.value).startswith("ReferenceGrant canary/allow-shop: ")


def test_parsed_route_is_immutable() -> None:
    route: HTTPRoute = parse_http_route(_route(FULL_SPEC))
    with pytest.raises(ValueError, match="frozen"):
        route.spec.rules[0].backend_refs[0].weight = 5  # type: ignore[misc]
