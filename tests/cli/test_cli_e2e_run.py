"""`interlock run --embedded` and `interlock policy get|watch` as a person runs them."""

from __future__ import annotations

import json
import signal
from pathlib import Path

from prometheus_client.parser import text_string_to_metric_families

from tests.kit.cli_process import (
    WEB_SERVICE,
    Running,
    finished,
    http_get,
    interlock_argv,
    wait_http,
)

SERVICES = (
    WEB_SERVICE
    + """---
apiVersion: v1
kind: Service
metadata: {name: web-canary, namespace: default}
spec:
  ports: [{name: http, port: 80}]
"""
)

ROUTE = """
apiVersion: gateway.networking.k8s.io/v1
kind: HTTPRoute
metadata: {name: web-split, namespace: default}
spec:
  parentRefs: [{group: "", kind: Service, name: web, port: 80}]
  rules:
    - backendRefs:
        - {name: web, port: 80, weight: 90}
        - {name: web-canary, port: 80, weight: 10}
"""


def _metrics(admin_url: str) -> dict[tuple[str, tuple[tuple[str, str], ...]], float]:
    status, headers, body = http_get(f"{admin_url}/metrics")
    assert status == 200
    assert headers["Content-Type"].startswith("text/plain")
    return {
        (sample.name, tuple(sorted(sample.labels.items()))): sample.value
        for family in text_string_to_metric_families(body.decode())
        for sample in family.samples
    }


def _kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> str:
    return finished(["kubectl", "--kubeconfig", str(kubeconfig), *args], timeout=60, stdin=stdin)


def test_run_embedded_serves_policy_get_and_watch_and_stops_on_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    controller = Running(
        interlock_argv(
            "run",
            "--embedded",
            "--policy-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
            "--write-kubeconfig",
            str(kubeconfig),
            "--watch-grace",
            "1",
        ),
        log=tmp_path / "run.log",
    )
    watch: Running | None = None
    try:
        policy_url = controller.wait_for(r"policy API listening on (http://\S+)")[1]
        admin_url = controller.wait_for(r"admin listening on (http://\S+)")[1]
        wait_http(f"{admin_url}/readyz")
        assert http_get(f"{admin_url}/healthz")[0] == 200
        before = _metrics(admin_url)
        _kubectl(kubeconfig, "apply", "-f", "-", stdin=SERVICES)

        got = finished(interlock_argv("policy", "get", "default/web:80", "--server", policy_url))
        policy = json.loads(got)
        assert (policy["service"], policy["port"]) == ("web", 80)
        assert [route["kind"] for route in policy["routes"]] == ["Default"]

        watch = Running(
            interlock_argv("policy", "watch", "default/web:80", "--server", policy_url),
            log=tmp_path / "watch.log",
        )
        watch.wait_for(r'"kind": ?"Default"')
        _kubectl(kubeconfig, "apply", "-f", "-", stdin=ROUTE)
        changed = watch.wait_for(r'"name": ?"web-split"')
        routes = json.loads(changed.string)["routes"]
        assert [route["name"] for route in routes] == ["web-split"]
        backends = {b["name"]: b["weight"] for b in routes[0]["rules"][0]["backends"]}
        assert backends == {"web": 90, "web-canary": 10}

        after = _metrics(admin_url)
        services = ("interlock_informer_events_total", (("informer", "Service.v1"),))
        assert after[services] >= before[services] + 2
        handled = "interlock_messages_handled_total"
        router = (handled, (("kind", "informer-router"),))
        assert after[router] > before.get(router, 0)
        names = {name for name, _ in after}
        assert {"interlock_mailbox_depth", "interlock_leader"} <= names
        assert {"interlock_status_patches_total", "interlock_informer_relists_total"} <= names

        controller.signal(signal.SIGTERM)
        assert controller.wait(within=90) == 0
    finally:
        if watch is not None:
            watch.stop()
        controller.stop()
