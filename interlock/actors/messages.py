"""Messages and topic names of the outbound actors (and what the policy API reads).

One module so that senders and receivers agree on one name per concept, and so that each
message states how it is traced (``trace_summary``) and coalesced (``coalesce_key``: a newer
message with the same key replaces a queued one in the mailbox — latest state wins, so a burst
of changes to one object costs its receiver one handling).

The topics they travel on, with who publishes and who reads them: :mod:`interlock.actors.topics`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, ClassVar

from interlock.model.gateway import HTTPRoute, ReferenceGrant
from interlock.model.grpc_route import GRPCRoute
from interlock.model.meta import InvalidObject, ObjectKey
from interlock.model.service import Service
from interlock.model.stream_routes import TCPRoute, TLSRoute

ROUTE_GROUP = "gateway.networking.k8s.io"
SERVICE_KEY = "service"
ROUTE_KEY = "route"

SERVICE_DIRECTORY = "service-directory"
GRANTS_DIRECTORY = "grants"
STATUS_WRITER = "status-writer"
INFORMER_ROUTER = "informer-router"


def route_identity(
    namespace: str, name: str, *, group: str = ROUTE_GROUP, kind: str = "HTTPRoute"
) -> str:
    """One identity per route whatever its served version: ``<group>/<ns>/<name>`` for an
    HTTPRoute, ``<group>/<Kind>/<ns>/<name>`` for other kinds (a GRPCRoute may share a name)."""
    if kind == "HTTPRoute":
        return f"{group}/{namespace}/{name}"
    return f"{group}/{kind}/{namespace}/{name}"


def route_address(namespace: str, name: str, *, kind: str = "HTTPRoute") -> str:
    return f"route/{route_identity(namespace, name, kind=kind)}"


def watch_address(*, namespace: str, service: str, port: int, client_namespace: str) -> str:
    return f"watch/{namespace}/{service}/{port}/{client_namespace}"


@dataclass(frozen=True, slots=True)
class ObjectParsed:
    """A change of an object, parsed by the router with its kind's parser (the kinds table,
    ``controller/kinds.py``) for the directory of its kind: every directory receives models.

    ``value`` is the model, also for a deletion when the last state parsed (a directory may
    need it to find what the object published); None when the object could not be read (the
    router logged why, naming the field), which a directory takes as the object's absence.
    Keyed like :class:`ObjectChanged`, so a burst coalesces and a poison message is resynced.
    """

    __trace_redact__: ClassVar[frozenset[str]] = frozenset({"value"})

    kind: str
    key: ObjectKey
    value: object | None
    deleted: bool
    resource_version: str = ""

    @property
    def coalesce_key(self) -> tuple[str, str, str, str]:
        return ("object", self.kind, self.key.namespace, self.key.name)

    def trace_summary(self) -> str:
        verb = "Deleted" if self.deleted else ("Parsed" if self.value is not None else "Invalid")
        return f"ObjectParsed {verb} {self.kind} {self.key} rv={self.resource_version}"


@dataclass(frozen=True, slots=True)
class ObjectChanged:
    """An informer event on its way to the router, keyed so a burst on one object coalesces.

    An update followed by a delete leaves the delete; a delete followed by a re-create leaves
    the create: exactly the final state, which is all the actors need. ``obj`` is the raw
    object (never traced: it may be a Secret).
    """

    __trace_redact__: ClassVar[frozenset[str]] = frozenset({"obj"})

    kind: str
    namespace: str
    name: str
    deleted: bool
    resource_version: str
    obj: dict[str, Any] = field(compare=False)

    @classmethod
    def of(
        cls,
        obj: dict[str, Any],
        *,
        kind: str | None = None,
        deleted: bool = False,
        resource_version: str | None = None,
    ) -> ObjectChanged:
        """The change for the raw object ``obj``: namespace, name and resourceVersion read from
        its metadata, the kind from ``obj`` unless given (a listed item carries none)."""
        meta = obj.get("metadata") or {}
        if resource_version is None:
            resource_version = str(meta.get("resourceVersion") or "")
        return cls(
            kind=kind if kind is not None else str(obj.get("kind") or ""),
            namespace=str(meta.get("namespace") or ""),
            name=str(meta.get("name") or ""),
            deleted=deleted,
            resource_version=resource_version,
            obj=obj,
        )

    @property
    def coalesce_key(self) -> tuple[str, str, str, str]:
        return ("object", self.kind, self.namespace, self.name)

    @property
    def identity(self) -> str:
        """``Upserted Service default/web rv=12``: the correlation id of what follows."""
        verb = "Deleted" if self.deleted else "Upserted"
        return f"{verb} {self.kind} {self.namespace}/{self.name} rv={self.resource_version}"

    def trace_summary(self) -> str:
        return self.identity


@dataclass(frozen=True, slots=True)
class ServiceUpserted:
    """The ServiceDirectory learns a Service's current state."""

    service: Service

    @property
    def coalesce_key(self) -> tuple[str, str, str]:
        return ("service", self.service.metadata.namespace, self.service.metadata.name)

    def trace_summary(self) -> str:
        return f"ServiceUpserted {self.service.key}"


@dataclass(frozen=True, slots=True)
class NamespaceOpaquePorts:
    """The ServiceDirectory learns a Namespace's ``config.linkerd.io/opaque-ports`` (None: the
    Namespace has none, or is gone)."""

    namespace: str
    value: str | None

    @property
    def coalesce_key(self) -> tuple[str, str, str]:
        return ("namespace", "", self.namespace)

    def trace_summary(self) -> str:
        return f"NamespaceOpaquePorts {self.namespace} {self.value!r}"


@dataclass(frozen=True, slots=True)
class AboutObject:
    """A message about the object ``key``: its mailbox keeps only the latest of the messages
    with the same ``coalesce_prefix`` about that object."""

    key: ObjectKey
    coalesce_prefix: ClassVar[str]

    @property
    def coalesce_key(self) -> tuple[str, str, str]:
        return (self.coalesce_prefix, self.key.namespace, self.key.name)


@dataclass(frozen=True, slots=True)
class ServiceDeleted(AboutObject):
    """The ServiceDirectory learns that a Service is gone."""

    coalesce_prefix = "service"

    def trace_summary(self) -> str:
        return f"ServiceDeleted {self.key}"


@dataclass(frozen=True, slots=True)
class GrantUpserted:
    """The grants directory learns a ReferenceGrant's current state."""

    grant: ReferenceGrant

    @property
    def coalesce_key(self) -> tuple[str, str, str]:
        return ("grant", self.grant.metadata.namespace, self.grant.metadata.name)

    def trace_summary(self) -> str:
        return f"GrantUpserted {self.grant.key}"


@dataclass(frozen=True, slots=True)
class GrantDeleted(AboutObject):
    """The grants directory learns that a ReferenceGrant is gone."""

    coalesce_prefix = "grant"

    def trace_summary(self) -> str:
        return f"GrantDeleted {self.key}"


@dataclass(frozen=True, slots=True)
class RouteSpecified:
    """The retained value of ``route:<Kind>:<ns>/<name>`` for a route that parsed."""

    route: HTTPRoute | GRPCRoute | TLSRoute | TCPRoute

    def trace_summary(self) -> str:
        meta = self.route.metadata
        kind = type(self.route).__name__
        return f"RouteSpecified {kind} {meta.namespace}/{meta.name} gen={meta.generation}"


@dataclass(frozen=True, slots=True)
class RouteRejected:
    """The retained value of ``httproute:<ns>/<name>`` for a route that failed to parse.

    ``raw`` is kept so the route's status can still name its parents and the error.
    """

    __trace_redact__: ClassVar[frozenset[str]] = frozenset({"raw"})

    raw: dict[str, Any] = field(compare=False)
    error: InvalidObject = field(compare=False)
    resource_version: str = ""

    def trace_summary(self) -> str:
        return f"RouteRejected rv={self.resource_version} {self.error}"


@dataclass(frozen=True, slots=True)
class DesiredRouteStatus:
    """What a RouteActor wants ``status.parents`` of its HTTPRoute to be.

    Published on :data:`ROUTE_STATUS_TOPIC` under the route identity. ``stored`` is the route's
    ``status.parents`` as the RouteActor last saw it, so the StatusWriter can skip writes of
    what is already there.
    """

    namespace: str
    name: str
    parents: list[dict[str, Any]]
    stored: list[dict[str, Any]] = field(default_factory=list)
    kind: str = "HTTPRoute"
    uid: str = ""
    """The route's uid: a route deleted and created again under the same name is another
    object, whatever this replica wrote to the old one."""

    def trace_summary(self) -> str:
        reasons = [
            f"{c.get('type')}={c.get('reason')}"
            for entry in self.parents
            for c in entry.get("conditions", ())
            if isinstance(c, dict)
        ]
        return f"DesiredRouteStatus {self.kind} {self.namespace}/{self.name} {' '.join(reasons)}"


@dataclass(frozen=True, slots=True)
class LeadershipChanged:
    """This replica gained (True) or lost (False) the Lease."""

    leading: bool

    @property
    def coalesce_key(self) -> str:
        return "leadership"
