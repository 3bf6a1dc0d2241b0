"""The ``interlock run`` and ``interlock policy`` subcommands.

``run`` turns flags (or ``INTERLOCK_<FLAG>`` environment variables, for Deployments) into a
:class:`~interlock.config.ControllerConfig`, starts the controller and stops it cleanly on
SIGINT/SIGTERM (drain, release the Lease, exit 0). ``policy get|watch`` is the smallest client
of the policy API, for people debugging what a mesh proxy would be told.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import re
import signal
import sys
from collections.abc import Callable
from typing import Any

from interlock.config import (
    DEFAULT_ADMIN_ADDR,
    DEFAULT_POLICY_ADDR,
    ControllerConfig,
    default_identity,
    default_lease_namespace,
    parse_address,
    parse_cidrs,
    parse_http_url,
)

DEFAULT_POLICY_SERVER = "http://127.0.0.1:8090"

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_name(flag: str) -> str:
    """``--policy-addr`` → ``INTERLOCK_POLICY_ADDR``."""
    return "INTERLOCK_" + flag.lstrip("-").replace("-", "_").upper()


def _env_bool(flag: str) -> bool:
    raw = os.environ.get(env_name(flag), "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise SystemExit(f"{env_name(flag)}: {raw!r} is not a boolean (true/false)")


def _env_list(flag: str) -> list[str]:
    raw = os.environ.get(env_name(flag), "")
    return [part.strip() for part in raw.split(",") if part.strip()]


class _EnvDefaults:
    """Adds flags whose default comes from ``INTERLOCK_<FLAG>`` and says so in ``--help``."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    def value(self, flag: str, *, default: str | None, help: str, **kw: Any) -> None:
        env = os.environ.get(env_name(flag))
        self.parser.add_argument(
            flag,
            default=env if env is not None else default,
            help=f"{help} (env {env_name(flag)}; default {default})",
            **kw,
        )

    def number(self, flag: str, *, default: float, help: str) -> None:
        env = os.environ.get(env_name(flag))
        self.parser.add_argument(
            flag,
            type=float,
            default=float(env) if env is not None else default,
            help=f"{help} (env {env_name(flag)}; default {default})",
        )

    def switch(self, flag: str, *, help: str) -> None:
        self.parser.add_argument(
            flag,
            action="store_true",
            default=_env_bool(flag),
            help=f"{help} (env {env_name(flag)}=true)",
        )

    def repeated(self, flag: str, *, help: str, metavar: str) -> None:
        self.parser.add_argument(
            flag,
            action="append",
            default=None,
            metavar=metavar,
            help=f"{help}; repeatable (env {env_name(flag)}, comma-separated)",
        )


def add_run_parser(subparsers: Any) -> None:
    """Register ``interlock run``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "run",
        help="run the controller",
        description="Run the controller against a cluster, or against an embedded API server.",
    )
    add = _EnvDefaults(parser)
    add.switch("--embedded", help="start the embedded API server instead of using a kubeconfig")
    add.repeated(
        "--manifests", metavar="PATH", help="embedded mode: YAML file or folder applied at start"
    )
    add.value(
        "--write-kubeconfig",
        default=None,
        metavar="PATH",
        help="embedded mode: write a kubeconfig for kubectl here",
    )
    add.value("--kubeconfig", default=None, metavar="PATH", help="kubeconfig file")
    add.switch("--in-cluster", help="use the Pod's service account")
    add.value(
        "--policy-addr",
        default=DEFAULT_POLICY_ADDR,
        metavar="HOST:PORT",
        help="policy API address (port 0: any free port, printed)",
    )
    add.value(
        "--admin-addr",
        default=DEFAULT_ADMIN_ADDR,
        metavar="HOST:PORT",
        help="admin address: /healthz /readyz /debug/actors (port 0: any free port, printed)",
    )
    add.value(
        "--edge-addr",
        default=None,
        metavar="HOST:PORT",
        help="edge data plane address (port 0: any free port, printed)",
    )
    add.value(
        "--edge-admin-url",
        default=None,
        metavar="URL",
        help="program a data plane running as its own process (interlock edge) through its "
        "admin API at URL instead of serving one here; excludes --edge-addr",
    )
    add.value(
        "--edge-tls-addr",
        default=None,
        metavar="HOST:PORT",
        help="edge HTTPS address, certificates from the Ingresses' TLS Secrets by SNI",
    )
    add.repeated(
        "--trusted-proxy",
        metavar="CIDR",
        help="a proxy in front of the edge whose X-Forwarded-For is believed",
    )
    add.value("--trace-file", default=None, metavar="PATH", help="write actor traces (JSON lines)")
    add.repeated(
        "--namespace", metavar="NS", help="watch only this namespace (default: all namespaces)"
    )
    add.value(
        "--lease-namespace",
        default=default_lease_namespace(),
        metavar="NS",
        help="namespace of the leader-election Lease",
    )
    add.value("--lease-name", default="interlock", metavar="NAME", help="leader-election Lease")
    add.value(
        "--lease-identity",
        default=None,
        metavar="ID",
        help="this replica's identity in the Lease (default: hostname plus a random suffix)",
    )
    add.number("--lease-duration", default=15.0, help="Lease duration, seconds")
    add.number("--lease-renew-deadline", default=10.0, help="Lease renew deadline, seconds")
    add.number("--lease-retry-period", default=2.0, help="Lease retry period, seconds")
    add.number(
        "--watch-grace",
        default=30.0,
        help="seconds a service-port watch outlives its last subscriber",
    )
    add.value(
        "--log-level",
        default="INFO",
        metavar="LEVEL",
        help="DEBUG, INFO, WARNING or ERROR",
        choices=["DEBUG", "INFO", "WARNING", "ERROR"],
        type=str.upper,
    )
    parser.set_defaults(handler=run_command)


def config_from_args(args: argparse.Namespace) -> ControllerConfig:
    """The :class:`ControllerConfig` that ``interlock run`` flags (and env) describe."""
    if args.embedded and (args.kubeconfig or args.in_cluster):
        raise SystemExit("--embedded cannot be combined with --kubeconfig or --in-cluster")
    if not args.embedded and (args.manifests or args.write_kubeconfig):
        raise SystemExit("--manifests and --write-kubeconfig need --embedded")
    trusted = args.trusted_proxy if args.trusted_proxy is not None else _env_list("--trusted-proxy")
    if args.edge_admin_url and (args.edge_addr or args.edge_tls_addr or trusted):
        raise SystemExit(
            "--edge-admin-url cannot be combined with --edge-addr, --edge-tls-addr or "
            "--trusted-proxy: the controller either serves the data plane itself or programs one "
            "running elsewhere (give that one these settings: interlock edge --listen, "
            "--tls-listen, --trusted-proxy)"
        )
    manifests = args.manifests if args.manifests is not None else _env_list("--manifests")
    namespaces = args.namespace if args.namespace is not None else _env_list("--namespace")
    try:
        return ControllerConfig(
            kubeconfig=args.kubeconfig,
            in_cluster=args.in_cluster,
            embedded=args.embedded,
            manifests=tuple(manifests),
            write_kubeconfig=args.write_kubeconfig,
            policy_addr=parse_address(args.policy_addr, flag="--policy-addr"),
            admin_addr=parse_address(args.admin_addr, flag="--admin-addr"),
            edge_addr=(
                parse_address(args.edge_addr, flag="--edge-addr") if args.edge_addr else None
            ),
            edge_admin_url=(
                parse_http_url(args.edge_admin_url, flag="--edge-admin-url")
                if args.edge_admin_url
                else None
            ),
            edge_tls_addr=(
                parse_address(args.edge_tls_addr, flag="--edge-tls-addr")
                if args.edge_tls_addr
                else None
            ),
            trusted_proxies=parse_cidrs(trusted, flag="--trusted-proxy"),
            trace_file=args.trace_file,
            namespaces=tuple(namespaces),
            lease_namespace=args.lease_namespace,
            lease_name=args.lease_name,
            lease_identity=args.lease_identity or default_identity(),
            lease_duration=args.lease_duration,
            lease_renew_deadline=args.lease_renew_deadline,
            lease_retry_period=args.lease_retry_period,
            watch_grace=args.watch_grace,
            log_level=args.log_level,
            # This process is the controller and nothing else.
            tune_gc=True,
        )
    except ValueError as exc:
        raise SystemExit(str(exc)) from None


def configure_logging(level: str) -> None:
    """Log lines to stderr at ``level`` and above."""
    from loguru import logger

    logger.remove()
    # diagnose=False: loguru would otherwise print every local variable of a failing frame,
    # which can hold Secret data.
    logger.add(sys.stderr, level=level, diagnose=False)


def run_command(args: argparse.Namespace) -> int:
    from interlock.app import StartupError
    from interlock.kube.client import KubeConfigError

    config = config_from_args(args)
    configure_logging(config.log_level)
    try:
        return asyncio.run(run_until_signalled(config))
    except (KubeConfigError, StartupError) as error:
        print(f"interlock run: {error}", file=sys.stderr)
        return 1


async def run_until_signalled(
    config: ControllerConfig, *, announce: Callable[[str], None] = print
) -> int:
    """Start a controller, print where it listens, and stop it on SIGINT or SIGTERM."""
    from interlock.app import Controller

    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stop.set)
    controller = Controller(config)
    try:
        await controller.start()
        for line in controller.describe():
            announce(line)
        sys.stdout.flush()
        await stop.wait()
        announce("stopping: draining actors and releasing the Lease")
    finally:
        await controller.stop()
        for signum in (signal.SIGINT, signal.SIGTERM):
            loop.remove_signal_handler(signum)
    return 0


_TARGET = re.compile(r"^(?P<ns>[^/\s]+)/(?P<svc>[^:\s]+):(?P<port>\d+)$")


def add_policy_parser(subparsers: Any) -> None:
    """Register ``interlock policy get|watch NS/SVC:PORT``."""
    parser: argparse.ArgumentParser = subparsers.add_parser(
        "policy",
        help="read the outbound policy of a Service port from a running controller",
        description="Print the outbound policy of a Service port (get) or follow it (watch).",
    )
    parser.add_argument("action", choices=["get", "watch"])
    parser.add_argument("target", metavar="NS/SVC:PORT")
    parser.add_argument(
        "--client-namespace", default=None, help="client namespace (default: the Service's)"
    )
    parser.add_argument(
        "--server",
        default=os.environ.get("INTERLOCK_SERVER", DEFAULT_POLICY_SERVER),
        help=f"policy API URL (env INTERLOCK_SERVER; default {DEFAULT_POLICY_SERVER})",
    )
    parser.set_defaults(handler=policy_command)


def policy_url(*, server: str, target: str, client_namespace: str | None, watch: bool) -> str:
    """The API URL for ``NS/SVC:PORT``; raises ``ValueError`` naming the bad target."""
    match = _TARGET.match(target)
    if match is None:
        raise ValueError(f"target {target!r} is not NS/SVC:PORT (for example default/web:80)")
    url = f"{server.rstrip('/')}/v1/outbound/{match['ns']}/{match['svc']}/{match['port']}"
    query = []
    if client_namespace:
        query.append(f"clientNamespace={client_namespace}")
    if watch:
        query.append("watch=true")
    return url + ("?" + "&".join(query) if query else "")


async def print_policy(url: str, *, watch: bool, out: Callable[[str], None] = print) -> int:
    """GET ``url`` and print the policy (or each line of the watch stream) as it arrives."""
    import aiohttp

    timeout = aiohttp.ClientTimeout(total=None if watch else 30, sock_connect=10)
    async with (
        aiohttp.ClientSession(timeout=timeout) as session,
        session.get(url) as response,
    ):
        if response.status != 200:
            out(f"error: HTTP {response.status}: {(await response.text()).strip()}")
            return 1
        if not watch:
            out((await response.text()).strip())
            return 0
        async for line in response.content:
            if line.strip():
                out(line.decode().strip())
                sys.stdout.flush()
    return 0


def policy_command(args: argparse.Namespace) -> int:
    watch = args.action == "watch"
    try:
        url = policy_url(
            server=args.server,
            target=args.target,
            client_namespace=args.client_namespace,
            watch=watch,
        )
    except ValueError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    try:
        return asyncio.run(print_policy(url, watch=watch))
    except KeyboardInterrupt:
        return 0
    except OSError as exc:
        print(f"error: cannot reach {args.server}: {exc}", file=sys.stderr)
        return 1


def register(subparsers: Any) -> None:
    """Add ``run`` and ``policy`` to the main parser's subcommands."""
    add_run_parser(subparsers)
    add_policy_parser(subparsers)
