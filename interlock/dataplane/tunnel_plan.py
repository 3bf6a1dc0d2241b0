"""Where a CONNECT tunnel to a Service port goes, by that port's policy — pure.

A client of the mesh listener that opens a tunnel (``CONNECT web.shop.svc:5432``, what an
``HTTPS_PROXY`` client sends) carries bytes the listener does not read as requests, so the HTTP
rules of :func:`~interlock.dataplane.plan.decide` do not apply; the routes that route
connections do (``docs/mesh.md``, "Tunnels"):

* a **TCPRoute** (one per port): its rule's backends by weight;
* **TLSRoutes**: the route whose ``hostnames`` match the server name (SNI) of the client's
  ClientHello — an exact name before a wildcard, a longer wildcard before a shorter, then the
  policy's order (oldest first) — then its backends by weight; none matches → ``no-sni-match``
  (Linkerd's proxy closes such a connection too);
* the **Default** route (no route attached): the Service port itself, as Linkerd's opaque
  fallback does for a port that is not known to be HTTP;
* HTTPRoutes or GRPCRoutes: refused (``not-a-tunnel``, 405): their rules choose by path and
  headers, which a tunnel does not have, and tunnelling around them would skip the routing the
  Service's owner set up.

A backend that cannot carry traffic (``exists: false``; a stream route's failure injector says
``refuseConnection``) answers its injector's status as ``backend-not-found``; the front door
decides how a client learns of it (an answer to the CONNECT, or a closed connection once TLS
bytes flow). The result is an ordinary :class:`~interlock.dataplane.plan.Forward`, so the
engine's endpoint choice, failure accrual and answers apply to tunnels unchanged.
"""

from __future__ import annotations

from dataclasses import replace

from interlock.dataplane.answers import (
    NO_BACKEND_WEIGHT,
    NO_SNI_MATCH,
    NOT_A_TUNNEL,
    Answer,
    answer,
)
from interlock.dataplane.filters import EMPTY_FILTERS
from interlock.dataplane.plan import (
    NO_DEADLINES,
    Forward,
    PolicyPlan,
    choose_backend,
    injected_answer,
)
from interlock.model.outbound import OutboundPolicy, OutboundRoute

TLS_ROUTE = "TLSRoute"
STREAM_KINDS = frozenset({"TCPRoute", TLS_ROUTE, "Default"})
"""The route kinds a tunnel is routed by (see the module docstring)."""


def needs_server_name(policy: OutboundPolicy) -> bool:
    """Whether a tunnel to this port is routed by the TLS server name (its routes are
    TLSRoutes): the client's ClientHello must be read first."""
    return any(route.kind == TLS_ROUTE for route in policy.routes)


def hostname_rank(pattern: str, name: str) -> int | None:
    """How specifically a TLSRoute hostname (``db.example.com``, ``*.example.com``) matches a
    server name: higher is more specific, None when it does not match. A wildcard stands for
    one or more labels (``*.example.com`` matches ``a.b.example.com``, not ``example.com``)."""
    pattern = pattern.lower().removesuffix(".")
    if not pattern.startswith("*."):
        return 2 * len(pattern) + 1 if pattern == name else None
    suffix = pattern[1:]
    if name.endswith(suffix) and len(name) > len(suffix):
        return 2 * len(suffix)
    return None


def select_tls_route(
    routes: tuple[OutboundRoute, ...], server_name: str | None
) -> OutboundRoute | None:
    """The TLSRoute whose hostnames match ``server_name`` best (ties: the first listed)."""
    if not server_name:
        return None
    best: tuple[int, OutboundRoute] | None = None
    for route in routes:
        if route.kind != TLS_ROUTE:
            continue
        ranks = [r for h in route.hostnames if (r := hostname_rank(h, server_name)) is not None]
        if ranks and (best is None or max(ranks) > best[0]):
            best = (max(ranks), route)
    return None if best is None else best[1]


def decide_tunnel(
    plan: PolicyPlan, *, server_name: str | None, rng_value: float
) -> Forward | Answer:
    """Where a tunnel to ``plan``'s Service port goes, or the answer to give instead (see the
    module docstring). ``server_name`` is the ClientHello's (only read when
    :func:`needs_server_name`); ``rng_value`` is uniform in [0, 1), for the weights."""
    policy = plan.policy
    where = f"Service {policy.namespace}/{policy.service} port {policy.port}"
    routes = policy.routes
    http = [route for route in routes if route.kind not in STREAM_KINDS]
    if http:
        first = http[0]
        return answer(
            NOT_A_TUNNEL,
            f"{where} is routed by {first.kind} {first.namespace}/{first.name}: "
            "send HTTP requests to it, not CONNECT",
        )
    if needs_server_name(policy):
        route = select_tls_route(routes, server_name)
        if route is None:
            return answer(
                NO_SNI_MATCH, f"{where}: no TLSRoute matches the server name {server_name!r}"
            )
    else:
        route = routes[0]
    rule_plan = plan.rules[id(route.rules[0])]
    backend = choose_backend(rule_plan, rng_value)
    if backend is None:
        return answer(NO_BACKEND_WEIGHT, f"{rule_plan.name}: every backend has weight 0")
    if backend.target is None:
        refused = injected_answer(backend.backend)
        return replace(refused, detail=f"{rule_plan.name}: {refused.detail}")
    return Forward(
        target=backend.target,
        rule=rule_plan,
        filters=EMPTY_FILTERS,
        path="",
        deadlines=NO_DEADLINES,
        retry=None,
        accrual=plan.accrual,
    )
