"""The kinds the embedded API server serves, described as data.

The server itself knows nothing about Services or HTTPRoutes: every path, discovery document,
OpenAPI document and Table it produces is derived from a :class:`ResourceType`. Built-in kinds
are listed here; a CustomResourceDefinition adds one more entry when it is created (and removes
it when deleted), exactly as in a real cluster, so ModuleSets are served by the same code as
Services. Keeping kinds as data is what lets the server stay generic.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from interlock.embedded import builtin_schemas
from interlock.embedded.jsonpath import JsonPathError, evaluate_jsonpath
from interlock.embedded.timefmt import human_duration, parse_timestamp

JsonObject = dict[str, Any]
CellFunction = Callable[[Mapping[str, Any], datetime], object]


@dataclass(frozen=True, slots=True)
class PrinterColumn:
    """One column of ``kubectl get`` output, rendered server-side into a Table."""

    name: str
    """Column title as the real API server spells it (kubectl upper-cases it)."""
    type: str
    """OpenAPI type of the cell: string, integer, number, boolean or date."""
    cell: CellFunction
    """Computes the cell from the stored object and the server's current time."""
    description: str = ""
    priority: int = 0
    """0 for the default view, 1 for columns shown only with ``-o wide``."""
    format: str = ""


@dataclass(frozen=True, slots=True)
class ResourceType:
    """Everything the server needs to know to serve one kind."""

    group: str
    """API group; ``""`` for the core group."""
    versions: tuple[str, ...]
    """Served versions, the preferred one first."""
    storage_version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    status_subresource: bool = False
    printer_columns: tuple[PrinterColumn, ...] = ()
    schemas: Mapping[str, JsonObject] = field(default_factory=dict)
    """OpenAPI v3 schema per version (from a CRD); empty for built-in kinds."""
    from_crd: bool = False

    @property
    def key(self) -> tuple[str, str]:
        """Storage key: objects of all versions of a kind share one collection."""
        return (self.group, self.plural)

    @property
    def list_kind(self) -> str:
        return f"{self.kind}List"

    def api_version(self, version: str) -> str:
        return f"{self.group}/{version}" if self.group else version

    def resource_name(self) -> str:
        """``plural.group`` (``services`` for the core group), as in error messages."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    def path_prefix(self, version: str) -> str:
        return f"/apis/{self.group}/{version}" if self.group else f"/api/{version}"


class Registry:
    """The kinds currently served, indexed the ways requests look them up."""

    def __init__(self) -> None:
        self._by_key: dict[tuple[str, str], ResourceType] = {}

    def register(self, rtype: ResourceType) -> None:
        self._by_key[rtype.key] = rtype

    def unregister(self, *, group: str, plural: str) -> None:
        self._by_key.pop((group, plural), None)

    def __iter__(self) -> Iterator[ResourceType]:
        return iter(sorted(self._by_key.values(), key=lambda t: (t.group, t.plural)))

    def by_plural(self, *, group: str, version: str, plural: str) -> ResourceType | None:
        rtype = self._by_key.get((group, plural))
        if rtype is None or version not in rtype.versions:
            return None
        return rtype

    def by_kind(self, *, api_version: str, kind: str) -> ResourceType | None:
        group, _, version = api_version.rpartition("/")
        for rtype in self._by_key.values():
            if rtype.group == group and rtype.kind == kind and version in rtype.versions:
                return rtype
        return None

    def group_versions(self) -> dict[str, list[str]]:
        """Each group's served versions, preferred first (core group under ``""``)."""
        groups: dict[str, list[str]] = {}
        for rtype in self:
            if not rtype.versions:
                continue  # a CRD whose versions are all unserved
            versions = groups.setdefault(rtype.group, [])
            for version in rtype.versions:
                if version not in versions:
                    versions.append(version)
        for versions in groups.values():
            versions.sort(key=_version_priority)
        return groups


def _version_priority(version: str) -> tuple[int, int, int]:
    """Kubernetes version ordering: GA before beta before alpha, higher numbers first."""
    head, _, tail = version.partition("alpha") if "alpha" in version else version.partition("beta")
    major = int(head[1:]) if head[1:].isdigit() else 0
    minor = int(tail) if tail.isdigit() else 0
    level = (
        0 if "alpha" not in version and "beta" not in version else (1 if "beta" in version else 2)
    )
    return (level, -major, -minor)


# ---------------------------------------------------------------------------------------------
# Printer columns of the built-in kinds (the same titles and cells as kube-apiserver's).


def _get(obj: Mapping[str, Any], *path: str) -> Any:
    current: Any = obj
    for part in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(part)
    return current


def name_column() -> PrinterColumn:
    return PrinterColumn(
        name="Name",
        type="string",
        format="name",
        description="Name must be unique within a namespace.",
        cell=lambda obj, _now: _get(obj, "metadata", "name") or "",
    )


def age_column(title: str = "Age") -> PrinterColumn:
    def cell(obj: Mapping[str, Any], now: datetime) -> object:
        created = _get(obj, "metadata", "creationTimestamp")
        if not isinstance(created, str):
            return "<unknown>"
        return human_duration(now - parse_timestamp(created))

    return PrinterColumn(
        name=title,
        type="string",
        description="CreationTimestamp is a timestamp representing the server time when this "
        "object was created.",
        cell=cell,
    )


def _text(value: Any, default: str = "<none>") -> str:
    if value is None or value == "" or value == []:
        return default
    return str(value)


def _service_ports(obj: Mapping[str, Any], _now: datetime) -> object:
    parts = []
    for port in _get(obj, "spec", "ports") or []:
        text = f"{port.get('port')}"
        if port.get("nodePort"):
            text += f":{port['nodePort']}"
        parts.append(f"{text}/{port.get('protocol', 'TCP')}")
    return ",".join(parts) or "<none>"


def _service_external_ip(obj: Mapping[str, Any], _now: datetime) -> object:
    spec = obj.get("spec") or {}
    if spec.get("type") == "ExternalName":
        return _text(spec.get("externalName"))
    ips = list(spec.get("externalIPs") or [])
    for ingress in _get(obj, "status", "loadBalancer", "ingress") or []:
        ips.append(ingress.get("ip") or ingress.get("hostname"))
    if ips:
        return ",".join(str(ip) for ip in ips)
    return "<pending>" if spec.get("type") == "LoadBalancer" else "<none>"


def _selector(obj: Mapping[str, Any], _now: datetime) -> object:
    selector = _get(obj, "spec", "selector") or {}
    return ",".join(f"{k}={v}" for k, v in sorted(selector.items())) or "<none>"


def _endpoint_slice_ports(obj: Mapping[str, Any], _now: datetime) -> object:
    ports = [str(p.get("port")) for p in obj.get("ports") or [] if p.get("port") is not None]
    return ",".join(ports) or "<unset>"


def _endpoint_slice_endpoints(obj: Mapping[str, Any], _now: datetime) -> object:
    addresses = [a for e in obj.get("endpoints") or [] for a in e.get("addresses") or []]
    if not addresses:
        return "<unset>"
    shown = ",".join(addresses[:3])
    return shown + (f" + {len(addresses) - 3} more..." if len(addresses) > 3 else "")


def _ingress_hosts(obj: Mapping[str, Any], _now: datetime) -> object:
    hosts = [r.get("host") for r in _get(obj, "spec", "rules") or [] if r.get("host")]
    return ",".join(hosts) or "*"


def _ingress_address(obj: Mapping[str, Any], _now: datetime) -> object:
    ingresses = _get(obj, "status", "loadBalancer", "ingress") or []
    return ",".join(str(i.get("ip") or i.get("hostname")) for i in ingresses) or ""


def _ingress_ports(obj: Mapping[str, Any], _now: datetime) -> object:
    return "80, 443" if _get(obj, "spec", "tls") else "80"


def _event_last_seen(obj: Mapping[str, Any], now: datetime) -> object:
    seen = obj.get("lastTimestamp") or obj.get("eventTime") or obj.get("firstTimestamp")
    if not isinstance(seen, str):
        return "<unknown>"
    return human_duration(now - parse_timestamp(seen))


def _event_object(obj: Mapping[str, Any], _now: datetime) -> object:
    involved = obj.get("involvedObject") or {}
    return f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}"


def _column(
    name: str, cell: CellFunction, *, priority: int = 0, column_type: str = "string"
) -> PrinterColumn:
    return PrinterColumn(name=name, type=column_type, cell=cell, priority=priority)


def _builtin(
    group: str,
    kind: str,
    plural: str,
    schema: JsonObject,
    *,
    namespaced: bool,
    columns: tuple[PrinterColumn, ...],
    short_names: tuple[str, ...] = (),
    categories: tuple[str, ...] = (),
    status: bool = False,
) -> ResourceType:
    """A built-in kind: served and stored as ``v1`` only, its singular the lower-cased kind."""
    return ResourceType(
        group=group,
        versions=("v1",),
        storage_version="v1",
        kind=kind,
        schemas={"v1": schema},
        plural=plural,
        singular=kind.lower(),
        namespaced=namespaced,
        short_names=short_names,
        categories=categories,
        status_subresource=status,
        printer_columns=columns,
    )


def _field_column(name: str, *path: str) -> PrinterColumn:
    """A string column showing the field at ``path`` (empty when the object does not set it)."""
    return _column(name, lambda o, _n: _get(o, *path) or "")


BUILTIN_TYPES: tuple[ResourceType, ...] = (
    _builtin(
        "",
        "Namespace",
        "namespaces",
        builtin_schemas.NAMESPACE,
        namespaced=False,
        short_names=("ns",),
        status=True,
        columns=(
            name_column(),
            _field_column("Status", "status", "phase"),
            age_column(),
        ),
    ),
    _builtin(
        "",
        "Service",
        "services",
        builtin_schemas.SERVICE,
        namespaced=True,
        short_names=("svc",),
        categories=("all",),
        status=True,
        columns=(
            name_column(),
            _field_column("Type", "spec", "type"),
            _column("Cluster-IP", lambda o, _n: _text(_get(o, "spec", "clusterIP"))),
            _column("External-IP", _service_external_ip),
            _column("Port(s)", _service_ports),
            age_column(),
            _column("Selector", _selector, priority=1),
        ),
    ),
    _builtin(
        "",
        "Secret",
        "secrets",
        builtin_schemas.SECRET,
        namespaced=True,
        columns=(
            name_column(),
            _field_column("Type", "type"),
            _column("Data", lambda o, _n: len(o.get("data") or {}), column_type="string"),
            age_column(),
        ),
    ),
    _builtin(
        "",
        "ConfigMap",
        "configmaps",
        builtin_schemas.CONFIG_MAP,
        namespaced=True,
        short_names=("cm",),
        columns=(
            name_column(),
            _column("Data", lambda o, _n: len(o.get("data") or {}), column_type="string"),
            age_column(),
        ),
    ),
    _builtin(
        "",
        "Event",
        "events",
        builtin_schemas.EVENT,
        namespaced=True,
        short_names=("ev",),
        columns=(
            _column("Last Seen", _event_last_seen),
            _field_column("Type", "type"),
            _field_column("Reason", "reason"),
            _column("Object", _event_object),
            _field_column("Message", "message"),
            PrinterColumn(
                name="Name",
                type="string",
                format="name",
                priority=1,
                cell=lambda o, _n: _get(o, "metadata", "name") or "",
            ),
        ),
    ),
    _builtin(
        "discovery.k8s.io",
        "EndpointSlice",
        "endpointslices",
        builtin_schemas.ENDPOINT_SLICE,
        namespaced=True,
        columns=(
            name_column(),
            _field_column("AddressType", "addressType"),
            _column("Ports", _endpoint_slice_ports),
            _column("Endpoints", _endpoint_slice_endpoints),
            age_column(),
        ),
    ),
    _builtin(
        "coordination.k8s.io",
        "Lease",
        "leases",
        builtin_schemas.LEASE,
        namespaced=True,
        columns=(
            name_column(),
            _field_column("Holder", "spec", "holderIdentity"),
            age_column(),
        ),
    ),
    _builtin(
        "networking.k8s.io",
        "Ingress",
        "ingresses",
        builtin_schemas.INGRESS,
        namespaced=True,
        short_names=("ing",),
        status=True,
        columns=(
            name_column(),
            _column("Class", lambda o, _n: _text(_get(o, "spec", "ingressClassName"))),
            _column("Hosts", _ingress_hosts),
            _column("Address", _ingress_address),
            _column("Ports", _ingress_ports),
            age_column(),
        ),
    ),
    _builtin(
        "networking.k8s.io",
        "IngressClass",
        "ingressclasses",
        builtin_schemas.INGRESS_CLASS,
        namespaced=False,
        columns=(
            name_column(),
            _field_column("Controller", "spec", "controller"),
            _column("Parameters", lambda o, _n: _text(_get(o, "spec", "parameters"))),
            age_column(),
        ),
    ),
    _builtin(
        "apiextensions.k8s.io",
        "CustomResourceDefinition",
        "customresourcedefinitions",
        builtin_schemas.CUSTOM_RESOURCE_DEFINITION,
        namespaced=False,
        short_names=("crd", "crds"),
        categories=("api-extensions",),
        status=True,
        columns=(
            name_column(),
            _column(
                "Created At",
                lambda o, _n: _get(o, "metadata", "creationTimestamp") or "",
                column_type="date",
            ),
        ),
    ),
)


# ---------------------------------------------------------------------------------------------
# CustomResourceDefinitions become ResourceTypes.


def _jsonpath_cell(path: str, column_type: str) -> CellFunction:
    def cell(obj: Mapping[str, Any], now: datetime) -> object:
        try:
            results = evaluate_jsonpath(path, obj)
        except JsonPathError:
            return None
        if not results:
            return None
        value = results[0]
        if column_type == "date" and isinstance(value, str):
            try:
                return human_duration(now - parse_timestamp(value))
            except ValueError:
                return "<invalid>"
        if column_type == "string":
            if isinstance(value, str):
                return value
            return json.dumps(value, separators=(",", ":"))
        return value

    return cell


def resource_type_from_crd(crd: Mapping[str, Any]) -> ResourceType:
    """The ResourceType a (validated) CustomResourceDefinition describes."""
    spec = crd["spec"]
    names = spec["names"]
    served = [v for v in spec["versions"] if v.get("served", True)]
    served.sort(key=lambda v: _version_priority(v["name"]))
    storage = next(v["name"] for v in spec["versions"] if v.get("storage"))
    preferred = served[0] if served else spec["versions"][0]
    columns: list[PrinterColumn] = [name_column()]
    for column in preferred.get("additionalPrinterColumns") or []:
        column_type = column.get("type", "string")
        columns.append(
            PrinterColumn(
                name=column["name"],
                type=column_type,
                description=column.get("description", ""),
                priority=int(column.get("priority", 0)),
                format=column.get("format", ""),
                cell=_jsonpath_cell(column["jsonPath"], column_type),
            )
        )
    if not preferred.get("additionalPrinterColumns"):
        columns.append(age_column())
    schemas = {
        v["name"]: (v.get("schema") or {}).get("openAPIV3Schema") or {} for v in spec["versions"]
    }
    return ResourceType(
        group=spec["group"],
        versions=tuple(v["name"] for v in served),
        storage_version=storage,
        kind=names["kind"],
        plural=names["plural"],
        singular=names.get("singular") or names["kind"].lower(),
        namespaced=spec.get("scope", "Namespaced") == "Namespaced",
        short_names=tuple(names.get("shortNames") or ()),
        categories=tuple(names.get("categories") or ()),
        status_subresource="status" in (preferred.get("subresources") or {}),
        printer_columns=tuple(columns),
        schemas=schemas,
        from_crd=True,
    )
