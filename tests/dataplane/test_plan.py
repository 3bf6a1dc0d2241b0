"""decide(): which rule, which backend, what path — or the answer instead — for one request."""

from __future__ import annotations

from collections import Counter

from interlock.dataplane import Answer, Forward, compile_policy, decide
from interlock.dataplane.answers import BACKEND_NOT_FOUND, NO_BACKEND_WEIGHT, NO_ROUTE, REDIRECT
from interlock.model.outbound_policy import build_outbound_policy
from tests.kit.policies import policy, request, service


def backend(name: str, weight: int = 1, **extra: object) -> dict[str, object]:
    return {"name": name, "port": 80, "weight": weight, **extra}


def prefix(value: str) -> list[dict[str, object]]:
    return [{"path": {"type": "PathPrefix", "value": value}}]


def forward(decided: Forward | Answer) -> Forward:
    assert isinstance(decided, Forward), decided
    return decided


def test_rule_by_path_then_rewrite_by_the_matched_prefix() -> None:
    plan = compile_policy(
        policy(
            {"matches": prefix("/api"), "backendRefs": [backend("v1")]},
            {
                "matches": prefix("/api/v2"),
                "backendRefs": [backend("v2")],
                "filters": [
                    {
                        "type": "URLRewrite",
                        "urlRewrite": {
                            "path": {"type": "ReplacePrefixMatch", "replacePrefixMatch": "/"}
                        },
                    }
                ],
            },
        )
    )
    first = forward(decide(plan, request("/api/users"), 0.5))
    assert (first.target.name, first.path) == ("v1", "/api/users")
    second = forward(decide(plan, request("/api/v2/users"), 0.5))
    assert (second.target.name, second.path) == ("v2", "/users")


def test_no_matching_rule_is_no_route() -> None:
    plan = compile_policy(policy({"matches": prefix("/api"), "backendRefs": [backend("v1")]}))
    decided = decide(plan, request("/other"), 0.5)
    assert isinstance(decided, Answer)
    assert (decided.status, decided.reason) == (404, NO_ROUTE)


def test_header_query_and_method_matches() -> None:
    plan = compile_policy(
        policy(
            {"backendRefs": [backend("web")]},
            {
                "matches": [{"headers": [{"name": "X-Version", "value": "2"}]}],
                "backendRefs": [backend("v2")],
            },
            {
                "matches": [{"queryParams": [{"name": "v", "value": "1"}]}],
                "backendRefs": [backend("v1")],
            },
            {"matches": [{"method": "DELETE"}], "backendRefs": [backend("v1")]},
        )
    )
    assert forward(decide(plan, request(headers={"X-Version": "2"}), 0.5)).target.name == "v2"
    assert forward(decide(plan, request(query="v=1"), 0.5)).target.name == "v1"
    assert forward(decide(plan, request(method="DELETE"), 0.5)).target.name == "v1"
    assert forward(decide(plan, request(), 0.5)).target.name == "web"


def test_redirect_answers_with_location_before_any_backend() -> None:
    for status in (301, 302, 303, 307, 308):
        plan = compile_policy(
            policy(
                {
                    "matches": prefix("/old"),
                    "filters": [
                        {
                            "type": "RequestRedirect",
                            "requestRedirect": {
                                "hostname": "new.example",
                                "statusCode": status,
                                "path": {
                                    "type": "ReplacePrefixMatch",
                                    "replacePrefixMatch": "/new",
                                },
                            },
                        }
                    ],
                }
            )
        )
        decided = decide(plan, request("/old/page", query="a=1", host="web.example:8080"), 0.5)
        assert isinstance(decided, Answer)
        assert (decided.status, decided.reason) == (status, REDIRECT)
        assert dict(decided.headers)["Location"] == "http://new.example:8080/new/page?a=1"


def test_weights_follow_the_random_number() -> None:
    plan = compile_policy(policy({"backendRefs": [backend("v1", 1), backend("v2", 3)]}))
    assert forward(decide(plan, request(), 0.0)).target.name == "v1"
    assert forward(decide(plan, request(), 0.24)).target.name == "v1"
    assert forward(decide(plan, request(), 0.25)).target.name == "v2"
    counts = Counter(forward(decide(plan, request(), i / 1000)).target.name for i in range(1000))
    assert counts == {"v1": 250, "v2": 750}


def test_zero_weights_answer_500() -> None:
    plan = compile_policy(policy({"backendRefs": [backend("v1", 0)]}))
    decided = decide(plan, request(), 0.3)
    assert isinstance(decided, Answer) and (decided.status, decided.reason) == (
        500,
        NO_BACKEND_WEIGHT,
    )
    only_v2 = compile_policy(policy({"backendRefs": [backend("v1", 0), backend("v2", 5)]}))
    assert all(forward(decide(only_v2, request(), i / 10)).target.name == "v2" for i in range(10))


def test_missing_backend_answers_its_failure_injector() -> None:
    plan = compile_policy(policy({"backendRefs": [backend("gone")]}))
    decided = decide(plan, request(), 0.5)
    assert isinstance(decided, Answer)
    assert (decided.status, decided.reason) == (500, BACKEND_NOT_FOUND)
    assert decided.detail == "backend Service shop/gone does not exist"


def test_backend_filters_follow_the_rule_filters() -> None:
    rule_header = {
        "type": "RequestHeaderModifier",
        "requestHeaderModifier": {"set": [{"name": "X-Rule", "value": "r"}]},
    }
    backend_header = {
        "type": "RequestHeaderModifier",
        "requestHeaderModifier": {"set": [{"name": "X-Backend", "value": "b"}]},
    }
    plan = compile_policy(
        policy(
            {
                "filters": [rule_header],
                "backendRefs": [backend("v1", 1, filters=[backend_header]), backend("v2", 1)],
            }
        )
    )
    to_v1 = forward(decide(plan, request(), 0.1))
    to_v2 = forward(decide(plan, request(), 0.9))
    assert [e.set for e in to_v1.filters.request_headers] == [
        (("X-Rule", "r"),),
        (("X-Backend", "b"),),
    ]
    assert [e.set for e in to_v2.filters.request_headers] == [(("X-Rule", "r"),)]


def test_timeouts_and_retry_are_compiled_once() -> None:
    plan = compile_policy(
        policy(
            {
                "backendRefs": [backend("v1")],
                "timeouts": {"request": "10s", "backendRequest": "500ms"},
                "retry": {"codes": [503], "attempts": 2, "backoff": "100ms"},
            }
        )
    )
    decided = forward(decide(plan, request(), 0.5))
    assert (decided.deadlines.request, decided.deadlines.attempt) == (10.0, 0.5)
    assert decided.retry is not None
    assert (decided.retry.statuses, decided.retry.retries, decided.retry.backoff) == (
        frozenset({503}),
        2,
        0.1,
    )
    # The Gateway API's retry also sends again a try that got no answer, whatever its codes.
    assert decided.retry.failures


def test_annotations_give_timeouts_retries_and_accrual() -> None:
    plan = compile_policy(
        policy(
            {"backendRefs": [backend("v1")]},
            annotations={
                "timeout.linkerd.io/request": "2s",
                "timeout.linkerd.io/idle": "1s",
                "retry.linkerd.io/http": "5xx",
                "retry.linkerd.io/grpc": "unavailable",
                "retry.linkerd.io/limit": "3",
                "retry.linkerd.io/timeout": "300ms",
                "balancer.linkerd.io/failure-accrual": "consecutive",
            },
        )
    )
    decided = forward(decide(plan, request(), 0.5))
    assert (decided.deadlines.request, decided.deadlines.attempt, decided.deadlines.idle) == (
        2.0,
        0.3,
        1.0,
    )
    assert decided.retry is not None
    assert decided.retry.statuses == frozenset(range(500, 600))
    assert decided.retry.retryable(200, "14") and not decided.retry.retryable(200, "0")
    assert decided.retry.retries == 3
    assert not decided.retry.failures  # Linkerd's annotations retry the statuses they list
    assert decided.accrual is not None and decided.accrual.max_failures == 7


def test_zero_timeout_means_none() -> None:
    plan = compile_policy(policy({"backendRefs": [backend("v1")], "timeouts": {"request": "0s"}}))
    assert forward(decide(plan, request(), 0.5)).deadlines.request is None


def test_the_default_route_takes_the_fast_path() -> None:
    plan = compile_policy(build_outbound_policy(service("web"), "shop", "web", 80, "shop", []))
    assert plan.only is not None and plan.policy.routes[0].kind == "Default"
    decided = forward(decide(plan, request("/anything"), 0.5))
    assert (decided.target.name, decided.path) == ("web", "/anything")


CORS = {
    "type": "CORS",
    "cors": {
        "allowOrigins": ["https://app.example", "https://*.shop.example"],
        "allowMethods": ["GET", "PUT"],
        "allowHeaders": ["X-Token"],
        "exposeHeaders": ["X-Total"],
        "allowCredentials": True,
        "maxAge": 60,
    },
}


def test_cors_preflight_is_answered_by_the_filter() -> None:
    plan = compile_policy(policy({"filters": [CORS], "backendRefs": [backend("v1")]}))
    preflight = request(
        method="OPTIONS",
        headers={"Origin": "https://a.shop.example", "Access-Control-Request-Method": "PUT"},
    )
    decided = decide(plan, preflight, 0.5)
    assert isinstance(decided, Answer) and decided.status == 200
    assert dict(decided.headers) == {
        "Access-Control-Allow-Origin": "https://a.shop.example",
        "Access-Control-Allow-Credentials": "true",
        "Access-Control-Allow-Methods": "GET, PUT",
        "Access-Control-Allow-Headers": "X-Token",
        "Access-Control-Expose-Headers": "X-Total",
        "Access-Control-Max-Age": "60",
        "Vary": "Origin",
    }
    stranger = request(
        method="OPTIONS",
        headers={"Origin": "https://evil.example", "Access-Control-Request-Method": "PUT"},
    )
    refused = decide(plan, stranger, 0.5)
    assert isinstance(refused, Answer) and "Access-Control-Allow-Origin" not in dict(
        refused.headers
    )


def test_cors_headers_on_responses_of_allowed_origins_only() -> None:
    plan = compile_policy(policy({"filters": [CORS], "backendRefs": [backend("v1")]}))
    allowed = forward(decide(plan, request(headers={"Origin": "https://app.example"}), 0.5))
    assert allowed.filters.response_headers[-1].set == (
        ("Access-Control-Allow-Origin", "https://app.example"),
        ("Access-Control-Allow-Credentials", "true"),
        ("Access-Control-Expose-Headers", "X-Total"),
    )
    other = forward(decide(plan, request(headers={"Origin": "https://evil.example"}), 0.5))
    assert other.filters.response_headers == ()


def test_a_grpc_call_to_a_missing_grpc_backend_gets_its_grpc_status() -> None:
    from interlock.model.grpc_route import parse_grpc_route
    from interlock.model.route_resolution import resolve_route

    route = parse_grpc_route(
        {
            "metadata": {"name": "g", "namespace": "shop"},
            "spec": {
                "parentRefs": [{"group": "", "kind": "Service", "name": "web"}],
                "rules": [{"backendRefs": [{"name": "gone", "port": 80}]}],
            },
        }
    )
    web = service("web")
    built = build_outbound_policy(
        web, "shop", "web", 80, "shop", [resolve_route(route, {web.key: web}, [])]
    )
    plan = compile_policy(built)
    call = request("/pkg.Svc/Method", method="POST", headers={"Content-Type": "application/grpc"})
    decided = decide(plan, call, 0.5)
    assert isinstance(decided, Answer)
    assert decided.status == 200 and dict(decided.headers)["grpc-status"] == "14"
    plain = decide(plan, request("/pkg.Svc/Method", method="POST"), 0.5)
    assert isinstance(plain, Answer) and plain.status == 500
