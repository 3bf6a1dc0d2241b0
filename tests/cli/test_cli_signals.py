"""SIGINT and SIGTERM stop ``interlock`` at any moment, with exit 0 and one line saying why.

Start-up is where a deaf process hurts: against an API server it cannot reach, ``interlock run``
retries discovery for a minute, and a person pressing Ctrl-C (or the kubelet sending SIGTERM)
must not wait for that to end.
"""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from tests.kit.cli_process import Running, interlock_argv

UNREACHABLE_KUBECONFIG = """
apiVersion: v1
kind: Config
clusters: [{name: gone, cluster: {server: "http://127.0.0.1:9"}}]
users: [{name: someone, user: {token: not-a-secret}}]
contexts: [{name: gone, context: {cluster: gone, user: someone}}]
current-context: gone
"""

LOCAL = ("--policy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")


def _stopped_cleanly(process: Running, signum: signal.Signals) -> None:
    code = process.wait(within=60.0)
    assert code == 0, process.output()
    process.wait_for(rf"^received {signum.name}: stopping", within=60.0)
    assert "Traceback" not in process.log.read_text(), process.output()


def _retrying_discovery(tmp_path: Path) -> Running:
    """``interlock run`` against an API server it cannot reach, once it retries discovery."""
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text(UNREACHABLE_KUBECONFIG)
    run = Running(
        interlock_argv("run", "--kubeconfig", str(kubeconfig), *LOCAL), log=tmp_path / "log"
    )
    try:
        run.wait_for_log(r"discover .*retrying in", within=60)
    except BaseException:
        run.stop()
        raise
    return run


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_during_discovery_retries_stops_run(tmp_path: Path, signum) -> None:
    run = _retrying_discovery(tmp_path)
    try:
        run.signal(signum)
        _stopped_cleanly(run, signum)
        assert run.count(lambda line: "listening on" in line) == 0, "it had finished starting"
    finally:
        run.stop()


def test_a_signal_while_the_embedded_api_server_starts_stops_run(tmp_path: Path) -> None:
    run = Running(
        interlock_argv("run", "--embedded", *LOCAL),
        log=tmp_path / "log",
    )
    try:
        run.wait_for_log(r"embedded API server: applied", within=60)
        run.signal(signal.SIGTERM)
        _stopped_cleanly(run, signal.SIGTERM)
    finally:
        run.stop()


def test_a_second_signal_does_not_wait_for_clean_up(tmp_path: Path) -> None:
    run = _retrying_discovery(tmp_path)
    try:
        run.signal(signal.SIGINT)
        run.signal(signal.SIGINT)
        assert run.wait(within=60.0) == 0, run.output()
        assert "Traceback" not in run.log.read_text(), run.output()
    finally:
        run.stop()
