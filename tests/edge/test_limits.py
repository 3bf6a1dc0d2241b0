"""The edge limit flags reach :class:`ProxyLimits`, for ``interlock run`` and ``interlock edge``
alike, and a bad value is refused naming the limit."""

from __future__ import annotations

import pytest

from interlock.cli import build_parser
from interlock.cli.edge_limits import edge_limits_from_args
from interlock.cli.run import config_from_args
from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits

FLAGS = [
    "--edge-upstream-connections=7",
    "--edge-max-upstream-connections=70",
    "--edge-header-timeout=2",
    "--edge-body-timeout=3",
    "--edge-drain-timeout=6",
    "--edge-password-workers=3",
    "--edge-password-checks=5",
    "--edge-idle-timeout=4",
]
EXPECTED = ProxyLimits(
    upstream_connections=7,
    max_connections=70,
    header_timeout=2,
    body_timeout=3,
    idle_timeout=4,
    drain_timeout=6,
    password_workers=3,
    password_checks=5,
)


def test_run_flags_set_the_limits() -> None:
    config = config_from_args(build_parser().parse_args(["run", "--embedded", *FLAGS]))
    assert config.edge.limits == EXPECTED
    default = config_from_args(build_parser().parse_args(["run", "--embedded"]))
    assert default.edge.limits == DEFAULT_LIMITS


def test_edge_flags_set_the_limits(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_EDGE_IDLE_TIMEOUT", "9")
    args = build_parser().parse_args(["edge", *FLAGS[:-1]])
    assert edge_limits_from_args(args) == ProxyLimits(
        upstream_connections=7,
        max_connections=70,
        header_timeout=2,
        body_timeout=3,
        idle_timeout=9,
        drain_timeout=6,
        password_workers=3,
        password_checks=5,
    )


@pytest.mark.parametrize(
    ("flag", "named"),
    [
        ("--edge-header-timeout=0", "header_timeout"),
        ("--edge-upstream-connections=0", "upstream_connections"),
    ],
)
def test_bad_limits_are_refused_by_name(flag: str, named: str) -> None:
    with pytest.raises(SystemExit, match=named):
        config_from_args(build_parser().parse_args(["run", "--embedded", flag]))
