"""``interlock run``'s mesh flags become the controller's settings, or a message naming them."""

from __future__ import annotations

import pytest

from interlock.cli import build_parser
from interlock.cli.run import config_from_args
from interlock.config import Address, ControllerConfig


def config(*argv: str) -> ControllerConfig:
    return config_from_args(build_parser().parse_args(["run", "--embedded", *argv]))


def test_no_mesh_listener_by_default() -> None:
    settings = config()
    assert settings.mesh.addr is None
    assert settings.mesh.client_namespace == "default"
    assert settings.cluster.domain == "cluster.local"


def test_mesh_flags_build_the_config() -> None:
    settings = config(
        "--mesh-addr",
        "127.0.0.1:0",
        "--mesh-client-namespace",
        "team-a",
        "--cluster-domain",
        "Corp.Example.",
    )
    assert settings.mesh.addr == Address("127.0.0.1", 0)
    assert settings.mesh.client_namespace == "team-a"
    assert settings.cluster.domain == "corp.example"


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (("--mesh-addr", "nowhere"), "--mesh-addr: 'nowhere' is not HOST:PORT"),
        (("--mesh-client-namespace", "Team_A"), "--mesh-client-namespace: 'Team_A'"),
        (("--cluster-domain", "a..b"), "--cluster-domain: 'a..b'"),
    ],
)
def test_bad_mesh_flags_are_reported_by_name(argv: tuple[str, ...], message: str) -> None:
    with pytest.raises(SystemExit) as raised:
        config(*argv)
    assert message in str(raised.value)


def test_the_environment_sets_the_mesh_flags(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INTERLOCK_MESH_ADDR", "0.0.0.0:4140")
    monkeypatch.setenv("INTERLOCK_MESH_CLIENT_NAMESPACE", "shop")
    settings = config()
    assert settings.mesh.addr == Address("0.0.0.0", 4140)
    assert settings.mesh.client_namespace == "shop"


def test_the_access_log_is_off_unless_asked_for() -> None:
    assert config().observability.access_log is False
    assert config("--access-log").observability.access_log is True
