"""Routes on Gateways: which listeners each route attaches to, its status, what each port serves.

An HTTPRoute names Gateways as its parents. Whether it attaches, and to which listeners, depends
on the parentRef (``sectionName``, ``port``), on each listener (is it valid, does it carry
HTTPRoutes, do its ``allowedRoutes`` admit the route's namespace), on hostnames (the route's
and the listener's must intersect) and on the other routes: an HTTPRoute and a GRPCRoute whose
hostnames meet on one listener cannot both be served there (a gRPC call is an HTTP request), so
the older one is (then the first by namespace/name), the other not (``RouteReasonConflicted``,
as on Service parents, naming the winner). The route's author reads the outcome in the route's
``status.parents`` with the Gateway API's reasons (``NoMatchingParent``,
``NotAllowedByListeners``, ``NoMatchingListenerHostname``; ``ResolvedRefs`` False with
``BackendNotFound``, ``InvalidKind`` or ``RefNotPermitted``); the Gateway's owner reads
``attachedRoutes`` per listener. :func:`attach_routes` decides all three at once, as a pure
function of the Gateways, routes, Services, ReferenceGrants and namespace labels, so every
replica computes the same answer whatever order the objects arrived in.

What the data plane serves follows from the same decision (:class:`GatewayServing`): for each
port of a Gateway, its listeners (most specific hostname first) and for each listener its
*virtual hosts* — the hostnames its routes serve there (the intersection of the route's and the
listener's), each with an :class:`~interlock.model.outbound.OutboundPolicy` holding exactly the
routes that serve that hostname. A request is then decided by the one engine of the edge and
the mesh (``interlock/dataplane/``): rule precedence across routes (the Gateway API's order),
filters, weights, and a backend that cannot be used answering 500.

A TLSRoute attaches the same way to a ``protocol: TLS`` listener in ``tls.mode`` Passthrough
(the only listeners carrying TLSRoutes): its virtual hosts are chosen by the ClientHello's
server name, and the engine splices the connection, undecrypted, to the backend of the most
specific TLSRoute hostname (``edge/gateway_passthrough.py``).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import datetime
from typing import Any

from interlock.model.edge import ModuleError
from interlock.model.gateway import (
    GATEWAY_GROUP,
    HTTPRoute,
    ParentReference,
    ReferenceGrant,
    normalize_group,
)
from interlock.model.gateway_class import GATEWAY_CONTROLLER_NAME
from interlock.model.gateway_conditions import (
    condition,
    hostname_matches,
    hostname_rank,
    intersect_hostnames,
    stored_conditions,
    without_timestamps,
)
from interlock.model.gateway_frontend import ClientValidation
from interlock.model.gateway_listeners import (
    AddressProblem,
    CertificatePair,
    Gateway,
    ListenerCheck,
    route_kinds_allowed,
)
from interlock.model.gateway_mirrors import MirrorProblem, RuleMirror
from interlock.model.gateway_modules import RuleModules, with_listener_modules
from interlock.model.grpc_route import GRPCRoute
from interlock.model.listener_sets import ListenerSetOutcome
from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy, OutboundRoute, ResolvedRule
from interlock.model.policy_annotations import Protocol, port_protocol
from interlock.model.route_kinds import CONFLICT_REASON
from interlock.model.route_resolution import resolve_route
from interlock.model.service import Service
from interlock.model.stream_routes import TLSRoute


@dataclass(frozen=True, slots=True)
class GatewayView:
    """One of our Gateways as the route side needs it: checked listeners and its address;
    ``listener_sets``: the ListenerSets naming it (attached or refused) and their listeners."""

    gateway: Gateway
    checks: tuple[ListenerCheck, ...]
    address: str | AddressProblem
    listener_sets: Mapping[ObjectKey, ListenerSetOutcome] = field(default_factory=dict)

    def attached_checks(self) -> tuple[ListenerCheck, ...]:
        """Every listener it serves: its own, then its attached ListenerSets'."""
        merged = list(self.checks)
        for outcome in self.listener_sets.values():
            if outcome.refused is None:
                merged.extend(outcome.checks)
        return tuple(merged)


RouteId = tuple[str, ObjectKey]
"""A route of a Gateway: its kind (``HTTPRoute``, ``GRPCRoute``) and namespace/name."""

GatewayRoute = HTTPRoute | GRPCRoute | TLSRoute
"""The route kinds HTTP and HTTPS listeners carry, and TLS (Passthrough) ones."""


def route_id(route: GatewayRoute | RejectedRoute) -> RouteId:
    if isinstance(route, RejectedRoute):
        return (route.kind, route.key)
    if isinstance(route, TLSRoute):
        return ("TLSRoute", route.key)
    return ("GRPCRoute" if isinstance(route, GRPCRoute) else "HTTPRoute", route.key)


@dataclass(frozen=True, slots=True)
class RejectedRoute:
    """A route that could not be parsed: its parents still hear why (``UnsupportedValue``)."""

    key: ObjectKey
    generation: int
    parent_refs: tuple[ParentReference, ...]
    message: str
    stored_parents: tuple[dict[str, Any], ...] = ()
    kind: str = "HTTPRoute"


RuleKey = tuple[str, str, int]
"""A route rule: the route's namespace and name, and the rule's index."""


@dataclass(frozen=True, slots=True)
class VirtualHost:
    """A hostname a listener serves (None: every host it takes) and the policy serving it;
    ``modules``: the interlock modules of the rules that name ModuleSets."""

    hostname: str | None
    policy: OutboundPolicy
    modules: Mapping[RuleKey, RuleModules] = field(default_factory=dict)
    protocols: Mapping[RuleKey, Protocol] = field(default_factory=dict)
    mirrors: Mapping[RuleKey, tuple[RuleMirror, ...]] = field(default_factory=dict)
    """Where the rules' RequestMirror filters copy requests to."""
    """The upstream protocol of the rules whose backends all speak one other than HTTP/1.1
    (``appProtocol: kubernetes.io/h2c``): every request of such a rule goes up in it."""


@dataclass(frozen=True, slots=True)
class ListenerServing:
    """One usable listener: its hostname, certificates and client validation (HTTPS) and
    virtual hosts."""

    name: str
    hostname: str | None
    certificates: tuple[CertificatePair, ...]
    virtual_hosts: tuple[VirtualHost, ...]
    client_validation: ClientValidation | None = None

    def virtual_host(self, host: str) -> VirtualHost | None:
        """The most specific virtual host covering ``host`` (lower case, no port)."""
        for virtual in self.virtual_hosts:
            if hostname_matches(virtual.hostname, host):
                return virtual
        return None


@dataclass(frozen=True, slots=True)
class PortServing:
    """What one port of a Gateway serves: its protocol and listeners, most specific first."""

    port: int
    protocol: str
    listeners: tuple[ListenerServing, ...]

    def listener(self, host: str) -> ListenerServing | None:
        """The listener a request for ``host`` belongs to (most specific hostname)."""
        for listener in self.listeners:
            if hostname_matches(listener.hostname, host):
                return listener
        return None


@dataclass(frozen=True, slots=True)
class GatewayServing:
    """Everything the data plane serves for one Gateway at its address."""

    gateway: ObjectKey
    address: str
    ports: tuple[PortServing, ...]


@dataclass(frozen=True, slots=True)
class RoutesOutcome:
    """:func:`attach_routes`' result."""

    parents: Mapping[RouteId, tuple[dict[str, Any], ...]]
    """Per route: its ``status.parents`` entries for our Gateways (possibly none)."""
    attached: Mapping[ObjectKey, Mapping[str, int]]
    """Per Gateway: accepted routes per listener name (its own listeners)."""
    listener_set_attached: Mapping[ObjectKey, Mapping[str, int]]
    """Per ListenerSet attached to one of our Gateways: accepted routes per listener name."""
    serving: Mapping[ObjectKey, GatewayServing]
    """Per Gateway with an address: what the data plane serves."""


def is_gateway_ref(ref: ParentReference) -> bool:
    return normalize_group(ref.group) == GATEWAY_GROUP and ref.kind == "Gateway"


def is_listener_set_ref(ref: ParentReference) -> bool:
    return normalize_group(ref.group) == GATEWAY_GROUP and ref.kind == "ListenerSet"


ListenerSlot = tuple[ObjectKey, ObjectKey | None, str]
"""A listener of a Gateway: the Gateway, the ListenerSet declaring it (None: the Gateway
itself) and its name (unique within its declaring object only)."""

ConflictCheck = Callable[[ListenerSlot, str, tuple[str, ...]], OutboundRoute | None]
"""For a route of a kind about to attach to a listener with its hostnames: the route of the
other kind (HTTPRoute, GRPCRoute) attached there first that keeps it off, or None."""


def gateway_parents(route_namespace: str, refs: Iterable[ParentReference]) -> tuple[ObjectKey, ...]:
    """The Gateways a route's parentRefs name (in order, without duplicates)."""
    found: list[ObjectKey] = []
    for ref in refs:
        if is_gateway_ref(ref):
            key = ObjectKey(namespace=ref.namespace or route_namespace, name=ref.name)
            if key not in found:
                found.append(key)
    return tuple(found)


def _stored_entry(
    stored: Iterable[dict[str, Any]], ref: dict[str, Any]
) -> Mapping[str, Mapping[str, Any]]:
    for entry in stored:
        if entry.get("controllerName") == GATEWAY_CONTROLLER_NAME and entry.get("parentRef") == ref:
            return stored_conditions(entry.get("conditions"))
    return {}


def _route_age(route: GatewayRoute) -> tuple[float, str, str]:
    created = route.metadata.creation_timestamp
    return (
        0.0 if created is None else created.timestamp(),
        route.metadata.namespace,
        route.metadata.name,
    )


def attach_routes(
    gateways: Mapping[ObjectKey, GatewayView],
    routes: Iterable[GatewayRoute | RejectedRoute],
    *,
    services: Mapping[ObjectKey, Service],
    grants: Iterable[ReferenceGrant],
    namespace_labels: Mapping[str, Mapping[str, str]],
    now: datetime,
    rule_modules: Mapping[RouteId, Mapping[int, RuleModules]] | None = None,
    rule_mirrors: Mapping[RouteId, Mapping[int, tuple[RuleMirror, ...]]] | None = None,
    mirror_problems: Mapping[RouteId, MirrorProblem] | None = None,
    listener_modules: Mapping[ListenerSlot, RuleModules] | None = None,
) -> RoutesOutcome:
    """Attach ``routes`` to the listeners of ``gateways`` (ours only); see the module docstring.

    ``rule_modules``: per route, the modules of its rules that name ModuleSets
    (:mod:`interlock.model.gateway_modules`); ``listener_modules``: those a Gateway's
    annotations name for a listener, run by every rule served on it."""
    modules_of = rule_modules or {}
    mirrors_of: dict[RouteId, dict[int, tuple[RuleMirror, ...]]] = {}
    mirror_problem_of = dict(mirror_problems or {})
    for key, by_rule in (rule_mirrors or {}).items():
        # Copied when the rule is chosen, before its modules admit the request: not together.
        both = sorted(set(by_rule) & set(modules_of.get(key, {})))
        mirrors_of[key] = {i: m for i, m in by_rule.items() if i not in both}
        if both:
            mirror_problem_of[key] = MirrorProblem(
                "IncompatibleFilters",
                f"{key[0]} {key[1]}: rule {both[0]}: a RequestMirror filter cannot be combined "
                "with interlock's ModuleSet filters on one rule (copies would leave before the "
                "modules admit the request)",
            )
    grant_list = tuple(grants)
    parents: dict[RouteId, tuple[dict[str, Any], ...]] = {}
    attached: dict[ObjectKey, dict[str, int]] = {key: {} for key in gateways}
    set_attached: dict[ObjectKey, dict[str, int]] = {
        key: {}
        for view in gateways.values()
        for key, o in view.listener_sets.items()
        if o.refused is None
    }
    # listener → [(route, effective hostnames)]
    on_listener: dict[ListenerSlot, list[tuple[OutboundRoute, tuple[str, ...]]]] = {}
    ordered = sorted(
        routes,
        key=lambda r: (
            (0.0, r.key.namespace, r.key.name) if isinstance(r, RejectedRoute) else _route_age(r)
        ),
    )
    set_parents = {
        key: gateway_key for gateway_key, view in gateways.items() for key in view.listener_sets
    }
    for route in ordered:
        if isinstance(route, RejectedRoute):
            parents[route_id(route)] = _rejected_entries(route, gateways, set_parents, now=now)
            continue

        def first_of_other_kind(
            slot: ListenerSlot, kind: str, hostnames: tuple[str, ...]
        ) -> OutboundRoute | None:
            return kind_conflict(on_listener.get(slot, ()), kind, hostnames)

        entries, attachments = _route_entries(
            route,
            gateways,
            set_parents,
            conflict=first_of_other_kind,
            modules=modules_of.get(route_id(route), {}),
            mirror_problem=mirror_problem_of.get(route_id(route)),
            services=services,
            grants=grant_list,
            namespace_labels=namespace_labels,
            now=now,
        )
        parents[route_id(route)] = entries
        for slot, (outbound, hostnames) in attachments.items():
            gateway_key, owner, listener_name = slot
            counts = attached[gateway_key] if owner is None else set_attached[owner]
            counts[listener_name] = counts.get(listener_name, 0) + 1
            on_listener.setdefault(slot, []).append((outbound, hostnames))
    serving = {
        key: served
        for key, view in gateways.items()
        if (
            served := _serving(
                view, on_listener, modules_of, mirrors_of, services, listener_modules or {}
            )
        )
        is not None
    }
    return RoutesOutcome(
        parents=parents, attached=attached, listener_set_attached=set_attached, serving=serving
    )


def _our_parent(
    ref: ParentReference,
    route_namespace: str,
    gateways: Mapping[ObjectKey, GatewayView],
    set_parents: Mapping[ObjectKey, ObjectKey],
) -> tuple[GatewayView, ObjectKey | None] | None:
    """The Gateway a parentRef reaches and the ListenerSet it names (None: the Gateway itself);
    None when neither is ours (another controller's, or nobody's)."""
    key = ObjectKey(namespace=ref.namespace or route_namespace, name=ref.name)
    if is_gateway_ref(ref):
        view = gateways.get(key)
        return None if view is None else (view, None)
    if is_listener_set_ref(ref):
        gateway_key = set_parents.get(key)
        return None if gateway_key is None else (gateways[gateway_key], key)
    return None


def _rejected_entries(
    route: RejectedRoute,
    gateways: Mapping[ObjectKey, GatewayView],
    set_parents: Mapping[ObjectKey, ObjectKey],
    *,
    now: datetime,
) -> tuple[dict[str, Any], ...]:
    entries: list[dict[str, Any]] = []
    for ref in route.parent_refs:
        if _our_parent(ref, route.key.namespace, gateways, set_parents) is None:
            continue
        written = ref.as_written()
        stored = _stored_entry(route.stored_parents, written)
        entries.append(
            {
                "parentRef": written,
                "controllerName": GATEWAY_CONTROLLER_NAME,
                "conditions": [
                    condition(
                        "Accepted",
                        False,
                        "UnsupportedValue",
                        route.message,
                        generation=route.generation,
                        stored=stored,
                        now=now,
                    )
                ],
            }
        )
    return tuple(entries)


def _route_entries(
    route: GatewayRoute,
    gateways: Mapping[ObjectKey, GatewayView],
    set_parents: Mapping[ObjectKey, ObjectKey],
    *,
    conflict: ConflictCheck,
    modules: Mapping[int, RuleModules],
    mirror_problem: MirrorProblem | None = None,
    services: Mapping[ObjectKey, Service],
    grants: tuple[ReferenceGrant, ...],
    namespace_labels: Mapping[str, Mapping[str, str]],
    now: datetime,
) -> tuple[
    tuple[dict[str, Any], ...],
    dict[ListenerSlot, tuple[OutboundRoute, tuple[str, ...]]],
]:
    namespace = route.metadata.namespace
    generation = route.metadata.generation
    resolved = resolve_route(route, services, grants, parents=())
    outbound = OutboundRoute(
        kind=route_id(route)[0],
        group=GATEWAY_GROUP,
        namespace=namespace,
        name=route.metadata.name,
        creation_timestamp=route.metadata.creation_timestamp,
        hostnames=route.spec.hostnames,
        rules=resolved.rules,
    )
    unresolved = resolved.unresolved_backends
    module_error = next((m.error for _, m in sorted(modules.items()) if m.error is not None), None)
    entries: list[dict[str, Any]] = []
    attachments: dict[ListenerSlot, tuple[OutboundRoute, tuple[str, ...]]] = {}
    stored_parents = [dict(p) for p in route.status.parents]
    seen: list[dict[str, Any]] = []
    for ref in route.spec.parent_refs:
        found = _our_parent(ref, namespace, gateways, set_parents)
        if found is None:
            continue  # not one of ours (or not there): another controller's, or nobody's
        view, owner = found
        written = ref.as_written()
        if written in seen:
            continue
        seen.append(written)
        stored = _stored_entry(stored_parents, written)

        def make(
            kind: str,
            status: bool,
            reason: str,
            message: str,
            stored: Mapping[str, Mapping[str, Any]] = stored,
        ) -> dict[str, Any]:
            return condition(
                kind, status, reason, message, generation=generation, stored=stored, now=now
            )

        accepted, listeners = _accept(
            route,
            ref,
            view,
            owner,
            namespace_labels=namespace_labels.get(namespace),
            conflict=conflict,
        )
        if listeners:
            for listener_name, hostnames in listeners:
                attachments[(view.gateway.key, owner, listener_name)] = (outbound, hostnames)
            accepted_condition = make("Accepted", True, "Accepted", accepted)
        else:
            reason, _, message = accepted.partition(": ")
            accepted_condition = make("Accepted", False, reason, message)
        if unresolved:
            first = unresolved[0]
            message = first.failure_injector.message if first.failure_injector is not None else ""
            resolved_condition = make(
                "ResolvedRefs", False, first.reason or "BackendNotFound", message
            )
        elif module_error is not None:
            resolved_condition = make(
                "ResolvedRefs", False, module_error.reason, module_error.message
            )
        elif mirror_problem is not None:
            resolved_condition = make(
                "ResolvedRefs", False, mirror_problem.reason, mirror_problem.message
            )
        else:
            resolved_condition = make(
                "ResolvedRefs", True, "ResolvedRefs", "every backend reference is resolved"
            )
        entries.append(
            {
                "parentRef": written,
                "controllerName": GATEWAY_CONTROLLER_NAME,
                "conditions": [accepted_condition, resolved_condition],
            }
        )
    return tuple(entries), attachments


def _accept(
    route: GatewayRoute,
    ref: ParentReference,
    view: GatewayView,
    owner: ObjectKey | None,
    *,
    namespace_labels: Mapping[str, str] | None,
    conflict: ConflictCheck,
) -> tuple[str, list[tuple[str, tuple[str, ...]]]]:
    """The listeners ``route`` attaches to through ``ref`` (name, served hostnames) and a
    sentence; with no listener the sentence is ``Reason: message``. ``owner``: the ListenerSet
    ``ref`` names (its listeners only), None for the Gateway (its own listeners only)."""
    gateway = view.gateway
    kind = route_id(route)[0]
    if owner is None:
        where = f"parentRef Gateway {gateway.key}"
        checks = view.checks
        # allowedRoutes "Same" means the namespace of the object declaring the listener.
        home = gateway.metadata.namespace
    else:
        where = f"parentRef ListenerSet {owner}"
        outcome = view.listener_sets[owner]
        if outcome.refused is not None:
            return (
                f"NotAllowedByListeners: {where}: the ListenerSet is not attached to Gateway "
                f"{gateway.key} ({outcome.refused[0]}; see the ListenerSet's status)",
                [],
            )
        checks = outcome.checks
        home = owner.namespace
    candidates = [
        check
        for check in checks
        if (ref.section_name is None or check.listener.name == ref.section_name)
        and (ref.port is None or check.listener.port == ref.port)
    ]
    if not candidates:
        wanted = []
        if ref.section_name is not None:
            wanted.append(f"sectionName {ref.section_name}")
        if ref.port is not None:
            wanted.append(f"port {ref.port}")
        return f"NoMatchingParent: {where}: no listener has {' and '.join(wanted)}", []
    allowed = [
        check
        for check in candidates
        if check.accepted
        and (GATEWAY_GROUP, kind) in check.supported_kinds
        and route_kinds_allowed(
            check.listener,
            route_namespace=route.metadata.namespace,
            gateway_namespace=home,
            namespace_labels=namespace_labels,
        )
    ]
    if not allowed:
        return (
            f"NotAllowedByListeners: {where}: no listener admits {kind}s from namespace "
            f"{route.metadata.namespace} (see its allowedRoutes)",
            [],
        )
    listeners: list[tuple[str, tuple[str, ...]]] = []
    for check in allowed:
        hostnames = intersect_hostnames(check.listener.hostname, route.spec.hostnames)
        if hostnames is not None:
            listeners.append((check.listener.name, hostnames))
    if not listeners:
        return (
            f"NoMatchingListenerHostname: {where}: none of the route's hostnames "
            f"({', '.join(route.spec.hostnames)}) intersects a listener's hostname",
            [],
        )
    # An HTTPRoute and a GRPCRoute sharing a hostname on one listener: the older one only.
    beaten = [
        (name, winner)
        for name, hostnames in listeners
        if (winner := conflict((gateway.key, owner, name), kind, hostnames)) is not None
    ]
    listeners = [item for item in listeners if item[0] not in {name for name, _ in beaten}]
    if not listeners:
        name, winner = beaten[0]
        return (
            f"{CONFLICT_REASON}: {where}: listener {name}: {winner.kind} "
            f"{winner.namespace}/{winner.name} is attached there first and shares a hostname "
            "with this route (an HTTPRoute and a GRPCRoute sharing a hostname on one listener: "
            "the older is accepted, then the first by namespace/name)",
            [],
        )
    names = ", ".join(name for name, _ in listeners)
    of = f"Gateway {gateway.key}" if owner is None else f"ListenerSet {owner}"
    return f"attached to listener(s) {names} of {of}", listeners


CONFLICTING_KINDS = frozenset({"HTTPRoute", "GRPCRoute"})
"""The route kinds that may not share a hostname on one listener (the GRPCRoute spec)."""


def hostnames_overlap(a: tuple[str, ...], b: tuple[str, ...]) -> bool:
    """Whether two routes' hostnames on one listener share a host (``()``: every host)."""
    if not a or not b:
        return True
    return any(intersect_hostnames(x, (y,)) is not None for x in a for y in b)


def kind_conflict(
    attached: Iterable[tuple[OutboundRoute, tuple[str, ...]]], kind: str, hostnames: tuple[str, ...]
) -> OutboundRoute | None:
    """The first route of ``attached`` (a listener's, oldest first) of the other kind of the
    pair HTTPRoute/GRPCRoute whose hostnames overlap ``hostnames``; None when there is none."""
    if kind not in CONFLICTING_KINDS:
        return None
    for other, other_hostnames in attached:
        if (
            other.kind != kind
            and other.kind in CONFLICTING_KINDS
            and hostnames_overlap(hostnames, other_hostnames)
        ):
            return other
    return None


def _serving(
    view: GatewayView,
    on_listener: Mapping[ListenerSlot, list[tuple[OutboundRoute, tuple[str, ...]]]],
    modules_of: Mapping[RouteId, Mapping[int, RuleModules]],
    mirrors_of: Mapping[RouteId, Mapping[int, tuple[RuleMirror, ...]]],
    services: Mapping[ObjectKey, Service],
    listener_modules: Mapping[ListenerSlot, RuleModules],
) -> GatewayServing | None:
    if not isinstance(view.address, str):
        return None
    gateway = view.gateway
    ports: dict[int, list[ListenerServing]] = {}
    protocols: dict[int, str] = {}
    for check in view.attached_checks():
        if not check.usable:
            continue
        listener = check.listener
        # Unique on the Gateway: a ListenerSet may reuse a name the Gateway (or another) uses.
        # ':' is in no namespace, object or listener name, and '/' must not be in it: the edge
        # reads a served route's listener as what comes before the first '/' of its id.
        name = (
            listener.name
            if check.owner is None
            else f"{check.owner.namespace}:{check.owner.name}:{listener.name}"
        )
        on_this = listener_modules.get((gateway.key, check.owner, listener.name))
        by_host: dict[str | None, list[OutboundRoute]] = {}
        for outbound, hostnames in on_listener.get((gateway.key, check.owner, listener.name), []):
            for hostname in hostnames or (None,):
                by_host.setdefault(hostname, []).append(outbound)
        virtual_hosts = tuple(
            VirtualHost(
                hostname=hostname,
                policy=OutboundPolicy(
                    namespace=gateway.metadata.namespace,
                    service=f"{gateway.metadata.name}/{name}/{hostname or '*'}",
                    port=listener.port,
                    client_namespace=gateway.metadata.namespace,
                    routes=tuple(routes),
                ),
                modules=_host_modules(routes, modules_of, mirrors_of, on_this),
                mirrors={}
                if on_this is not None
                else {
                    (route.namespace, route.name, index): mirrors
                    for route in routes
                    for index, mirrors in mirrors_of.get(
                        (route.kind, ObjectKey(namespace=route.namespace, name=route.name)), {}
                    ).items()
                },
                protocols={
                    (route.namespace, route.name, index): protocol
                    for route in routes
                    for index, rule in enumerate(route.rules)
                    if (protocol := _rule_protocol(rule, services)) != "detect"
                },
            )
            for hostname, routes in sorted(by_host.items(), key=lambda item: hostname_rank(item[0]))
        )
        ports.setdefault(listener.port, []).append(
            ListenerServing(
                name=name,
                hostname=listener.hostname,
                certificates=check.certificates,
                virtual_hosts=virtual_hosts,
                client_validation=check.client_validation,
            )
        )
        protocols[listener.port] = listener.protocol
    return GatewayServing(
        gateway=gateway.key,
        address=view.address,
        ports=tuple(
            PortServing(
                port=port,
                protocol=protocols[port],
                listeners=tuple(sorted(listeners, key=lambda item: hostname_rank(item.hostname))),
            )
            for port, listeners in sorted(ports.items())
        ),
    )


def _host_modules(
    routes: Iterable[OutboundRoute],
    modules_of: Mapping[RouteId, Mapping[int, RuleModules]],
    mirrors_of: Mapping[RouteId, Mapping[int, tuple[RuleMirror, ...]]],
    listener: RuleModules | None,
) -> dict[RuleKey, RuleModules]:
    """The modules of a virtual host's rules: their own, under the listener's when the Gateway
    names some for it (then every rule has modules, and a rule with RequestMirror filters fails
    closed: its copies would leave before the modules admit the request)."""
    found: dict[RuleKey, RuleModules] = {}
    for route in routes:
        route_key = (route.kind, ObjectKey(namespace=route.namespace, name=route.name))
        own = modules_of.get(route_key, {})
        if listener is None:
            found.update(((route.namespace, route.name, i), m) for i, m in own.items())
            continue
        mirrored = mirrors_of.get(route_key, {})
        for index in range(len(route.rules)):
            combined = with_listener_modules(listener, own.get(index))
            if mirrored.get(index) and combined.error is None:
                combined = replace(
                    combined,
                    error=ModuleError(
                        permanent=True,
                        reason="IncompatibleFilters",
                        message=f"{route.namespace}/{route.name} rule {index}: a RequestMirror "
                        "filter cannot be served on a listener with the Gateway's ModuleSets "
                        "(copies would leave before the modules admit the request)",
                    ),
                )
            found[(route.namespace, route.name, index)] = combined
    return found


def _rule_protocol(rule: ResolvedRule, services: Mapping[ObjectKey, Service]) -> Protocol:
    """What the rule's backends speak, when they agree on HTTP/2 (h2c) or gRPC; else
    ``detect`` (HTTP/1.1, and h2c for gRPC calls)."""
    found: set[Protocol] = set()
    for backend in rule.backends:
        if not backend.exists or backend.port is None:
            continue
        service = services.get(backend.key)
        port = None if service is None else service.port_by_number(backend.port)
        found.add(
            port_protocol(app_protocol=None if port is None else port.app_protocol, opaque=False)
        )
    if len(found) == 1 and (only := found.pop()) in ("http2", "grpc"):
        return only
    return "detect"


def statuses_equal(a: Any, b: Any) -> bool:
    """Two statuses that differ only in ``lastTransitionTime`` are the same."""
    return bool(without_timestamps(a) == without_timestamps(b))
