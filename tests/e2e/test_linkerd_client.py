"""interlock's gRPC answers judged by Linkerd's own code: a client built from the
``linkerd2-proxy-api`` crate (``hack/linkerd-client``, the types a Linkerd proxy decodes these
messages with) Gets and Watches interlock on ``--grpc-addr`` and prints each decoded message as
JSON (the crate's field names; a oneof as ``{"Variant": value}``).

The seed's scenario (``docs/design.md``: Linkerd's missing-backend bug) over gRPC: a route whose
backend Service is created after it, then deleted — the Watch stream shows the backend's
failure injector go and come back, on one stream. Then every route kind (HTTPRoute, GRPCRoute,
TLSRoute, TCPRoute, and the Default route of a port without one) decodes, by authority and by
cluster IP. Both lanes: the embedded API server and a real kube-apiserver.
"""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from interlock.config import Address, LinkerdConfig
from interlock.controller.app import Controller
from tests.kit.e2e_clients import Cluster, StartController
from tests.kit.outbound_objects import backend, http_route, parent, service, stream_route

REPO = Path(__file__).resolve().parents[2]
BUILD = REPO / "hack" / "build-linkerd-client.sh"
GATEWAY = "gateway.networking.k8s.io"
WORKLOAD = json.dumps({"ns": "default", "pod": "client-0"})
Policy = dict[str, Any]


def client_binary() -> Path:
    """The cached client (``hack/build-linkerd-client.sh`` builds it; CI runs that first)."""
    path = Path(
        subprocess.run(
            [str(BUILD), "--print-path"], capture_output=True, text=True, check=True
        ).stdout.strip()
    )
    if os.access(path, os.X_OK):
        return path
    message = f"the Linkerd test client is not built ({path} is missing): run {BUILD}"
    if shutil.which("cargo") is None and os.environ.get("INTERLOCK_REQUIRE_BINARIES") != "1":
        pytest.skip(f"{message} (needs cargo)")
    pytest.fail(message)


class LinkerdClient:
    """Runs the client against one controller's gRPC address."""

    def __init__(self, binary: Path, server: str) -> None:
        self.binary = binary
        self.server = server

    def _args(self, method: str, target: str, workload: str) -> list[str]:
        flag = "--authority" if not target[0].isdigit() else "--addr"
        return [
            str(self.binary),
            method,
            "--server",
            self.server,
            flag,
            target,
            "--source-workload",
            workload,
        ]

    async def get(self, target: str, *, workload: str = WORKLOAD) -> Policy:
        process = await asyncio.create_subprocess_exec(
            *self._args("get", target, workload),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        out, err = await asyncio.wait_for(process.communicate(), 60)
        assert process.returncode == 0, err.decode()
        answer: Policy = json.loads(out)
        return answer

    async def watch(self, target: str, *, workload: str = WORKLOAD) -> LinkerdWatch:
        process = await asyncio.create_subprocess_exec(
            *self._args("watch", target, workload),
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
        return LinkerdWatch(process)


class LinkerdWatch:
    """One Watch stream: every message the client decoded, in order."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self.received: list[Policy] = []

    async def next(self, *, within: float = 60.0) -> Policy:
        assert self.process.stdout is not None
        line = await asyncio.wait_for(self.process.stdout.readline(), within)
        assert line, f"the stream ended: {await self._stderr()}"
        message: Policy = json.loads(line)
        assert "error" not in message, message
        self.received.append(message)
        return message

    async def until(self, condition: Callable[[Policy], bool], *, within: float = 60.0) -> Policy:
        for message in self.received:
            if condition(message):
                return message
        deadline = asyncio.get_running_loop().time() + within
        while True:
            left = deadline - asyncio.get_running_loop().time()
            assert left > 0, f"no message matched; last: {self.received[-1:]}"
            message = await self.next(within=left)
            if condition(message):
                return message

    async def _stderr(self) -> str:
        assert self.process.stderr is not None
        return (await self.process.stderr.read()).decode()

    async def close(self) -> None:
        if self.process.returncode is None:
            self.process.terminate()
        await self.process.wait()


@pytest.fixture
def binary() -> Path:
    return client_binary()


@pytest.fixture
async def grpc_controller(start_controller: StartController) -> Controller:
    return await start_controller(
        linkerd=LinkerdConfig(grpc_addr=Address(host="127.0.0.1", port=0))
    )


@pytest.fixture
def linkerd(binary: Path, grpc_controller: Controller) -> LinkerdClient:
    server = grpc_controller.grpc_server
    assert server is not None and server.address is not None
    return LinkerdClient(binary, f"127.0.0.1:{server.address.port}")


def one(mapping: dict[str, Any]) -> tuple[str, Any]:
    """The variant and value of a decoded oneof (``{"Variant": value}``)."""
    [(variant, value)] = mapping.items()
    return variant, value


def protocol(policy: Policy) -> tuple[str, Any]:
    return one(policy["protocol"]["kind"])


def http_routes(policy: Policy) -> list[Policy]:
    variant, value = protocol(policy)
    routes: list[Policy] = value["http1"]["routes"] if variant == "Detect" else value["routes"]
    return routes


def metadata(message: Policy) -> tuple[str, Any]:
    return one(message["metadata"]["kind"])


def route_backends(route: Policy) -> list[Policy]:
    """Every weighted backend of every rule of a decoded route, whatever its kind."""
    found = []
    for rule in route["rules"]:
        variant, value = one(rule["backends"]["kind"])
        found += value["backends"] if variant == "RandomAvailable" else []
    return found


def backend_state(weighted: Policy) -> tuple[str, Any]:
    """``("balancer", destination path)`` or ``("failure", filter kind and value)``."""
    route_backend = weighted["backend"]
    kind = route_backend["backend"]["kind"]
    if kind is not None:
        variant, balancer = one(kind)
        assert variant == "Balancer"
        return "balancer", one(balancer["discovery"]["kind"])[1]["path"]
    [failure] = route_backend["filters"]
    return "failure", one(failure["kind"])


async def test_a_backend_created_after_its_route_then_deleted_reaches_an_open_watch(
    cluster: Cluster, linkerd: LinkerdClient
) -> None:
    await cluster.apply(service("web"))
    await cluster.apply(
        http_route("r", parents=[parent("web", port=80)], backends=[backend("api")])
    )

    def api_state(policy: Policy) -> tuple[str, Any] | None:
        routes = http_routes(policy)
        if metadata(routes[0]) != ("Resource", {**metadata(routes[0])[1], "name": "r"}):
            return None
        [weighted] = route_backends(routes[0])
        return backend_state(weighted)

    watch = await linkerd.watch("web.default.svc.cluster.local:80")
    try:
        missing = await watch.until(lambda p: api_state(p) is not None)
        kind, (variant, injector) = api_state(missing)  # type: ignore[misc]
        assert (kind, variant, injector["status"]) == ("failure", "FailureInjector", 500)
        assert "default/api" in injector["message"]
        stream_start = len(watch.received)

        await cluster.apply(service("api"))
        await watch.until(
            lambda p: api_state(p) == ("balancer", "api.default.svc.cluster.local:80")
        )
        await cluster.delete(service("api"))
        back = await watch.until(lambda p: (api_state(p) or ("",))[0] == "failure")
        assert backend_state(route_backends(http_routes(back)[0])[0])[1][1]["status"] == 500
        # One stream carried all of it: more messages, never a second connection.
        assert len(watch.received) > stream_start
        assert watch.process.returncode is None
    finally:
        await watch.close()


WEB_80 = ("web", 80)
API_AND_GONE = [{"name": "api", "port": 80}, {"name": "gone", "port": 80}]
"""A route's backends: one that exists and one that does not (its failure filter)."""


GRPC_ROUTE = {
    "apiVersion": f"{GATEWAY}/v1",
    "kind": "GRPCRoute",
    "metadata": {"name": "rpc", "namespace": "default"},
    "spec": {
        "parentRefs": [{"group": "core", "kind": "Service", "name": "web", "port": 80}],
        "rules": [
            {
                "matches": [{"method": {"service": "shop.v1.Users", "method": "Get"}}],
                "backendRefs": API_AND_GONE,
            }
        ],
    },
}
HTTP_ROUTE = http_route(
    "page", parents=[parent("web", port=80)], backends=[backend("api"), backend("gone")]
)

KINDS: dict[str, tuple[dict[str, Any] | None, str, str]] = {
    # kind: (route, the ProxyProtocol variant, the failure filter of a missing backend)
    "HTTPRoute": (HTTP_ROUTE, "Detect", "FailureInjector"),
    "GRPCRoute": (GRPC_ROUTE, "Grpc", "FailureInjector"),
    "TLSRoute": (
        stream_route(
            "TLSRoute",
            "tls",
            API_AND_GONE,
            service_port=WEB_80,
            hostnames=["db.example.com"],
        ),
        "Tls",
        "Invalid",
    ),
    "TCPRoute": (
        stream_route("TCPRoute", "tcp", API_AND_GONE, service_port=WEB_80),
        "Opaque",
        "Invalid",
    ),
    "Default": (None, "Detect", ""),
}


@pytest.mark.parametrize("kind", list(KINDS))
async def test_every_route_kind_decodes_with_linkerds_crate(
    cluster: Cluster, linkerd: LinkerdClient, kind: str
) -> None:
    route, variant, failure = KINDS[kind]
    await cluster.apply(service("web"))
    await cluster.apply(service("api"))
    if route is not None:
        await cluster.apply(route)

    def served(policy: Policy) -> Policy | None:
        found, value = protocol(policy)
        if found != variant:
            return None
        routes = value["http1"]["routes"] if found == "Detect" else value["routes"]
        named = metadata(routes[0])
        if kind == "Default":
            return routes[0] if named == ("Default", "http") else None
        return routes[0] if named[0] == "Resource" and named[1]["kind"] == kind else None

    watch = await linkerd.watch("web.default.svc.cluster.local:80")
    try:
        policy = await watch.until(lambda p: served(p) is not None)
    finally:
        await watch.close()
    decoded = served(policy)
    assert decoded is not None
    assert metadata(policy) == (
        "Resource",
        {
            "group": "core",
            "kind": "Service",
            "name": "web",
            "namespace": "default",
            "section": "",
            "port": 80,
        },
    )
    if kind == "Default":
        [rule] = decoded["rules"]
        [first] = one(rule["backends"]["kind"])[1]["backends"]
        assert one(first["backend"]["kind"])[1]["discovery"]["kind"] == {
            "Dst": {"path": "web.default.svc.cluster.local:80"}
        }
    else:
        states = [backend_state(b) for b in route_backends(decoded)]
        assert states[0] == ("balancer", "api.default.svc.cluster.local:80")
        assert states[1][0] == "failure" and states[1][1][0] == failure
    if kind == "GRPCRoute":
        [match] = decoded["rules"][0]["matches"]
        assert match["rpc"] == {"service": "shop.v1.Users", "method": "Get"}
    if kind == "TLSRoute":
        assert decoded["snis"] == [{"match": {"Exact": "db.example.com"}}]

    # The same answer by cluster IP, as a proxy asks for a connection's original destination.
    stored = await cluster.get(service("web"))
    assert stored is not None
    by_address = await linkerd.get(f"{stored['spec']['clusterIP']}:80")
    assert by_address == policy
