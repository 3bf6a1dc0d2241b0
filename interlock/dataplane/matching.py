"""Request-time matching: the route, rule and match a request is sent by, and its backend.

This is how a data plane applies an :class:`~interlock.model.outbound.OutboundPolicy` to a
request (:mod:`interlock.dataplane.plan` compiles a policy once and calls these per request).
Pure: the random number :func:`pick_backend` draws from is the caller's.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from interlock.model.gateway import (
    HTTPPathMatch,
    HTTPRouteMatch,
)
from interlock.model.outbound import Backend, OutboundPolicy, OutboundRoute, ResolvedRule
from interlock.model.route_kinds import age_order


def _route_order(route: OutboundRoute) -> tuple[bool, datetime, str, str]:
    # Oldest first (a route without a timestamp sorts last), then namespace/name: Linkerd's and
    # the Gateway API's tie-break, and a total order so the output never depends on input order.
    return age_order(route)


def _path_rank(path: HTTPPathMatch) -> tuple[int, int]:
    # Gateway API: an exact path beats any prefix, a longer prefix beats a shorter one. The
    # rank of regular expressions is left to implementations; like Linkerd we put them last.
    if path.type == "Exact":
        return (2, len(path.value))
    if path.type == "PathPrefix":
        return (1, len(path.value.rstrip("/")))
    return (0, len(path.value))


def _path_matches(path: HTTPPathMatch, request_path: str) -> bool:
    if path.type == "Exact":
        return request_path == path.value
    if path.type == "PathPrefix":
        # Whole segments only: "/foo" matches "/foo" and "/foo/bar", never "/foobar"; a
        # trailing slash on the prefix is not significant.
        prefix = path.value.rstrip("/")
        return not prefix or request_path == prefix or request_path.startswith(prefix + "/")
    return re.fullmatch(path.value, request_path) is not None


def _value_matches(kind: str, expected: str, actual: str | None) -> bool:
    if actual is None:
        return False
    if kind == "Exact":
        return actual == expected
    return re.fullmatch(expected, actual) is not None


def _match_applies(
    match: HTTPRouteMatch,
    *,
    method: str,
    path: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
) -> bool:
    if match.method is not None and match.method != method.upper():
        return False
    if not _path_matches(match.path, path):
        return False
    if not all(_value_matches(h.type, h.value, headers.get(h.name.lower())) for h in match.headers):
        return False
    return all(_value_matches(q.type, q.value, query.get(q.name)) for q in match.query_params)


def select_route(
    policy: OutboundPolicy,
    *,
    method: str,
    path: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
) -> tuple[OutboundRoute, ResolvedRule] | None:
    """The route and rule a request is sent by (:func:`select_match` without the match)."""
    found = select_match(policy, method=method, path=path, headers=headers, query=query)
    return None if found is None else (found[0], found[1])


def select_match(
    policy: OutboundPolicy,
    *,
    method: str,
    path: str,
    headers: Mapping[str, str],
    query: Mapping[str, str],
) -> tuple[OutboundRoute, ResolvedRule, HTTPRouteMatch] | None:
    """The route, rule and match a request is sent by, using the Gateway API's precedence.

    The match is returned because a ``ReplacePrefixMatch`` rewrite or redirect replaces the
    path prefix of the match that selected the rule.

    Across all routes and rules, the matching ``match`` with: an exact path, else the longest
    path prefix, then a method, then the most header matches, then the most query parameter
    matches wins; ties go to the oldest route, then by namespace/name, then to the first rule.
    Header names compare case-insensitively, query parameter names exactly. None when nothing
    matches (a data plane answers 404).
    """
    lowered = {name.lower(): value for name, value in headers.items()}
    best: tuple[tuple[Any, ...], OutboundRoute, ResolvedRule, HTTPRouteMatch] | None = None
    for route in policy.routes:
        order = _route_order(route)
        for rule_index, rule in enumerate(route.rules):
            for match in rule.matches:
                if not _match_applies(
                    match, method=method, path=path, headers=lowered, query=query
                ):
                    continue
                kind_rank, length = _path_rank(match.path)
                rank = (
                    -kind_rank,
                    -length,
                    match.method is None,
                    -len(match.headers),
                    -len(match.query_params),
                    order,
                    rule_index,
                )
                if best is None or rank < best[0]:
                    best = (rank, route, rule, match)
    return None if best is None else (best[1], best[2], best[3])


def pick_backend(rule: ResolvedRule, rng_value: float) -> Backend | None:
    """The backend a request goes to, given a uniform random number in [0, 1).

    Each backend gets a share of traffic proportional to its weight, including backends that do
    not exist (their share answers 500, as the Gateway API requires). Weight-0 backends are never
    picked; None when every weight is 0 (or there are no backends).
    """
    if not 0.0 <= rng_value < 1.0:
        raise ValueError(f"rng_value must be in [0, 1), got {rng_value}")
    total = sum(b.weight for b in rule.backends)
    if total == 0:
        return None
    target = rng_value * total
    cumulative = 0
    chosen: Backend | None = None
    for backend in rule.backends:
        if backend.weight == 0:
            continue
        cumulative += backend.weight
        chosen = backend
        if target < cumulative:
            return backend
    # Only reached through float rounding at the very top of the range.
    return chosen
