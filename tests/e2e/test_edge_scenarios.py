"""Issue 6 acceptance scenarios, end to end: embedded API server → controller → edge → backend.

Objects are written through the real kubernetes-asyncio client; requests go over real HTTP to
the controller's edge data plane, which forwards to local aiohttp backends wired in through
Services and EndpointSlices exactly as pods would be.
"""

from __future__ import annotations

import base64
import json
from collections.abc import AsyncIterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import bcrypt
import pytest
from aiohttp import web
from e2e_clients import LOCAL, StartController, eventually

from interlock.actors.edge import RouteState
from interlock.app import Controller
from interlock.embedded import EmbeddedApiServer
from interlock.kube.resources import (
    ENDPOINT_SLICE,
    EVENT,
    INGRESS,
    INGRESS_CLASS,
    MODULE_SET,
    SECRET,
    SERVICE,
    Resource,
)
from interlock.kube.transport import KubeApiError, request_json
from interlock.mailbox import BackoffPolicy

CRDS = Path(__file__).resolve().parents[2] / "manifests" / "crds"
RESOURCES = {
    r.kind: r for r in (ENDPOINT_SLICE, INGRESS, INGRESS_CLASS, MODULE_SET, SECRET, SERVICE)
}
PASSWORD = "s3cret-pw"
HTPASSWD = "alice:" + bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(4)).decode()
GOOD_AUTH = {"Authorization": "Basic " + base64.b64encode(f"alice:{PASSWORD}".encode()).decode()}


# --- a local backend standing in for pods --------------------------------------------------------


@dataclass
class Backend:
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

    async def start(self) -> None:
        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", self.handle)
        self.runner = web.AppRunner(app, access_log=None)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        self.port = self.runner.addresses[0][1]

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


# --- objects -------------------------------------------------------------------------------------


def service(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"ports": [{"port": 80, "protocol": "TCP"}]},
    }


def endpoint_slice(backend: Backend, *, service_name: str | None = None) -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"{service_name or backend.name}-slice",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": service_name or backend.name},
        },
        "addressType": "IPv4",
        "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
        "ports": [{"name": "", "port": backend.port, "protocol": "TCP"}],
    }


def module_set(name: str, modules: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "interlock.dev/v1alpha1",
        "kind": "ModuleSet",
        "metadata": {"name": name, "namespace": "default"},
        "spec": {"modules": modules},
    }


def secret(name: str, data: dict[str, str]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": name, "namespace": "default"},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


def ingress(
    name: str,
    host: str,
    *,
    backend: str = "web",
    modules: str = "",
    path: str = "/",
    rules: list[dict[str, Any]] | None = None,
) -> dict[str, Any]:
    annotations = {"interlock.dev/modules": modules} if modules else {}
    default_rules = [
        {
            "host": host,
            "http": {
                "paths": [
                    {
                        "path": path,
                        "pathType": "Prefix",
                        "backend": {"service": {"name": backend, "port": {"number": 80}}},
                    }
                ]
            },
        }
    ]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": name, "namespace": "default", "annotations": annotations},
        "spec": {
            "ingressClassName": "interlock",
            "rules": default_rules if rules is None else rules,
        },
    }


INGRESS_CLASS_OBJ = {
    "apiVersion": "networking.k8s.io/v1",
    "kind": "IngressClass",
    "metadata": {"name": "interlock"},
    "spec": {"controller": "interlock.dev/ingress-controller"},
}


# --- the environment -----------------------------------------------------------------------------


class Kube:
    """Raw objects through the controller's own API client (kubernetes-asyncio underneath)."""

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
        current = await request_json(self.api, method="GET", path=path, what="get")
        body = json.loads(json.dumps(obj))
        body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
        return await request_json(self.api, method="PUT", path=path, what="replace", body=body)

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
        listed = await request_json(
            self.api,
            method="GET",
            path=EVENT.collection_path(namespace="default"),
            what="list events",
        )
        return [
            e
            for e in listed.get("items", [])
            if e.get("involvedObject", {}).get("name") == name
            and (reason is None or e.get("reason") == reason)
        ]


@dataclass
class Env:
    controller: Controller
    kube: Kube
    http: aiohttp.ClientSession
    backends: dict[str, Backend]

    @property
    def edge_url(self) -> str:
        assert self.controller.edge is not None
        return self.controller.edge.url

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
        await self.kube.apply(service(name))
        await self.kube.apply(endpoint_slice(backend))
        return backend

    def route_state(self, host: str, route_id: str = "Prefix:/") -> RouteState | None:
        assert self.controller.edge is not None
        return self.controller.edge.board.route(host=host, route_id=route_id)

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
async def env(
    api_server: EmbeddedApiServer, start_controller: StartController
) -> AsyncIterator[Env]:
    await api_server.apply_manifests([CRDS])
    controller = await start_controller(lease_identity="edge-replica", edge_addr=LOCAL)
    assert controller.edge is not None
    controller.edge.backoff = BackoffPolicy(initial=0.02, maximum=0.2)
    async with aiohttp.ClientSession(
        timeout=aiohttp.ClientTimeout(total=10), auto_decompress=False
    ) as http:
        running = Env(controller, Kube(controller.api), http, {})
        await running.kube.apply(INGRESS_CLASS_OBJ)
        await running.serve("web")
        try:
            yield running
        finally:
            for backend in running.backends.values():
                await backend.stop()


# --- scenario 1 (ngrok issue 208): fail closed, then serve, then keep the last good ------------


async def test_scenario_1_a_bad_cidr_serves_nothing_until_fixed_then_keeps_the_last_good(
    env: Env,
) -> None:
    web_backend = env.backends["web"]
    await env.kube.apply(module_set("guard", {"ipRestriction": {"allow": ["127.0.0.0/33"]}}))
    await env.kube.apply(ingress("shop", "shop.example", modules="guard"))
    await env.until_event("shop", "ModulesFailed")
    assert await env.status_of("shop.example") == 503
    assert web_backend.requests == []

    fixed = {
        "ipRestriction": {"allow": ["127.0.0.0/8"]},
        "headers": {"request": {"add": {"X-Team": "blue"}}},
    }
    await env.kube.apply(module_set("guard", fixed))
    await env.until_status("shop.example", 200)
    assert web_backend.requests[-1]["X-Team"] == "blue"

    # Enforced: a set that denies loopback refuses this client.
    await env.kube.apply(
        module_set(
            "guard",
            {**fixed, "ipRestriction": {"allow": ["127.0.0.0/8"], "deny": ["127.0.0.1/32"]}},
        )
    )
    await env.until_status("shop.example", 403)
    await env.kube.apply(module_set("guard", fixed))
    await env.until_status("shop.example", 200)

    # Broken again: the previous configuration keeps serving, with its modules.
    await env.kube.apply(module_set("guard", {"ipRestriction": {"allow": ["not-a-cidr"]}}))
    await env.until_route_error("shop.example", "not-a-cidr")
    status, _, _ = await env.request("shop.example")
    assert status == 200 and web_backend.requests[-1]["X-Team"] == "blue"


async def test_scenario_1_a_missing_basic_auth_secret_serves_nothing_until_created(
    env: Env,
) -> None:
    web_backend = env.backends["web"]
    auth = {"basicAuth": {"realm": "shop", "secretRef": {"name": "users", "key": "htpasswd"}}}
    await env.kube.apply(module_set("auth", auth))
    await env.kube.apply(ingress("shop", "shop.example", modules="auth"))
    await env.until_event("shop", "ModulesFailed")
    assert await env.status_of("shop.example") == 503
    assert await env.status_of("shop.example", headers=GOOD_AUTH) == 503
    assert web_backend.requests == []

    await env.kube.apply(secret("users", {"htpasswd": HTPASSWD}))
    await env.until_status("shop.example", 200, headers=GOOD_AUTH)
    status, headers, _ = await env.request("shop.example")
    assert status == 401 and headers["WWW-Authenticate"].startswith("Basic")
    reached = len(web_backend.requests)

    # Deleting the Secret keeps the last good configuration (auth still enforced).
    await env.kube.delete(secret("users", {}))
    await env.until_route_error("shop.example", "SecretNotFound")
    assert await env.status_of("shop.example") == 401
    assert await env.status_of("shop.example", headers=GOOD_AUTH) == 200
    assert len(web_backend.requests) == reached + 1
