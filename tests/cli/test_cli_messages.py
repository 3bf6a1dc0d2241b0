"""What the command line says to a person who types something: usage, suggestions, defaults."""

from __future__ import annotations

import re

import pytest

from interlock.cli import build_parser, main
from interlock.cli.env import format_seconds, seconds
from interlock.cli.run import config_from_args
from interlock.config import Address


def _fails(argv: list[str], capsys) -> str:
    with pytest.raises(SystemExit) as exit_:
        main(argv)
    assert exit_.value.code == 2
    return capsys.readouterr().err


def test_no_command_prints_usage_and_exits_2(capsys) -> None:
    err = _fails([], capsys)
    assert err.startswith("usage: interlock")
    assert "a command is required" in err


def test_a_mistyped_flag_is_suggested_with_the_subcommands_usage(capsys) -> None:
    err = _fails(["run", "--polcy-addr", "127.0.0.1:0"], capsys)
    assert err.startswith("usage: interlock run")
    assert "unrecognized arguments: --polcy-addr 127.0.0.1:0" in err
    assert "did you mean --policy-addr?" in err
    err = _fails(["policy", "watch", "default/web:80", "--prety"], capsys)
    assert err.startswith("usage: interlock policy watch")
    assert "did you mean --pretty?" in err


def test_a_mistyped_command_is_suggested(capsys) -> None:
    err = _fails(["rnu"], capsys)
    assert "invalid choice: 'rnu'" in err
    assert "did you mean 'run'?" in err


@pytest.mark.parametrize(
    ("text", "value"),
    [("15", 15.0), ("2.5", 2.5), ("15s", 15.0), ("500ms", 0.5), ("1m30s", 90.0), ("1h", 3600.0)],
)
def test_durations_are_accepted_wherever_seconds_are(text: str, value: float) -> None:
    assert seconds(text) == value
    # The renew deadline and retry period below every value: a Lease must outlast them.
    flags = ["--lease-renew-deadline", "0.2", "--lease-retry-period", "0.1"]
    args = build_parser().parse_args(
        ["run", "--lease-duration", text, "--watch-grace", text, *flags]
    )
    config = config_from_args(args)
    assert (config.leadership.duration, config.policy.watch_grace) == (value, value)


def test_a_duration_from_the_environment_and_a_bad_one(monkeypatch, capsys) -> None:
    monkeypatch.setenv("INTERLOCK_LEASE_RENEW_DEADLINE", "8s")
    assert config_from_args(build_parser().parse_args(["run"])).leadership.renew_deadline == 8.0
    err = _fails(["run", "--lease-duration", "soon"], capsys)
    assert "argument --lease-duration: 'soon' is not a duration (for example 15s" in err
    err = _fails(["demo", "--duration", "0s"], capsys)
    assert "argument --duration: '0s' must be more than 0 seconds" in err


def test_format_seconds_reads_like_a_duration() -> None:
    assert [format_seconds(v) for v in (15.0, 0.25, 90.0, 60.0, 7200.0)] == [
        "15s",
        "250ms",
        "1m30s",
        "1m",
        "7200s",
    ]


@pytest.mark.parametrize(
    "argv",
    [
        ["run"],
        ["demo"],
        ["edge"],
        ["apiserver"],
        ["trace"],
        ["policy", "get"],
        ["policy", "watch"],
    ],
)
def test_help_shows_readable_defaults(argv: list[str], capsys) -> None:
    with pytest.raises(SystemExit) as exit_:
        main([*argv, "--help"])
    assert exit_.value.code == 0
    out = " ".join(capsys.readouterr().out.split())
    assert "None" not in out
    assert "default default" not in out
    assert not re.search(r"default:? \d+\.0[ );]", out), out


def test_policy_get_and_watch_describe_their_own_arguments(capsys) -> None:
    for action in ("get", "watch"):
        with pytest.raises(SystemExit):
            main(["policy", action, "--help"])
        out = capsys.readouterr().out
        assert out.startswith(f"usage: interlock policy {action}")
        assert "NS/SVC:PORT" in out and "--pretty" in out and "--server URL" in out
    with pytest.raises(SystemExit):
        main(["policy", "watch", "--help"])
    assert "reconnects with backoff" in " ".join(capsys.readouterr().out.split())


def test_run_listens_on_loopback_unless_told(monkeypatch) -> None:
    monkeypatch.delenv("INTERLOCK_POLICY_ADDR", raising=False)
    monkeypatch.delenv("INTERLOCK_ADMIN_ADDR", raising=False)
    config = config_from_args(build_parser().parse_args(["run"]))
    assert config.policy.addr == Address("127.0.0.1", 8090)
    assert config.admin.addr == Address("127.0.0.1", 9090), "one admin port: run, demo, manifests"


def test_a_missing_kubeconfig_file_is_named(tmp_path) -> None:
    missing = tmp_path / "kubeconfig"
    with pytest.raises(SystemExit) as exit_:
        config_from_args(build_parser().parse_args(["run", "--kubeconfig", str(missing)]))
    assert str(exit_.value).startswith(f"--kubeconfig {missing}: no such file")


def test_the_edge_admin_ca_is_read_from_an_existing_file(tmp_path) -> None:
    ca = tmp_path / "ca.pem"
    argv = ["run", "--edge-admin-url", "https://edge:9091", "--edge-admin-ca", str(ca)]
    with pytest.raises(SystemExit) as exit_:
        config_from_args(build_parser().parse_args(argv))
    assert str(exit_.value) == f"--edge-admin-ca {ca}: no such file"
    ca.write_text("PEM")
    token = tmp_path / "token"
    token.write_text("t0ken")
    argv += ["--edge-admin-token-file", str(token)]
    assert config_from_args(build_parser().parse_args(argv)).edge.admin_ca == str(ca)
