"""Settings of a running controller, grouped by concern, with one docstring per field.

The command line (`interlock run`), environment variables (`INTERLOCK_<FLAG>`) and tests all
build a :class:`ControllerConfig`; ``controller/`` reads nothing else. It holds one frozen
dataclass per concern (kopf's ``OperatorSettings`` is the model): the cluster and its API client,
leadership, the policy API, Linkerd's gRPC API, the admin server, the edge, the mesh listener,
Gateways, status writing, observability. Each checks its own combinations in ``__post_init__``
and :class:`ControllerConfig` those that span two, so a config that cannot run cannot be
built: the errors name the flag a user would set (``--edge-admin-url and
--edge-admin-token-file go together``), and ``interlock run`` shows them as they are. A test
starts a controller with short leases and grace periods by giving only the concerns it changes;
every default is documented where it is defined.
"""

from __future__ import annotations

import ipaddress
import os
import socket
import uuid
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits
from interlock.logs import LogFormat
from interlock.model.allowed_hosts import AllowedHosts
from interlock.model.meta import ObjectKey
from interlock.model.secret_value import SecretValue

# Loopback unless told otherwise: a controller started on a laptop should not serve its policy
# and /debug/ to the network. The shipped Deployment passes 0.0.0.0 explicitly. One admin port
# (9090) for run, demo and the manifests.
DEFAULT_POLICY_ADDR = "127.0.0.1:8090"
DEFAULT_ADMIN_ADDR = "127.0.0.1:9090"


@dataclass(frozen=True, slots=True)
class Address:
    """A ``HOST:PORT`` listening address; port 0 means "pick a free port"."""

    host: str
    port: int

    def __str__(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"{host}:{self.port}"


def parse_address(value: str, *, flag: str) -> Address:
    """Parse ``HOST:PORT`` (``[::1]:8090`` for IPv6); errors name the flag and the value."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not port_text.isdigit():
        raise ValueError(f"{flag}: {value!r} is not HOST:PORT (for example 127.0.0.1:8090)")
    port = int(port_text)
    if not 0 <= port <= 65535:
        raise ValueError(f"{flag}: port {port} is out of range 0..65535")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    return Address(host=host or "0.0.0.0", port=port)


def parse_cidrs(values: Sequence[str], *, flag: str) -> tuple[str, ...]:
    """Check each value is an IPv4/IPv6 network (``10.0.0.0/8``) or address; errors name the
    flag and the value."""
    for value in values:
        try:
            ipaddress.ip_network(value, strict=False)
        except ValueError:
            raise ValueError(f"{flag}: {value!r} is not a CIDR (for example 10.0.0.0/8)") from None
    return tuple(values)


def read_token_file(path: str, *, flag: str) -> SecretValue:
    """The shared token in the file at ``path`` (a mounted Secret's key), without surrounding
    whitespace; errors name the flag and the path, never the file's content."""
    try:
        text = Path(path).read_bytes().strip()
    except OSError as error:
        raise ValueError(f"{flag} {path}: cannot read it ({error.strerror})") from None
    if not text:
        raise ValueError(f"{flag} {path}: the file is empty; it must hold the token")
    if not all(0x21 <= byte < 0x7F for byte in text):
        # It travels in an HTTP header: printable ASCII, no spaces (base64 or hex is).
        raise ValueError(f"{flag} {path}: the token must be printable ASCII without spaces")
    return SecretValue(text)


def parse_http_url(value: str, *, flag: str) -> str:
    """Check ``value`` is an ``http://`` or ``https://`` URL with a host (``http://edge:9091``);
    errors name the flag, never the URL's user information."""
    url = urlsplit(value)
    try:
        port_ok = url.port is None or url.port > 0
    except ValueError:
        port_ok = False
    if url.scheme not in ("http", "https") or not url.hostname or not port_ok:
        shown = url.hostname or value.rpartition("@")[2]
        raise ValueError(f"{flag}: {shown!r} is not an http(s) URL (for example http://edge:9091)")
    return value


def default_identity() -> str:
    """A Lease holder identity unique per process: the host name plus a random suffix."""
    return f"{socket.gethostname()}-{uuid.uuid4().hex[:8]}"


def default_lease_namespace() -> str:
    """The Pod's namespace in a cluster (downward API ``POD_NAMESPACE``), else ``default``."""
    return os.environ.get("POD_NAMESPACE", "default")


@dataclass(frozen=True, kw_only=True)
class ClusterConfig:
    """Which Kubernetes API server the controller talks to, how, and what it watches there."""

    kubeconfig: str | None = None
    """Path of a kubeconfig file (``--kubeconfig``); ``None`` uses in-cluster config or the
    default kubeconfig."""

    in_cluster: bool = False
    """Use the Pod's service account (in-cluster config) instead of a kubeconfig file."""

    embedded: bool = False
    """Start the embedded API server in this process and talk to it instead of a cluster
    (``--embedded``); excludes ``kubeconfig`` and ``in_cluster``."""

    manifests: tuple[str, ...] = ()
    """Files or folders of YAML applied at start in embedded mode (after ``manifests/crds``)."""

    write_kubeconfig: str | None = None
    """Embedded mode: where to write a kubeconfig that kubectl can use against it."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch (``--namespace``); empty means all namespaces."""

    domain: str = "cluster.local"
    """The cluster's DNS domain (``--cluster-domain``), as in
    ``NAME.NAMESPACE.svc.cluster.local`` (canonical form)."""

    reconnect_initial: float = 0.8
    """First delay, in seconds, before an informer reconnects after a failed list or watch."""

    reconnect_maximum: float = 30.0
    """Largest delay, in seconds, between informer reconnects (client-go's 0.8 s to 30 s)."""

    def __post_init__(self) -> None:
        if self.embedded and (self.kubeconfig or self.in_cluster):
            raise ValueError("--embedded cannot be combined with --kubeconfig or --in-cluster")
        if not self.embedded and (self.manifests or self.write_kubeconfig):
            raise ValueError("--manifests and --write-kubeconfig need --embedded")


@dataclass(frozen=True, kw_only=True)
class LeadershipConfig:
    """The coordination.k8s.io/v1 Lease that elects the replica writing status."""

    namespace: str = field(default_factory=default_lease_namespace)
    """Namespace of the Lease (``--lease-namespace``)."""

    name: str = "interlock"
    """Name of the Lease (``--lease-name``)."""

    identity: str = field(default_factory=default_identity)
    """This replica's holder identity in the Lease (``--lease-identity``)."""

    duration: float = 15.0
    """Seconds a Lease is valid after its last renewal (client-go's LeaseDuration)."""

    renew_deadline: float = 10.0
    """Seconds the leader keeps trying to renew before it gives up leadership."""

    retry_period: float = 2.0
    """Seconds between attempts to acquire or renew the Lease."""

    def __post_init__(self) -> None:
        if not self.identity:
            raise ValueError("--lease-identity must not be empty")
        if not self.duration > self.renew_deadline > self.retry_period > 0:
            # client-go's rule: the leader gives up before its Lease can expire under it, after
            # more than one attempt.
            raise ValueError(
                f"--lease-duration ({self.duration:g}s) must be longer than "
                f"--lease-renew-deadline ({self.renew_deadline:g}s), and that longer than "
                f"--lease-retry-period ({self.retry_period:g}s), above 0: the leader stops "
                "leading before its Lease can expire, after more than one attempt to renew it"
            )


@dataclass(frozen=True, kw_only=True)
class PolicyApiConfig:
    """The outbound policy API (``GET /v1/outbound/...``) and what it answers."""

    addr: Address = field(default_factory=lambda: parse_address(DEFAULT_POLICY_ADDR, flag=""))
    """Where the policy API listens (``--policy-addr``)."""

    watch_grace: float = 30.0
    """Seconds a service-port watch lives on after its last subscriber left, so that a client
    reconnecting (or repeated ``GET``s) does not rebuild it each time."""

    lax_reference_grants: bool = False
    """Linkerd's reading of ReferenceGrants (``--lax-reference-grants``): a producer route's
    cross-namespace backend needs no grant (``docs/policy-api.md``, "ReferenceGrants")."""


@dataclass(frozen=True, kw_only=True)
class LinkerdConfig:
    """Linkerd's proxy API (``io.linkerd.proxy.outbound.OutboundPolicies``, gRPC)."""

    grpc_addr: Address | None = None
    """Where the gRPC API listens (``--grpc-addr``); ``None`` serves none (``docs/linkerd.md``)."""

    cluster_networks: tuple[str, ...] = ()
    """The pod and service networks (``--cluster-network``, Linkerd's ``clusterNetworks``): the
    gRPC API answers an address outside them that is no Service's as egress; empty: Linkerd's
    default (the private ranges)."""


@dataclass(frozen=True, kw_only=True)
class AdminConfig:
    """The admin server (``/healthz``, ``/readyz``, ``/metrics``, ``/debug/*``)."""

    addr: Address = field(default_factory=lambda: parse_address(DEFAULT_ADMIN_ADDR, flag=""))
    """Where the admin server listens (``--admin-addr``)."""

    debug_from: tuple[str, ...] = ()
    """Networks (CIDRs) whose clients may read ``/debug/*`` besides loopback, which always may
    (``--debug-from``); everyone else is refused with 403 (``/healthz``, ``/readyz`` and
    ``/metrics`` stay open)."""


@dataclass(frozen=True, kw_only=True)
class EdgeConfig:
    """The edge data plane: served by this process (``addr``) or programmed in another one
    (``admin_url``), and how Ingresses are served and published on it."""

    addr: Address | None = None
    """Where the edge data plane listens (``--edge-addr``); ``None`` runs no edge here."""

    tls_addr: Address | None = None
    """Where the edge also serves HTTPS (``--edge-tls-addr``), with each host's certificate from
    its Ingress's TLS Secret chosen by SNI; ``None`` serves plain HTTP only."""

    admin_url: str | None = None
    """The admin API (``http://HOST:PORT``, ``--edge-admin-url``) of a data plane running as its
    own process (``interlock edge``), which the edge actors program instead of one in this
    process; the controller then serves no data plane itself. Excludes ``addr``, ``tls_addr``
    and ``trusted_proxies`` (TLS listeners and trusted proxies are that process's own
    settings) and needs ``admin_token``."""

    admin_token: SecretValue | None = None
    """The token the admin API at ``admin_url`` requires (``--edge-admin-token-file``), sent as
    ``Authorization: Bearer``; never logged nor shown."""

    admin_ca: str | None = None
    """A PEM file of the certificates an ``https://`` ``admin_url``'s certificate is verified
    against (``--edge-admin-ca``; ``interlock edge --admin-tls-cert``); None: the system's."""

    push_upstreams: bool = False
    """Push the controller's upstream tables (policies, EndpointSlice endpoints) to the data
    plane at ``admin_url`` (``--edge-push-upstreams``; it runs ``interlock edge
    --pushed-upstreams``), as to edge workers; else it resolves through cluster DNS."""

    workers: int = 1
    """Data-plane processes serving ``addr`` and ``tls_addr`` (``--edge-workers``): 1 serves
    them from this process; N > 1 starts N ``interlock edge`` children sharing the ports
    (``interlock.edge.workers``)."""

    limits: ProxyLimits = DEFAULT_LIMITS
    """Bounds on what one client may hold of the edge served here, and of the mesh listener
    (``--edge-*`` limits): per-upstream connections, client header, body and idle timeouts (see
    :class:`~interlock.dataplane.limits.ProxyLimits`)."""

    trusted_proxies: tuple[str, ...] = ()
    """CIDRs of proxies in front of the edge (``--trusted-proxy``; a cloud load balancer, say)
    whose ``X-Forwarded-For`` is believed when finding the client address for ipRestriction and
    rateLimit; from any other peer the header is ignored, so it cannot be forged."""

    ingress_nginx_annotations: bool = False
    """Serve ingress-nginx's annotations on every Ingress (``--ingress-nginx-annotations``);
    else only on those whose IngressClass opts in (``docs/ingress-nginx.md``)."""

    publish_service: ObjectKey | None = None
    """The Service in front of the edge (``--publish-service NAMESPACE/NAME``): every Ingress's
    ``status.loadBalancer`` is that Service's load-balancer ingress, else its cluster IP. ``None``
    writes where the edge listens instead, and nothing for a wildcard address (see
    :mod:`interlock.model.load_balancer`). Its namespace must be watched."""

    @property
    def runs(self) -> bool:
        """Whether there is an edge to program: served here or reached at ``admin_url``."""
        return self.addr is not None or self.admin_url is not None

    def __post_init__(self) -> None:
        if self.admin_url is not None and (
            self.addr is not None or self.tls_addr is not None or self.trusted_proxies
        ):
            raise ValueError(
                "--edge-admin-url cannot be combined with --edge-addr, --edge-tls-addr or "
                "--trusted-proxy: the controller either serves the data plane itself or programs "
                "one running elsewhere (give that one these settings: interlock edge --listen, "
                "--tls-listen, --trusted-proxy)"
            )
        if (self.admin_url is None) != (self.admin_token is None):
            raise ValueError(
                "--edge-admin-url and --edge-admin-token-file go together: the edge's admin API "
                "refuses calls without its token (interlock edge --admin-token-file)"
            )
        if self.push_upstreams and self.admin_url is None:
            raise ValueError(
                "--edge-push-upstreams needs --edge-admin-url: it pushes the upstream tables to "
                "a data plane in another process (edge workers get them without the flag)"
            )
        if self.workers < 1:
            raise ValueError(f"--edge-workers {self.workers}: at least 1 is required")
        if self.workers > 1 and self.addr is None:
            raise ValueError(
                "--edge-workers above 1 needs --edge-addr: the workers serve this process's edge "
                "(a data plane programmed through --edge-admin-url runs its own processes)"
            )
        if self.publish_service is not None and not self.runs:
            raise ValueError(
                "--publish-service needs --edge-addr or --edge-admin-url: it says where the edge "
                "is reached, and without either no edge runs"
            )


@dataclass(frozen=True, kw_only=True)
class MeshConfig:
    """The mesh listener: cluster clients' requests routed by outbound policy (``docs/mesh.md``)."""

    addr: Address | None = None
    """Where the mesh listener serves cluster clients (``--mesh-addr``): requests whose
    authority names a Service are routed by that Service port's outbound policy; ``None`` runs
    no mesh listener."""

    client_namespace: str = "default"
    """The namespace whose view of each policy the mesh listener enforces
    (``--mesh-client-namespace``): its consumer routes apply, other namespaces' do not."""


@dataclass(frozen=True, kw_only=True)
class GatewayConfig:
    """Gateway API Gateways, served by this process's edge."""

    addresses: tuple[str, ...] = ()
    """The addresses interlock's Gateways are given, one each (``--gateway-addresses``: a
    CIDR or a list); each Gateway's listeners are served on its own address, so that Gateways
    with the same ports and hostnames are told apart. Empty: Gateways get no address (their
    ``Programmed`` condition says so). Needs ``EdgeConfig.addr``."""


@dataclass(frozen=True, kw_only=True)
class StatusConfig:
    """How the leader writes status (routes, Ingresses, Gateways)."""

    controller_name: str = "interlock.dev/policy-controller"
    """The ``controllerName`` written in HTTPRoute ``status.parents`` entries."""

    concurrency: int = 8
    """Status writes in flight at once (at most one per route); bounds the load a new leader
    puts on the API server when it writes every route's status."""

    retry_initial: float = 0.5
    """First delay, in seconds, before retrying a status write that failed transiently."""

    retry_maximum: float = 30.0
    """Largest delay, in seconds, between retries of a failing status write."""


@dataclass(frozen=True, kw_only=True)
class ObservabilityConfig:
    """Logs, access logs, traces and spans."""

    log_level: str = "INFO"
    """Minimum level of log lines written to stderr (DEBUG, INFO, WARNING, ERROR)."""

    log_format: LogFormat = "text"
    """How log lines look: ``text`` for people, ``json`` (one object a line with
    controller-runtime's keys) for log pipelines; see :mod:`interlock.logs`."""

    access_log: bool = False
    """Log one JSON line per request through the edge and the mesh listener (host, route,
    method, path, status, bytes, duration, upstream, retries; never a header value or the
    query string); off by default."""

    trace_file: str | None = None
    """Write one JSON line per actor message delivery/handling here; ``None`` disables tracing."""

    otlp_endpoint: str | None = None
    """Export one OpenTelemetry span per handled message over OTLP/HTTP to this collector URL
    (``interlock.otel``, the ``otel`` extra); ``None`` exports nothing."""


@dataclass(frozen=True, kw_only=True)
class ControllerConfig:
    """Everything ``Controller`` needs to start, one field per concern; every field has a
    working default. Checks the combinations that span two concerns."""

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    """The API server, how to reach it, and the namespaces watched."""

    leadership: LeadershipConfig = field(default_factory=LeadershipConfig)
    """The Lease that elects the status-writing replica."""

    policy: PolicyApiConfig = field(default_factory=PolicyApiConfig)
    """The outbound policy API."""

    linkerd: LinkerdConfig = field(default_factory=LinkerdConfig)
    """Linkerd's gRPC proxy API."""

    admin: AdminConfig = field(default_factory=AdminConfig)
    """The admin server."""

    edge: EdgeConfig = field(default_factory=EdgeConfig)
    """The edge data plane and the Ingresses it serves."""

    mesh: MeshConfig = field(default_factory=MeshConfig)
    """The mesh listener."""

    gateways: GatewayConfig = field(default_factory=GatewayConfig)
    """Gateway API Gateways."""

    status: StatusConfig = field(default_factory=StatusConfig)
    """Status writing."""

    observability: ObservabilityConfig = field(default_factory=ObservabilityConfig)
    """Logs, traces and spans."""

    allowed_hosts: AllowedHosts = field(default_factory=AllowedHosts)
    """``Host`` names the policy API, the admin server and the embedded API server answer
    besides IP addresses and ``localhost`` (``--allowed-host``; a guard against DNS rebinding,
    see :mod:`interlock.model.allowed_hosts`): in a cluster, their Services' DNS names."""

    tune_gc: bool = False
    """Tune Python's garbage collector for a long-running controller holding many objects:
    collect the young generation less often, and freeze everything alive after the initial
    sync so later full collections do not walk it again (halves start-up CPU at 10k routes).
    Process-wide, so only for a process that is the controller: ``interlock run`` turns it on;
    tests and embedders leave it off."""

    def __post_init__(self) -> None:
        if self.gateways.addresses and self.edge.addr is None:
            raise ValueError(
                "--gateway-addresses needs --edge-addr: Gateways are served by this process's "
                "data plane"
            )
        publish, namespaces = self.edge.publish_service, self.cluster.namespaces
        if publish is not None and namespaces and publish.namespace not in namespaces:
            raise ValueError(
                f"--publish-service {publish}: its namespace is not watched; "
                f"add --namespace {publish.namespace}"
            )
