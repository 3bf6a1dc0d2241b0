"""Settings of a running controller, in one place, with one docstring per field.

The command line (`interlock run`), environment variables (`INTERLOCK_<FLAG>`) and tests all
build a :class:`ControllerConfig`; ``controller/`` reads nothing else. Keeping it a plain frozen
dataclass means a test can start a controller with short leases and grace periods without
touching flags, and every default is documented where it is defined.
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
from interlock.model.moduleset import SecretValue

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
class ControllerConfig:
    """Everything ``Controller`` needs to start; every field has a working default."""

    kubeconfig: str | None = None
    """Path of a kubeconfig file; ``None`` uses in-cluster config or the default kubeconfig."""

    in_cluster: bool = False
    """Use the Pod's service account (in-cluster config) instead of a kubeconfig file."""

    embedded: bool = False
    """Start the embedded API server in this process and talk to it instead of a cluster."""

    manifests: tuple[str, ...] = ()
    """Files or folders of YAML applied at start in embedded mode (after ``manifests/crds``)."""

    write_kubeconfig: str | None = None
    """Embedded mode: where to write a kubeconfig that kubectl can use against it."""

    policy_addr: Address = field(
        default_factory=lambda: parse_address(DEFAULT_POLICY_ADDR, flag="")
    )
    """Where the outbound policy API listens (``GET /v1/outbound/...``)."""

    admin_addr: Address = field(default_factory=lambda: parse_address(DEFAULT_ADMIN_ADDR, flag=""))
    """Where the admin server listens (``/healthz``, ``/readyz``, ``/debug/actors``)."""

    allowed_hosts: AllowedHosts = field(default_factory=AllowedHosts)
    """``Host`` names the policy API, the admin server and the embedded API server answer
    besides IP addresses and ``localhost`` (``--allowed-host``; a guard against DNS rebinding,
    see :mod:`interlock.model.allowed_hosts`): in a cluster, their Services' DNS names."""

    debug_from: tuple[str, ...] = ()
    """Networks (CIDRs) whose clients may read ``/debug/*`` besides loopback, which always may;
    everyone else is refused with 403 (``/healthz``, ``/readyz`` and ``/metrics`` stay open)."""

    edge_addr: Address | None = None
    """Where the edge data plane listens; ``None`` runs no edge."""

    edge_admin_url: str | None = None
    """The admin API (``http://HOST:PORT``) of a data plane running as its own process
    (``interlock edge``), which the edge actors program instead of one in this process; the
    controller then serves no data plane itself. Excludes ``edge_addr`` and ``edge_tls_addr``
    (TLS listeners and trusted proxies are that process's own settings)."""

    edge_admin_token: SecretValue | None = None
    """The token the admin API at ``edge_admin_url`` requires (``--edge-admin-token-file``),
    sent as ``Authorization: Bearer``; never logged nor shown."""

    ingress_nginx_annotations: bool = False
    """Serve ingress-nginx's annotations on every Ingress (``--ingress-nginx-annotations``);
    else only on those whose IngressClass opts in (``docs/ingress-nginx.md``)."""

    publish_service: ObjectKey | None = None
    """The Service in front of the edge (``--publish-service NAMESPACE/NAME``): every Ingress's
    ``status.loadBalancer`` is that Service's load-balancer ingress, else its cluster IP. ``None``
    writes where the edge listens instead, and nothing for a wildcard address (see
    :mod:`interlock.model.load_balancer`). Its namespace must be watched."""

    cluster_networks: tuple[str, ...] = ()
    """The pod and service networks (``--cluster-network``, Linkerd's ``clusterNetworks``): the
    gRPC API answers an address outside them that is no Service's as egress; empty: Linkerd's
    default (the private ranges)."""

    lax_reference_grants: bool = False
    """Linkerd's reading of ReferenceGrants (``--lax-reference-grants``): a producer route's
    cross-namespace backend needs no grant (``docs/policy-api.md``, "ReferenceGrants")."""

    grpc_addr: Address | None = None
    """Where Linkerd's proxy API (``io.linkerd.proxy.outbound.OutboundPolicies``, gRPC) listens
    (``--grpc-addr``); ``None`` serves none (see ``docs/linkerd.md``)."""

    mesh_addr: Address | None = None
    """Where the mesh listener serves cluster clients (``--mesh-addr``): requests whose
    authority names a Service are routed by that Service port's outbound policy; ``None`` runs
    no mesh listener (see ``docs/mesh.md``)."""

    mesh_client_namespace: str = "default"
    """The namespace whose view of each policy the mesh listener enforces: its consumer routes
    apply, other namespaces' consumer routes do not."""

    cluster_domain: str = "cluster.local"
    """The cluster's DNS domain, as in ``NAME.NAMESPACE.svc.cluster.local`` (canonical form)."""

    access_log: bool = False
    """Log one JSON line per request through the edge and the mesh listener (host, route,
    method, path, status, bytes, duration, upstream, retries; never a header value or the
    query string); off by default."""

    gateway_addresses: tuple[str, ...] = ()
    """The addresses interlock's Gateways are given, one each (``--gateway-addresses``: a
    CIDR or a list); each Gateway's listeners are served on its own address, so that Gateways
    with the same ports and hostnames are told apart. Empty: Gateways get no address (their
    ``Programmed`` condition says so). Needs ``edge_addr`` (the data plane of this process)."""

    edge_tls_addr: Address | None = None
    """Where the edge also serves HTTPS, with each host's certificate from its Ingress's TLS
    Secret chosen by SNI; ``None`` serves plain HTTP only. Needs ``edge_addr``."""

    trusted_proxies: tuple[str, ...] = ()
    """CIDRs of proxies in front of the edge (a cloud load balancer, say) whose
    ``X-Forwarded-For`` is believed when finding the client address for ipRestriction and
    rateLimit; from any other peer the header is ignored, so it cannot be forged."""

    edge_workers: int = 1
    """Data-plane processes serving ``edge_addr`` and ``edge_tls_addr`` (``--edge-workers``):
    1 serves them from this process; N > 1 starts N ``interlock edge`` children sharing the
    ports (``interlock.edge.workers``)."""

    edge_limits: ProxyLimits = DEFAULT_LIMITS
    """Bounds on what one client may hold of the edge served here: per-upstream connections,
    client header, body and idle timeouts (see :class:`~interlock.dataplane.limits.ProxyLimits`)."""

    trace_file: str | None = None
    """Write one JSON line per actor message delivery/handling here; ``None`` disables tracing."""

    otlp_endpoint: str | None = None
    """Export one OpenTelemetry span per handled message over OTLP/HTTP to this collector URL
    (``interlock.otel``, the ``otel`` extra); ``None`` exports nothing."""

    namespaces: tuple[str, ...] = ()
    """Namespaces to watch; empty means all namespaces."""

    lease_namespace: str = field(default_factory=default_lease_namespace)
    """Namespace of the coordination.k8s.io/v1 Lease that elects the status-writing replica."""

    lease_name: str = "interlock"
    """Name of that Lease."""

    lease_identity: str = field(default_factory=default_identity)
    """This replica's holder identity in the Lease."""

    lease_duration: float = 15.0
    """Seconds a Lease is valid after its last renewal (client-go's LeaseDuration)."""

    lease_renew_deadline: float = 10.0
    """Seconds the leader keeps trying to renew before it gives up leadership."""

    lease_retry_period: float = 2.0
    """Seconds between attempts to acquire or renew the Lease."""

    watch_grace: float = 30.0
    """Seconds a service-port watch lives on after its last subscriber left, so that a client
    reconnecting (or repeated ``GET``s) does not rebuild it each time."""

    reconnect_initial: float = 0.8
    """First delay, in seconds, before an informer reconnects after a failed list or watch."""

    reconnect_maximum: float = 30.0
    """Largest delay, in seconds, between informer reconnects (client-go's 0.8 s to 30 s)."""

    status_concurrency: int = 8
    """Status writes in flight at once (at most one per route); bounds the load a new leader
    puts on the API server when it writes every route's status."""

    status_retry_initial: float = 0.5
    """First delay, in seconds, before retrying a status write that failed transiently."""

    status_retry_maximum: float = 30.0
    """Largest delay, in seconds, between retries of a failing status write."""

    tune_gc: bool = False
    """Tune Python's garbage collector for a long-running controller holding many objects:
    collect the young generation less often, and freeze everything alive after the initial
    sync so later full collections do not walk it again (halves start-up CPU at 10k routes).
    Process-wide, so only for a process that is the controller: ``interlock run`` turns it on;
    tests and embedders leave it off."""

    controller_name: str = "interlock.dev/policy-controller"
    """The ``controllerName`` written in HTTPRoute ``status.parents`` entries."""

    log_level: str = "INFO"
    """Minimum level of log lines written to stderr (DEBUG, INFO, WARNING, ERROR)."""

    log_format: LogFormat = "text"
    """How log lines look: ``text`` for people, ``json`` (one object a line with
    controller-runtime's keys) for log pipelines; see :mod:`interlock.logs`."""
