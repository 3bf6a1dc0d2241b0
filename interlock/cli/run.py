"""``interlock run``: the controller.

Turns flags (or ``INTERLOCK_<FLAG>`` environment variables, for Deployments) into a
:class:`~interlock.config.ControllerConfig`, starts the controller and stops it cleanly on
SIGINT/SIGTERM (drain, release the Lease, exit 0).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from typing import Any

from interlock.cli.announce import Announce, announcer
from interlock.cli.cpus import usable_cpus
from interlock.cli.edge_limits import add_edge_limit_flags, edge_limits_from_args
from interlock.cli.env import EnvDefaults, env_list
from interlock.cli.loop import add_loop_flag, run_on_loop
from interlock.cli.signals import announce_with, serve_until_signalled
from interlock.config import (
    DEFAULT_ADMIN_ADDR,
    DEFAULT_POLICY_ADDR,
    AdminConfig,
    ClusterConfig,
    ControllerConfig,
    EdgeConfig,
    GatewayConfig,
    LeadershipConfig,
    LinkerdConfig,
    MeshConfig,
    ObservabilityConfig,
    PolicyApiConfig,
    default_identity,
    default_lease_namespace,
    parse_address,
    parse_cidrs,
    parse_http_url,
    read_token_file,
)
from interlock.logs import configure_logging
from interlock.model.allowed_hosts import AllowedHosts
from interlock.model.authority import parse_namespace, validate_cluster_domain
from interlock.model.load_balancer import parse_publish_service

_HELP = "run the controller"
_DESCRIPTION = "Run the controller against a cluster, or against an embedded API server."


def add_run_parser(subparsers: Any) -> None:
    """Register ``interlock run``."""
    add = EnvDefaults.subcommand(subparsers, "run", help=_HELP, description=_DESCRIPTION)
    parser = add.parser
    add.switch("--embedded", help="start the embedded API server instead of using a kubeconfig")
    add.repeated(
        "--manifests", metavar="PATH", help="embedded mode: YAML file or folder applied at start"
    )
    add.value(
        "--write-kubeconfig",
        default=None,
        metavar="PATH",
        help="embedded mode: write a kubeconfig for kubectl here",
        shown="a temporary file",
    )
    add.value(
        "--kubeconfig",
        default=None,
        metavar="PATH",
        help="kubeconfig file",
        shown="$KUBECONFIG, else ~/.kube/config",
    )
    add.switch("--in-cluster", help="use the Pod's service account")
    add.value(
        "--policy-addr",
        default=DEFAULT_POLICY_ADDR,
        metavar="HOST:PORT",
        help="policy API address (port 0: any free port, printed; 0.0.0.0:8090 for every "
        "interface, as the shipped Deployment sets)",
    )
    add.value(
        "--admin-addr",
        default=DEFAULT_ADMIN_ADDR,
        metavar="HOST:PORT",
        help="admin address: /healthz /readyz /metrics /debug/ (port 0: any free port, "
        "printed; 0.0.0.0:9090 for every interface)",
    )
    add.repeated(
        "--allowed-host",
        metavar="NAME",
        help="a Host name the policy API, the admin server and the embedded API server answer "
        "besides IP addresses and localhost (NAME or *.SUFFIX; in a cluster their Services' DNS "
        "names); other Hosts get 421 (DNS rebinding)",
    )
    add.repeated(
        "--debug-from",
        metavar="CIDR",
        help="a network whose clients may read /debug/ on the admin address besides loopback "
        "(kubectl port-forward arrives on loopback); others get 403",
    )
    add.value(
        "--edge-addr",
        default=None,
        metavar="HOST:PORT",
        help="edge data plane address (port 0: any free port, printed)",
        shown="no edge",
    )
    add.value(
        "--edge-workers",
        default="auto",
        metavar="N|auto",
        help="data-plane processes serving --edge-addr and --edge-tls-addr, sharing the ports "
        "(SO_REUSEPORT) and programmed as one, each given the controller's upstream tables; "
        "auto: one per CPU this process may use (its affinity and cgroup cpu.max quota); 1 "
        "serves the edge from this process (docs/operations.md, Edge workers)",
    )
    add.value(
        "--edge-admin-url",
        default=None,
        metavar="URL",
        help="program a data plane running as its own process (interlock edge) through its "
        "admin API at URL instead of serving one here; excludes --edge-addr",
        shown="none",
    )
    add.value(
        "--edge-admin-token-file",
        default=None,
        metavar="PATH",
        help="with --edge-admin-url: a file holding the token that interlock edge "
        "--admin-token-file requires (a mounted Secret's key)",
        shown="none",
    )
    add.value(
        "--edge-admin-ca",
        default=None,
        metavar="PATH",
        help="with an https:// --edge-admin-url: a PEM file of the CA certificates its "
        "certificate (interlock edge --admin-tls-cert) is verified against",
        shown="the system's",
    )
    add.switch(
        "--edge-push-upstreams",
        help="with --edge-admin-url: push the controller's upstream tables (outbound policies, "
        "EndpointSlice endpoints) to that data plane, started with interlock edge "
        "--pushed-upstreams, so it routes as an edge in this process would",
    )
    add.value(
        "--publish-service",
        default=None,
        metavar="NAMESPACE/NAME",
        help="the Service in front of the edge: Ingress status.loadBalancer is its load-balancer "
        "ingress, else its cluster IP (without it: the --edge-addr host; nothing for 0.0.0.0)",
        shown="none",
    )
    add.value(
        "--gateway-addresses",
        default=None,
        metavar="CIDR|LIST",
        help="addresses for interlock's Gateways, one each (a CIDR such as 127.10.0.0/24, or "
        "a comma list); each Gateway's listeners are served on its own address. Needs "
        "--edge-addr",
        shown="none",
    )
    add.value(
        "--edge-tls-addr",
        default=None,
        metavar="HOST:PORT",
        help="edge HTTPS address, certificates from the Ingresses' TLS Secrets by SNI",
        shown="HTTP only",
    )
    add.repeated(
        "--cluster-network",
        metavar="CIDR",
        help="a pod or service network, as Linkerd's clusterNetworks: the gRPC API answers an "
        "address outside them that is no Service's as egress (default: Linkerd's, the private "
        "ranges)",
    )
    add.switch(
        "--lax-reference-grants",
        help="as Linkerd's controller: producer routes may send to Services of other namespaces "
        "without a ReferenceGrant (GEP-1294 asks for one; docs/policy-api.md)",
    )
    add.value(
        "--grpc-addr",
        default=None,
        metavar="HOST:PORT",
        help="Linkerd's proxy API (OutboundPolicies Get/Watch over gRPC), the policies of "
        "--policy-addr in the linkerd2-proxy-api encoding (port 0: any free port, printed; "
        "see docs/linkerd.md)",
        shown="not served",
    )
    add.value(
        "--mesh-addr",
        default=None,
        metavar="HOST:PORT",
        help="mesh listener address: cluster clients reach Services through it by their DNS "
        "names (Host header or HTTP_PROXY), routed by outbound policy (port 0: any free port, "
        "printed; see docs/mesh.md)",
        shown="no mesh listener",
    )
    add.switch(
        "--ingress-nginx-annotations",
        help="serve ingress-nginx's nginx.ingress.kubernetes.io/* annotations on every Ingress "
        "(else only for IngressClasses annotated interlock.dev/ingress-nginx-annotations: "
        '"true"; docs/ingress-nginx.md)',
    )
    add.switch(
        "--access-log",
        help="log one JSON line per edge and mesh request (no header values, no query string)",
    )
    add.value(
        "--mesh-client-namespace",
        default="default",
        metavar="NS",
        help="the namespace whose view of each policy the mesh listener enforces (its "
        "consumer routes apply)",
    )
    add.value(
        "--cluster-domain",
        default="cluster.local",
        metavar="DOMAIN",
        help="the cluster's DNS domain, as in NAME.NAMESPACE.svc.DOMAIN",
    )
    add.repeated(
        "--trusted-proxy",
        metavar="CIDR",
        help="a proxy in front of the edge whose X-Forwarded-For is believed",
    )
    add_edge_limit_flags(add)
    add.value(
        "--trace-file",
        default=None,
        metavar="PATH",
        help="write actor traces (JSON lines)",
        shown="no trace",
    )
    add.value(
        "--otlp-endpoint",
        default=None,
        metavar="URL",
        help="export a span per handled message over OTLP/HTTP to this collector "
        "(http://collector:4318; needs the otel extra)",
        shown="no export",
    )
    add.repeated(
        "--namespace", metavar="NS", help="watch only this namespace (default: all namespaces)"
    )
    add.value(
        "--lease-namespace",
        default=default_lease_namespace(),
        metavar="NS",
        help="namespace of the leader-election Lease",
        shown='$POD_NAMESPACE, else "default"',
    )
    add.value("--lease-name", default="interlock", metavar="NAME", help="leader-election Lease")
    add.value(
        "--lease-identity",
        default=None,
        metavar="ID",
        help="this replica's identity in the Lease",
        shown="host name plus a random suffix",
    )
    add.number("--lease-duration", default=15.0, help="how long a Lease is valid")
    add.number("--lease-renew-deadline", default=10.0, help="how long the leader tries to renew")
    add.number("--lease-retry-period", default=2.0, help="time between Lease attempts")
    add.number(
        "--watch-grace",
        default=30.0,
        help="how long a service-port watch outlives its last subscriber",
    )
    add_loop_flag(add)
    add.logging()
    parser.set_defaults(handler=run_command)


def config_from_args(args: argparse.Namespace) -> ControllerConfig:
    """The :class:`ControllerConfig` that ``interlock run`` flags (and env) describe; the
    combinations it refuses are refused by the config's types, with their messages."""
    allowed_hosts = (
        args.allowed_host if args.allowed_host is not None else env_list("--allowed-host")
    )
    debug_from = args.debug_from if args.debug_from is not None else env_list("--debug-from")
    networks = (
        args.cluster_network if args.cluster_network is not None else env_list("--cluster-network")
    )
    trusted = args.trusted_proxy if args.trusted_proxy is not None else env_list("--trusted-proxy")
    manifests = args.manifests if args.manifests is not None else env_list("--manifests")
    namespaces = args.namespace if args.namespace is not None else env_list("--namespace")
    try:
        config = ControllerConfig(
            cluster=ClusterConfig(
                kubeconfig=args.kubeconfig,
                in_cluster=args.in_cluster,
                embedded=args.embedded,
                manifests=tuple(manifests),
                write_kubeconfig=args.write_kubeconfig,
                namespaces=tuple(namespaces),
                domain=validate_cluster_domain(args.cluster_domain),
            ),
            leadership=LeadershipConfig(
                namespace=args.lease_namespace,
                name=args.lease_name,
                identity=args.lease_identity or default_identity(),
                duration=args.lease_duration,
                renew_deadline=args.lease_renew_deadline,
                retry_period=args.lease_retry_period,
            ),
            policy=PolicyApiConfig(
                addr=parse_address(args.policy_addr, flag="--policy-addr"),
                watch_grace=args.watch_grace,
                lax_reference_grants=args.lax_reference_grants,
            ),
            linkerd=LinkerdConfig(
                grpc_addr=(
                    parse_address(args.grpc_addr, flag="--grpc-addr") if args.grpc_addr else None
                ),
                cluster_networks=parse_cidrs(networks, flag="--cluster-network"),
            ),
            admin=AdminConfig(
                addr=parse_address(args.admin_addr, flag="--admin-addr"),
                debug_from=parse_cidrs(debug_from, flag="--debug-from"),
            ),
            edge=_edge_settings(args, trusted),
            mesh=MeshConfig(
                addr=parse_address(args.mesh_addr, flag="--mesh-addr") if args.mesh_addr else None,
                client_namespace=parse_namespace(
                    args.mesh_client_namespace, flag="--mesh-client-namespace"
                ),
            ),
            gateways=GatewayConfig(addresses=_gateway_addresses(args.gateway_addresses)),
            observability=ObservabilityConfig(
                log_level=args.log_level,
                log_format=args.log_format,
                access_log=args.access_log,
                trace_file=args.trace_file,
                otlp_endpoint=args.otlp_endpoint,
            ),
            allowed_hosts=AllowedHosts.parse(allowed_hosts, flag="--allowed-host"),
            # This process is the controller and nothing else.
            tune_gc=True,
        )
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
    if args.kubeconfig and not os.path.isfile(args.kubeconfig):
        raise SystemExit(
            f"--kubeconfig {args.kubeconfig}: no such file (give the path of a kubeconfig, or "
            "leave the flag out to use $KUBECONFIG or ~/.kube/config)"
        )
    return config


def _readable(path: str | None, *, flag: str) -> str | None:
    if path is not None and not os.path.isfile(path):
        raise ValueError(f"{flag} {path}: no such file")
    return path


def _edge_settings(args: argparse.Namespace, trusted: Sequence[str]) -> EdgeConfig:
    """The ``--edge-*``, ``--trusted-proxy``, ``--ingress-nginx-annotations`` and
    ``--publish-service`` flags' :class:`EdgeConfig`."""
    token_file = args.edge_admin_token_file
    return EdgeConfig(
        addr=parse_address(args.edge_addr, flag="--edge-addr") if args.edge_addr else None,
        tls_addr=(
            parse_address(args.edge_tls_addr, flag="--edge-tls-addr")
            if args.edge_tls_addr
            else None
        ),
        admin_url=(
            parse_http_url(args.edge_admin_url, flag="--edge-admin-url")
            if args.edge_admin_url
            else None
        ),
        admin_token=(
            read_token_file(token_file, flag="--edge-admin-token-file") if token_file else None
        ),
        admin_ca=_readable(args.edge_admin_ca, flag="--edge-admin-ca"),
        push_upstreams=args.edge_push_upstreams,
        workers=parse_edge_workers(args.edge_workers, serves_edge=bool(args.edge_addr)),
        limits=edge_limits_from_args(args),
        trusted_proxies=parse_cidrs(trusted, flag="--trusted-proxy"),
        ingress_nginx_annotations=args.ingress_nginx_annotations,
        publish_service=(
            parse_publish_service(args.publish_service) if args.publish_service else None
        ),
    )


def run_command(args: argparse.Namespace) -> int:
    from interlock.controller.app import StartupError
    from interlock.kube.client import KubeConfigError

    configure_logging(args.log_level, format=args.log_format)
    # With --log-format json, what is printed on stdout is JSON too (interlock.cli.announce),
    # and so is the one line saying why it could not start.
    announce = announcer(args.log_format, logger="cli.run")
    announce_with(announce)
    try:
        config = config_from_args(args)
        return run_on_loop(
            run_until_signalled(config, announce=announce), uvloop=not args.no_uvloop
        )
    except (KubeConfigError, StartupError) as error:
        return _cannot_start(f"interlock run: {error}", args.log_format)
    except SystemExit as refused:
        # config_from_args refuses a flag's value with SystemExit(message).
        if args.log_format != "json" or not isinstance(refused.code, str):
            raise
        return _cannot_start(refused.code, args.log_format)


def _cannot_start(line: str, log_format: str) -> int:
    """Say on stderr why the controller could not start (a log line in JSON); exit status 1."""
    if log_format == "json":
        from loguru import logger

        logger.bind(logger="cli.run").error("{}", line)
    else:
        print(line, file=sys.stderr)
    return 1


async def run_until_signalled(config: ControllerConfig, *, announce: Announce = print) -> int:
    """Start a controller, print where it listens, and stop it on SIGINT or SIGTERM."""
    from interlock.controller.app import Controller

    controller = Controller(config)

    async def serving() -> None:
        try:
            await controller.start()
            for line in controller.describe():
                announce(line)
            sys.stdout.flush()
            await asyncio.Event().wait()
        finally:
            await controller.stop()

    return await serve_until_signalled(
        serving(),
        doing="stopping (draining actors, releasing the Lease)",
        announce=announce,
    )


def register(subparsers: Any) -> None:
    """Add ``run`` to the main parser's subcommands."""
    add_run_parser(subparsers)


def parse_edge_workers(value: str, *, serves_edge: bool = True) -> int:
    """``--edge-workers``: a count of at least 1, or ``auto``: the CPUs this process may use
    (:func:`~interlock.cli.cpus.usable_cpus`) when it serves an edge (``serves_edge``:
    ``--edge-addr``), else 1."""
    if value.strip() == "auto":
        return usable_cpus() if serves_edge else 1
    try:
        count = int(value)
    except ValueError:
        raise SystemExit(f"--edge-workers {value!r}: a number or auto is required") from None
    if count < 1:
        raise SystemExit(f"--edge-workers {count}: at least 1 is required")
    return count


def _gateway_addresses(text: str | None) -> tuple[str, ...]:
    """``--gateway-addresses``; the Gateway models load only when it is given (issue 29 item 5)."""
    if not text:
        return ()
    from interlock.model.gateway_listeners import parse_address_pool

    return parse_address_pool(text)
