"""What the data plane's end-to-end tests share: an edge whose Ingress sends ``dp.test`` to the
Service ``web``, echo backends standing in for pods, and producer HTTPRoutes on ``web`` whose
policy the edge enforces on the wire.

Each echo backend (``tests/kit/echo_backends.py``, the one the mesh's and the engine's tests use
too) answers with a JSON report of what it received (its name, method, path as received,
query, every header with all its values), so a test checks what the policy made of a request;
``/stall…`` paths never answer until the test ends (for timeouts), ``?status=N`` answers N,
``?fail_first=N`` answers 503 to the first N requests with that query, ``?read`` reads the
whole body first (its length in the report). A test changes the
route, then waits for a marker header of that route version to reach a backend: from then on
the edge serves that version, and the assertions need no timing.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from interlock.config import EdgeConfig
from interlock.controller.app import Controller
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.echo_backends import Echo, EchoReply, local_slice

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
GATEWAY = "gateway.networking.k8s.io"
HOST = "dp.test"
MARK = "X-Route-Version"


@dataclass(frozen=True)
class Reply(EchoReply):
    all_headers: dict[str, list[str]] = field(default_factory=dict)
    """Every value of each header, by lower-cased name (``headers`` keeps one of each)."""

    @property
    def reason(self) -> str | None:
        return self.headers.get("X-Interlock-Reason")


def service_obj(name: str, annotations: dict[str, str] | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations or {}},
        "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
    }


def slice_obj(name: str, port: int) -> dict[str, Any]:
    return local_slice(name, {"http": port}, name=f"{name}-dp")


def ref(name: str, *, weight: int = 1, **extra: Any) -> dict[str, Any]:
    return {"name": name, "port": 80, "weight": weight, **extra}


def header_filter(kind: str, **config: Any) -> dict[str, Any]:
    """A RequestHeaderModifier / ResponseHeaderModifier with ``set``/``add``/``remove``."""
    key = kind[0].lower() + kind[1:]
    return {"type": kind, key: config}


def backend_edits(name: str) -> list[dict[str, Any]]:
    """Backend-level filters that name the backend ``name`` both ways: ``X-Backend`` set on the
    request, ``X-From`` added to the response."""
    return [
        header_filter("RequestHeaderModifier", set=[{"name": "X-Backend", "value": name}]),
        header_filter("ResponseHeaderModifier", add=[{"name": "X-From", "value": name}]),
    ]


def _marked(rule: dict[str, Any], version: str) -> dict[str, Any]:
    """``rule`` whose RequestHeaderModifier (one is added if none) also sets the marker."""
    marker = {"name": MARK, "value": version}
    filters = [dict(f) for f in rule.get("filters", [])]
    for f in filters:
        if f["type"] == "RequestHeaderModifier":
            config = dict(f["requestHeaderModifier"])
            config["set"] = [*config.get("set", []), marker]
            f["requestHeaderModifier"] = config
            break
    else:
        filters.insert(0, header_filter("RequestHeaderModifier", set=[marker]))
    return {**rule, "filters": filters}


INGRESS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "Ingress",
    "metadata": {"name": "dp", "namespace": "default"},
    "spec": {
        "ingressClassName": "interlock",
        "rules": [
            {
                "host": HOST,
                "http": {
                    "paths": [
                        {
                            "path": "/",
                            "pathType": "Prefix",
                            "backend": {"service": {"name": "web", "port": {"number": 80}}},
                        }
                    ]
                },
            }
        ],
    },
}

INGRESS_CLASS = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {"name": "interlock"},
    "spec": {"controller": "interlock.dev/ingress-controller"},
}


@dataclass
class EdgeEnv:
    cluster: Cluster
    controller: Controller
    http: aiohttp.ClientSession
    echoes: dict[str, Echo] = field(default_factory=dict)

    @property
    def url(self) -> str:
        edge = self.controller.inspect().edge
        assert edge is not None
        url = edge.url
        assert url is not None
        return url

    async def serve(self, name: str) -> Echo:
        """A Service ``name`` with one ready endpoint: an echo server named ``name``."""
        echo = Echo(name)
        await echo.start()
        self.echoes[name] = echo
        await self.cluster.apply(service_obj(name))
        await self.cluster.apply(slice_obj(name, echo.port))
        return echo

    async def route(
        self,
        version: str,
        *rules: dict[str, Any],
        probe: str = "/",
        annotations: dict[str, str] | None = None,
    ) -> None:
        """Replace the producer HTTPRoute on ``web`` with ``rules`` (each sets the version
        marker header) and wait until a request for ``probe`` shows the edge serves it."""
        marked = [_marked(rule, version) for rule in rules]
        await self.cluster.apply(
            {
                "apiVersion": f"{GATEWAY}/v1",
                "kind": "HTTPRoute",
                "metadata": {
                    "name": "web-route",
                    "namespace": "default",
                    "annotations": annotations or {},
                },
                "spec": {
                    "parentRefs": [{"group": "", "kind": "Service", "name": "web"}],
                    "rules": marked,
                },
            }
        )

        def served() -> bool:
            return any(
                r["headers"].get(MARK.lower()) == [version]
                for echo in self.echoes.values()
                for r in echo.received
            )

        async def probed() -> bool:
            last[:] = [await self.get(probe, headers={"X-Probe": "1"})]
            return served()

        last: list[Reply] = []

        try:
            await eventually(probed, message=f"the edge serves route version {version}")
        except AssertionError as error:
            raise AssertionError(f"{error}; last reply: {last}") from error

    async def get(
        self, path: str, *, method: str = "GET", headers: dict[str, str] | None = None
    ) -> Reply:
        async with self.http.request(
            method,
            self.url + path,
            headers={"Host": HOST, **(headers or {})},
            allow_redirects=False,
        ) as response:
            all_headers: dict[str, list[str]] = {}
            for name, value in response.headers.items():
                all_headers.setdefault(name.lower(), []).append(value)
            return Reply(
                response.status, dict(response.headers), await response.read(), all_headers
            )


@contextlib.asynccontextmanager
async def edge_env(
    cluster: Cluster, start_controller: StartController, **controller: Any
) -> AsyncIterator[EdgeEnv]:
    """The controller (``controller`` are its concerns besides the test defaults: ``edge``
    serves at ``LOCAL`` unless given; ``mesh``, …) with its edge, the echo backends ``web``,
    ``v1``, ``v2`` and the Ingress of ``dp.test``."""
    await cluster.apply_manifests([CRDS])
    controller.setdefault("edge", EdgeConfig(addr=LOCAL))
    started = await start_controller(identity="dataplane-replica", **controller)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as http:
        env = EdgeEnv(cluster, started, http)
        try:
            await cluster.apply(INGRESS_CLASS)
            for name in ("web", "v1", "v2"):
                await env.serve(name)
            await cluster.apply(INGRESS)

            async def reaches_web() -> bool:
                return (await env.get("/")).headers.get("X-Echo") == "web"

            await eventually(reaches_web, message=f"{HOST} reaches web")
            yield env
        finally:
            for echo in env.echoes.values():
                await echo.stop()


@pytest.fixture
async def edge(cluster: Cluster, start_controller: StartController) -> AsyncIterator[EdgeEnv]:
    async with edge_env(cluster, start_controller) as env:
        yield env
