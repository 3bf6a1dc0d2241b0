"""Every series the shipped dashboard and alerts read is one a running interlock exports.

A dashboard panel or an alert over a metric name the code does not export shows nothing and
never fires — silently. So this test reads the PromQL of ``docs/dashboards/interlock.json`` (the
chart's dashboard) and of ``charts/interlock/files/alerts.yaml``, runs a controller with an edge,
sends it traffic (answered requests, a 404, a 502 from an upstream that refuses connections, a
WebSocket held open), scrapes ``/metrics`` and finds every metric name the queries use, with
every label their matchers and groupings name (besides the target labels Prometheus adds:
``namespace``, ``pod``, …).

Three counters move only on events this traffic does not cause (an upstream timeout, a retry, a
mesh ``CONNECT`` tunnel): for those the family must be exported (its ``HELP``), and their labels
are checked by the tests of those features.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import AsyncIterator, Iterator
from pathlib import Path

import pytest
import yaml
from e2e_clients import eventually
from echo_backends import local_slice
from edge_objects import backend_service
from lanes import ENDPOINT_HOST
from mesh_env import WsBackend, chat_backend
from prometheus_client.parser import text_string_to_metric_families
from test_edge_scenarios import Env, ingress
from test_edge_scenarios import env as env  # the fixture

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "docs" / "dashboards" / "interlock.json"
ALERTS = REPO / "charts" / "interlock" / "files" / "alerts.yaml"

TARGET_LABELS = frozenset({"namespace", "pod", "job", "instance", "service", "container"})
"""Labels Prometheus gives a scraped target's series; not in ``/metrics`` itself."""

ONLY_ON_RARE_EVENTS = frozenset(
    {
        "interlock_upstream_timeouts_total",
        "interlock_upstream_retries_total",
        "interlock_tunnel_bytes_total",
    }
)

_KEYWORDS = frozenset({"by", "without", "on", "ignoring", "group_left", "group_right", "bool"})
_KEYWORDS |= {"and", "or", "unless", "offset", "le", "inf", "nan"}
_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_SELECTOR = re.compile(r"([A-Za-z_:][A-Za-z0-9_:]*)\s*\{([^}]*)\}")
_MATCHER = re.compile(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)")
_GROUPING = re.compile(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^)]*)\)")
_IDENTIFIER = re.compile(r"(?<![\w.$])([A-Za-z_:][A-Za-z0-9_:]*)\s*(\()?")


def used_series(expr: str) -> dict[str, set[str]]:
    """The metric names a PromQL expression reads, each with the labels its matchers name,
    and the labels its groupings name (under the key ``""``)."""
    used: dict[str, set[str]] = {}
    for name, matchers in _SELECTOR.findall(expr):
        used.setdefault(name, set()).update(_MATCHER.findall(_STRING.sub('""', matchers)))
    grouped = {label.strip() for g in _GROUPING.findall(expr) for label in g.split(",")}
    bare = _GROUPING.sub(" ", re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", _STRING.sub('""', expr)))
    for name, call in _IDENTIFIER.findall(re.sub(r"\$\w+", " ", bare)):
        if not call and name not in _KEYWORDS:
            used.setdefault(name, set())
    used[""] = grouped - {""}
    return used


def test_used_series_reads_names_matchers_and_groupings() -> None:
    expr = (
        "histogram_quantile(0.99, sum by (kind, le) (rate(interlock_reconcile_seconds_bucket{"
        'namespace=~"$namespace", result="a,b"}[$__rate_interval]))) / on(pod) group_left '
        "max(interlock_leader) > 0.5 and up"
    )
    assert used_series(expr) == {
        "interlock_reconcile_seconds_bucket": {"namespace", "result"},
        "interlock_leader": set(),
        "up": set(),
        "": {"kind", "le", "pod"},
    }


def _dashboard_queries() -> Iterator[str]:
    dashboard = json.loads(DASHBOARD.read_text())
    for panel in dashboard["panels"]:
        for target in panel.get("targets", []):
            yield target["expr"]
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            query = re.fullmatch(r"label_values\((.*),\s*(\w+)\)", variable["definition"])
            assert query is not None, variable["definition"]
            yield f"sum by ({query.group(2)}) ({query.group(1)})"


def _alert_queries() -> Iterator[str]:
    for group in yaml.safe_load(ALERTS.read_text())["groups"]:
        for rule in group["rules"]:
            yield rule["expr"]


def test_the_dashboard_and_the_alerts_have_queries() -> None:
    assert len(list(_dashboard_queries())) >= 25
    alerts = [r["alert"] for g in yaml.safe_load(ALERTS.read_text())["groups"] for r in g["rules"]]
    assert len(alerts) == len(list(_alert_queries())) == 7


@pytest.fixture
async def chat(env: Env) -> AsyncIterator[WsBackend]:
    async with chat_backend(env.kube.apply) as backend:
        await env.kube.apply(ingress("chat", "ws.example", backend="chat"))
        await env.until_status("ws.example", 200)
        yield backend


def _closed_port() -> int:
    """A port nothing listens on, where the EndpointSlice's address is."""
    with socket.socket() as sock:
        sock.bind((ENDPOINT_HOST, 0))
        return int(sock.getsockname()[1])


async def test_every_series_the_dashboard_and_alerts_read_is_exported(
    env: Env, chat: WsBackend
) -> None:
    await env.kube.apply(ingress("web", "web.example", backend="web"))
    await env.kube.apply(backend_service("gone"))
    await env.kube.apply(local_slice("gone", {"": _closed_port()}, name="gone-slice"))
    await env.kube.apply(ingress("gone", "gone.example", backend="gone"))
    await env.until_status("web.example", 200)
    await env.until_status("gone.example", 502)
    assert await env.status_of("unknown.example") == 404
    admin = env.controller.admin_site
    assert admin is not None

    async with env.http.ws_connect(
        env.edge_url + "/room/1", headers={"Host": "ws.example"}, protocols=("chat.v2",)
    ) as ws:
        await chat.talk(ws, "/room/1", "hi", b"abc")
        text = ""

        async def scraped_with_status_written() -> bool:
            nonlocal text
            async with env.http.get(admin.url + "/metrics") as response:
                text = await response.text()
            return 'interlock_status_patches_total{outcome="written"} 0.0' not in text

        await eventually(scraped_with_status_written, message="a status write counted")
    families = {family.name: family for family in text_string_to_metric_families(text)}
    labels: dict[str, set[str]] = {}
    for family in families.values():
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)

    # The gauges this change added, with the values this traffic gives them.
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value
        for f in families.values()
        for s in f.samples
    }
    assert samples[("interlock_ready", ())] == 1
    websocket = (("front", "edge"), ("protocol", "websocket"))
    assert samples[("interlock_connections_open", websocket)] == 1

    queries = [*_dashboard_queries(), *_alert_queries()]
    missing: list[str] = []
    for expr in queries:
        used = used_series(expr)
        grouped = used.pop("")
        for name, matched in used.items():
            if name in ONLY_ON_RARE_EVENTS:
                if name.removesuffix("_total") not in families:
                    missing.append(f"{name} (no HELP either) in {expr}")
                continue
            if name not in labels:
                missing.append(f"{name} in {expr}")
                continue
            unknown = matched - labels[name] - TARGET_LABELS
            if unknown:
                missing.append(f"{name} has no label {sorted(unknown)} ({expr})")
        known = set().union(*(labels.get(name, set()) for name in used))
        if used.keys() - ONLY_ON_RARE_EVENTS and (unknown := grouped - known - TARGET_LABELS):
            missing.append(f"grouping by {sorted(unknown)}: no such label in {expr}")
    assert not missing, "\n".join(missing)
