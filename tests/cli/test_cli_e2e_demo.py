"""`interlock demo` as the README tells people to run it, and `interlock trace` on its trace."""

from __future__ import annotations

import json
import shlex
import signal
import time
from pathlib import Path

from tests.kit.cli_process import Running, finished, http_get, interlock_argv

FREE_PORTS = ["--edge-addr", "127.0.0.1:0", "--policy-addr", "127.0.0.1:0"]
FREE_PORTS += ["--admin-addr", "127.0.0.1:0", "--mesh-addr", "127.0.0.1:0"]


def test_demo_prints_a_curl_line_that_works_the_split_and_a_live_trace(tmp_path: Path) -> None:
    demo = Running(interlock_argv("demo", "--duration", "120", *FREE_PORTS), log=tmp_path / "log")
    try:
        curl = demo.wait_for(
            r"curl -u demo:demo -H 'Host: (demo\.localhost)' (http://\S+/hello)", within=60
        )
        host, url = curl[1], curl[2]
        status, _, body = http_get(url, headers={"Host": host}, auth=("demo", "demo"))
        assert status == 200, body
        echoed = json.loads(body)
        assert echoed["backend"] in ("echo-v1", "echo-v2")
        assert echoed["path"] == "/hello"
        assert echoed["headers"]["X-Interlock"] == "demo"
        assert http_get(url, headers={"Host": host})[0] == 401
        assert http_get(url, headers={"Host": host}, auth=("demo", "nope"))[0] == 401

        policy_url = demo.wait_for(r"policy API\s+(http://\S+/v1/outbound/default/echo/80)")[1]
        status, _, body = http_get(policy_url)
        assert status == 200
        (route,) = json.loads(body)["routes"]
        assert route["name"] == "echo-split"
        split = {b["name"]: (b["weight"], b["exists"]) for b in route["rules"][0]["backends"]}
        assert split == {"echo-v1": (80, True), "echo-v2": (20, True)}

        # The banner's commands work as printed (here: `python -m interlock`, not on PATH).
        watch_line = demo.wait_for(r"^  (.+ policy watch default/echo:80 --server \S+)$")[1]
        watch = Running(shlex.split(watch_line), log=tmp_path / "watch.log")
        try:
            watch.wait_for(r'"name": ?"echo-split"')
        finally:
            watch.stop()

        # The console is quiet after its banner: start-up's trace is in the file, not printed.
        demo.wait_for(r"^Live trace")
        assert demo.count(lambda line: "Started()" in line or "<= external event" in line) == 0

        # The mesh listener's line works as printed: echo's policy splits 80/20 to v1 and v2.
        mesh = demo.wait_for(r"curl --proxy (http://\S+) http://(echo\.default)(/hello)")
        status, _, body = http_get(mesh[1] + mesh[3], headers={"Host": mesh[2]})
        assert status == 200, body
        assert json.loads(body)["backend"] in ("echo-v1", "echo-v2")

        # The printed kubectl line changes things live: the policy and the trace follow.
        kubectl = demo.wait_for(r"(kubectl --kubeconfig \S+) delete service echo-v2")[1]
        finished([*kubectl.split(), "delete", "service", "echo-v2"], timeout=60)
        demo.wait_for(r"<= external event$")
        demo.wait_for(r"route/default/echo-split .* <= Deleted Service default/echo-v2 rv=\d+$")
        deadline = time.monotonic() + 10
        while split["echo-v2"] != (20, False):
            assert time.monotonic() < deadline, split
            time.sleep(0.05)
            (route,) = json.loads(http_get(policy_url)[2])["routes"]
            split = {b["name"]: (b["weight"], b["exists"]) for b in route["rules"][0]["backends"]}
        demo.signal(signal.SIGINT)
        assert demo.wait(within=90) == 0, demo.output()
    finally:
        demo.stop()


def test_demo_stops_by_itself_and_interlock_trace_reads_its_trace(tmp_path: Path) -> None:
    demo = Running(
        interlock_argv("demo", "--duration", "1", "--quiet-trace", *FREE_PORTS),
        log=tmp_path / "log",
    )
    try:
        assert demo.wait(within=60) == 0, demo.output()
        trace_file = Path(demo.wait_for(r"trace kept in (\S+):")[1])
    finally:
        demo.stop()
    assert demo.count(lambda line: "<= external event" in line) == 0, "--quiet-trace printed it"
    assert trace_file.is_file()
    shown = finished(
        interlock_argv("trace", str(trace_file), "--object", "HTTPRoute/default/echo-split"),
        timeout=60,
    )
    lines = shown.splitlines()
    roots = [line for line in lines if "correlation Upserted HTTPRoute default/echo-split" in line]
    assert roots, shown
    assert any(line.lstrip().startswith(("├─ ", "└─ ")) for line in lines), shown
