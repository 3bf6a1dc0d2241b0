"""Every series the shipped dashboard and alerts read is one a running interlock exports.

A dashboard panel or an alert over a metric name the code does not export shows nothing and
never fires — silently. So this test reads the PromQL of ``docs/dashboards/interlock.json`` (the
chart's dashboard) and of ``charts/interlock/files/alerts.yaml``, runs a controller with an edge
and a mesh listener, sends it traffic, scrapes ``/metrics`` and finds every metric name the
queries use with a sample, and every label their matchers and groupings name (besides the
target labels Prometheus adds: ``namespace``, ``pod``, …). The traffic gives every series a
sample: answered requests, a 404, a 502 from an upstream that refuses connections, a 504 and a
retry (a producer HTTPRoute's timeouts and Linkerd's retry annotations), a ``CONNECT`` tunnel
through the mesh listener, and a WebSocket held open while it scrapes.
"""

from __future__ import annotations

import asyncio
import json
import re
import socket
from collections.abc import Iterator
from pathlib import Path

import yaml
from prometheus_client.parser import text_string_to_metric_families

from interlock.config import MeshConfig
from tests.kit.dataplane_env import EdgeEnv, edge_env, ref, slice_obj
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.edge_objects import ingress
from tests.kit.lanes import ENDPOINT_HOST
from tests.kit.mesh_env import chat_backend

REPO = Path(__file__).resolve().parents[2]
DASHBOARD = REPO / "docs" / "dashboards" / "interlock.json"
ALERTS = REPO / "charts" / "interlock" / "files" / "alerts.yaml"

TARGET_LABELS = frozenset({"namespace", "pod", "job", "instance", "service", "container"})
"""Labels Prometheus gives a scraped target's series; not in ``/metrics`` itself."""

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


def _closed_port() -> int:
    """A port nothing listens on, where the EndpointSlice's address is."""
    with socket.socket() as sock:
        sock.bind((ENDPOINT_HOST, 0))
        return int(sock.getsockname()[1])


async def _tunnel_through_the_mesh(edge: EdgeEnv, authority: str) -> bytes:
    """``CONNECT authority`` at the mesh listener, then one HTTP/1.1 request through the
    tunnel; what came back."""
    mesh = edge.controller.mesh
    assert mesh is not None and mesh.address is not None
    reader, writer = await asyncio.open_connection(mesh.address.host, mesh.address.port)
    try:
        writer.write(f"CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n\r\n".encode())
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        if not head.startswith(b"HTTP/1.1 200"):
            return head  # refused: the caller finds no answer from the backend in it
        writer.write(b"GET /through HTTP/1.1\r\nHost: tun\r\nConnection: close\r\n\r\n")
        return await asyncio.wait_for(reader.read(), 30)
    finally:
        writer.close()


async def test_every_series_the_dashboard_and_alerts_read_is_exported(
    cluster: Cluster, start_controller: StartController
) -> None:
    async with edge_env(cluster, start_controller, mesh=MeshConfig(addr=LOCAL)) as edge:
        # v2's only endpoint refuses connections; v1 times out on /stall and answers 503 once
        # to ?fail_first=1, which the retry annotations retry.
        await edge.cluster.apply(slice_obj("v2", _closed_port()))
        await edge.route(
            "series",
            {"backendRefs": [ref("v1")], "timeouts": {"request": "5s", "backendRequest": "300ms"}},
            {
                "matches": [{"path": {"type": "PathPrefix", "value": "/gone"}}],
                "backendRefs": [ref("v2")],
            },
            annotations={"retry.linkerd.io/http": "503", "retry.linkerd.io/limit": "2"},
        )
        assert (await edge.get("/stall")).status == 504
        assert (await edge.get("/r?fail_first=1")).status == 200
        assert (await edge.get("/gone")).status == 502
        async with edge.http.get(edge.url, headers={"Host": "unknown.example"}) as unknown:
            assert unknown.status == 404
        await edge.serve("tun")

        async def tunnelled() -> bool:
            # 503 until the mesh listener has read the new Service's EndpointSlice.
            return b"tun" in await _tunnel_through_the_mesh(edge, "tun.default:80")

        await eventually(tunnelled, message="a tunnel through the mesh listener reaches tun")
        async with chat_backend(edge.cluster.apply) as chat:
            await edge.cluster.apply(ingress("chat", "ws.example", backend="chat"))

            async def routed() -> bool:
                async with edge.http.get(edge.url, headers={"Host": "ws.example"}) as answer:
                    return answer.status == 200

            await eventually(routed, message="ws.example routed to the chat backend")
            async with edge.http.ws_connect(
                edge.url + "/room/1", headers={"Host": "ws.example"}, protocols=("chat.v2",)
            ) as ws:
                await chat.talk(ws, "/room/1", "hi", b"abc")
                text = await _scrape_once_status_is_written(edge)
    _check_every_series(text)


async def _scrape_once_status_is_written(edge: EdgeEnv) -> str:
    admin = edge.controller.admin_site
    assert admin is not None
    text = ""

    async def scraped() -> bool:
        nonlocal text
        async with edge.http.get(admin.url + "/metrics") as response:
            text = await response.text()
        return 'interlock_status_patches_total{outcome="written"} 0.0' not in text

    await eventually(scraped, message="a status write counted")
    return text


def _check_every_series(text: str) -> None:
    families = list(text_string_to_metric_families(text))
    labels: dict[str, set[str]] = {}
    for family in families:
        for sample in family.samples:
            labels.setdefault(sample.name, set()).update(sample.labels)

    # The gauges added for the dashboard, with the values this traffic gives them.
    samples = {
        (s.name, tuple(sorted(s.labels.items()))): s.value for f in families for s in f.samples
    }
    assert samples[("interlock_ready", ())] == 1
    websocket = (("front", "edge"), ("protocol", "websocket"))
    assert samples[("interlock_connections_open", websocket)] == 1

    missing: list[str] = []
    for expr in [*_dashboard_queries(), *_alert_queries()]:
        used = used_series(expr)
        grouped = used.pop("")
        for name, matched in used.items():
            if name not in labels:
                missing.append(f"{name} in {expr}")
            elif unknown := matched - labels[name] - TARGET_LABELS:
                missing.append(f"{name} has no label {sorted(unknown)} ({expr})")
        known = set().union(*(labels.get(name, set()) for name in used))
        if unknown := grouped - known - TARGET_LABELS:
            missing.append(f"grouping by {sorted(unknown)}: no such label in {expr}")
    assert not missing, "\n".join(missing)
