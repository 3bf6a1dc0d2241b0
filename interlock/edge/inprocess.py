"""The data plane's state in this process, and :class:`InProcessEdge`, the provider over it.

The server reads this state on every request; edge actors (directly, or through the admin API
of a standalone data plane) change it. Each route is an immutable :class:`ServedRoute`; a change
builds a new one and replaces the old in a single dictionary assignment. Because a request reads
its route once and keeps that value (even across the awaits of a body read or a bcrypt check), it
sees either the old route or the new one, whole — never a new module chain with an old backend,
and never a moment without a chain. This is what
makes switching basicAuth → jwt safe under load.

Module configuration is compiled (CIDRs parsed, hashes and keys loaded) *before* anything is
replaced, so a bad configuration raises and leaves an existing route exactly as it was. A *new*
route whose modules fail is still created, as a reservation with no modules and no backend: it
answers 503 for its path instead of letting a shorter prefix of the same host (with other
modules) serve the requests meant for it, and a backend cannot be attached to it until its
modules apply.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace

from interlock.dataplane.answers import Answer
from interlock.dataplane.request_target import normalize_host
from interlock.edge.modules import (
    MissingSecretError,
    ModuleChain,
    ModuleConfigError,
    ProviderUnavailableError,
    compile_modules,
)
from interlock.edge.provider import (
    PATH_TYPES,
    ApplyModules,
    BackendTarget,
    EdgeSnapshot,
    HostSnapshot,
    PathType,
    PermanentEdgeError,
    RouteSnapshot,
    TransientEdgeError,
)
from interlock.edge.routing import ServedRoute, select_route
from interlock.edge.tls import SniCertificates, TlsConfigError
from interlock.model.moduleset import SecretValue


class InProcessEdge:
    """An :class:`~interlock.edge.provider.EdgeProvider` over state served from this process."""

    narrows_routes = False
    """Whether :meth:`route_for_request` may give another route than the one chosen by host and
    path (a Gateway's port does); the edge's steps skip the call when it cannot."""

    def __init__(
        self,
        *,
        trusted_proxies: Sequence[str] = (),
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], float] = time.time,
    ) -> None:
        self._trusted_proxies = tuple(trusted_proxies)
        self._clock = clock
        self._wall_clock = wall_clock
        self._hosts: dict[str, dict[str, ServedRoute]] = {}
        self.certificates = SniCertificates()

    def routes_of(self, host_header: str) -> dict[str, ServedRoute] | None:
        """The routes of the edge a ``Host`` header names, or None for an unknown host."""
        return self._hosts.get(normalize_host(host_header))

    def routes_of_host(self, host: str) -> dict[str, ServedRoute] | None:
        """:meth:`routes_of` for a host already normalized (``request_target.normalize_host``):
        the table kept as routes change, not a copy (a request chooses in it,
        ``routing.select_route``). Do not change it."""
        return self._hosts.get(host)

    def hosts_served(self) -> dict[str, dict[str, ServedRoute]] | None:
        """The table :meth:`routes_of_host` reads, by host, for a reader that looks a host up
        itself (the edge's steps: compiled, where calling this interpreted class's method cost
        ~800 instructions a request); it changes in place, never replaced. None when
        :meth:`routes_of_host` computes its answer instead (a Gateway's port)."""
        return self._hosts

    def route_for_request(
        self,
        route: ServedRoute,
        *,
        method: str,
        path: str,
        headers: Mapping[str, str],
        query: Mapping[str, str],
        transport: object = None,
    ) -> ServedRoute | Answer | None:
        """The route serving a request whose host and path chose ``route``: ``route`` itself
        here; a Gateway's port narrows it down to the route rule the request matches, whose
        own modules then apply, or answers itself (``gateway_ports.py``: a misdirected HTTPS
        request, 421). None: no rule matches (404). ``transport``: the client connection's."""
        return route

    def match(self, *, host_header: str, path: str) -> ServedRoute | None:
        routes = self.routes_of(host_header)
        return None if routes is None else select_route(routes, path)

    async def apply_modules(self, command: ApplyModules) -> None:
        route_id, path, path_type = command.route_id, command.path, command.path_type
        modules = command.modules
        key = _host_key(command.host)
        where = f"edge {key} route {route_id}"
        if path_type not in PATH_TYPES:
            raise PermanentEdgeError(f"{where}: pathType {path_type!r} must be Exact or Prefix")
        if not path.startswith("/"):
            raise PermanentEdgeError(f"{where}: path {path!r} must start with '/'")
        current = self._hosts.get(key, {}).get(route_id)
        secrets = dict(command.secrets)
        if (
            current is not None
            and current.modules == modules
            and current.secrets == secrets
            and current.path == path
            and current.path_type == path_type
        ):
            return
        try:
            chain = compile_modules(
                modules,
                secrets,
                trusted_proxies=self._trusted_proxies,
                clock=self._clock,
                wall_clock=self._wall_clock,
            )
            if chain.identity is not None and path_type != "Prefix":
                raise ModuleConfigError(
                    chain.identity.kind, "needs a Prefix path (its callback is under the path)"
                )
            await chain.prepare()
        except ModuleConfigError as exc:
            self._reserve(key, route_id, path=path, path_type=path_type, current=current)
            raise PermanentEdgeError(f"{where}: {exc}") from None
        except (MissingSecretError, ProviderUnavailableError) as exc:
            self._reserve(key, route_id, path=path, path_type=path_type, current=current)
            raise TransientEdgeError(f"{where}: {exc}") from None
        # Read again: preparing an oauth/oidc chain awaited the provider.
        current = self._hosts.get(key, {}).get(route_id)
        others = [r for rid, r in self._hosts.get(key, {}).items() if rid != route_id]
        try:
            # The host's handshake trusts the new CAs before the route requires them.
            self._trust_client_cas(key, [*others, chain])
        except TlsConfigError as exc:
            self._reserve(key, route_id, path=path, path_type=path_type, current=current)
            raise PermanentEdgeError(f"{where}: {exc}") from None
        self._hosts.setdefault(key, {})[route_id] = ServedRoute(
            route_id=route_id,
            path=path,
            path_type=path_type,
            chain=chain,
            backend=None if current is None else current.backend,
            modules=modules,
            secrets=secrets,
        )

    async def attach_backend(self, *, host: str, route_id: str, backend: BackendTarget) -> None:
        key = _host_key(host)
        current = self._existing(key, route_id)
        if current.chain is None:
            raise PermanentEdgeError(
                f"edge {key} route {route_id}: its modules were never applied; "
                "a backend is attached only after they are"
            )
        self._hosts[key][route_id] = replace(current, backend=backend)

    async def detach_backend(self, *, host: str, route_id: str) -> None:
        key = _host_key(host)
        current = self._hosts.get(key, {}).get(route_id)
        if current is not None and current.backend is not None:
            self._hosts[key][route_id] = replace(current, backend=None)

    async def remove_route(self, *, host: str, route_id: str) -> None:
        key = _host_key(host)
        routes = self._hosts.get(key)
        if routes is None:
            return
        routes.pop(route_id, None)
        # Fewer CAs than the host trusts now, all of them loaded before: cannot fail.
        self._trust_client_cas(key, list(routes.values()))
        if not routes:
            del self._hosts[key]

    async def set_tls(
        self, *, host: str, cert_pem: SecretValue | None, key_pem: SecretValue | None
    ) -> None:
        key = _host_key(host)
        if cert_pem is None and key_pem is None:
            self.certificates.set_certificate(host=key, pair=None)
            return
        if cert_pem is None or key_pem is None:
            missing = "tls.crt" if cert_pem is None else "tls.key"
            raise PermanentEdgeError(f"TLS for host {key}: {missing} is required")
        try:
            self.certificates.set_certificate(host=key, pair=(cert_pem, key_pem))
        except TlsConfigError as exc:
            raise PermanentEdgeError(str(exc)) from None

    async def snapshot(self) -> EdgeSnapshot:
        return self.snapshot_now()

    def snapshot_now(self) -> EdgeSnapshot:
        """The same as :meth:`snapshot`, callable from synchronous code (``/debug/edges``)."""
        tls_hosts = self.certificates.hosts()
        hosts = []
        for host in sorted(set(self._hosts) | tls_hosts):
            routes = self._hosts.get(host, {})
            hosts.append(
                HostSnapshot(
                    host=host,
                    tls=host in tls_hosts,
                    routes=tuple(
                        RouteSnapshot(
                            route_id=route.route_id,
                            path=route.path,
                            path_type=route.path_type,
                            applied=route.chain is not None,
                            modules={} if route.chain is None else route.chain.summary(),
                            backend=route.backend,
                        )
                        for _, route in sorted(routes.items())
                    ),
                )
            )
        return EdgeSnapshot(hosts=tuple(hosts))

    def _trust_client_cas(self, key: str, routes: Sequence[ServedRoute | ModuleChain]) -> None:
        """Make ``key``'s handshake verify client certificates against the CAs of the
        mutualTLS modules of ``routes`` (served routes or a chain about to be); raises
        :class:`TlsConfigError`."""
        chains = [r if isinstance(r, ModuleChain) else r.chain for r in routes]
        bundles = {c.client_ca_bundle for c in chains if c is not None and c.client_ca_bundle}
        self.certificates.set_client_cas(host=key, ca_bundles=tuple(sorted(bundles)))

    def _reserve(
        self,
        key: str,
        route_id: str,
        *,
        path: str,
        path_type: PathType,
        current: ServedRoute | None,
    ) -> None:
        if current is not None:
            return
        self._hosts.setdefault(key, {})[route_id] = ServedRoute(
            route_id=route_id,
            path=path,
            path_type=path_type,
            chain=None,
            backend=None,
            modules=None,
            secrets={},
        )

    def _existing(self, key: str, route_id: str) -> ServedRoute:
        current = self._hosts.get(key, {}).get(route_id)
        if current is None:
            raise PermanentEdgeError(
                f"edge {key} route {route_id}: no such route (apply its modules first)"
            )
        return current


def _host_key(host: str) -> str:
    key = normalize_host(host)
    if not key:
        raise PermanentEdgeError(f"host {host!r}: a host name is required")
    return key
