"""``--log-format json``: every line ``interlock run`` writes to stderr is one JSON object."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from tests.kit.cli_process import WEB_SERVICE, Running, interlock_argv

LOCAL = ("--policy-addr", "127.0.0.1:0", "--admin-addr", "127.0.0.1:0")

SERVICE = WEB_SERVICE


def test_run_writes_json_lines_with_the_object_as_fields(tmp_path: Path) -> None:
    (tmp_path / "service.yaml").write_text(SERVICE)
    flags = ("--log-format", "json", "--log-level", "debug", "--manifests", str(tmp_path))
    run = Running(interlock_argv("run", "--embedded", *flags, *LOCAL), log=tmp_path / "log")
    try:
        run.wait_for_log(r"became leader", within=60)
        run.signal(signal.SIGTERM)
        assert run.wait(within=60.0) == 0, run.output()
    finally:
        run.stop()
    lines = [json.loads(line) for line in run.log.read_text().splitlines()]
    assert lines, "nothing logged"
    assert all({"level", "ts", "logger", "msg"} <= line.keys() for line in lines)
    assert all(str(line["ts"]).endswith("Z") for line in lines)
    leader = next(line for line in lines if "became leader" in str(line["msg"]))
    assert (leader["level"], leader["logger"]) == ("info", "kube.lease")
    assert (leader["kind"], leader["namespace"], leader["name"]) == (
        "Lease",
        "default",
        "interlock",
    )
    # --log-level debug says what the informers saw, object by object.
    seen = [line for line in lines if line["level"] == "debug" and "upserted" in str(line["msg"])]
    # A cluster-scoped object's line (a Namespace's) has no namespace field.
    assert any(
        (s["kind"], s.get("namespace"), s["name"]) == ("Service", "default", "web") for s in seen
    )
