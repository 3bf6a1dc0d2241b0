"""Desired edges: what every host our Ingresses expose should serve, computed from the inputs.

This is the rule book of the edge half (``docs/design.md``); the actors only feed it and pass
its results on. It is built from per-Ingress pieces so that the two ways of using it cannot
disagree:

* an IngressActor calls :func:`ingress_host_routes` for its own Ingress (with the ModuleSets,
  Secrets and Services it subscribed to, found through :func:`ingress_dependencies`) and
  publishes one part per host;
* an EdgeActor combines the parts of its host with :func:`edge_from_parts`;
* :func:`desired_edges` does both for a whole cluster at once (tests, ``/debug``, the embedded
  demo), by calling exactly those functions.

Decisions that matter to users:

* **Fail closed.** A route whose modules cannot be resolved still appears, with a
  :class:`ModuleError`: *transient* when an input may still appear (a ModuleSet, Secret or Secret
  key not found), *permanent* when a ModuleSet is invalid. The edge actor never attaches the
  backend of such a route.
* **Missing backends are kept.** A backend Service (or its port) that does not exist gives an
  :class:`EdgeBackend` with ``exists=False`` and a reason, so the edge answers 500 and recovers
  as soon as the Service appears.
* **Conflicts.** Two Ingresses claiming the same host and path: the oldest
  (``creationTimestamp``, then namespace/name) wins; the other is reported in
  :class:`EdgesResult`.
* **Path types.** ``ImplementationSpecific`` is treated as ``Prefix``; a ``Prefix`` path's
  trailing slash is ignored (``/api/`` and ``/api`` are one route), as in the Ingress spec.
  ``route_id`` is ``"<pathType>:<path>"`` after that normalization.
* **defaultBackend** serves ``Prefix /`` on every host the Ingress names in its rules (unless a
  rule already routes ``Prefix /`` there); the edge is chosen by the ``Host`` header, so an
  Ingress whose rules name no host has nowhere to serve it and gets an error instead.
* **Broken rules** (no host, no http paths, a ``resource`` backend, an unknown path type) are
  reported as :class:`IngressError` naming the Ingress and field; the other rules still work.

All outputs are frozen pydantic models compared by value, so callers publish only when modified.
Secret values travel only inside :class:`~interlock.model.moduleset.SecretValue`; ``repr``,
``str`` and JSON of every output here show ``<redacted>`` instead.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Literal

from pydantic import BaseModel, ConfigDict, field_serializer

from interlock.model.ingress import Ingress, IngressBackend, IngressClass, is_ours
from interlock.model.ingress_nginx import (
    IngressNginxModule,
    NginxCanary,
    NginxTranslation,
    annotations_enabled,
    nginx_annotations_of,
    regex_route,
    translate,
)
from interlock.model.meta import ObjectKey
from interlock.model.module_settings import modules_clash
from interlock.model.moduleset import (
    Modules,
    ModuleSet,
    Secret,
    SecretValue,
    describe_invalid,
    merge_modules,
    module_secret_ref_fields,
    module_secret_refs,
)
from interlock.model.service import Service

__all__ = [
    "Conflict",
    "DesiredEdge",
    "DesiredRoute",
    "EdgeBackend",
    "EdgesResult",
    "IngressError",
    "ModuleError",
    "PathType",
    "desired_edges",
    "edge_from_parts",
    "ingress_dependencies",
    "ingress_errors",
    "ingress_host_routes",
    "module_secret_refs",
    "resolve_module_sets",
    "route_order",
]

PathType = Literal["Exact", "Prefix"]


class _Output(BaseModel):
    model_config = ConfigDict(frozen=True, arbitrary_types_allowed=True)


class EdgeBackend(_Output):
    """The Service port a route forwards to.

    ``port`` is the Service port number (0 when a port name could not be resolved) and
    ``port_name`` the Service port's name (``""`` for an unnamed port): EndpointSlice ports are
    matched by that name. ``exists=False`` (with ``reason``) makes the edge answer 500.
    """

    namespace: str
    service: str
    port: int
    port_name: str = ""
    exists: bool = True
    reason: str = ""


class ModuleError(_Output):
    """Why a route's modules cannot be applied; the route serves nothing until it is gone.

    ``permanent``: retrying cannot help until an input changes (an invalid ModuleSet).
    Otherwise an input may still appear (ModuleSet, Secret or key not found yet).
    ``reason`` is a CamelCase word for conditions and Events; ``message`` names the objects.
    """

    permanent: bool
    reason: str
    message: str


class DesiredRoute(_Output):
    """One path of one host, as one Ingress wants it served."""

    route_id: str
    ingress: ObjectKey
    ingress_created: datetime | None
    """The owning Ingress's creationTimestamp: the older Ingress wins a conflict."""
    path: str
    path_type: PathType
    backend: EdgeBackend
    modules: Modules
    secrets: dict[tuple[str, str], SecretValue]
    """Values of exactly the Secret keys ``modules`` reference, keyed (secret name, key)."""
    module_error: ModuleError | None = None
    tls_secret: ObjectKey | None = None
    """The TLS Secret the owning Ingress names for this route's host, if any."""
    canary: NginxCanary | None = None
    """Set on the routes of an ingress-nginx canary Ingress: they serve nothing themselves and
    join the route of the same host and path of another Ingress (:func:`edge_from_parts`)."""

    @field_serializer("secrets")
    def _redact_secrets(self, secrets: dict[tuple[str, str], SecretValue]) -> dict[str, str]:
        return {f"{name}/{key}": "<redacted>" for name, key in sorted(secrets)}


class DesiredEdge(_Output):
    """Everything one host serves: routes in matching order, and its TLS Secret if any."""

    host: str
    routes: tuple[DesiredRoute, ...]
    tls_secret: ObjectKey | None = None


class Conflict(_Output):
    """An Ingress path that another, older Ingress already serves on the same host."""

    ingress: ObjectKey
    host: str
    route_id: str
    path: str
    path_type: PathType
    winner: ObjectKey

    def __str__(self) -> str:
        return (
            f"Ingress {self.ingress}: host {self.host} path {self.path} ({self.path_type}) "
            f"is already served by the older Ingress {self.winner}"
        )


class IngressError(_Output):
    """A part of an Ingress that cannot be served, naming the field and what to do."""

    ingress: ObjectKey
    field: str
    reason: str

    def __str__(self) -> str:
        return f"Ingress {self.ingress}: {self.field}: {self.reason}"


class EdgesResult(_Output):
    """The outcome for a whole cluster: edges by host (sorted), conflicts and broken rules."""

    edges: dict[str, DesiredEdge]
    conflicts: tuple[Conflict, ...]
    ingress_errors: tuple[IngressError, ...]


def route_order(route: DesiredRoute) -> tuple[int, int, str]:
    """How an edge's routes are sorted: Exact first, then longer paths first, then by path.

    This is also the order in which a request is matched against them.
    """
    return (0 if route.path_type == "Exact" else 1, -len(route.path), route.path)


# --- what an Ingress asks for, before looking anything up ---------------------------------------


@dataclass(frozen=True, slots=True)
class _PortRef:
    number: int | None
    name: str | None


@dataclass(frozen=True, slots=True)
class _RouteSpec:
    host: str
    path: str
    path_type: PathType
    service: str
    port: _PortRef
    raw_path: str
    """The path as written (a regular expression for ingress-nginx's ``use-regex``)."""


class _RuleProblem(Exception):
    """A part of an Ingress that cannot be served; :func:`_route_specs` turns it into an error."""

    def __init__(self, field: str, reason: str) -> None:
        super().__init__(f"{field}: {reason}")
        self.field = field
        self.reason = reason


def _route_specs(ingress: Ingress) -> tuple[list[_RouteSpec], list[IngressError]]:
    """The routes ``ingress`` asks for (first occurrence of a host and path wins), and errors."""
    key = ingress.key
    errors: list[IngressError] = []
    specs: list[_RouteSpec] = []
    first_field: dict[tuple[str, str], str] = {}
    hosts: list[str] = []
    has_default = ingress.spec.default_backend is not None

    def error(field: str, reason: str) -> None:
        errors.append(IngressError(ingress=key, field=field, reason=reason))

    for index, rule in enumerate(ingress.spec.rules):
        field = f"spec.rules[{index}]"
        host = _normalize_host(rule.host)
        if not host:
            error(
                f"{field}.host",
                "a rule without a host cannot be served: the edge is chosen by the Host header; "
                "set a host",
            )
            continue
        if host not in hosts:
            hosts.append(host)
        if (rule.http is None or not rule.http.paths) and not has_default:
            error(
                f"{field}.http",
                f"no paths for host {host}: add http.paths or a defaultBackend",
            )
            continue
        for path_index, ingress_path in enumerate(rule.http.paths if rule.http else []):
            path_field = f"{field}.http.paths[{path_index}]"
            try:
                path, path_type = _path_match(ingress_path.path, ingress_path.path_type, path_field)
                backend = _service_backend(ingress_path.backend, f"{path_field}.backend")
            except _RuleProblem as problem:
                error(problem.field, problem.reason)
                continue
            route = (host, f"{path_type}:{path}")
            if route in first_field:
                error(
                    path_field,
                    f"host {host} path {path} ({path_type}) is already routed by "
                    f"{first_field[route]}; this one is ignored",
                )
                continue
            first_field[route] = path_field
            specs.append(
                _RouteSpec(host, path, path_type, backend[0], backend[1], ingress_path.path)
            )

    if ingress.spec.default_backend is not None:
        field = "spec.defaultBackend"
        try:
            backend = _service_backend(ingress.spec.default_backend, field)
        except _RuleProblem as problem:
            error(problem.field, problem.reason)
            return specs, errors
        if not hosts:
            error(
                field,
                "no rule names a host, so the defaultBackend has nowhere to be served: "
                "the edge is chosen by the Host header; add a rule with a host",
            )
        else:
            for host in hosts:
                if (host, "Prefix:/") not in first_field:
                    specs.append(_RouteSpec(host, "/", "Prefix", backend[0], backend[1], "/"))
    return specs, errors


def _path_match(path: str, path_type: str, field: str) -> tuple[str, PathType]:
    normalized: PathType
    if path_type in ("Exact", "Prefix"):
        normalized = "Exact" if path_type == "Exact" else "Prefix"
    elif path_type == "ImplementationSpecific":
        normalized = "Prefix"
        path = path or "/"
    elif not path_type:
        raise _RuleProblem(
            f"{field}.pathType", "is required: Exact, Prefix or ImplementationSpecific"
        )
    else:
        raise _RuleProblem(
            f"{field}.pathType",
            f'"{path_type}" is not supported: use Exact, Prefix or ImplementationSpecific',
        )
    if not path.startswith("/"):
        raise _RuleProblem(f"{field}.path", f'"{path}" must start with "/"')
    if normalized == "Prefix":
        path = path.rstrip("/") or "/"
    return path, normalized


def _service_backend(backend: IngressBackend, field: str) -> tuple[str, _PortRef]:
    if backend.resource is not None:
        raise _RuleProblem(
            f"{field}.resource", "resource backends are not supported; use a service backend"
        )
    service = backend.service
    if service is None or not service.name:
        raise _RuleProblem(f"{field}.service.name", "is required")
    port = service.port
    if port.number is None and not port.name:
        raise _RuleProblem(f"{field}.service.port", "a port number or name is required")
    if port.number is not None and port.name:
        raise _RuleProblem(f"{field}.service.port", "set either number or name, not both")
    if port.number is not None and not 1 <= port.number <= 65535:
        raise _RuleProblem(
            f"{field}.service.port.number", f"{port.number} is not between 1 and 65535"
        )
    return service.name, _PortRef(port.number, port.name or None)


def ingress_errors(ingress: Ingress) -> list[IngressError]:
    """What in ``ingress`` cannot be served (field and reason); its other rules still are."""
    return _route_specs(ingress)[1]


def ingress_dependencies(ingress: Ingress) -> tuple[tuple[str, ...], tuple[str, ...]]:
    """``(module set names, service names)`` in the Ingress's namespace that its routes read.

    ModuleSets in annotation order (duplicates removed), Services sorted. The Secrets to watch
    follow from the ModuleSets: ``module_secret_refs(merge_modules(sets))``.
    """
    module_sets = tuple(dict.fromkeys(ingress.module_set_names()))
    services = tuple(sorted({spec.service for spec in _route_specs(ingress)[0]}))
    return module_sets, services


# --- resolving an Ingress's routes -------------------------------------------------------------


def ingress_host_routes(
    ingress: Ingress,
    module_sets: Mapping[ObjectKey, ModuleSet],
    secrets: Mapping[ObjectKey, Secret],
    services: Mapping[ObjectKey, Service],
    *,
    nginx: NginxTranslation | None = None,
) -> dict[str, list[DesiredRoute]]:
    """The routes ``ingress`` wants, by host (each list in :func:`route_order`).

    Lookups are by :class:`ObjectKey` in the Ingress's namespace; objects of other namespaces in
    the mappings are never used. Pass only Ingresses that are ours (:func:`is_ours`).
    ``nginx``: the translation of its ingress-nginx annotations, when they are served
    (:mod:`interlock.model.ingress_nginx`).
    """
    namespace = ingress.metadata.namespace
    modules, values, module_error = _resolve_modules(
        ingress, module_sets, secrets, overlay=None if nginx is None else nginx.module_overlay()
    )
    if nginx is not None and nginx.fail_closed and module_error is None:
        module_error = ModuleError(
            permanent=True,
            reason="InvalidAnnotation",
            message="; ".join(f"Ingress {ingress.key}: {r}" for r in nginx.fail_closed),
        )
    tls = _tls_secrets(ingress)
    routes: dict[str, list[DesiredRoute]] = {}
    for spec in _route_specs(ingress)[0]:
        route_id = f"{spec.path_type}:{spec.path}"
        path, route_modules, route_error = spec.path, modules, module_error
        canary: NginxCanary | None = None
        backend = _resolve_backend(namespace, spec.service, spec.port, services)
        if nginx is not None:
            route_part = nginx.route
            if nginx.regex_paths and spec.path_type == "Prefix":
                shape = regex_route(spec.raw_path)
                path = shape.prefix
                if shape.pattern != shape.prefix:
                    route_id = f"Regex:{spec.raw_path}"
                route_part = route_part.model_copy(update={"path_pattern": shape.pattern})
                if shape.problem and route_error is None:
                    route_error = ModuleError(
                        permanent=True,
                        reason="InvalidAnnotation",
                        message=f"Ingress {ingress.key}: path {spec.raw_path} {shape.problem} "
                        "(nginx.ingress.kubernetes.io/use-regex)",
                    )
            if nginx.force_ssl_redirect or (nginx.ssl_redirect and spec.host in tls):
                route_part = route_part.model_copy(update={"ssl_redirect": True})
            if route_part != IngressNginxModule():
                route_modules = modules.model_copy(update={"ingress_nginx": route_part})
            if nginx.canary is not None:
                canary = nginx.canary.model_copy(
                    update={
                        "namespace": backend.namespace,
                        "service": backend.service,
                        "port": backend.port if backend.port >= 1 else 1,
                        "exists": backend.exists,
                        "ingress": str(ingress.key),
                    }
                )
        routes.setdefault(spec.host, []).append(
            DesiredRoute(
                route_id=route_id,
                ingress=ingress.key,
                ingress_created=ingress.metadata.creation_timestamp,
                path=path,
                path_type=spec.path_type,
                backend=backend,
                modules=route_modules,
                secrets=values,
                module_error=route_error,
                tls_secret=tls.get(spec.host),
                canary=canary,
            )
        )
    return {host: sorted(host_routes, key=route_order) for host, host_routes in routes.items()}


def _normalize_host(host: str) -> str:
    # As the edge reads a Host header (interlock.dataplane.request_target.normalize_host): case
    # and a final dot do not make a different host.
    return host.strip().lower().rstrip(".")


def _tls_secrets(ingress: Ingress) -> dict[str, ObjectKey]:
    """Host → TLS Secret; the first ``spec.tls`` entry naming a host wins."""
    found: dict[str, ObjectKey] = {}
    for tls in ingress.spec.tls:
        if not tls.secret_name:
            continue
        for host in tls.hosts:
            found.setdefault(
                _normalize_host(host),
                ObjectKey(namespace=ingress.metadata.namespace, name=tls.secret_name),
            )
    return found


def _resolve_backend(
    namespace: str, name: str, port: _PortRef, services: Mapping[ObjectKey, Service]
) -> EdgeBackend:
    where = f"Service {namespace}/{name}"
    service = services.get(ObjectKey(namespace=namespace, name=name))
    number = port.number or 0
    port_name = port.name or ""
    if service is None:
        reason = f"{where} not found"
    elif service.is_external_name:
        reason = f"{where} is of type ExternalName, which the edge cannot forward to"
    elif port.number is not None:
        found = service.port_by_number(port.number)
        if found is not None:
            return EdgeBackend(namespace=namespace, service=name, port=number, port_name=found.name)
        reason = f"{where} has no port {port.number}"
    else:
        found = service.port_by_name(port_name)
        if found is not None:
            return EdgeBackend(
                namespace=namespace, service=name, port=found.port, port_name=found.name
            )
        reason = f'{where} has no port named "{port_name}"'
    return EdgeBackend(
        namespace=namespace,
        service=name,
        port=number,
        port_name=port_name,
        exists=False,
        reason=reason,
    )


def _resolve_modules(
    ingress: Ingress,
    module_sets: Mapping[ObjectKey, ModuleSet],
    secrets: Mapping[ObjectKey, Secret],
    *,
    overlay: Mapping[str, object] | None = None,
) -> tuple[Modules, dict[tuple[str, str], SecretValue], ModuleError | None]:
    """Merged modules, their Secret values, and why they cannot be applied (if they cannot).

    ``overlay``: modules (by field name) that come before every ModuleSet (the ingress-nginx
    annotations'): a ModuleSet's module of the same type replaces one of them."""
    return resolve_module_sets(
        ingress.metadata.namespace,
        ingress.module_set_names(),
        module_sets,
        secrets,
        overlay=overlay,
    )


def resolve_module_sets(
    namespace: str,
    names: Iterable[str],
    module_sets: Mapping[ObjectKey, ModuleSet],
    secrets: Mapping[ObjectKey, Secret],
    *,
    overlay: Mapping[str, object] | None = None,
) -> tuple[Modules, dict[tuple[str, str], SecretValue], ModuleError | None]:
    """The ModuleSets ``names`` of ``namespace`` merged (the last set listed wins per module),
    the values of the Secret keys they reference, and why they cannot be applied (if they
    cannot): an Ingress's annotation and a Gateway route rule's ExtensionRef filters both
    name ModuleSets this way. ``overlay``: see :func:`_resolve_modules`."""
    usable: list[ModuleSet] = []
    invalid: list[str] = []
    missing: list[str] = []
    for name in names:
        module_set = module_sets.get(ObjectKey(namespace=namespace, name=name))
        if module_set is None:
            missing.append(f"ModuleSet {namespace}/{name} not found")
            continue
        if module_set.problems:
            invalid.append(describe_invalid(module_set.key, module_set.problems))
            continue
        usable.append(module_set)
    modules = merge_modules(usable)
    if overlay:
        merged = {name: getattr(modules, name) for name in Modules.model_fields}
        for name, config in overlay.items():
            if merged.get(name) is None:
                merged[name] = config
        modules = Modules.model_validate(
            {name: config for name, config in merged.items() if config is not None}
        )

    values: dict[tuple[str, str], SecretValue] = {}
    missing_secrets: list[str] = []
    for module, field, ref in module_secret_ref_fields(modules):
        where = f"Secret {namespace}/{ref.name}"
        secret = secrets.get(ObjectKey(namespace=namespace, name=ref.name))
        value = None if secret is None else secret.value(ref.key)
        if value is not None:
            values[(ref.name, ref.key)] = value
        elif secret is None:
            missing_secrets.append(f"{where} not found (referenced by {module}.{field})")
        else:
            missing_secrets.append(
                f'{where} has no key "{ref.key}" (referenced by {module}.{field})'
            )

    clash = modules_clash(modules)
    if clash and not invalid:
        names = ", ".join(f"{namespace}/{m.metadata.name}" for m in usable)
        invalid.append(f"ModuleSets {names} merged: {clash}")

    error: ModuleError | None = None
    if invalid:
        error = ModuleError(permanent=True, reason="InvalidModuleSet", message="; ".join(invalid))
    elif missing:
        error = ModuleError(permanent=False, reason="ModuleSetNotFound", message="; ".join(missing))
    elif missing_secrets:
        error = ModuleError(
            permanent=False, reason="SecretNotFound", message="; ".join(missing_secrets)
        )
    return modules, values, error


# --- combining the parts of one host -----------------------------------------------------------


def _age_order(key: ObjectKey, created: datetime | None) -> tuple[int, float, str, str]:
    # No creationTimestamp (a hand-written embedded-mode object) counts as newest. Naive
    # timestamps are read as UTC so that they compare with aware ones instead of raising.
    if created is None:
        return (1, 0.0, key.namespace, key.name)
    if created.tzinfo is None:
        created = created.replace(tzinfo=UTC)
    return (0, created.timestamp(), key.namespace, key.name)


def edge_from_parts(
    host: str, parts: Mapping[ObjectKey, Sequence[DesiredRoute]]
) -> tuple[DesiredEdge, list[Conflict]]:
    """One host's edge from each Ingress's routes for it, whatever order the parts come in.

    For a path claimed by several Ingresses the oldest wins and each other claim is a
    :class:`Conflict`; the TLS Secret comes from the oldest Ingress that names one. A canary
    route (ingress-nginx's ``canary: "true"``) claims nothing: it joins the winning route of its
    path as that route's canary (the oldest canary, if several), and serves nothing alone.
    """
    ordered = sorted(
        ((key, routes) for key, routes in parts.items() if routes),
        key=lambda item: _age_order(item[0], item[1][0].ingress_created),
    )
    winners: dict[str, DesiredRoute] = {}
    canaries: dict[str, NginxCanary] = {}
    conflicts: list[Conflict] = []
    tls_secret: ObjectKey | None = None
    for key, routes in ordered:
        if tls_secret is None:
            tls_secret = next((r.tls_secret for r in routes if r.tls_secret is not None), None)
        for route in routes:
            if route.canary is not None:
                canaries.setdefault(route.route_id, route.canary)
                continue
            winner = winners.get(route.route_id)
            if winner is None:
                winners[route.route_id] = route
                continue
            conflicts.append(
                Conflict(
                    ingress=key,
                    host=host,
                    route_id=route.route_id,
                    path=route.path,
                    path_type=route.path_type,
                    winner=winner.ingress,
                )
            )
    for route_id, canary in canaries.items():
        main = winners.get(route_id)
        if main is not None:
            part = main.modules.ingress_nginx or IngressNginxModule()
            modules = main.modules.model_copy(
                update={"ingress_nginx": part.model_copy(update={"canary": canary})}
            )
            winners[route_id] = main.model_copy(update={"modules": modules})
    edge = DesiredEdge(
        host=host,
        routes=tuple(sorted(winners.values(), key=route_order)),
        tls_secret=tls_secret,
    )
    return edge, conflicts


# --- the whole cluster ---------------------------------------------------------------------------


def desired_edges(
    ingresses: Iterable[Ingress],
    ingress_classes: Iterable[IngressClass],
    module_sets: Iterable[ModuleSet],
    secrets: Iterable[Secret],
    services: Iterable[Service],
    *,
    ingress_nginx_annotations: bool = False,
) -> EdgesResult:
    """Every edge our Ingresses ask for; the result does not depend on the inputs' order.

    ingress-nginx annotations are translated where the IngressClass opts in, or everywhere
    with ``ingress_nginx_annotations`` (``--ingress-nginx-annotations``), as the actors do."""
    classes = list(ingress_classes)
    sets_by_key = {module_set.key: module_set for module_set in module_sets}
    secrets_by_key = {secret.key: secret for secret in secrets}
    services_by_key = {service.key: service for service in services}
    ours = sorted(
        (ingress for ingress in ingresses if is_ours(ingress, classes)),
        key=lambda ingress: (ingress.metadata.namespace, ingress.metadata.name),
    )
    parts: dict[str, dict[ObjectKey, list[DesiredRoute]]] = {}
    errors: list[IngressError] = []
    for ingress in ours:
        errors.extend(ingress_errors(ingress))
        nginx = (
            translate(ingress)
            if nginx_annotations_of(ingress.metadata.annotations)
            and annotations_enabled(ingress, classes, flag=ingress_nginx_annotations)
            else None
        )
        host_routes = ingress_host_routes(
            ingress, sets_by_key, secrets_by_key, services_by_key, nginx=nginx
        )
        for host, routes in host_routes.items():
            parts.setdefault(host, {})[ingress.key] = routes
    edges: dict[str, DesiredEdge] = {}
    conflicts: list[Conflict] = []
    for host in sorted(parts):
        edge, host_conflicts = edge_from_parts(host, parts[host])
        edges[host] = edge
        conflicts.extend(host_conflicts)
    conflicts.sort(key=lambda c: (c.host, c.route_id, c.ingress.namespace, c.ingress.name))
    return EdgesResult(edges=edges, conflicts=tuple(conflicts), ingress_errors=tuple(errors))
