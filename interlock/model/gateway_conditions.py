"""Status conditions of the Gateway API kinds interlock controls, built one way for all of them.

GatewayClass, Gateway, each listener and each route parent carry ``metav1.Condition`` lists. The
conformance suite (and every user's ``kubectl wait``) reads them by type, status and reason, and
requires ``observedGeneration`` to be the object's current generation. Two rules keep writes
down: a condition whose status did not change keeps its stored ``lastTransitionTime`` (otherwise
every recompute would be a "new" status and a write), and conditions are listed in a fixed order.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

Condition = dict[str, Any]


def timestamp(moment: datetime) -> str:
    """RFC 3339 in UTC, seconds precision: what ``metav1.Time`` serializes to."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def stored_conditions(raw: object) -> dict[str, Mapping[str, Any]]:
    """A stored ``conditions`` list by type (anything malformed is ignored)."""
    if not isinstance(raw, list):
        return {}
    return {c["type"]: c for c in raw if isinstance(c, dict) and isinstance(c.get("type"), str)}


def condition(
    kind: str,
    status: bool,
    reason: str,
    message: str,
    *,
    generation: int,
    stored: Mapping[str, Mapping[str, Any]],
    now: datetime,
) -> Condition:
    """One condition; its ``lastTransitionTime`` is the stored one while its status holds."""
    text = "True" if status else "False"
    before = stored.get(kind)
    since = timestamp(now)
    if before is not None and before.get("status") == text:
        kept = before.get("lastTransitionTime")
        if isinstance(kept, str) and kept:
            since = kept
    return {
        "type": kind,
        "status": text,
        "reason": reason,
        "message": message[:32768],
        "observedGeneration": generation,
        "lastTransitionTime": since,
    }


def without_timestamps(value: Any) -> Any:
    """``value`` with every ``lastTransitionTime`` removed: two statuses that differ only there
    are the same status."""
    if isinstance(value, dict):
        return {k: without_timestamps(v) for k, v in value.items() if k != "lastTransitionTime"}
    if isinstance(value, list):
        return [without_timestamps(v) for v in value]
    return value


def hostname_matches(pattern: str | None, host: str) -> bool:
    """Whether ``host`` (lower case, no port) is covered by a listener or route hostname.

    None covers everything; ``*.example.com`` covers every name with at least one more label in
    front of ``example.com`` (not ``example.com`` itself), as the Gateway API says.
    """
    if pattern is None:
        return True
    if pattern.startswith("*."):
        suffix = pattern[1:]
        return host.endswith(suffix) and len(host) > len(suffix)
    return host == pattern


def intersect_hostnames(listener: str | None, route: Iterable[str]) -> tuple[str, ...] | None:
    """The hostnames a route serves through a listener; None when they do not intersect.

    A route with no hostnames takes the listener's (``()`` when the listener has none: every
    host). Otherwise each route hostname the listener's covers is kept; a wildcard route hostname
    covering the listener's exact (or narrower wildcard) hostname gives the listener's.
    """
    names = tuple(route)
    if not names:
        return () if listener is None else (listener,)
    if listener is None:
        return names
    found: list[str] = []
    for name in names:
        route_wild, listener_wild = name.startswith("*."), listener.startswith("*.")
        if not route_wild and not listener_wild:
            kept = name if name == listener else None
        elif not route_wild:
            kept = name if hostname_matches(listener, name) else None
        elif not listener_wild:
            kept = listener if hostname_matches(name, listener) else None
        elif name.endswith(listener[1:]):
            kept = name  # the route's wildcard is the narrower (or the same)
        elif listener.endswith(name[1:]):
            kept = listener
        else:
            kept = None
        if kept is not None:
            found.append(kept)
    return tuple(dict.fromkeys(found)) or None


def hostname_rank(pattern: str | None) -> tuple[int, int]:
    """How specific a hostname is (smaller sorts first): exact names before wildcards, longer
    before shorter, and no hostname (every host) last."""
    if pattern is None or pattern == "":
        return (2, 0)
    if pattern.startswith("*."):
        return (1, -len(pattern))
    return (0, -len(pattern))
