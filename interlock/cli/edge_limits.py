"""The edge's limit flags, shared by ``interlock run`` (its data plane) and ``interlock edge``.

One definition, so both commands name, default and document each limit the same way
(``docs/operations.md``, "Edge limits"); the values are :class:`~interlock.edge.limits.EdgeLimits`.
"""

from __future__ import annotations

import argparse

from interlock.cli.env import EnvDefaults
from interlock.edge.limits import DEFAULT_LIMITS, EdgeLimits


def add_edge_limit_flags(add: EnvDefaults) -> None:
    """Register the ``--edge-*`` limit flags on a subcommand's parser."""
    d = DEFAULT_LIMITS
    add.value(
        "--edge-upstream-connections",
        default=str(d.upstream_connections),
        type=int,
        metavar="N",
        help="edge: connections open at once to one upstream address",
    )
    add.value(
        "--edge-max-upstream-connections",
        default=str(d.max_connections),
        type=int,
        metavar="N",
        help="edge: upstream connections open at once in all (0: no limit)",
    )
    add.number(
        "--edge-header-timeout",
        default=d.header_timeout,
        help="edge: seconds a client has to send a request's headers (then 408)",
    )
    add.number(
        "--edge-body-timeout",
        default=d.body_timeout,
        help="edge: seconds between two reads of a request body (then 408)",
    )
    add.number(
        "--edge-idle-timeout",
        default=d.idle_timeout,
        help="edge: seconds a client connection stays open with no request in progress",
    )
    add.number(
        "--edge-drain-timeout",
        default=d.drain_timeout,
        help="edge: seconds requests in flight may take to finish once stopping (SIGTERM)",
    )
    add.value(
        "--edge-password-workers",
        default=str(d.password_workers),
        type=int,
        metavar="N",
        help="edge: threads running basicAuth's bcrypt checks",
    )
    add.value(
        "--edge-password-checks",
        default=str(d.password_checks),
        type=int,
        metavar="N",
        help="edge: bcrypt checks queued or running at once (beyond: 503)",
    )


def edge_limits_from_args(args: argparse.Namespace) -> EdgeLimits:
    """The :class:`EdgeLimits` the flags describe; a bad value exits naming the problem."""
    try:
        return EdgeLimits(
            upstream_connections=args.edge_upstream_connections,
            max_connections=args.edge_max_upstream_connections,
            header_timeout=args.edge_header_timeout,
            body_timeout=args.edge_body_timeout,
            idle_timeout=args.edge_idle_timeout,
            drain_timeout=args.edge_drain_timeout,
            password_workers=args.edge_password_workers,
            password_checks=args.edge_password_checks,
        )
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
