"""select_route and pick_backend: which rule and backend a request goes to.

The precedence is the Gateway API's: exact path, then the longest prefix (whole segments), then
method, then most header matches, then most query matches; ties go to the oldest route, then
namespace/name, then the first rule.
"""

from typing import Any

import pytest

from interlock.dataplane.matching import pick_backend, select_route
from interlock.model.gateway import parse_http_route
from interlock.model.outbound import Backend, OutboundPolicy, ResolvedRule
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.service import parse_service

WEB = parse_service(
    {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"ports": [{"port": 80}]}}
)


def policy(*routes: tuple[str, str, list[dict[str, Any]]]) -> OutboundPolicy:
    """A policy of routes ``(name, creationTimestamp, rules)``; each rule is named by ``name``."""
    resolved = [
        resolve_route(
            parse_http_route(
                {
                    "metadata": {"name": name, "namespace": "shop", "creationTimestamp": created},
                    "spec": {
                        "parentRefs": [{"group": "", "kind": "Service", "name": "web"}],
                        "rules": rules,
                    },
                }
            ),
            {WEB.key: WEB},
            [],
        )
        for name, created, rules in routes
    ]
    return build_outbound_policy(WEB, "shop", "web", 80, "shop", resolved)


def rule(name: str, **match: Any) -> dict[str, Any]:
    return {"name": name, "matches": [match]}


def path(kind: str, value: str) -> dict[str, str]:
    return {"type": kind, "value": value}


def chosen(
    the_policy: OutboundPolicy,
    request_path: str,
    *,
    method: str = "GET",
    headers: dict[str, str] | None = None,
    query: dict[str, str] | None = None,
) -> str | None:
    found = select_route(
        the_policy, method=method, path=request_path, headers=headers or {}, query=query or {}
    )
    if found is None:
        return None
    route, the_rule = found
    return f"{route.name}:{the_rule.name}"


T0 = "2024-01-01T00:00:00Z"
T1 = "2024-02-01T00:00:00Z"

PATHS = policy(
    (
        "r",
        T0,
        [
            rule("root", path=path("PathPrefix", "/")),
            rule("foo", path=path("PathPrefix", "/foo")),
            rule("foo-bar", path=path("PathPrefix", "/foo/bar/")),
            rule("exact-foo", path=path("Exact", "/foo")),
            rule("regex", path=path("RegularExpression", "/foo/[0-9]+")),
        ],
    )
)


@pytest.mark.parametrize(
    ("request_path", "expected"),
    [
        ("/foo", "r:exact-foo"),  # exact beats any prefix
        ("/foo/", "r:foo"),
        ("/foo/x", "r:foo"),
        ("/foobar", "r:root"),  # prefixes match whole segments only
        ("/foo/bar", "r:foo-bar"),  # a trailing slash on a prefix is not significant
        ("/foo/bar/baz", "r:foo-bar"),  # the longest prefix wins
        ("/foo/barn", "r:foo"),
        ("/foo/42", "r:foo"),  # prefixes rank above regular expressions
        ("/other", "r:root"),
    ],
)
def test_path_precedence(request_path: str, expected: str) -> None:
    assert chosen(PATHS, request_path) == expected


def test_regular_expression_must_match_the_whole_path() -> None:
    only_regex = policy(("r", T0, [rule("regex", path=path("RegularExpression", "/v[0-9]+"))]))
    assert chosen(only_regex, "/v2") == "r:regex"
    assert chosen(only_regex, "/v2/extra") is None


SAME_PATH = policy(
    (
        "r",
        T0,
        [
            rule("plain", path=path("PathPrefix", "/api")),
            rule(
                "query", path=path("PathPrefix", "/api"), queryParams=[{"name": "v", "value": "2"}]
            ),
            rule(
                "two-queries",
                path=path("PathPrefix", "/api"),
                queryParams=[{"name": "v", "value": "2"}, {"name": "beta", "value": "1"}],
            ),
            rule(
                "header",
                path=path("PathPrefix", "/api"),
                headers=[{"name": "X-User", "value": "a"}],
            ),
            rule(
                "two-headers",
                path=path("PathPrefix", "/api"),
                headers=[
                    {"name": "x-user", "value": "a"},
                    {"type": "RegularExpression", "name": "x-team", "value": "blue|green"},
                ],
            ),
            rule("post", path=path("PathPrefix", "/api"), method="POST"),
            rule("longer", path=path("PathPrefix", "/api/v1")),
        ],
    )
)


@pytest.mark.parametrize(
    ("kwargs", "expected"),
    [
        ({}, "r:plain"),
        ({"query": {"v": "2"}}, "r:query"),
        ({"query": {"v": "2", "beta": "1"}}, "r:two-queries"),
        ({"query": {"V": "2"}}, "r:plain"),  # query parameter names are case-sensitive
        ({"headers": {"x-user": "a"}}, "r:header"),
        ({"headers": {"X-USER": "a"}}, "r:header"),  # header names are not
        ({"headers": {"x-user": "A"}}, "r:plain"),  # header values are
        ({"headers": {"x-user": "a", "x-team": "green"}}, "r:two-headers"),
        ({"headers": {"x-user": "a", "x-team": "greenish"}}, "r:header"),
        # More headers outrank more query parameters.
        ({"headers": {"x-user": "a"}, "query": {"v": "2", "beta": "1"}}, "r:header"),
        # A method outranks headers and query parameters.
        ({"method": "POST", "headers": {"x-user": "a", "x-team": "blue"}}, "r:post"),
        ({"method": "post"}, "r:post"),
    ],
)
def test_method_header_and_query_precedence(kwargs: dict[str, Any], expected: str) -> None:
    assert chosen(SAME_PATH, "/api/x", **kwargs) == expected


def test_longer_prefix_outranks_method_headers_and_query() -> None:
    assert (
        chosen(SAME_PATH, "/api/v1/x", method="POST", headers={"x-user": "a"}, query={"v": "2"})
        == "r:longer"
    )


def test_ties_go_to_the_oldest_route_then_namespace_name_then_first_rule() -> None:
    same = [
        rule("first", path=path("PathPrefix", "/")),
        rule("second", path=path("PathPrefix", "/")),
    ]
    assert chosen(policy(("b", T1, same), ("a", T1, same), ("c", T0, same)), "/x") == "c:first"
    assert chosen(policy(("b", T1, same), ("a", T1, same)), "/x") == "a:first"


def test_more_specific_match_in_a_newer_route_wins_over_an_older_route() -> None:
    the_policy = policy(
        ("old", T0, [rule("any", path=path("PathPrefix", "/"))]),
        ("new", T1, [rule("api", path=path("PathPrefix", "/api"))]),
    )
    assert chosen(the_policy, "/api/x") == "new:api"
    assert chosen(the_policy, "/x") == "old:any"


def test_any_match_of_a_rule_can_select_it() -> None:
    the_policy = policy(
        (
            "r",
            T0,
            [
                {
                    "name": "a",
                    "matches": [{"path": path("Exact", "/a")}, {"path": path("Exact", "/b")}],
                },
            ],
        )
    )
    assert chosen(the_policy, "/b") == "r:a"


def test_no_match_gives_none() -> None:
    the_policy = policy(("r", T0, [rule("a", path=path("Exact", "/a"), method="GET")]))
    assert chosen(the_policy, "/b") is None
    assert chosen(the_policy, "/a", method="DELETE") is None


def test_default_route_matches_everything() -> None:
    default = build_outbound_policy(WEB, "shop", "web", 80, "shop", [])
    found = select_route(default, method="PATCH", path="/anything", headers={}, query={})
    assert found is not None
    assert found[0].kind == "Default"


def _rule(*weights: int) -> ResolvedRule:
    return ResolvedRule(
        name=None,
        matches=(),
        filters=(),
        timeouts=None,
        backends=tuple(
            Backend(
                kind="Service",
                group="",
                namespace="shop",
                name=f"b{i}",
                port=80,
                weight=w,
                exists=True,
            )
            for i, w in enumerate(weights)
        ),
    )


@pytest.mark.parametrize(
    ("weights", "rng", "expected"),
    [
        ((1, 1), 0.0, "b0"),
        ((1, 1), 0.49, "b0"),
        ((1, 1), 0.5, "b1"),
        ((1, 1), 0.999999, "b1"),
        ((0, 3, 1), 0.0, "b1"),  # weight 0 is never picked, even at the start of the range
        ((0, 3, 1), 0.74, "b1"),
        ((0, 3, 1), 0.76, "b2"),
        ((3, 0), 0.999999, "b0"),  # nor at its end
        ((0, 0), 0.5, None),
        ((), 0.5, None),
    ],
)
def test_pick_backend_is_weighted(
    weights: tuple[int, ...], rng: float, expected: str | None
) -> None:
    picked = pick_backend(_rule(*weights), rng)
    assert (picked.name if picked else None) == expected


def test_pick_backend_shares_follow_weights() -> None:
    rule_ = _rule(1, 0, 3)
    counts: dict[str, int] = {}
    for i in range(1000):
        picked = pick_backend(rule_, i / 1000)
        assert picked is not None
        counts[picked.name] = counts.get(picked.name, 0) + 1
    assert counts == {"b0": 250, "b2": 750}


@pytest.mark.parametrize("rng", [-0.1, 1.0, 2.0])
def test_pick_backend_rejects_numbers_outside_the_unit_interval(rng: float) -> None:
    with pytest.raises(ValueError, match="rng_value"):
        pick_backend(_rule(1), rng)
