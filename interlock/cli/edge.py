"""``interlock edge``: the data plane on its own.

Serves the edge, programmed by a controller through its admin API (``interlock run
--edge-admin-url``). Thin: the work is in :mod:`interlock.edge.standalone`.
"""

from __future__ import annotations

import argparse
import ssl
from typing import TYPE_CHECKING, Any

from interlock.cli.announce import announcer
from interlock.cli.edge_limits import add_edge_limit_flags, edge_limits_from_args
from interlock.cli.env import EnvDefaults
from interlock.cli.loop import add_loop_flag, run_on_loop
from interlock.cli.signals import announce_with, serve_until_signalled
from interlock.config import read_token_file
from interlock.dataplane.listen import parse_host_port
from interlock.logs import configure_logging
from interlock.model.allowed_hosts import AllowedHosts
from interlock.model.secret_value import SecretValue
from interlock.model.service import ServicePortKey

if TYPE_CHECKING:
    from interlock.dataplane.source import Address

_HELP = "run the edge data plane alone (programmed through its admin API)"
_DESCRIPTION = (
    "Serve the edge data plane and its admin API in this process; a controller programs "
    "it remotely. Upstreams resolve through cluster DNS ({service}.{namespace}.svc), or with "
    "--pushed-upstreams from the tables the controller pushes."
)


def add_edge_parser(subparsers: Any) -> None:
    add = EnvDefaults.subcommand(subparsers, "edge", help=_HELP, description=_DESCRIPTION)
    parser = add.parser
    add.value("--listen", default="0.0.0.0:8080", metavar="HOST:PORT", help="edge HTTP address")
    add.value("--admin", default="127.0.0.1:9091", metavar="HOST:PORT", help="admin API address")
    add.value(
        "--admin-token-file",
        default=None,
        metavar="PATH",
        help="required: a file holding the token every admin API call must carry "
        "(Authorization: Bearer; a mounted Secret's key; interlock run "
        "--edge-admin-token-file sends it)",
        shown="none: required",
    )
    add.value(
        "--admin-tls-cert",
        default=None,
        metavar="PATH",
        help="serve the admin API over TLS with this PEM certificate (chain) and "
        "--admin-tls-key, so its token never crosses the network in clear (the controller "
        "trusts it with interlock run --edge-admin-ca)",
        shown="off (plain HTTP)",
    )
    add.value(
        "--admin-tls-key",
        default=None,
        metavar="PATH",
        help="the PEM private key of --admin-tls-cert",
        shown="none",
    )
    add.value(
        "--tls-listen",
        default=None,
        metavar="HOST:PORT",
        help="edge HTTPS address",
        shown="off (HTTP only)",
    )
    parser.add_argument(
        "--allowed-host",
        action="append",
        default=[],
        metavar="NAME",
        help="a Host name the admin API answers besides IP addresses and localhost (NAME or "
        "*.SUFFIX: the name the controller's --edge-admin-url uses); others get 421; repeatable",
    )
    parser.add_argument(
        "--trusted-proxy",
        action="append",
        default=[],
        metavar="CIDR",
        help="a proxy in front of the edge whose X-Forwarded-For is believed; repeatable",
    )
    parser.add_argument(
        "--upstream",
        action="append",
        default=[],
        metavar="NAMESPACE/SERVICE:PORT=HOST:PORT",
        help="send this Service port to HOST:PORT instead of its cluster DNS name (a backend "
        "outside the cluster, a benchmark); repeatable",
    )
    add.switch(
        "--pushed-upstreams",
        help="resolve backends from the upstream tables a controller pushes through the admin "
        "API (policies and EndpointSlice endpoints), not cluster DNS; a backend is attached only "
        "once its table arrived: what interlock run --edge-workers starts its workers with",
    )
    add.switch(
        "--reuse-port",
        help="let other processes listen on the edge's ports too (SO_REUSEPORT; the kernel "
        "spreads connections over them): what interlock run --edge-workers starts its workers "
        "with",
    )
    add.switch(
        "--access-log",
        help="log one JSON line per request (no header values, no query string), as interlock "
        "run --access-log does for its edge",
    )
    add.value(
        "--worker",
        type=int,
        default=None,
        shown="none",
        metavar="N",
        help="which worker of interlock run --edge-workers this edge is (from 1), named in its "
        "access log lines; set by interlock run",
    )
    add_edge_limit_flags(add)
    add_loop_flag(add)
    add.logging()
    parser.set_defaults(handler=edge_command)


def _admin_token(args: argparse.Namespace) -> SecretValue:
    if not args.admin_token_file:
        raise SystemExit(
            "interlock edge: --admin-token-file is required: whoever calls the admin API decides "
            "what the edge serves, so it answers only calls carrying the token in that file "
            "(give the controller the same file: interlock run --edge-admin-token-file)"
        )
    try:
        return read_token_file(args.admin_token_file, flag="--admin-token-file")
    except ValueError as error:
        raise SystemExit(f"interlock edge: {error}") from None


def _admin_tls(args: argparse.Namespace) -> ssl.SSLContext | None:
    from interlock.edge.standalone import admin_tls_context

    cert, key = args.admin_tls_cert, args.admin_tls_key
    if not cert and not key:
        return None
    if not cert or not key:
        raise SystemExit("interlock edge: --admin-tls-cert and --admin-tls-key go together")
    try:
        return admin_tls_context(cert, key)
    except (OSError, ssl.SSLError) as error:
        raise SystemExit(f"interlock edge: --admin-tls-cert/--admin-tls-key: {error}") from None


async def _edge_until_signalled(
    args: argparse.Namespace,
    admin_token: SecretValue,
    allowed_hosts: AllowedHosts,
    admin_tls: ssl.SSLContext | None,
) -> int:
    from interlock.dataplane.metrics import Traffic
    from interlock.dataplane.pushed_upstreams import PushedUpstreams
    from interlock.dataplane.upstreams import DnsUpstreams
    from interlock.edge.standalone import run_standalone_edge

    pushed = PushedUpstreams() if args.pushed_upstreams else None

    return await serve_until_signalled(
        run_standalone_edge(
            listen=args.listen,
            admin=args.admin,
            admin_token=admin_token,
            allowed_hosts=allowed_hosts,
            trusted_proxies=tuple(args.trusted_proxy),
            tls_listen=args.tls_listen,
            limits=edge_limits_from_args(args),
            upstreams=None if pushed else DnsUpstreams(fixed=fixed_upstreams(args.upstream)),
            pushed=pushed,
            traffic=Traffic(access_log=args.access_log, worker=args.worker),
            reuse_port=args.reuse_port,
            admin_tls=admin_tls,
            announce=announcer(args.log_format, logger="cli.edge"),
        )
    )


def fixed_upstreams(values: list[str]) -> dict[ServicePortKey, list[Address]]:
    """``--upstream`` values read into a table; a bad one exits naming it."""
    table: dict[ServicePortKey, list[Address]] = {}
    for value in values:
        service, sep, address = value.partition("=")
        namespace, slash, name_port = service.partition("/")
        try:
            if not sep or not slash or not namespace:
                raise ValueError("NAMESPACE/SERVICE:PORT=HOST:PORT is required")
            name, port = parse_host_port(name_port)
            table.setdefault(ServicePortKey(namespace, name, port), []).append(
                parse_host_port(address)
            )
        except ValueError as error:
            raise SystemExit(f"interlock edge: --upstream {value!r}: {error}") from None
    return table


def edge_command(args: argparse.Namespace) -> int:
    admin_token = _admin_token(args)
    fixed_upstreams(args.upstream)  # a bad value exits before anything starts
    if args.pushed_upstreams and args.upstream:
        raise SystemExit(
            "interlock edge: --upstream and --pushed-upstreams exclude each other: with "
            "--pushed-upstreams every backend comes from the controller's tables"
        )
    admin_tls = _admin_tls(args)
    try:
        allowed_hosts = AllowedHosts.parse(args.allowed_host, flag="--allowed-host")
    except ValueError as error:
        raise SystemExit(f"interlock edge: {error}") from None
    configure_logging(args.log_level, format=args.log_format)
    announce_with(announcer(args.log_format, logger="cli.edge"))
    return run_on_loop(
        _edge_until_signalled(args, admin_token, allowed_hosts, admin_tls),
        uvloop=not args.no_uvloop,
    )


def register(subparsers: Any) -> None:
    """Add ``edge`` to the main parser's subcommands."""
    add_edge_parser(subparsers)
