"""``--log-format json``: what ``interlock run`` prints on stdout is JSON too, not only its logs.

In a container stdout and stderr land in one log; a plain-text banner line among JSON log lines
is a line a collector cannot parse. These tests run the real process as a Deployment would.
"""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.kit.cli_process import WEB_SERVICE, Running, interlock_argv

LOCAL = (
    "--policy-addr",
    "127.0.0.1:0",
    "--admin-addr",
    "127.0.0.1:0",
    "--edge-addr",
    "127.0.0.1:0",
)


def test_every_line_on_stdout_is_a_json_object_from_start_to_stop(tmp_path: Path) -> None:
    (tmp_path / "service.yaml").write_text(WEB_SERVICE)
    flags = ("--log-format", "json", "--manifests", str(tmp_path))
    run = Running(interlock_argv("run", "--embedded", *flags, *LOCAL), log=tmp_path / "log")
    try:
        run.wait_for(r"policy API listening on", within=60)
        run.wait_for(r"edge data plane listening on", within=60)
        run.signal(signal.SIGTERM)
        assert run.wait(within=60.0) == 0, run.output()
    finally:
        run.stop()
    printed = [json.loads(line) for line in run.lines]
    assert all({"level", "ts", "logger", "msg"} <= line.keys() for line in printed), printed
    assert all(line["logger"] == "cli.run" and line["ts"].endswith("Z") for line in printed)
    by_message = {line["msg"].split(" http")[0]: line for line in printed}
    assert "embedded API server at" in by_message, printed
    # The address a script needs is a field of its own.
    policy = by_message["policy API listening on"]
    assert policy["url"].startswith("http://127.0.0.1:"), policy
    assert policy["msg"] == f"policy API listening on {policy['url']}"
    assert any(line["msg"].startswith("received SIGTERM: stopping") for line in printed), printed
    # The logs on stderr are JSON as they were.
    assert all(json.loads(line) for line in run.log.read_text().splitlines())


def test_a_start_up_error_is_a_json_line_too(tmp_path: Path) -> None:
    missing = tmp_path / "no-such-kubeconfig"
    argv = interlock_argv("run", "--log-format", "json", "--kubeconfig", str(missing), *LOCAL)
    run = Running(argv, log=tmp_path / "log")
    try:
        assert run.wait(within=60.0) == 1, run.output()
    finally:
        run.stop()
    written = [json.loads(line) for line in run.lines + run.log.read_text().splitlines()]
    error = next(line for line in written if line["level"] == "error")
    assert error["logger"] == "cli.run", error
    assert str(missing) in error["msg"], error


def test_text_format_prints_plain_lines(tmp_path: Path) -> None:
    """The control case: without --log-format json the banner is the plain lines it was."""
    run = Running(interlock_argv("run", "--embedded", *LOCAL), log=tmp_path / "log")
    try:
        run.wait_for(r"^policy API listening on http://127\.0\.0\.1:\d+$", within=60)
        run.signal(signal.SIGTERM)
        assert run.wait(within=60.0) == 0, run.output()
    finally:
        run.stop()
    assert any(line.startswith("received SIGTERM: stopping") for line in run.lines), run.lines


def _json_until_sigterm(argv: list[str], tmp_path: Path, *, first: str) -> list[dict[str, str]]:
    run = Running(argv, log=tmp_path / "log")
    try:
        run.wait_for(first, within=60)
        run.signal(signal.SIGTERM)
        assert run.wait(within=60.0) == 0, run.output()
    finally:
        run.stop()
    return [json.loads(line) for line in run.lines]


def test_interlock_apiserver_prints_json_too(tmp_path: Path) -> None:
    kubeconfig = str(tmp_path / "kubeconfig")
    flags = ("--log-format", "json", "--listen", "127.0.0.1:0", "--write-kubeconfig", kubeconfig)
    printed = _json_until_sigterm(interlock_argv("apiserver", *flags), tmp_path, first="kubeconfig")
    assert printed[0]["msg"].startswith("embedded Kubernetes API server: https://127.0.0.1:")
    assert printed[0]["logger"] == "cli.apiserver" and printed[0]["url"].startswith("https://")
    assert printed[-1]["msg"].startswith("received SIGTERM: stopping"), printed


def test_interlock_edge_prints_json_too(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("a-token-of-32-characters-or-more-0123456789\n")
    flags = ("--log-format", "json", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0")
    argv = interlock_argv("edge", *flags, "--admin-token-file", str(token))
    printed = _json_until_sigterm(argv, tmp_path, first="edge admin API on")
    messages = [line["msg"] for line in printed]
    assert messages[0].startswith("edge listening on http://127.0.0.1:"), messages
    assert all(line["logger"] == "cli.edge" for line in printed), printed
    assert messages[-1].startswith("received SIGTERM: stopping"), messages
