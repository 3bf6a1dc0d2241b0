"""An HTTPRoute, GRPCRoute or TLSRoute as the Gateway half reads it: the kinds table's parser
of their Gateway rows (``controller/kinds.py``).

The Gateway side reads a route its own way, not as the mesh does: it takes interlock's
ModuleSet ExtensionRef filters and the RequestMirror filters out of an HTTPRoute's rules first
(:func:`~interlock.model.gateway_modules.take_module_filters`,
:func:`~interlock.model.gateway_mirrors.take_mirror_filters`), then parses what is left. A
route that still does not parse is not dropped: it becomes a
:class:`~interlock.model.gateway_routes.RejectedRoute`, so the Gateways it names report why
(``Accepted: False``, ``UnsupportedValue``) instead of never hearing of it. So these parsers
never raise for a route: every change reaches the GatewayController as a typed value.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from interlock.model.gateway import HTTPRequestMirrorFilter, ParentReference, parse_http_route
from interlock.model.gateway_mirrors import take_mirror_filters
from interlock.model.gateway_modules import take_module_filters
from interlock.model.gateway_routes import GatewayRoute, RejectedRoute
from interlock.model.grpc_route import parse_grpc_route
from interlock.model.meta import InvalidObject, ObjectKey
from interlock.model.stream_routes import parse_tls_route

GATEWAY_GROUP = "gateway.networking.k8s.io"


@dataclass(frozen=True, slots=True)
class GatewayRouteInput:
    """One route as the GatewayController keeps it."""

    route: GatewayRoute | RejectedRoute | None
    """The route parsed (its interlock filters taken out), rejected with why, or None: it
    names no Gateway or ListenerSet (any more), so the Gateways forget it."""
    module_names: Mapping[int, tuple[str, ...]] = field(default_factory=dict)
    """By rule index: the ModuleSets the rule's ExtensionRef filters name."""
    mirror_filters: Mapping[int, tuple[HTTPRequestMirrorFilter | str, ...]] = field(
        default_factory=dict
    )
    """By rule index: its RequestMirror filters (as written, or why one does not parse)."""


def names_a_gateway(raw: dict[str, Any]) -> bool:
    """Whether a raw route's parentRefs name a Gateway or a ListenerSet (group and kind
    default to Gateway's)."""
    spec = raw.get("spec")
    refs = spec.get("parentRefs") if isinstance(spec, dict) else None
    for ref in refs if isinstance(refs, list) else ():
        if (
            isinstance(ref, dict)
            and ref.get("kind", "Gateway") in ("Gateway", "ListenerSet")
            and ref.get("group", GATEWAY_GROUP) == GATEWAY_GROUP
        ):
            return True
    return False


def read_gateway_http_route(raw: dict[str, Any]) -> GatewayRouteInput:
    """An HTTPRoute for the Gateways: its ModuleSet and mirror filters taken out, the rest
    parsed (or rejected)."""
    if not names_a_gateway(raw):
        return GatewayRouteInput(None)
    stripped, names = take_module_filters(raw)
    stripped, mirrors = take_mirror_filters(stripped)
    route = _parse_or_reject("HTTPRoute", stripped, parse_http_route)
    return GatewayRouteInput(route, names, mirrors)


def read_gateway_grpc_route(raw: dict[str, Any]) -> GatewayRouteInput:
    """A GRPCRoute for the Gateways: parsed, or rejected."""
    if not names_a_gateway(raw):
        return GatewayRouteInput(None)
    return GatewayRouteInput(_parse_or_reject("GRPCRoute", raw, parse_grpc_route))


def read_gateway_tls_route(raw: dict[str, Any]) -> GatewayRouteInput:
    """A TLSRoute for the Gateways (TLS passthrough listeners): parsed, or rejected."""
    if not names_a_gateway(raw):
        return GatewayRouteInput(None)
    return GatewayRouteInput(_parse_or_reject("TLSRoute", raw, parse_tls_route))


def _parse_or_reject(
    kind: str, raw: dict[str, Any], parse: Callable[[dict[str, Any]], GatewayRoute]
) -> GatewayRoute | RejectedRoute:
    try:
        return parse(raw)
    except InvalidObject as error:
        found_meta = raw.get("metadata")
        meta: dict[str, Any] = found_meta if isinstance(found_meta, dict) else {}
        status = raw.get("status")
        stored = status.get("parents") if isinstance(status, dict) else None
        return RejectedRoute(
            key=ObjectKey(namespace=str(meta.get("namespace", "")), name=str(meta.get("name"))),
            generation=int(meta.get("generation") or 0),
            parent_refs=_parent_refs(raw),
            message=str(error),
            stored_parents=tuple(p for p in stored or () if isinstance(p, dict)),
            kind=kind,
        )


def _parent_refs(raw: dict[str, Any]) -> tuple[ParentReference, ...]:
    """The parentRefs of a route that failed to parse (those that parse on their own)."""
    spec = raw.get("spec")
    refs = spec.get("parentRefs") if isinstance(spec, dict) else None
    found: list[ParentReference] = []
    for ref in refs if isinstance(refs, list) else ():
        try:
            found.append(ParentReference.model_validate(ref))
        except ValueError:
            continue
    return tuple(found)
