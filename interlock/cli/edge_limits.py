"""The edge's limit flags, shared by ``interlock run`` (its data plane) and ``interlock edge``.

One definition, so both commands name, default and document each limit the same way
(``docs/operations.md``, "Edge limits"); the values are
:class:`~interlock.dataplane.limits.ProxyLimits`.
The flags are a table of (flag, field, help): a count is a whole number (``N``), a timeout a
duration, a switch is off unless given; the default is the field's value in ``DEFAULT_LIMITS``.
"""

from __future__ import annotations

import argparse

from interlock.cli.env import EnvDefaults
from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits

_COUNTS: tuple[tuple[str, str, str], ...] = (
    (
        "--edge-upstream-connections",
        "upstream_connections",
        "edge: connections open at once to one upstream address",
    ),
    (
        "--edge-max-upstream-connections",
        "max_connections",
        "edge: upstream connections open at once in all (0: no limit)",
    ),
    (
        "--edge-password-workers",
        "password_workers",
        "edge: threads running basicAuth's bcrypt checks",
    ),
    (
        "--edge-password-checks",
        "password_checks",
        "edge: bcrypt checks queued or running at once (beyond: 503)",
    ),
    (
        "--edge-http2-resets",
        "http2_resets",
        "edge: HTTP/2 streams one connection may reset in flight per reset window (then GOAWAY)",
    ),
    (
        "--edge-upgrade-connections",
        "upgrade_connections",
        "edge: upgraded connections (WebSockets) open at once in all (beyond: 503)",
    ),
    (
        "--edge-upgrade-connections-per-client",
        "upgrade_connections_per_client",
        "edge: upgraded connections (WebSockets) open at once from one client (beyond: 429)",
    ),
)
_DURATIONS: tuple[tuple[str, str, str], ...] = (
    (
        "--edge-header-timeout",
        "header_timeout",
        "edge: seconds a client has to send a request's headers (then 408)",
    ),
    (
        "--edge-body-timeout",
        "body_timeout",
        "edge: seconds between two reads of a request body (then 408)",
    ),
    (
        "--edge-idle-timeout",
        "idle_timeout",
        "edge: seconds a client connection stays open with no request in progress",
    ),
    (
        "--edge-drain-timeout",
        "drain_timeout",
        "edge: seconds requests in flight may take to finish once stopping (SIGTERM)",
    ),
    (
        "--edge-http2-reset-window",
        "http2_reset_window",
        "edge: seconds over which --edge-http2-resets resets are allowed",
    ),
    (
        "--edge-upgrade-idle-timeout",
        "upgrade_idle_timeout",
        "edge: seconds an upgraded connection (WebSocket) stays open with no byte either way",
    ),
)
_SWITCHES: tuple[tuple[str, str, str], ...] = (
    (
        "--edge-underscores-in-headers",
        "underscores_in_headers",
        "edge: pass request headers whose names hold '_' on (dropped by default, as nginx does)",
    ),
)


def add_edge_limit_flags(add: EnvDefaults) -> None:
    """Register the ``--edge-*`` limit flags on a subcommand's parser."""
    for flag, field, help in _COUNTS:
        default = getattr(DEFAULT_LIMITS, field)
        add.value(flag, default=str(default), type=int, metavar="N", help=help)
    for flag, field, help in _DURATIONS:
        add.number(flag, default=getattr(DEFAULT_LIMITS, field), help=help)
    for flag, _field, help in _SWITCHES:
        add.switch(flag, help=help)


def edge_limit_args(limits: ProxyLimits) -> list[str]:
    """The flags giving ``interlock edge`` these limits (what ``--edge-workers`` starts its
    workers with): those that differ from the defaults."""
    args: list[str] = []
    for flag, field, _help in _COUNTS + _DURATIONS:
        value = getattr(limits, field)
        if value != getattr(DEFAULT_LIMITS, field):
            args += [flag, str(value)]
    for flag, field, _help in _SWITCHES:
        if getattr(limits, field):
            args.append(flag)
    return args


def edge_limits_from_args(args: argparse.Namespace) -> ProxyLimits:
    """The :class:`ProxyLimits` the flags describe; a bad value exits naming the problem."""
    values = {
        field: getattr(args, flag.removeprefix("--").replace("-", "_"))
        for flag, field, _help in _COUNTS + _DURATIONS + _SWITCHES
    }
    try:
        return ProxyLimits(**values)
    except ValueError as exc:
        raise SystemExit(str(exc)) from None
