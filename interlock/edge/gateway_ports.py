"""The data plane of interlock's Gateways: one listening socket per Gateway address and port.

Several Gateways may list the same port and overlapping hostnames (the conformance suite makes
many, all on port 80); they are told apart by the **local address** a connection arrives on —
each Gateway has its own address from the pool (``--gateway-addresses``) — and then by the
``Host`` header (or TLS server name) among that Gateway's listeners on that port.

Each socket is an ordinary :class:`~interlock.edge.server.EdgeServer` (HTTP/1.1, h2c, h2 by
ALPN, WebSocket and other upgrades, every answer of ``docs/answers.md``) whose *edge* is a
:class:`GatewayPortEdge`: for a request's host it finds the listener (most specific hostname
first) and the virtual host among that listener's routes, and offers one route whose backend
is a synthetic Service port. :class:`GatewayPolicies` answers the engine's policy question for
that port with the virtual host's :class:`~interlock.model.outbound.OutboundPolicy` — the
routes attached there, decided by the same engine as the edge and the mesh — and every other
question (endpoints of the real backends) through the controller's upstreams. An HTTPS port
chooses its certificate by the ClientHello's server name among its listeners' hostnames, and
with it whether a client certificate is required (the Gateway's ``spec.tls.frontend``).

The table a socket serves is replaced whole on every change (a request reads it once), so a
request never mixes two configurations.

A port of TLS listeners (``tls.mode`` Passthrough, TLSRoutes) is no HTTP server: its socket
splices connections undecrypted by their ClientHello's server name
(:class:`~interlock.edge.gateway_passthrough.PassthroughPort`).
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import ssl
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from urllib.parse import quote, urlencode

import aiohttp
from loguru import logger
from multidict import CIMultiDict

from interlock.dataplane.answers import MISDIRECTED, Answer, answer
from interlock.dataplane.limits import ProxyLimits
from interlock.dataplane.matching import select_match
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.proxy import DEFAULT_TIMEOUTS, Forwarder
from interlock.dataplane.request_target import normalize_host
from interlock.dataplane.source import Address, PolicySource, UpstreamError
from interlock.edge.gateway_passthrough import PassthroughPort
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.modules import (
    MissingSecretError,
    ModuleChain,
    ModuleConfigError,
    ProviderUnavailableError,
    compile_modules,
)
from interlock.edge.routing import ServedRoute
from interlock.edge.server import EdgeServer
from interlock.edge.tls import TlsConfigError, load_certificate, trust_client_cas
from interlock.edge.tls_fallback import accept_any_client_certificate
from interlock.model.backend_tls import BackendTLS
from interlock.model.edge_plan import BackendTarget
from interlock.model.gateway_conditions import hostname_matches
from interlock.model.gateway_frontend import ClientValidation
from interlock.model.gateway_listeners import CertificatePair
from interlock.model.gateway_mirrors import RuleMirror
from interlock.model.gateway_modules import RuleModules
from interlock.model.gateway_routes import GatewayServing, ListenerServing, PortServing
from interlock.model.moduleset import Modules
from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey

GATEWAY_ROUTE_ID = "gateway"


@dataclass(frozen=True, slots=True)
class Applied:
    """What applying a Gateway did: ports that could not be opened (with why), and whether a
    rule's modules failed transiently (an identity provider not answering, say)."""

    failures: Mapping[int, str]
    transient: bool


def _synthetic_target(
    serving: GatewayServing, port: int, listener: str, host: str | None
) -> BackendTarget:
    # Service names hold no "/": this can never name a real Service port.
    return BackendTarget(
        ServicePortKey(
            serving.gateway.namespace,
            f"gateway/{serving.gateway.name}/{listener}/{host or '*'}",
            port,
        )
    )


class ListenerCertificates:
    """An HTTPS port's certificates by listener hostname (``context_for`` of the TLS listener).

    Each listener has its own context, kept while its hostname, certificate and client
    validation are unchanged, so a connection's context tells which listener its TLS server
    name chose (:meth:`listener_of`): a request whose ``Host`` belongs to another listener is
    misdirected (421), or a client could present one listener's name and reach another's
    routes. A listener validating clients (``AllowValidOnly``) requires a certificate that
    verifies against its CAs in the handshake; without one the handshake fails, so no request
    is read. ``AllowInsecureFallback`` requests a certificate and lets every client in, with
    one that verifies or not, or none (``edge/tls_fallback.py``; the Gateway's
    ``InsecureFrontendValidationMode`` condition says so).
    """

    def __init__(self) -> None:
        self._listeners: tuple[tuple[str | None, str, ssl.SSLContext], ...] = ()
        self._built: dict[_ContextKey, ssl.SSLContext] = {}
        self._names: dict[int, str] = {}
        self._refuse = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)

    def update(self, port: PortServing) -> None:
        contexts: list[tuple[str | None, str, ssl.SSLContext]] = []
        built: dict[_ContextKey, ssl.SSLContext] = {}
        for listener in port.listeners:
            if not listener.certificates:
                continue
            pair = listener.certificates[0]
            key = (listener.hostname, listener.name, pair, listener.client_validation)
            context = self._built.get(key)
            if context is None:
                try:
                    context = load_certificate(
                        host=listener.hostname or "*", cert_pem=pair[0], key_pem=pair[1]
                    )
                    _validate_clients(context, listener.hostname, listener.client_validation)
                except TlsConfigError as error:
                    # Not served at all: a listener must never serve without its validation.
                    logger.warning("Gateway listener {}: {}", listener.name, error)
                    continue
                context.set_alpn_protocols(["h2", "http/1.1"])
            built[key] = context
            contexts.append((listener.hostname, listener.name, context))
        self._built = built
        self._listeners = tuple(contexts)
        self._names = {id(context): name for _, name, context in contexts}

    def listener_of(self, context: object) -> str | None:
        """The listener whose context ``context`` is (None: not one of this port's now)."""
        return self._names.get(id(context))

    def context_for(self, server_name: str | None) -> ssl.SSLContext:
        name = normalize_host(server_name or "")
        for hostname, _, context in self._listeners:
            if not name and hostname is None:
                return context
            if name and hostname_matches(hostname, name):
                return context
        if not name and self._listeners:
            return self._listeners[0][2]
        return self._refuse


_ContextKey = tuple[str | None, str, CertificatePair, ClientValidation | None]
"""A listener context's inputs: hostname, listener name, certificate, client validation."""


def _validate_clients(
    context: ssl.SSLContext, hostname: str | None, validation: ClientValidation | None
) -> None:
    """Require client certificates issued by the validation's CAs (``AllowValidOnly``), or
    request one and let every client in (``AllowInsecureFallback``)."""
    if validation is None:
        return
    trust_client_cas(context, host=hostname or "*", ca_bundles=(validation.ca_bundle,))
    if not validation.insecure_fallback:
        context.verify_mode = ssl.CERT_REQUIRED
    elif not accept_any_client_certificate(context):
        # This Python cannot request one without refusing some: request none (all let in).
        context.verify_mode = ssl.CERT_NONE


MIRROR_IN_FLIGHT = 256
"""RequestMirror copies in flight at most; more are dropped (a mirror is best effort and must
not let a burst of traffic pile up connections to the mirror backend)."""

MIRROR_TIMEOUT = 10.0
"""Seconds a mirrored copy may take before it is abandoned."""

_NOT_COPIED = frozenset(
    {
        "connection",
        "keep-alive",
        "proxy-connection",
        "te",
        "trailer",
        "transfer-encoding",
        "upgrade",
        "content-length",
        "expect",
    }
)


class MirrorSender:
    """Sends RequestMirror copies: each to one ready endpoint of the mirror's Service port,
    answers ignored. Only requests without a body are copied (a body streams once, to the real
    backend)."""

    def __init__(self, upstreams: PolicySource, *, rng: random.Random | None = None) -> None:
        self._upstreams = upstreams
        self._rng = rng or random.Random()
        self._session: aiohttp.ClientSession | None = None
        self._verified: Forwarder | None = None
        """Sends the copies to a Service port a BackendTLSPolicy names (verified TLS)."""
        self._tasks: set[asyncio.Task[None]] = set()
        self.sent = 0
        self.dropped = 0

    def copy(
        self,
        mirrors: Sequence[RuleMirror],
        *,
        method: str,
        path: str,
        query: Mapping[str, str],
        headers: Mapping[str, str],
    ) -> None:
        lowered = {name.lower(): value for name, value in headers.items()}
        if "transfer-encoding" in lowered or lowered.get("content-length", "0") != "0":
            return
        for mirror in mirrors:
            if mirror.fraction < 1.0 and self._rng.random() >= mirror.fraction:
                continue
            if len(self._tasks) >= MIRROR_IN_FLIGHT:
                self.dropped += 1
                continue
            target = ServicePortKey(mirror.namespace, mirror.service, mirror.port)
            found = self._upstreams.addresses(target)
            if isinstance(found, UpstreamError) or not found:
                self.dropped += 1
                continue
            host, port = found[self._rng.randrange(len(found))]
            quoted = quote(path, safe=_PATH_SAFE)
            encoded_query = urlencode(list(query.items()))
            copied = [(k, v) for k, v in headers.items() if k.lower() not in _NOT_COPIED]
            if mirror.tls is not None:
                sent = self._send_verified(
                    method, (host, port), quoted, encoded_query, copied, mirror.tls
                )
            else:
                url = f"http://{_bracketed(host)}:{port}{quoted}"
                if encoded_query:
                    url += "?" + encoded_query
                sent = self._send(method, url, copied)
            task = asyncio.get_running_loop().create_task(sent)
            self._tasks.add(task)
            task.add_done_callback(self._tasks.discard)

    async def _send(self, method: str, url: str, headers: list[tuple[str, str]]) -> None:
        if self._session is None:
            self._session = aiohttp.ClientSession(
                timeout=aiohttp.ClientTimeout(total=MIRROR_TIMEOUT), auto_decompress=False
            )
        try:
            async with self._session.request(
                method, url, headers=headers, allow_redirects=False
            ) as response:
                await response.release()
                self.sent += 1
        except (aiohttp.ClientError, TimeoutError) as error:
            logger.debug("RequestMirror copy to {} failed: {!r}", url, error)

    async def _send_verified(
        self,
        method: str,
        address: Address,
        path: str,
        query: str,
        headers: list[tuple[str, str]],
        tls: BackendTLS,
    ) -> None:
        if self._verified is None:
            self._verified = Forwarder()
            await self._verified.start()
        try:
            async with asyncio.timeout(MIRROR_TIMEOUT):
                answered = await self._verified.open(
                    method,
                    address=address,
                    path=path,
                    query=query,
                    headers=CIMultiDict(headers),
                    data=None,
                    backend_tls=tls,
                )
                answered.close()  # the answer is ignored
            self.sent += 1
        except (aiohttp.ClientError, TimeoutError) as error:
            logger.debug("RequestMirror copy to {} over TLS failed: {!r}", address, error)

    async def close(self) -> None:
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError):
                await task
        if self._session is not None:
            await self._session.close()
            self._session = None
        if self._verified is not None:
            await self._verified.close()
            self._verified = None


_PATH_SAFE = "/:@!$&'()*+,;=-._~%"


@dataclass(frozen=True, slots=True)
class _RuleApplied:
    """What a rule last served successfully: its modules (as configured), chain and policy."""

    modules: RuleModules | None
    chain: ModuleChain
    policy: OutboundPolicy


@dataclass(frozen=True, slots=True)
class _VirtualHostState:
    policy: OutboundPolicy
    rules: Mapping[int, ServedRoute]
    """By ``id()`` of the policy's rules (the state holds the policy)."""
    mirrors: Mapping[int, tuple[RuleMirror, ...]]
    """The rules' RequestMirror targets, by ``id()`` of the rule."""


@dataclass(slots=True)
class PortUpdate:
    """What :meth:`GatewayPortEdge.update` did: the synthetic targets' policies to serve, and
    the rules whose modules failed (``transient``: worth retrying without an input change)."""

    policies: dict[BackendTarget, OutboundPolicy] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)
    transient: bool = False


class GatewayPortEdge(InProcessEdge):
    """The routes of one Gateway port as the edge server reads them; see the module docstring.

    A request's host chooses a listener and virtual host (:meth:`routes_of_host`); the route
    rule it matches (the Gateway API's precedence across the virtual host's routes) is chosen
    by :meth:`route_for_request`, and that rule is served as a route of its own: its modules
    (ModuleSets of its ExtensionRef filters; none: a chain that admits everything) and a
    synthetic backend whose policy holds that one rule. A rule whose modules cannot be applied
    keeps what it served last; one that never served is reserved (no chain: 503)."""

    narrows_routes = True

    def __init__(
        self, *, trusted_proxies: Sequence[str] = (), mirror: MirrorSender | None = None
    ) -> None:
        """``mirror``: where the rules' RequestMirror copies are sent from (None: not sent)."""
        super().__init__(trusted_proxies=trusted_proxies)
        self._mirror = mirror
        self._port: PortServing | None = None
        self._served: dict[tuple[str, str | None], dict[str, ServedRoute]] = {}
        """Per listener and virtual host: its table of routes, built when the port changes."""
        self._unrouted: dict[str, dict[str, ServedRoute]] = {}
        """Per listener: the route of hosts it takes that no route serves (a 404 — or a 421)."""
        self._virtual: dict[str, _VirtualHostState] = {}
        self._applied: dict[tuple[str, str | None, str, str, int], _RuleApplied] = {}
        self._empty = compile_modules(Modules(), {})
        self.gateway_certificates = ListenerCertificates()
        self.certificates = self.gateway_certificates  # type: ignore[assignment]

    async def update(self, serving: GatewayServing, port: PortServing) -> PortUpdate:
        """Serve ``port`` of ``serving`` from now on (the table is replaced whole)."""
        outcome = PortUpdate()
        served: dict[tuple[str, str | None], dict[str, ServedRoute]] = {}
        virtual_states: dict[str, _VirtualHostState] = {}
        applied: dict[tuple[str, str | None, str, str, int], _RuleApplied] = {}
        for listener in port.listeners:
            for virtual in listener.virtual_hosts:
                host_id = f"{listener.name}/{virtual.hostname or '*'}"
                target = _synthetic_target(serving, port.port, listener.name, virtual.hostname)
                served[(listener.name, virtual.hostname)] = {
                    GATEWAY_ROUTE_ID: ServedRoute(
                        route_id=host_id,
                        path="/",
                        path_type="Prefix",
                        chain=self._empty,
                        backend=target,
                        modules=Modules(),
                        secrets={},
                    )
                }
                rules: dict[int, ServedRoute] = {}
                rule_mirrors: dict[int, tuple[RuleMirror, ...]] = {}
                for route in virtual.policy.routes:
                    for index, rule in enumerate(route.rules):
                        key = (listener.name, virtual.hostname, route.namespace, route.name, index)
                        wanted = virtual.modules.get((route.namespace, route.name, index))
                        policy = replace(
                            virtual.policy,
                            routes=(replace(route, rules=(rule,)),),
                            protocol=virtual.protocols.get(
                                (route.namespace, route.name, index), "detect"
                            ),
                        )
                        chain, policy = await self._rule_chain(
                            key, wanted, policy, applied, outcome
                        )
                        rule_target = BackendTarget(
                            target.key._replace(
                                name=f"{target.key.name}/{route.namespace}/{route.name}/{index}"
                            )
                        )
                        outcome.policies[rule_target] = policy
                        found_mirrors = virtual.mirrors.get((route.namespace, route.name, index))
                        if found_mirrors:
                            rule_mirrors[id(rule)] = found_mirrors
                        rules[id(rule)] = ServedRoute(
                            route_id=f"{host_id} {route.namespace}/{route.name} rule {index}",
                            path="/",
                            path_type="Prefix",
                            chain=chain,
                            backend=rule_target if chain is not None else None,
                            modules=None if wanted is None else wanted.modules,
                            secrets={},
                        )
                virtual_states[host_id] = _VirtualHostState(
                    policy=virtual.policy, rules=rules, mirrors=rule_mirrors
                )
        self._served = served
        self._unrouted = {
            listener.name: {
                GATEWAY_ROUTE_ID: ServedRoute(
                    route_id=f"{listener.name}/",
                    path="/",
                    path_type="Prefix",
                    chain=self._empty,
                    backend=None,
                    modules=Modules(),
                    secrets={},
                )
            }
            for listener in port.listeners
        }
        self._virtual = virtual_states
        self._applied = applied
        self._port = port
        if port.protocol == "HTTPS":
            self.gateway_certificates.update(port)
        return outcome

    async def _rule_chain(
        self,
        key: tuple[str, str | None, str, str, int],
        wanted: RuleModules | None,
        policy: OutboundPolicy,
        applied: dict[tuple[str, str | None, str, str, int], _RuleApplied],
        outcome: PortUpdate,
    ) -> tuple[ModuleChain | None, OutboundPolicy]:
        """The chain and policy a rule serves with: its modules compiled (the chain it has
        when they did not change, so rate-limit and breaker counters carry on), else its last
        good ones, else none (reserved)."""
        before = self._applied.get(key)
        where = f"{key[2]}/{key[3]} rule {key[4]}"
        if wanted is None:
            applied[key] = _RuleApplied(None, self._empty, policy)
            return self._empty, policy
        if before is not None and before.modules == wanted:
            applied[key] = _RuleApplied(wanted, before.chain, policy)
            return before.chain, policy
        problem: str | None = None
        if wanted.error is not None:
            problem = f"{wanted.error.reason}: {wanted.error.message}"
        else:
            try:
                chain = compile_modules(
                    wanted.modules, wanted.secrets, trusted_proxies=self._trusted_proxies
                )
                await chain.prepare()
            except ModuleConfigError as error:
                problem = f"InvalidModuleSet: {error}"
            except (MissingSecretError, ProviderUnavailableError) as error:
                problem = f"ModulesUnavailable: {error}"
                outcome.transient = True
            else:
                applied[key] = _RuleApplied(wanted, chain, policy)
                return chain, policy
        outcome.failed.append(f"{where}: {problem}")
        if before is not None:
            applied[key] = before  # the last good modules and backends
            return before.chain, before.policy
        return None, policy

    def _tls_listener(self, transport: object) -> str | None:
        """The listener the connection's TLS server name chose (None: not known)."""
        get_extra_info = getattr(transport, "get_extra_info", None)
        ssl_object = None if get_extra_info is None else get_extra_info("ssl_object")
        context = getattr(ssl_object, "context", None)
        if context is None:
            return None
        return self.gateway_certificates.listener_of(context)

    def routes_of(self, host_header: str) -> dict[str, ServedRoute] | None:
        return self.routes_of_host(normalize_host(host_header))

    def hosts_served(self) -> dict[str, dict[str, ServedRoute]] | None:
        return None  # routes_of_host reads the port's listeners, not a table by host

    def routes_of_host(self, host: str) -> dict[str, ServedRoute] | None:
        """The table of the virtual host ``host`` reaches, as :meth:`update` built it (the
        edge's steps choose in it per request: a dict, not a copy)."""
        port = self._port
        if port is None:
            return None
        listener: ListenerServing | None = port.listener(host)
        if listener is None:
            return None
        virtual = listener.virtual_host(host)
        if virtual is None:
            # The listener takes the host but no route serves it: 404 from route_for_request,
            # after it checked that the host belongs to the TLS server name's listener (421).
            return self._unrouted.get(listener.name)
        return self._served.get((listener.name, virtual.hostname))

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
        state = self._virtual.get(route.route_id)
        if self._port is not None and self._port.protocol == "HTTPS":
            chosen = self._tls_listener(transport)
            listener = route.route_id.split("/", 1)[0]
            if chosen is not None and chosen != listener:
                return answer(
                    MISDIRECTED,
                    f"TLS server name chose listener {chosen}, the Host listener {listener}",
                )
        if state is None:
            return None
        found = select_match(state.policy, method=method, path=path, headers=headers, query=query)
        if found is None:
            return None
        mirrors = state.mirrors.get(id(found[1]))
        if mirrors and self._mirror is not None:
            self._mirror.copy(mirrors, method=method, path=path, query=query, headers=headers)
        return state.rules.get(id(found[1]))


class GatewayPolicies:
    """The engine's :class:`PolicySource` on Gateway ports: the synthetic targets' policies,
    and the controller's upstreams for everything else."""

    def __init__(self, upstreams: PolicySource) -> None:
        self._upstreams = upstreams
        self.policies: dict[ServicePortKey, OutboundPolicy] = {}

    def policy(self, target: ServicePortKey) -> OutboundPolicy | None:
        found = self.policies.get(target)
        if found is not None or target.name.startswith("gateway/"):
            return found
        return self._upstreams.policy(target)

    def addresses(self, target: ServicePortKey) -> Sequence[Address] | UpstreamError:
        return self._upstreams.addresses(target)


class GatewayPorts:
    """Every Gateway socket of this process: opened, reprogrammed and closed as Gateways change."""

    def __init__(
        self,
        *,
        upstreams: PolicySource,
        limits: ProxyLimits,
        trusted_proxies: Sequence[str] = (),
        rng: random.Random | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        self._policies = GatewayPolicies(upstreams)
        self._mirrors = MirrorSender(upstreams, rng=rng)
        self._limits = limits
        self._trusted = tuple(trusted_proxies)
        self._rng = rng
        self._traffic = traffic
        self._servers: dict[tuple[str, int], tuple[EdgeServer, GatewayPortEdge]] = {}
        self._passthrough: dict[tuple[str, int], PassthroughPort] = {}
        """The sockets of TLS (Passthrough) listeners."""
        self._protocols: dict[tuple[str, int], str] = {}
        """Per open socket: HTTP, HTTPS or TLS (what it speaks is chosen when it opens)."""
        self._owners: dict[str, set[tuple[str, int]]] = {}
        self._targets: dict[str, set[ServicePortKey]] = {}

    @property
    def sockets(self) -> tuple[tuple[str, int], ...]:
        return tuple(sorted([*self._servers, *self._passthrough]))

    async def apply(self, key: str, serving: GatewayServing) -> Applied:
        """Serve ``serving`` (the Gateway ``key``): the ports that could not be opened, with
        why, and whether a rule's modules failed in a way worth retrying."""
        failures: dict[int, str] = {}
        transient = False
        wanted = {(serving.address, port.port) for port in serving.ports}
        for socket in sorted(self._owners.get(key, set()) - wanted):
            await self._close(socket)
        targets: set[ServicePortKey] = set()
        for port in serving.ports:
            socket = (serving.address, port.port)
            self._take_over(key, socket)
            if self._protocols.get(socket, port.protocol) != port.protocol:
                await self._close(socket)
            if port.protocol == "TLS":
                failure = await self._pass_through(key, socket, serving, port)
                if failure is not None:
                    failures[port.port] = failure
                continue
            entry = self._servers.get(socket)
            if entry is None:
                edge = GatewayPortEdge(trusted_proxies=self._trusted, mirror=self._mirrors)
                server = EdgeServer(
                    edge=edge,
                    upstreams=self._policies,
                    trusted_proxies=self._trusted,
                    limits=self._limits,
                    rng=self._rng,
                    traffic=self._traffic,
                )
                update = await edge.update(serving, port)
                self._install(targets, update.policies)
                self._report(key, update)
                transient = transient or update.transient
                address = f"{_bracketed(serving.address)}:{port.port}"
                try:
                    if port.protocol == "HTTPS":
                        await server.start(
                            addr=f"{_bracketed(serving.address)}:0", tls_addr=address
                        )
                    else:
                        await server.start(addr=address)
                except OSError as error:
                    failures[port.port] = f"cannot listen on {address}: {error.strerror or error}"
                    logger.warning("Gateway {}: {}", key, failures[port.port])
                    continue
                self._servers[socket] = (server, edge)
                self._protocols[socket] = port.protocol
                logger.info("Gateway {} serving {} on {}", key, port.protocol, address)
            else:
                update = await entry[1].update(serving, port)
                self._install(targets, update.policies)
                self._report(key, update)
                transient = transient or update.transient
        for stale in self._targets.get(key, set()) - targets:
            self._policies.policies.pop(stale, None)
        self._targets[key] = targets
        self._owners[key] = wanted - {(serving.address, p) for p in failures}
        return Applied(failures=failures, transient=transient)

    async def _pass_through(
        self, key: str, socket: tuple[str, int], serving: GatewayServing, port: PortServing
    ) -> str | None:
        """Serve a TLS (Passthrough) port: why it cannot be opened, or None."""
        passthrough = self._passthrough.get(socket)
        if passthrough is None:
            passthrough = PassthroughPort(
                upstreams=self._policies,
                limits=self._limits,
                timeouts=DEFAULT_TIMEOUTS,
                rng=self._rng,
                traffic=self._traffic,
            )
            address = f"{_bracketed(serving.address)}:{port.port}"
            try:
                await passthrough.start(serving.address, port.port)
            except OSError as error:
                failure = f"cannot listen on {address}: {error.strerror or error}"
                logger.warning("Gateway {}: {}", key, failure)
                return failure
            self._passthrough[socket] = passthrough
            self._protocols[socket] = port.protocol
            logger.info("Gateway {} passing TLS through on {}", key, address)
        passthrough.update(serving, port)
        return None

    def _take_over(self, key: str, socket: tuple[str, int]) -> None:
        """``socket`` is the Gateway ``key``'s from now on. Addresses are unique among the
        Gateways served at any one time, but the changes that move one from a Gateway to
        another arrive one Gateway at a time: the Gateway that had it must not close it when
        its own change (another address, or its removal) is applied after this one."""
        for other, sockets in self._owners.items():
            if other != key and socket in sockets:
                sockets.discard(socket)
                logger.info("Gateway {} takes {}:{} over from Gateway {}", key, *socket, other)

    @staticmethod
    def _report(key: str, update: PortUpdate) -> None:
        for failed in update.failed:
            logger.warning("Gateway {}: {}", key, failed)

    def _install(
        self, targets: set[ServicePortKey], policies: Mapping[BackendTarget, OutboundPolicy]
    ) -> None:
        for backend, policy in policies.items():
            self._policies.policies[backend.key] = policy
            targets.add(backend.key)

    async def remove(self, key: str) -> None:
        """Stop serving the Gateway ``key``."""
        for socket in sorted(self._owners.pop(key, set())):
            await self._close(socket)
        for stale in self._targets.pop(key, set()):
            self._policies.policies.pop(stale, None)

    async def _close(self, socket: tuple[str, int]) -> None:
        entry = self._servers.pop(socket, None)
        self._protocols.pop(socket, None)
        if entry is not None:
            await entry[0].stop()
        passthrough = self._passthrough.pop(socket, None)
        if passthrough is not None:
            await passthrough.stop()

    async def close(self) -> None:
        await self._mirrors.close()
        for socket in sorted([*self._servers, *self._passthrough]):
            await self._close(socket)
        self._owners.clear()
        self._targets.clear()
        self._policies.policies.clear()


def _bracketed(address: str) -> str:
    return f"[{address}]" if ":" in address else address
