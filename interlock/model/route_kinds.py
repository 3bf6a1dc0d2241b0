"""Which route kind serves a Service port, and which routes lose to others there.

A client of a Service port speaks one protocol, so its policy can hold routes of one kind only.
Linkerd's outbound API picks that kind by precedence, the first present of GRPCRoute, HTTPRoute,
TLSRoute, TCPRoute (GEP-1426's route types: the more specific kind wins), and serves a single
TCPRoute per port, the oldest, because nothing in a TCP connection can select between two of
them. A route that loses must not look healthy: its ``Accepted`` condition says False, reason
``RouteReasonConflicted`` (Linkerd's reason), naming the route that won.

The policy (:func:`interlock.model.outbound_policy.build_outbound_policy`) and the status
(:func:`interlock.model.route_status.route_status`) both decide with :func:`beats`, so a route
whose status says Accepted is a route the policy serves, and the reverse. Both see the same
routes: the resolutions published on the parent Service's topic.
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import UTC, datetime
from typing import Protocol, TypeVar

KIND_PRECEDENCE: tuple[str, ...] = ("GRPCRoute", "HTTPRoute", "TLSRoute", "TCPRoute")
"""Route kinds from the one that wins a port to the one that loses it."""

CONFLICT_REASON = "RouteReasonConflicted"
"""The ``Accepted`` reason of a route that another route's kind (or age) keeps off a port."""

SINGLE_ROUTE_KINDS = frozenset({"TCPRoute"})
"""Kinds of which a port serves only one route (the oldest): they have nothing to match on."""


class RankedRoute(Protocol):
    """What precedence needs of a route (a resolved route or a route in a policy)."""

    @property
    def kind(self) -> str: ...
    @property
    def namespace(self) -> str: ...
    @property
    def name(self) -> str: ...
    @property
    def creation_timestamp(self) -> datetime | None: ...


def kind_rank(kind: str) -> int:
    """0 for the kind that wins a port over every other; unknown kinds rank last."""
    try:
        return KIND_PRECEDENCE.index(kind)
    except ValueError:
        return len(KIND_PRECEDENCE)


def age_order(route: RankedRoute) -> tuple[bool, datetime, str, str]:
    """Oldest first (a route without a timestamp last), then namespace/name: a total order."""
    created = route.creation_timestamp
    if created is not None and created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return (
        created is None,
        created or datetime.min.replace(tzinfo=UTC),
        route.namespace,
        route.name,
    )


def beats(winner: RankedRoute, loser: RankedRoute) -> bool:
    """Whether ``winner`` keeps ``loser`` off a port both attach to (for the same clients)."""
    if (winner.kind, winner.namespace, winner.name) == (loser.kind, loser.namespace, loser.name):
        return False
    if kind_rank(winner.kind) != kind_rank(loser.kind):
        return kind_rank(winner.kind) < kind_rank(loser.kind)
    return winner.kind in SINGLE_ROUTE_KINDS and age_order(winner) < age_order(loser)


R = TypeVar("R", bound=RankedRoute)


def served_routes(routes: Iterable[R]) -> list[R]:
    """The routes a port serves, oldest first, of the winning kind, among routes attached to it."""
    attached = sorted(routes, key=age_order)
    if not attached:
        return []
    # What :func:`beats` decides pairwise, in one pass: the best kind present, and of a single
    # route kind only the oldest.
    best = min(kind_rank(route.kind) for route in attached)
    served = [route for route in attached if kind_rank(route.kind) == best]
    return served[:1] if served[0].kind in SINGLE_ROUTE_KINDS else served


def kinds_that_beat(kind: str) -> tuple[str, ...]:
    """The kinds of the routes that can keep a route of ``kind`` off a port (the only ones a
    route's status has to know about: a GRPCRoute needs none)."""
    earlier = KIND_PRECEDENCE[: kind_rank(kind)]
    return (*earlier, kind) if kind in SINGLE_ROUTE_KINDS else earlier


def conflict_message(
    winner: RankedRoute, loser: RankedRoute, *, parent: str, ports: Iterable[int]
) -> str:
    """The ``Accepted`` message of ``loser``, which ``winner`` keeps off ``parent``'s ``ports``."""
    shown = ", ".join(str(p) for p in sorted(ports))
    if winner.kind == loser.kind:
        why = f"a port serves one {winner.kind}, the oldest"
    else:
        why = "route kinds take a port in the order " + " > ".join(KIND_PRECEDENCE)
    return (
        f"conflicts with {winner.kind} {winner.namespace}/{winner.name} on {parent} port "
        f"{shown}, which is served instead ({why})"
    )
