"""The boundary between edge actors and an edge data plane: :class:`EdgeProvider`.

Edge actors decide *what* each route should look like; a provider makes it so in a data plane.
Keeping this boundary small (five commands and a snapshot) lets the same actors drive the data
plane in this process (:class:`~interlock.edge.inprocess.InProcessEdge`), one in another process
(:class:`~interlock.edge.http_provider.HttpEdge`), or a fault-injecting wrapper in tests
(:class:`~interlock.edge.faults.FaultyEdge`) — the way httpx's transports work.

The fail-closed guarantee rests on two promises every provider keeps:

* ``apply_modules`` on a new route creates it *without* a backend (it answers 503), and on an
  existing route swaps the module chain in one step, so no request ever sees a half-applied chain.
* a call that raises leaves an existing route exactly as it was. (A new route whose modules fail
  is still created, without modules or backend, so its path answers 503 rather than falling
  through to a shorter prefix; no backend can be attached to it until its modules apply.)

Errors are classified for the caller, because the caller's reaction differs: a
:class:`PermanentEdgeError` is recorded and not retried until an input changes; a
:class:`TransientEdgeError` is retried with backoff (honouring ``retry_after`` when given).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal, Protocol

from interlock.model.edge_plan import BackendTarget as BackendTarget
from interlock.model.moduleset import Modules, SecretValue

PathType = Literal["Exact", "Prefix"]
PATH_TYPES: tuple[PathType, ...] = ("Exact", "Prefix")


class EdgeError(Exception):
    """A provider call failed and changed nothing; ``message`` names the host and route."""

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class PermanentEdgeError(EdgeError):
    """Retrying cannot help until an input changes (invalid module config, a provider 4xx)."""


class TransientEdgeError(EdgeError):
    """Retrying later may succeed (timeout, 5xx, 429, a Secret not present yet)."""

    def __init__(self, message: str, *, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


@dataclass(frozen=True, slots=True)
class RouteSnapshot:
    """One route as the data plane serves it now. ``modules`` is the chain's secret-free summary;
    ``applied`` is False for a route whose modules never applied (it answers 503)."""

    route_id: str
    path: str
    path_type: PathType
    applied: bool
    modules: Mapping[str, object]
    backend: BackendTarget | None

    def to_json(self) -> dict[str, Any]:
        return {
            "routeId": self.route_id,
            "path": self.path,
            "pathType": self.path_type,
            "applied": self.applied,
            "modules": dict(self.modules),
            "backend": None if self.backend is None else self.backend.to_json(),
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> RouteSnapshot:
        path_type = data["pathType"]
        if path_type not in PATH_TYPES:
            raise ValueError(f"route {data.get('routeId')!r}: pathType {path_type!r} is unknown")
        backend = data.get("backend")
        return cls(
            route_id=str(data["routeId"]),
            path=str(data["path"]),
            path_type=path_type,
            applied=bool(data.get("applied", False)),
            modules=dict(data.get("modules") or {}),
            backend=None if backend is None else BackendTarget.from_json(backend),
        )


@dataclass(frozen=True, slots=True)
class HostSnapshot:
    """One edge (host): whether it has a TLS certificate, and its routes sorted by id."""

    host: str
    tls: bool
    routes: tuple[RouteSnapshot, ...]

    def to_json(self) -> dict[str, Any]:
        return {
            "host": self.host,
            "tls": self.tls,
            "routes": [route.to_json() for route in self.routes],
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> HostSnapshot:
        return cls(
            host=str(data["host"]),
            tls=bool(data.get("tls", False)),
            routes=tuple(RouteSnapshot.from_json(r) for r in data.get("routes", [])),
        )


@dataclass(frozen=True, slots=True)
class EdgeSnapshot:
    """Everything a data plane serves, without secrets: what ``/debug/edges`` shows."""

    hosts: tuple[HostSnapshot, ...]

    def to_json(self) -> dict[str, Any]:
        return {"hosts": [host.to_json() for host in self.hosts]}

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> EdgeSnapshot:
        return cls(hosts=tuple(HostSnapshot.from_json(h) for h in data.get("hosts", [])))

    def host(self, host: str) -> HostSnapshot | None:
        wanted = host.strip().lower().rstrip(".")
        return next((h for h in self.hosts if h.host == wanted), None)

    def route(self, *, host: str, route_id: str) -> RouteSnapshot | None:
        edge = self.host(host)
        if edge is None:
            return None
        return next((r for r in edge.routes if r.route_id == route_id), None)


@dataclass(frozen=True, slots=True)
class ApplyModules:
    """The ``apply_modules`` command: one route's path and module chain, with the Secret values
    the chain names."""

    host: str
    route_id: str
    path: str
    path_type: PathType
    modules: Modules
    secrets: Mapping[tuple[str, str], SecretValue] = field(default_factory=dict, repr=False)
    """``(secret name, key)`` in the ModuleSet's namespace to the value."""


class EdgeProvider(Protocol):
    """What an edge actor programs. A call fully succeeds, or raises and serves nothing new.

    Hosts are compared case-insensitively. ``secrets`` maps ``(secret name, key)`` in the
    ModuleSet's namespace to the value; providers never log or echo them.
    """

    async def apply_modules(self, command: ApplyModules) -> None:
        """Create the route without a backend if new; otherwise swap its modules atomically.

        On failure an existing route is left exactly as it was; a new route is still created,
        without modules or backend, so that its path answers 503 (fail closed).
        """
        ...

    async def attach_backend(self, *, host: str, route_id: str, backend: BackendTarget) -> None:
        """Start forwarding the route to ``backend``; its modules must have applied."""
        ...

    async def detach_backend(self, *, host: str, route_id: str) -> None:
        """Stop forwarding (the route answers 503); a no-op if there is no backend."""
        ...

    async def remove_route(self, *, host: str, route_id: str) -> None:
        """Forget the route; a no-op if it does not exist. A host left with no route answers 404."""
        ...

    async def set_tls(
        self, *, host: str, cert_pem: SecretValue | None, key_pem: SecretValue | None
    ) -> None:
        """Serve ``host`` over TLS with this certificate (both None: remove it)."""
        ...

    async def snapshot(self) -> EdgeSnapshot:
        """What the data plane serves now, secret-free."""
        ...


EdgeMethod = Literal[
    "apply_modules", "attach_backend", "detach_backend", "remove_route", "set_tls", "snapshot"
]
"""The calls of the :class:`EdgeProvider` boundary, by name."""


@dataclass(frozen=True, slots=True)
class EdgeCall:
    """One call on its way through a :class:`ForwardingEdge` (secret-free: no module chain
    values, no certificate)."""

    method: EdgeMethod
    host: str = ""
    route_id: str = ""
    modules: Modules | None = None
    """``apply_modules``: the chain being applied."""
    backend: BackendTarget | None = None
    """``attach_backend``: the backend being attached."""

    @property
    def where(self) -> str:
        """What the call concerns, for errors: ``edge HOST route ROUTE``, ``TLS for host
        HOST`` or ``snapshot``."""
        if self.method == "snapshot":
            return "snapshot"
        if self.method == "set_tls":
            return f"TLS for host {self.host}"
        return f"edge {self.host} route {self.route_id}"


class ForwardingEdge:
    """An :class:`EdgeProvider` that forwards every call to ``inner``: the base of the
    decorators (fault injection, upstream tracking, refusing calls after a stop).

    A decorator overrides :meth:`before` (runs first; raising refuses the call, which then
    never reaches ``inner``) and/or :meth:`after` (runs once ``inner`` succeeded) instead of
    forwarding all six methods itself.
    """

    def __init__(self, inner: EdgeProvider) -> None:
        self.inner = inner

    async def before(self, call: EdgeCall) -> None:
        """Runs before ``call`` is forwarded (nothing by default)."""

    async def after(self, call: EdgeCall) -> None:
        """Runs after ``inner`` carried ``call`` out (nothing by default)."""

    async def apply_modules(self, command: ApplyModules) -> None:
        call = EdgeCall("apply_modules", command.host, command.route_id, modules=command.modules)
        await self.before(call)
        await self.inner.apply_modules(command)
        await self.after(call)

    async def attach_backend(self, *, host: str, route_id: str, backend: BackendTarget) -> None:
        call = EdgeCall("attach_backend", host, route_id, backend=backend)
        await self.before(call)
        await self.inner.attach_backend(host=host, route_id=route_id, backend=backend)
        await self.after(call)

    async def detach_backend(self, *, host: str, route_id: str) -> None:
        call = EdgeCall("detach_backend", host, route_id)
        await self.before(call)
        await self.inner.detach_backend(host=host, route_id=route_id)
        await self.after(call)

    async def remove_route(self, *, host: str, route_id: str) -> None:
        call = EdgeCall("remove_route", host, route_id)
        await self.before(call)
        await self.inner.remove_route(host=host, route_id=route_id)
        await self.after(call)

    async def set_tls(
        self, *, host: str, cert_pem: SecretValue | None, key_pem: SecretValue | None
    ) -> None:
        call = EdgeCall("set_tls", host)
        await self.before(call)
        await self.inner.set_tls(host=host, cert_pem=cert_pem, key_pem=key_pem)
        await self.after(call)

    async def snapshot(self) -> EdgeSnapshot:
        call = EdgeCall("snapshot")
        await self.before(call)
        snapshot = await self.inner.snapshot()
        await self.after(call)
        return snapshot
