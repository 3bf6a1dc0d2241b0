"""What the Gateway API end-to-end tests share: a controller with an edge and an address pool
of its own (four loopback addresses, so concurrent runs on one machine do not meet), our
GatewayClass, echo backends ``blue`` and ``green``, and readers of the statuses a user reads."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest

from interlock.config import EdgeConfig, GatewayConfig
from interlock.controller.app import Controller
from interlock.kube.transport import KubeApiError, request_json
from tests.kit.dataplane_env import CRDS, service_obj, slice_obj
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually
from tests.kit.echo_backends import Echo

GROUP = "gateway.networking.k8s.io"
CLASS = "interlock-e2e"

GATEWAY_API = Path(__file__).resolve().parents[3] / "shared/gateway-api/v1.6.1"
"""The Gateway API release's CRDs (``standard/`` is what the real lane installs)."""
SAFE_UPGRADES = "safe-upgrades.gateway.networking.k8s.io"
"""The standard channel's ValidatingAdmissionPolicy (and binding) refusing experimental CRDs
over standard ones."""


def _pool() -> tuple[str, ...]:
    """Four loopback addresses of their own, so concurrent runs on one machine do not meet."""
    base = f"127.{random.randint(64, 250)}.{random.randint(0, 255)}."
    start = random.randint(1, 200)
    return tuple(f"{base}{start + i}" for i in range(4))


def gateway_obj(name: str, *listeners: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "Gateway",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"gatewayClassName": CLASS, "listeners": list(listeners)},
    }


def listener_set_obj(name: str, gateway: str, *listeners: dict[str, Any]) -> dict[str, Any]:
    """A ListenerSet in ``default`` whose parent is the Gateway ``gateway``."""
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "ListenerSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"parentRef": {"name": gateway}, "listeners": list(listeners)},
    }


def http_listener(name: str, *, port: int = 80, hostname: str | None = None) -> dict[str, Any]:
    listener: dict[str, Any] = {"name": name, "port": port, "protocol": "HTTP"}
    if hostname is not None:
        listener["hostname"] = hostname
    return listener


def route_obj(
    name: str, parents: list[dict[str, Any]], backend: str, **spec: Any
) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {
            "parentRefs": parents,
            "rules": [{"backendRefs": [{"name": backend, "port": 80}]}],
            **spec,
        },
    }


def conditions(obj: dict[str, Any] | None) -> dict[str, tuple[str, str]]:
    found = (obj or {}).get("status", {}).get("conditions", [])
    return {c["type"]: (c["status"], c["reason"]) for c in found}


class Env:
    def __init__(self, cluster: Cluster, controller: Controller, http: aiohttp.ClientSession):
        self.cluster = cluster
        self.controller = controller
        self.http = http
        self.echoes: dict[str, Echo] = {}
        self.pool: tuple[str, ...] = controller.config.gateways.addresses

    async def serve(self, name: str) -> None:
        echo = Echo(name)
        await echo.start()
        self.echoes[name] = echo
        await self.cluster.apply(service_obj(name))
        await self.cluster.apply(slice_obj(name, echo.port))

    async def read(self, kind: str, name: str) -> dict[str, Any] | None:
        if kind == "GatewayClass":
            obj = {"apiVersion": f"{GROUP}/v1", "kind": kind, "metadata": {"name": name}}
        else:
            obj = {
                "apiVersion": f"{GROUP}/v1",
                "kind": kind,
                "metadata": {"name": name, "namespace": "default"},
            }
        return await self.cluster.get(obj)

    async def address(self, gateway: str) -> str:
        found: list[str] = []

        async def assigned() -> bool:
            obj = await self.read("Gateway", gateway)
            addresses = (obj or {}).get("status", {}).get("addresses", [])
            found[:] = [a["value"] for a in addresses]
            return bool(found)

        await eventually(assigned, message=f"Gateway {gateway} has an address")
        return found[0]

    async def parent_conditions(self, route: str, gateway: str) -> dict[str, tuple[str, str]]:
        obj = await self.read("HTTPRoute", route)
        for entry in (obj or {}).get("status", {}).get("parents", []):
            if (
                entry["controllerName"] == "interlock.dev/gateway-controller"
                and entry["parentRef"]["name"] == gateway
            ):
                return {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
        return {}

    async def backend_of(self, address: str, host: str, path: str = "/", port: int = 80) -> Any:
        try:
            async with self.http.get(
                f"http://{address}:{port}{path}", headers={"Host": host}
            ) as response:
                return response.headers.get("X-Echo") or response.status
        except aiohttp.ClientError as error:
            return repr(error)


@pytest.fixture
async def env(cluster: Cluster, start_controller: StartController) -> AsyncIterator[Env]:
    await cluster.apply_manifests([CRDS])
    controller = await start_controller(
        identity="gateway-replica",
        edge=EdgeConfig(addr=LOCAL),
        gateways=GatewayConfig(addresses=_pool()),
    )
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10)) as http:
        environment = Env(cluster, controller, http)
        await cluster.apply(
            {
                "apiVersion": f"{GROUP}/v1",
                "kind": "GatewayClass",
                "metadata": {"name": CLASS},
                "spec": {"controllerName": "interlock.dev/gateway-controller"},
            }
        )
        try:
            for name in ("blue", "green"):
                await environment.serve(name)
            yield environment
        finally:
            for echo in environment.echoes.values():
                await echo.stop()
            for kind, name in (("Gateway", "one"), ("Gateway", "two"), ("GatewayClass", CLASS)):
                obj = await environment.read(kind, name)
                if obj is not None:
                    await cluster.delete(obj)


@pytest.fixture
async def experimental_httproutes(cluster: Cluster) -> AsyncIterator[None]:
    """HTTPRoute's experimental-channel CRD for one test (fields such as ``rules[].retry``,
    which the standard CRD's API server prunes), the standard one again after it.

    On the real lane the standard channel's ``safe-upgrades`` policy refuses an experimental
    CRD over a standard one: its binding is deleted for the test and applied again after (its
    admission takes a moment to notice, so the apply is tried until it passes). The embedded
    lane's HTTPRoute admits the field already; the CRD is applied there too, the same way."""
    experimental = GATEWAY_API / "experimental" / "gateway.networking.k8s.io_httproutes.yaml"
    standard = GATEWAY_API / "standard" / "gateway.networking.k8s.io_httproutes.yaml"
    if cluster.real:
        try:
            await request_json(
                cluster.api,
                method="DELETE",
                path=f"/apis/admissionregistration.k8s.io/v1/validatingadmissionpolicybindings/"
                f"{SAFE_UPGRADES}",
                what="delete the safe-upgrades binding",
            )
        except KubeApiError as error:
            if error.code != 404:
                raise

    async def installed() -> bool:
        try:
            await cluster.apply_manifests([experimental])
        except AssertionError:
            return False  # the policy's binding is still enforced
        return True

    await eventually(installed, message="the experimental HTTPRoute CRD is installed")
    try:
        yield
    finally:
        await cluster.apply_manifests([standard])
        if cluster.real:
            await cluster.apply_manifests(
                [GATEWAY_API / "standard" / "gateway.networking.k8s.io_vap_safeupgrades.yaml"]
            )
