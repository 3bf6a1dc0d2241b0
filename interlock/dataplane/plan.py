"""A policy compiled for the wire, and the decision it makes for one request — pure.

An :class:`~interlock.model.outbound.OutboundPolicy` is the control plane's document: durations
as strings, filters as parsed models, retries from three levels. A data plane needs numbers and
ready-made steps, and it needs them on every request. :func:`compile_policy` turns a policy
into a :class:`PolicyPlan` once, when the policy changes; :func:`decide` then does per request
only what depends on the request: choose the rule (the Gateway API's precedence,
:func:`~interlock.dataplane.matching.select_match`), answer a redirect, choose a backend by weight,
rewrite the path.

What the plan reads from the policy, field by field (``docs/design.md``, "One engine, two front
doors", has the table of what is honoured on the wire):

* ``rules[].timeouts.request`` (else the annotations' ``request``) → :attr:`Deadlines.request`,
  the whole exchange, retries included; ``backendRequest`` (else the annotations'
  ``response``, else the retry's ``timeout``) → :attr:`Deadlines.attempt`, each attempt until
  the response headers; the annotations' ``idle`` → :attr:`Deadlines.idle`, between two reads.
  ``0s`` disables a timeout, as the Gateway API says.
* ``rules[].retry`` → :class:`RetryPlan`; ``failureAccrual`` → the policy's accrual settings.
* ``rules[].filters`` and ``backends[].filters`` → :class:`~interlock.dataplane.filters.FilterPlan`
  (a rule's CORS filter answers preflights here; its response headers join the plan's).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, replace
from datetime import timedelta
from typing import Final
from urllib.parse import quote

from multidict import CIMultiDict, getversion

from interlock.dataplane.answers import (
    BACKEND_NOT_FOUND,
    CORS_PREFLIGHT,
    NO_BACKEND_WEIGHT,
    NO_ROUTE,
    REASONS,
    REDIRECT,
    Answer,
    answer,
)
from interlock.dataplane.filters import (
    EMPTY_FILTERS,
    FilterPlan,
    compile_filters,
    modified_path,
    redirect_location,
)
from interlock.dataplane.matching import pick_backend, select_match
from interlock.model.backend_tls import BackendTLS
from interlock.model.gateway import HTTPRouteMatch, parse_gateway_duration
from interlock.model.outbound import Backend, OutboundPolicy, OutboundRoute, ResolvedRule
from interlock.model.policy_annotations import FailureAccrual, Retry
from interlock.model.service import ServicePortKey

GRPC_CODES = {
    "cancelled": 1,
    "deadline-exceeded": 4,
    "resource-exhausted": 8,
    "internal": 13,
    "unavailable": 14,
}
"""gRPC status numbers of the names ``retry.linkerd.io/grpc`` takes."""

DEFAULT_BACKOFF = 0.025
"""Seconds before the first retry when the policy names no backoff (Linkerd's minimum)."""


@dataclass(frozen=True, slots=True)
class Deadlines:
    """A rule's timeouts in seconds; None means none (the proxy's own bounds still apply)."""

    request: float | None = None
    attempt: float | None = None
    idle: float | None = None


NO_DEADLINES: Final = Deadlines()


@dataclass(frozen=True, slots=True)
class RetryPlan:
    """When and how often to send a request again (only requests whose body can be replayed)."""

    statuses: frozenset[int]
    """Upstream statuses that are retried (the engine's own 502 and 504 count as statuses)."""
    grpc_codes: frozenset[int]
    """``grpc-status`` values (in the response headers) that are retried."""
    retries: int
    """At most this many attempts after the first."""
    backoff: float
    """Seconds before the first retry; doubled before each next one."""
    failures: bool = False
    """Whether a try that got no answer (unreachable, reset, timed out) is retried whatever
    ``statuses`` lists (:attr:`interlock.model.policy_annotations.Retry.retries_failures`)."""

    def retryable(self, status: int, grpc_status: str | None = None) -> bool:
        if status in self.statuses:
            return True
        return (
            grpc_status is not None
            and grpc_status.isdigit()
            and int(grpc_status) in (self.grpc_codes)
        )


@dataclass(frozen=True, slots=True)
class BackendPlan:
    """A backend and the filters requests sent to it get (its rule's, then its own)."""

    backend: Backend
    target: ServicePortKey | None
    """Where it sends (None for a backend that cannot carry traffic)."""
    filters: FilterPlan


@dataclass(frozen=True, slots=True)
class RulePlan:
    route: OutboundRoute
    rule: ResolvedRule
    filters: FilterPlan
    backends: tuple[BackendPlan, ...]
    deadlines: Deadlines
    retry: RetryPlan | None

    @property
    def name(self) -> str:
        """``HTTPRoute ns/name rule N`` (or the rule's name), for logs and access logs."""
        index = self.route.rules.index(self.rule)
        rule = self.rule.name or str(index)
        return f"{self.route.kind} {self.route.namespace}/{self.route.name} rule {rule}"


@dataclass(frozen=True, slots=True)
class PolicyPlan:
    """An :class:`OutboundPolicy` compiled for the wire (:func:`compile_policy`)."""

    policy: OutboundPolicy
    rules: Mapping[int, RulePlan]
    """By ``id()`` of the policy's :class:`ResolvedRule` objects (the plan holds the policy)."""
    only: tuple[RulePlan, HTTPRouteMatch] | None
    """The rule every request takes when the policy has one catch-all rule (the Default route,
    or a route that only splits traffic): then per request no match is evaluated."""
    accrual: FailureAccrual | None


@dataclass(slots=True)
class Forward:
    """The decision to send the request on: where, with which filters, path and deadlines.

    Built per request and never shared, so not frozen: a frozen dataclass costs two to three
    times as much to construct, on the path every request takes."""

    target: ServicePortKey
    rule: RulePlan | None
    """None when no policy is known yet (sent to the Service port itself, unfiltered)."""
    filters: FilterPlan
    path: str
    """The path to request, percent-encoded as the client sent it, rewritten if asked."""
    deadlines: Deadlines
    retry: RetryPlan | None
    accrual: FailureAccrual | None
    upstream_tls: bool = False
    """Speak TLS to the upstream (an Ingress's ``backend-protocol: HTTPS``/``GRPCS``)."""
    backend_tls: BackendTLS | None = None
    """Speak TLS to the upstream and verify it (a Gateway backend's BackendTLSPolicy)."""

    # The dataclass's __init__ written out (the decorator keeps it): in the compiled build
    # (setup.py) a dataclass's generated methods stay interpreted, and one is made per request.
    def __init__(
        self,
        target: ServicePortKey,
        rule: RulePlan | None,
        filters: FilterPlan,
        path: str,
        deadlines: Deadlines,
        retry: RetryPlan | None,
        accrual: FailureAccrual | None,
        upstream_tls: bool = False,
        backend_tls: BackendTLS | None = None,
    ) -> None:
        self.target = target
        self.rule = rule
        self.filters = filters
        self.path = path
        self.deadlines = deadlines
        self.retry = retry
        self.accrual = accrual
        self.upstream_tls = upstream_tls
        self.backend_tls = backend_tls


KnownHead = tuple[CIMultiDict[str], bytes, str, str, int]
"""The upstream request head of one request's headers, known as bytes already
(``steps.decide_now``: the client's lines as received, ``http1_server.head_as_sent``, and the
``X-Forwarded-*`` lines the edge appends): ``(headers, head, method, target, version)``, where
``head`` is what ``http1.request_head`` would make of ``headers`` for a ``method`` request
without a body to ``target``, made without their items, while they are unchanged since
(``version``, ``multidict.getversion``: any change, a filter's, a module's, makes them ordinary
headers again).

The headers stay a plain ``CIMultiDict``, so whoever reads them sees what it saw; what is known
of them is kept beside them (it was an interpreted subclass of ``CIMultiDict`` with four
attributes: ~3,900 instructions a request to make and read, compiled). One is kept, the last
made (:func:`remember_head`): the edge's express path sends a request in the same turn it
decides it; a head not found (another request decided in between, a retry later) is made from
the headers, as any other. A tuple, not a class: made in one step in both builds (a class's
``__init__`` is a Python call in the pure one), and read whole, so a reader never mixes two."""


class _LastHead:
    """Where the last :data:`KnownHead` is kept (a compiled object's field: a module global
    that is not ``Final`` is a dict look-up in the compiled build)."""

    __slots__ = ("known",)

    def __init__(self) -> None:
        self.known: KnownHead | None = None


_LAST_HEAD: Final = _LastHead()
multidict_version: Final = getversion
"""``multidict.getversion`` (another number after any change to a multidict), as a ``Final``:
compiled, an imported name is a look-up in the module's dict, a ``Final`` a C static, read as
one by the compiled modules importing it too (``http1_server``, ``steps``). Its stub takes
``MultiDict[object]``, which ``CIMultiDict[str]`` is not (invariant): callers ignore arg-type."""


def remember_head(headers: CIMultiDict[str], head: bytes, method: str, target: str) -> None:
    """Keep ``head`` as what ``headers``, as they are now, make for a ``method`` request
    without a body to ``target`` (:data:`KnownHead`; it replaces the one kept before)."""
    version = multidict_version(headers)  # type: ignore[arg-type]
    known = _LAST_HEAD.known
    if (
        known is not None
        and known[0] is headers
        and known[1] is head
        and known[4] == version
        and known[2] == method
        and known[3] == target
    ):
        return  # kept already (a connection's kept headers again, unchanged: steps.py)
    _LAST_HEAD.known = (headers, head, method, target, version)


def known_head(headers: CIMultiDict[str], method: str, target: str) -> bytes | None:
    """The head :func:`remember_head` kept for ``headers`` (the same object, unchanged since)
    and this request line; None when there is none."""
    known = _LAST_HEAD.known
    if known is None:
        return None
    kept, head, kept_method, kept_target, version = known
    if (
        kept is not headers
        or kept_target != target
        or kept_method != method
        or version != multidict_version(headers)  # type: ignore[arg-type]
    ):
        return None
    return head


@dataclass(slots=True)
class RequestInfo:
    """What the engine needs to know of a request, from either front door (per request, so not
    frozen, as :class:`Forward`)."""

    method: str
    path: str
    """The path to route on (decoded, dot segments removed)."""
    forward_path: str
    """The path to forward (the client's encoding kept)."""
    query: str
    """The raw query string (without ``?``)."""
    query_params: Mapping[str, str]
    headers: Mapping[str, str]
    """Case-insensitive (a ``CIMultiDictProxy``)."""
    scheme: str
    host: str
    """The authority the client used (``Host``), port included when it sent one."""

    # Written out, as Forward's.
    def __init__(
        self,
        method: str,
        path: str,
        forward_path: str,
        query: str,
        query_params: Mapping[str, str],
        headers: Mapping[str, str],
        scheme: str,
        host: str,
    ) -> None:
        self.method = method
        self.path = path
        self.forward_path = forward_path
        self.query = query
        self.query_params = query_params
        self.headers = headers
        self.scheme = scheme
        self.host = host


def _seconds(text: str | None) -> float | None:
    if text is None:
        return None
    value = parse_gateway_duration(text)
    return None if value == timedelta(0) else value.total_seconds()


def _deadlines(rule: ResolvedRule, retry: Retry | None) -> Deadlines:
    timeouts = rule.timeouts
    annotated = dict(rule.annotated_timeouts)
    request = (timeouts.request if timeouts else None) or annotated.get("request")
    attempt = (
        (timeouts.backend_request if timeouts else None)
        or annotated.get("response")
        or (retry.timeout if retry is not None else None)
    )
    found = Deadlines(
        request=_seconds(request), attempt=_seconds(attempt), idle=_seconds(annotated.get("idle"))
    )
    return NO_DEADLINES if found == NO_DEADLINES else found


def _retry(retry: Retry | None) -> RetryPlan | None:
    if retry is None:
        return None
    statuses = set(retry.codes)
    for status_range in retry.status_ranges:
        statuses.update(range(status_range.min, status_range.max + 1))
    attempts = 1 if retry.attempts is None else retry.attempts
    if attempts <= 0:
        return None
    backoff = _seconds(retry.backoff) if retry.backoff else None
    return RetryPlan(
        statuses=frozenset(statuses),
        grpc_codes=frozenset(GRPC_CODES[c] for c in retry.grpc_codes if c in GRPC_CODES),
        retries=attempts,
        backoff=DEFAULT_BACKOFF if backoff is None else backoff,
        failures=retry.retries_failures,
    )


def _compile_rule(route: OutboundRoute, rule: ResolvedRule) -> RulePlan:
    filters = compile_filters(rule.filters)
    retry = rule.effective_retry
    return RulePlan(
        route=route,
        rule=rule,
        filters=filters,
        backends=tuple(
            BackendPlan(
                backend=backend,
                target=ServicePortKey(backend.namespace, backend.name, backend.port)
                if backend.exists and backend.port is not None
                else None,
                filters=filters.then(compile_filters(backend.filters))
                if backend.filters
                else filters,
            )
            for backend in rule.backends
        ),
        deadlines=_deadlines(rule, retry),
        retry=_retry(retry),
    )


def _catch_all(rule: ResolvedRule) -> HTTPRouteMatch | None:
    for match in rule.matches:
        if (
            match.path.type == "PathPrefix"
            and match.path.value.rstrip("/") == ""
            and match.method is None
            and not match.headers
            and not match.query_params
        ):
            return match
    return None


def compile_policy(policy: OutboundPolicy) -> PolicyPlan:
    """Compile ``policy`` once; :func:`decide` uses the result for every request."""
    rules: dict[int, RulePlan] = {}
    for route in policy.routes:
        for rule in route.rules:
            rules[id(rule)] = _compile_rule(route, rule)
    only: tuple[RulePlan, HTTPRouteMatch] | None = None
    if len(policy.routes) == 1 and len(policy.routes[0].rules) == 1:
        rule = policy.routes[0].rules[0]
        match = _catch_all(rule)
        if match is not None:
            only = (rules[id(rule)], match)
    return PolicyPlan(policy=policy, rules=rules, only=only, accrual=policy.failure_accrual)


def unrouted(target: ServicePortKey, request: RequestInfo) -> Forward:
    """The decision while no policy is known for ``target``: the Service port itself, as the
    policy would send it with no route attached."""
    return unrouted_path(target, request.forward_path)


def unrouted_path(target: ServicePortKey, forward_path: str) -> Forward:
    """:func:`unrouted` for a front door that has not built a :class:`RequestInfo` (it needs
    none while ``target`` has no policy: the edge's most common case)."""
    # Positional (target, rule, filters, path, deadlines, retry, accrual): keywords to a class
    # cost a dict built and unpacked per request.
    return Forward(target, None, EMPTY_FILTERS, forward_path, NO_DEADLINES, None, None)


def decide(plan: PolicyPlan, request: RequestInfo, rng_value: float) -> Forward | Answer:
    """Where ``request`` goes by ``plan``, or the answer to give instead.

    ``rng_value`` is a uniform random number in [0, 1) for the weighted backend choice.
    No rule matches → 404 ``no-route``; a RequestRedirect → its status with ``Location``;
    every weight 0 → 500 ``no-backend-weight``; a backend that cannot carry traffic → its
    failure injector's status and message (``backend-not-found``).
    """
    if plan.only is not None:
        rule_plan, match = plan.only
    else:
        found = select_match(
            plan.policy,
            method=request.method,
            path=request.path,
            headers=request.headers,
            query=request.query_params,
        )
        if found is None:
            where = f"Service {plan.policy.namespace}/{plan.policy.service} port {plan.policy.port}"
            return answer(NO_ROUTE, f"{where}: no route matches {request.method} {request.path}")
        rule_plan, match = plan.rules[id(found[1])], found[2]
    cors = rule_plan.filters.cors
    if cors is not None and _is_preflight(request):
        return Answer(
            status=200,
            reason=CORS_PREFLIGHT,
            detail=f"{rule_plan.name}: CORS preflight",
            headers=cors.preflight(request.headers),
        )
    if rule_plan.filters.redirect is not None:
        return _redirect(rule_plan.filters, request, match)
    backend = choose_backend(rule_plan, rng_value)
    if backend is None:
        return answer(NO_BACKEND_WEIGHT, f"{rule_plan.name}: every backend has weight 0")
    if backend.filters.redirect is not None:
        return _redirect(backend.filters, request, match)
    if backend.target is None:
        return _injected(backend.backend, request)
    rewrite = backend.filters.rewrite
    path = request.forward_path
    if rewrite is not None and rewrite.path is not None:
        path = modified_path(rewrite.path, path=path, match=match)
    filters = backend.filters
    if filters.cors is not None:
        origin = request.headers.get("origin")
        edits = None if origin is None else filters.cors.response(origin)
        if edits is not None:
            filters = replace(filters, response_headers=(*filters.response_headers, edits))
    return Forward(
        target=backend.target,
        rule=rule_plan,
        filters=filters,
        path=path,
        deadlines=rule_plan.deadlines,
        retry=rule_plan.retry,
        accrual=plan.accrual,
        backend_tls=backend.backend.tls,
    )


def injected_answer(backend: Backend) -> Answer:
    """The answer of a backend that cannot carry traffic (``backend-not-found``): its failure
    injector's status and message, or the usual status naming the backend when it has none."""
    injector = backend.failure_injector
    if injector is None:
        detail = f"backend {backend.namespace}/{backend.name} cannot be used"
        return answer(BACKEND_NOT_FOUND, detail)
    return answer(BACKEND_NOT_FOUND, injector.message, status=injector.status)


def _injected(backend: Backend, request: RequestInfo) -> Answer:
    """A failure injector's answer (:func:`injected_answer`), or for a gRPC call
    (``content-type: application/grpc…``) on a GRPCRoute a trailers-only 200 carrying its
    ``grpc-status``."""
    injector = backend.failure_injector
    if (
        injector is not None
        and injector.grpc_status is not None
        and request.headers.get("content-type", "").startswith("application/grpc")
    ):
        return Answer(
            status=200,
            reason=BACKEND_NOT_FOUND,
            detail=injector.message,
            headers=(
                ("Content-Type", "application/grpc"),
                ("grpc-status", str(injector.grpc_status)),
                # The sentence, not the message: it must not name cluster objects at the edge.
                ("grpc-message", quote(REASONS[BACKEND_NOT_FOUND][1], safe=" ")),
            ),
        )
    return injected_answer(backend)


def _is_preflight(request: RequestInfo) -> bool:
    headers = request.headers
    return (
        request.method == "OPTIONS"
        and "origin" in headers
        and "access-control-request-method" in headers
    )


def choose_backend(rule_plan: RulePlan, rng_value: float) -> BackendPlan | None:
    """The rule's backend for a uniform random ``rng_value`` in [0, 1), by weight; None when
    every weight is 0."""
    backends = rule_plan.backends
    if len(backends) == 1:
        return backends[0] if backends[0].backend.weight > 0 else None
    chosen = pick_backend(rule_plan.rule, rng_value)
    if chosen is None:
        return None
    for backend in backends:
        if backend.backend is chosen:
            return backend
    raise AssertionError("pick_backend chose a backend of another rule")


def _redirect(filters: FilterPlan, request: RequestInfo, match: HTTPRouteMatch) -> Answer:
    redirect = filters.redirect
    assert redirect is not None
    location = redirect_location(
        redirect,
        scheme=request.scheme,
        host=request.host,
        path=request.forward_path,
        query=request.query,
        match=match,
    )
    return Answer(
        status=redirect.status_code,
        reason=REDIRECT,
        detail=location,
        headers=(("Location", location),),
    )
