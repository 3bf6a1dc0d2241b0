"""RequestMirror on Gateway routes: which Service port a rule's requests are copied to, how often.

A rule's ``RequestMirror`` filter sends a copy of each request (or of ``percent`` / ``fraction``
of them) to another backend and ignores its answer. The HTTPRoute parser refuses the filter for
mesh routes (the mesh engine has no mirrors), so, as with interlock's ModuleSet filters
(``gateway_modules.py``), the Gateway side takes the mirror filters out of a route's rules before
parsing (:func:`take_mirror_filters`) and resolves them itself (:func:`resolve_mirrors`): a
mirror to another namespace needs a ReferenceGrant, as a backendRef does, and one that cannot be
resolved is not sent and says why on the route's status. Mirrors are copied when the rule is
chosen, so a rule that also runs interlock's modules cannot mirror (its requests may yet be
refused): such a route reports ``IncompatibleFilters``.
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from interlock.model.gateway import (
    CORE_GROUP,
    GATEWAY_GROUP,
    HTTPRequestMirrorFilter,
    ReferenceGrant,
)
from interlock.model.meta import ObjectKey
from interlock.model.service import Service

if TYPE_CHECKING:
    from interlock.model.backend_tls import BackendTLS


@dataclass(frozen=True, slots=True)
class RuleMirror:
    """A resolved mirror: the Service port copies go to, and the share of requests copied."""

    namespace: str
    service: str
    port: int
    fraction: float
    tls: BackendTLS | None = None
    """Copies go over TLS, verified as the BackendTLSPolicy of the Service port says."""


@dataclass(frozen=True, slots=True)
class MirrorProblem:
    """Why a rule's mirror is not sent: a ResolvedRefs reason and a sentence."""

    reason: str
    message: str


def _is_mirror(entry: object) -> bool:
    return isinstance(entry, dict) and entry.get("type") == "RequestMirror"


def take_mirror_filters(
    raw: dict[str, Any],
) -> tuple[dict[str, Any], dict[int, tuple[HTTPRequestMirrorFilter | str, ...]]]:
    """``raw`` without its rules' RequestMirror filters, and each rule's mirrors (by rule index;
    a filter that does not parse is kept as its error text). ``raw`` itself is not changed."""
    spec = raw.get("spec")
    rules = spec.get("rules") if isinstance(spec, dict) else None
    if not isinstance(rules, list) or not any(
        isinstance(rule, dict)
        and isinstance(rule.get("filters"), list)
        and any(_is_mirror(f) for f in rule["filters"])
        for rule in rules
    ):
        return raw, {}
    stripped = copy.deepcopy(raw)
    mirrors: dict[int, tuple[HTTPRequestMirrorFilter | str, ...]] = {}
    for index, rule in enumerate(stripped["spec"]["rules"]):
        filters = rule.get("filters") if isinstance(rule, dict) else None
        if not isinstance(filters, list) or not any(_is_mirror(f) for f in filters):
            continue
        found: list[HTTPRequestMirrorFilter | str] = []
        for entry in filters:
            if not _is_mirror(entry):
                continue
            try:
                found.append(HTTPRequestMirrorFilter.model_validate(entry.get("requestMirror")))
            except ValidationError as error:
                found.append(f"spec.rules[{index}] RequestMirror: {error.errors()[0]['msg']}")
        mirrors[index] = tuple(found)
        rule["filters"] = [f for f in filters if not _is_mirror(f)]
    return stripped, mirrors


def mirror_dependencies(
    namespace: str, mirrors: Mapping[int, Iterable[HTTPRequestMirrorFilter | str]]
) -> tuple[tuple[ObjectKey, ...], tuple[str, ...]]:
    """The Services a route's mirrors name and the namespaces whose grants they need."""
    services: list[ObjectKey] = []
    grant_namespaces: list[str] = []
    for rule in mirrors.values():
        for mirror in rule:
            if isinstance(mirror, str):
                continue
            ref = mirror.backend_ref
            key = ObjectKey(namespace=ref.namespace or namespace, name=ref.name)
            services.append(key)
            if key.namespace != namespace:
                grant_namespaces.append(key.namespace)
    return tuple(dict.fromkeys(services)), tuple(dict.fromkeys(grant_namespaces))


def resolve_mirrors(
    kind: str,
    namespace: str,
    mirrors: Mapping[int, Iterable[HTTPRequestMirrorFilter | str]],
    *,
    services: Mapping[ObjectKey, Service],
    grants: Iterable[ReferenceGrant],
) -> tuple[dict[int, tuple[RuleMirror, ...]], MirrorProblem | None]:
    """Each rule's mirrors that can be sent, and the first reason one cannot."""
    grant_list = tuple(grants)
    resolved: dict[int, tuple[RuleMirror, ...]] = {}
    problem: MirrorProblem | None = None
    for index, rule in sorted(mirrors.items()):
        usable: list[RuleMirror] = []
        for mirror in rule:
            found = _resolve(kind, namespace, mirror, services=services, grants=grant_list)
            if isinstance(found, MirrorProblem):
                problem = problem or found
            else:
                usable.append(found)
        if usable:
            resolved[index] = tuple(usable)
    return resolved, problem


def _resolve(
    kind: str,
    namespace: str,
    mirror: HTTPRequestMirrorFilter | str,
    *,
    services: Mapping[ObjectKey, Service],
    grants: tuple[ReferenceGrant, ...],
) -> RuleMirror | MirrorProblem:
    if isinstance(mirror, str):
        return MirrorProblem("UnsupportedValue", mirror)
    ref = mirror.backend_ref
    where = f"RequestMirror backendRef {ref.kind} {ref.namespace or namespace}/{ref.name}"
    if not (ref.group == CORE_GROUP and ref.kind == "Service"):
        return MirrorProblem("InvalidKind", f"{where}: only core Services can be mirrored to")
    if ref.port is None:
        return MirrorProblem("BackendNotFound", f"{where}: port is required")
    target = ref.namespace or namespace
    if target != namespace and not any(
        grant.permits(
            from_group=GATEWAY_GROUP,
            from_kind=kind,
            from_namespace=namespace,
            to_group=CORE_GROUP,
            to_kind="Service",
            to_namespace=target,
            to_name=ref.name,
        )
        for grant in grants
    ):
        return MirrorProblem(
            "RefNotPermitted",
            f"{where}: no ReferenceGrant in namespace {target} permits it",
        )
    service = services.get(ObjectKey(namespace=target, name=ref.name))
    if service is None or service.port_by_number(ref.port) is None:
        return MirrorProblem("BackendNotFound", f"{where} port {ref.port} does not exist")
    if mirror.fraction is not None:
        fraction = mirror.fraction.numerator / mirror.fraction.denominator
    elif mirror.percent is not None:
        fraction = mirror.percent / 100
    else:
        fraction = 1.0
    return RuleMirror(namespace=target, service=ref.name, port=ref.port, fraction=fraction)
