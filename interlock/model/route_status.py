"""HTTPRoute ``status.parents``: what we tell the route's author about each Service parent.

Users learn why a mesh route does not work from two conditions per Service parent, the Gateway
API's ``Accepted`` (can the parent Service take routes at all?) and ``ResolvedRefs`` (can every
backend carry traffic?). The status is a pure function of the route, its resolution and the
Services, so every replica computes the same answer and the StatusWriter writes only when it
differs from what is stored (:func:`status_equal_ignoring_timestamps`).

Two details keep the writes down and other controllers happy: ``lastTransitionTime`` is carried
over from the stored condition while its status is unchanged (otherwise every recompute would
produce a "new" status), and entries written by other controllers (say, a Gateway controller for
the route's Gateway parents) are kept exactly as they were.

A route that cannot be parsed at all (an unsupported filter type, a weight out of range) still
gets a status through :func:`rejected_route_status`, so its author sees the error with its
field path on the object itself.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from datetime import UTC, datetime
from typing import Any

from pydantic import Field, ValidationError

from interlock.model.gateway import ParentReference, RouteStatus
from interlock.model.meta import InvalidObject, KubeModel, ObjectKey, ObjectMeta
from interlock.model.outbound import MeshRoute, ResolvedRoute, RouteAttachment, ServiceParent
from interlock.model.outbound_policy import (
    PORT_PROTOCOL_WHY,
    attached_ports,
    parent_problem,
    port_route_kinds,
    service_annotation_problems,
)
from interlock.model.route_dependencies import service_parents
from interlock.model.route_kinds import (
    CONFLICT_REASON,
    age_order,
    beats,
    conflict_message,
    kind_rank,
)
from interlock.model.service import Service

CONTROLLER_NAME = "interlock.dev/policy-controller"
"""The ``controllerName`` of the status entries this controller owns."""

GATEWAY_CONTROLLER_NAME = "interlock.dev/gateway-controller"
"""The ``controllerName`` of the GatewayClasses interlock implements (and of the route status
entries it writes for Gateway parents). Here, beside :data:`CONTROLLER_NAME`, so that the route
actors of a controller without Gateways do not import the GatewayClass model for it."""


def _timestamp(moment: datetime) -> str:
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _parent_ref(parent: ServiceParent) -> dict[str, Any]:
    if parent.spec_ref is not None:
        # By value, as the spec wrote it: clients find their entry by comparing parentRefs.
        return parent.spec_ref.as_written()
    ref: dict[str, Any] = {
        "group": "",
        "kind": "Service",
        "namespace": parent.namespace,
        "name": parent.name,
    }
    if parent.section_name is not None:
        ref["sectionName"] = parent.section_name
    if parent.port is not None:
        ref["port"] = parent.port
    return ref


def _parent_identity(ref: Any, route_namespace: str) -> tuple[Any, ...] | None:
    """A stored parentRef as a comparable key (defaults filled in), None if it is not a dict."""
    if not isinstance(ref, dict):
        return None
    group = ref.get("group", "gateway.networking.k8s.io")
    return (
        "" if group == "core" else group,
        ref.get("kind", "Gateway"),
        ref.get("namespace") or route_namespace,
        ref.get("name"),
        ref.get("sectionName"),
        ref.get("port"),
    )


class _RouteShellSpec(KubeModel):
    parent_refs: tuple[ParentReference, ...] = Field((), alias="parentRefs")


class _RouteShell(KubeModel):
    """The parts of an HTTPRoute a status needs, readable even when its rules are invalid."""

    metadata: ObjectMeta
    spec: _RouteShellSpec = Field(default_factory=_RouteShellSpec)
    status: RouteStatus = Field(default_factory=RouteStatus)


class _StoredStatus:
    """The stored ``status.parents``: other controllers' entries, and our conditions by parent."""

    def __init__(
        self, parents: Iterable[dict[str, Any]], *, controller_name: str, namespace: str
    ) -> None:
        self.others: list[dict[str, Any]] = []
        self._ours: dict[tuple[Any, ...], dict[str, Mapping[str, Any]]] = {}
        for entry in parents:
            if entry.get("controllerName") != controller_name:
                self.others.append(dict(entry))
                continue
            identity = _parent_identity(entry.get("parentRef"), namespace)
            conditions = entry.get("conditions")
            if identity is None or not isinstance(conditions, list):
                continue
            self._ours[identity] = {
                c["type"]: c for c in conditions if isinstance(c, dict) and "type" in c
            }

    def conditions_of(self, parent: ServiceParent) -> dict[str, Mapping[str, Any]]:
        """Our stored conditions for ``parent``, by type (empty when there are none)."""
        identity = ("", "Service", parent.namespace, parent.name, parent.section_name, parent.port)
        return self._ours.get(identity, {})


def _entry(
    parent: ServiceParent, controller_name: str, conditions: list[dict[str, Any]]
) -> dict[str, Any]:
    return {
        "parentRef": _parent_ref(parent),
        "controllerName": controller_name,
        "conditions": conditions,
    }


def _condition(
    *,
    type_: str,
    ok: bool,
    reason: str,
    message: str,
    generation: int,
    previous: Mapping[str, Any] | None,
    now: datetime,
) -> dict[str, Any]:
    status = "True" if ok else "False"
    kept = previous.get("lastTransitionTime") if previous is not None else None
    unchanged = previous is not None and previous.get("status") == status and kept
    return {
        "type": type_,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": kept if unchanged else _timestamp(now),
    }


def route_conflict(
    resolved: RouteAttachment,
    parent: ServiceParent,
    service: Service,
    others: Iterable[RouteAttachment],
) -> str | None:
    """Why ``resolved`` is not served on ``parent`` (a ``RouteReasonConflicted`` message), or None.

    It is not served when on every port it attaches to through ``parent`` another route beats
    it (:func:`~interlock.model.route_kinds.beats`: a kind earlier in the precedence, or an
    older TCPRoute) for every client it applies to: a producer route (in the Service's
    namespace) reaches every client namespace, so it loses only to producer routes; a consumer
    route reaches its own namespace, where only that namespace's consumer routes apply
    (GEP-1294, :func:`~interlock.model.outbound_policy.consumer_precedence`), so it loses only to
    those. ``others`` are the other routes attached to the parent Service (those of
    other kinds are enough: see :func:`~interlock.model.route_kinds.kinds_that_beat`); a route
    that loses on some of its ports only is served on the rest and is not conflicted.
    """
    ports = attached_ports(parent, service)
    allowed = {port: port_route_kinds(service, port) for port in ports}
    covering = [
        other
        for other in others
        if other.namespace == resolved.namespace and beats(other, resolved)
    ]
    winners: list[RouteAttachment] = []
    lost_ports: list[int] = []
    hidden: list[int] = []
    for port in ports:
        kinds = allowed[port][1]
        if kinds is not None and resolved.kind not in kinds:
            hidden.append(port)  # the port's protocol serves no route of this kind
            continue
        on_port = [
            other
            for other in covering
            if (kinds is None or other.kind in kinds)
            and any(
                p.key == parent.key and port in attached_ports(p, service) for p in other.parents
            )
        ]
        if not on_port:
            return None
        winners.append(min(on_port, key=lambda r: (kind_rank(r.kind), age_order(r))))
        lost_ports.append(port)
    if not winners:
        if not hidden:
            return None
        protocol, kinds = allowed[hidden[0]]
        shown = ", ".join(str(p) for p in hidden)
        served = " and ".join(f"{kind}s" for kind in sorted(kinds or ()))
        return (
            f"Service {parent.namespace}/{parent.name} port {shown} is "
            f"{PORT_PROTOCOL_WHY[protocol]}: only {served} are served there, as Linkerd serves it"
        )
    winner = min(winners, key=lambda r: (kind_rank(r.kind), age_order(r)))
    lost = [port for port, w in zip(lost_ports, winners, strict=True) if w is winner]
    return conflict_message(
        winner, resolved, parent=f"Service {parent.namespace}/{parent.name}", ports=lost
    )


def route_status(
    route: MeshRoute,
    resolved: ResolvedRoute | Mapping[ObjectKey, ResolvedRoute],
    services: Mapping[ObjectKey, Service],
    *,
    controller_name: str = CONTROLLER_NAME,
    now: datetime,
    competitors: Mapping[ObjectKey, Iterable[RouteAttachment]] | None = None,
) -> list[dict[str, Any]]:
    """The new ``status.parents`` of ``route``: other controllers' entries, then ours.

    One entry of ours per Service parentRef (Gateway parents are left to their controllers),
    in spec order, its ``parentRef`` echoing the spec's by value (``group: core`` stays
    ``core``), with:

    - ``Accepted``: True, or False / ``NoMatchingParent`` when the parent Service is missing,
      headless, of type ExternalName, or lacks the port or sectionName the parentRef names, or
      False / ``RouteReasonConflicted`` when another route takes every port it attaches to
      there (:func:`route_conflict`; ``competitors`` holds the other routes attached to each
      parent Service); when True, its message names every malformed policy annotation (the
      route's and the parent Service's) that was ignored;
    - ``ResolvedRefs``: True, or False with the reason of the first backend that cannot carry
      traffic (``BackendNotFound``, ``InvalidKind`` or ``RefNotPermitted``) and a message
      naming every such backend.

    ``resolved`` is one resolution for every parent, or the resolution of each parent Service
    (``resolve_route_by_parent``: a producer and a consumer parent may differ on grants).
    ``services`` needs the parent Services (see ``route_service_dependencies``). Our stale
    entries (parents no longer in the spec) are dropped; other controllers' are kept verbatim.
    """
    generation = route.metadata.generation
    stored = _StoredStatus(
        route.status.parents, controller_name=controller_name, namespace=route.metadata.namespace
    )
    if isinstance(resolved, ResolvedRoute):
        parents = resolved.parents
        by_parent: Mapping[ObjectKey, ResolvedRoute] = {p.key: resolved for p in parents}
    else:
        by_parent = resolved
        parents = tuple(
            p
            for p in service_parents(
                route.spec.parent_refs, route_namespace=route.metadata.namespace
            )
            if p.key in by_parent
        )

    ours: list[dict[str, Any]] = []
    for parent in parents:
        unresolved = by_parent[parent.key].unresolved_backends
        messages = list(
            dict.fromkeys(b.failure_injector.message for b in unresolved if b.failure_injector)
        )
        refs_reason = (
            unresolved[0].reason if unresolved and unresolved[0].reason else "ResolvedRefs"
        )
        previous = stored.conditions_of(parent)
        parent_service = services.get(parent.key)
        problem = parent_problem(parent, parent_service)
        # Malformed policy annotations leave the route accepted (the rest of its policy
        # applies); the message names each one so the author can find and fix it.
        ignored = [
            p.message
            for p in (
                *by_parent[parent.key].annotations.problems,
                *service_annotation_problems(parent_service),
            )
        ]
        reason = "Accepted" if problem is None else "NoMatchingParent"
        if problem is None and parent_service is not None and competitors is not None:
            conflict = route_conflict(
                by_parent[parent.key].attachment,
                parent,
                parent_service,
                competitors.get(parent.key, ()),
            )
            if conflict is not None:
                problem, reason = conflict, CONFLICT_REASON
        accepted = _condition(
            type_="Accepted",
            ok=problem is None,
            reason=reason,
            message=problem or ("ignored: " + "; ".join(ignored) if ignored else ""),
            generation=generation,
            previous=previous.get("Accepted"),
            now=now,
        )
        resolved_refs = _condition(
            type_="ResolvedRefs",
            ok=not unresolved,
            reason=refs_reason,
            message="; ".join(messages),
            generation=generation,
            previous=previous.get("ResolvedRefs"),
            now=now,
        )
        ours.append(_entry(parent, controller_name, [accepted, resolved_refs]))
    return stored.others + ours


def rejected_route_status(
    raw: dict[str, Any],
    error: InvalidObject,
    *,
    controller_name: str = CONTROLLER_NAME,
    now: datetime,
) -> list[dict[str, Any]] | None:
    """``status.parents`` for a route that failed to parse: ``Accepted`` False, the error in it.

    This is how a route author learns that, say, ``spec.rules[0].filters[1].type`` names a
    filter we do not support (reason ``UnsupportedValue``; the Gateway API forbids skipping a
    filter silently). Returns None when not even the metadata and parentRefs can be read, in
    which case the error can only go to an Event or the log.
    """
    try:
        shell = _RouteShell.model_validate(raw)
    except ValidationError:
        return None
    stored = _StoredStatus(
        shell.status.parents, controller_name=controller_name, namespace=shell.metadata.namespace
    )
    ours = [
        _entry(
            parent,
            controller_name,
            [
                _condition(
                    type_="Accepted",
                    ok=False,
                    reason="UnsupportedValue",
                    message=str(error),
                    generation=shell.metadata.generation,
                    previous=stored.conditions_of(parent).get("Accepted"),
                    now=now,
                )
            ],
        )
        for parent in service_parents(
            shell.spec.parent_refs, route_namespace=shell.metadata.namespace
        )
    ]
    return stored.others + ours


def _without_timestamps(parents: list[dict[str, Any]]) -> list[dict[str, Any]]:
    stripped: list[dict[str, Any]] = []
    for entry in parents:
        copy = dict(entry)
        conditions = entry.get("conditions")
        if isinstance(conditions, list):
            copy["conditions"] = [
                {k: v for k, v in c.items() if k != "lastTransitionTime"}
                if isinstance(c, dict)
                else c
                for c in conditions
            ]
        stripped.append(copy)
    return stripped


def status_equal_ignoring_timestamps(a: list[dict[str, Any]], b: list[dict[str, Any]]) -> bool:
    """Whether two ``status.parents`` lists say the same thing apart from ``lastTransitionTime``.

    The StatusWriter skips a write when this holds between the stored and the computed status.
    """
    return _without_timestamps(a) == _without_timestamps(b)
