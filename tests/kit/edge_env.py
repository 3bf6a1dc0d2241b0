"""The edge scenarios' environment (tests/e2e/test_edge_scenarios.py and the tests that reuse it):
the controller's edge, the Kubernetes objects it reads, local backends, and the ``env`` fixture."""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import pytest
from aiohttp import web

from interlock.config import EdgeConfig
from interlock.controller.app import Controller
from interlock.kube.resources import (
    ENDPOINT_SLICE,
    HTTP_ROUTE,
    INGRESS,
    INGRESS_CLASS,
    MODULE_SET,
    SECRET,
    SERVICE,
    Resource,
)
from interlock.kube.transport import KubeApiError, request_json
from interlock.mailbox import BackoffPolicy
from interlock.model.edge_board import RouteState
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, eventually, object_events
from tests.kit.echo_backends import LocalBackend, local_slice
from tests.kit.edge_objects import INGRESS_CLASS_OBJ, backend_service

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
RESOURCES = {
    r.kind: r
    for r in (ENDPOINT_SLICE, HTTP_ROUTE, INGRESS, INGRESS_CLASS, MODULE_SET, SECRET, SERVICE)
}
PASSWORD = "s3cret-pw"
HTPASSWD = "alice:" + bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
GOOD_AUTH = {"Authorization": "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()}


# --- a local backend standing in for pods --------------------------------------------------------


@dataclass
class Backend(LocalBackend):
    """An HTTP server that records what reaches it and answers 200 naming itself."""

    name: str
    port: int = 0
    requests: list[dict[str, str]] = field(default_factory=list)
    status: int = 200
    runner: web.AppRunner | None = None

    async def handle(self, request: web.Request) -> web.Response:
        self.requests.append(dict(request.headers))
        body = f"backend {self.name} {request.path}\n" + "x" * 2000
        return web.Response(status=self.status, text=body)


# --- objects -------------------------------------------------------------------------------------


def endpoint_slice(backend: Backend, *, service_name: str | None = None) -> dict[str, Any]:
    service = service_name or backend.name
    return local_slice(service, {"": backend.port}, name=f"{service}-slice")


def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


# --- the environment -----------------------------------------------------------------------------


class Kube:
    """Raw objects through the test's (admin) API client (kubernetes-asyncio underneath)."""

    def __init__(self, api: Any) -> None:
        self.api = api

    @staticmethod
    def _resource(obj: dict[str, Any]) -> Resource:
        return RESOURCES[obj["kind"]]

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = self._resource(obj)
        namespace = obj["metadata"].get("namespace")
        try:
            return await request_json(
                self.api,
                method="POST",
                path=resource.collection_path(namespace=namespace),
                what="create",
                body=obj,
            )
        except KubeApiError as error:
            if error.code != 409:
                raise
        path = resource.object_path(namespace=namespace, name=obj["metadata"]["name"])
        while True:
            # The controller may write the object's status between our read and our write.
            current = await request_json(self.api, method="GET", path=path, what="get")
            body = json.loads(json.dumps(obj))
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            try:
                return await request_json(
                    self.api, method="PUT", path=path, what="replace", body=body
                )
            except KubeApiError as error:
                if error.code != 409:
                    raise

    async def delete(self, obj: dict[str, Any]) -> None:
        resource = self._resource(obj)
        path = resource.object_path(
            namespace=obj["metadata"].get("namespace"), name=obj["metadata"]["name"]
        )
        try:
            await request_json(self.api, method="DELETE", path=path, what="delete")
        except KubeApiError as error:
            if error.code != 404:
                raise

    async def get(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = self._resource(obj)
        path = resource.object_path(
            namespace=obj["metadata"].get("namespace"), name=obj["metadata"]["name"]
        )
        return await request_json(self.api, method="GET", path=path, what="get")

    async def events(self, name: str, reason: str | None = None) -> list[dict[str, Any]]:
        return await object_events(self.api, name, reason)


@dataclass
class Env:
    controller: Controller
    kube: Kube
    http: aiohttp.ClientSession
    backends: dict[str, Backend]

    @property
    def edge_url(self) -> str:
        edge = self.controller.inspect().edge
        assert edge is not None and edge.url is not None
        return edge.url

    async def request(
        self, host: str, path: str = "/", *, method: str = "GET", **kwargs: Any
    ) -> tuple[int, dict[str, str], bytes]:
        headers = {"Host": host, **kwargs.pop("headers", {})}
        async with self.http.request(
            method, self.edge_url + path, headers=headers, **kwargs
        ) as response:
            return response.status, dict(response.headers), await response.read()

    async def status_of(self, host: str, path: str = "/", **kwargs: Any) -> int:
        return (await self.request(host, path, **kwargs))[0]

    async def until_status(self, host: str, status: int, path: str = "/", **kwargs: Any) -> None:
        async def check() -> bool:
            return await self.status_of(host, path, **kwargs) == status

        await eventually(check, message=f"{host}{path} answers {status}")

    async def serve(self, name: str) -> Backend:
        """A backend Service ``name`` with one ready endpoint."""
        backend = Backend(name)
        await backend.start()
        self.backends[name] = backend
        await self.kube.apply(backend_service(name))
        await self.kube.apply(endpoint_slice(backend))
        return backend

    def route_state(self, host: str, route_id: str = "Prefix:/") -> RouteState | None:
        edge = self.controller.inspect().edge
        assert edge is not None
        return edge.route(host=host, route_id=route_id)

    async def until_route_error(self, host: str, text: str, route_id: str = "Prefix:/") -> None:
        def check() -> bool:
            state = self.route_state(host, route_id)
            return state is not None and text in (state.last_error or "")

        await eventually(check, message=f"{host} {route_id} reports {text!r}")

    async def until_event(self, name: str, reason: str) -> list[dict[str, Any]]:
        found: list[dict[str, Any]] = []

        async def check() -> bool:
            found[:] = await self.kube.events(name, reason)
            return bool(found)

        await eventually(check, message=f"Event {reason} on {name}")
        return found


@pytest.fixture
async def env(cluster: Cluster, start_controller: StartController) -> AsyncIterator[Env]:
    await cluster.apply_manifests([CRDS])
    controller = await start_controller(identity="edge-replica", edge=EdgeConfig(addr=LOCAL))
    async with edge_env(cluster, controller, auto_decompress=False) as running:
        yield running


@asynccontextmanager
async def edge_env(cluster: Cluster, controller: Controller, **session: Any) -> AsyncIterator[Env]:
    """An :class:`Env` over ``controller`` (its edge retrying quickly) with the IngressClass and
    the ``web`` backend; ``session``: more options of the client session."""
    assert controller.edge is not None
    controller.edge.backoff = BackoffPolicy(initial=0.02, maximum=0.2)
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=10), **session) as http:
        running = Env(controller, Kube(cluster.api), http, {})
        await running.kube.apply(INGRESS_CLASS_OBJ)
        await running.serve("web")
        try:
            yield running
        finally:
            for backend in running.backends.values():
                await backend.stop()
