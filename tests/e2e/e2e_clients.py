"""Clients used by the end-to-end tests: the cluster (through kubernetes-asyncio) and the
policy API (through aiohttp), plus a polling helper with a deadline."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

import aiohttp

from interlock.app import Controller
from interlock.config import Address, ControllerConfig
from interlock.kube.transport import KubeApiError, request_json

LOCAL = Address("127.0.0.1", 0)

PLURALS = {
    ("v1", "Service"): ("/api/v1", "services"),
    ("gateway.networking.k8s.io/v1", "HTTPRoute"): (
        "/apis/gateway.networking.k8s.io/v1",
        "httproutes",
    ),
    ("gateway.networking.k8s.io/v1beta1", "HTTPRoute"): (
        "/apis/gateway.networking.k8s.io/v1beta1",
        "httproutes",
    ),
    ("gateway.networking.k8s.io/v1beta1", "ReferenceGrant"): (
        "/apis/gateway.networking.k8s.io/v1beta1",
        "referencegrants",
    ),
    ("v1", "Namespace"): ("/api/v1", "namespaces"),
}


async def eventually(
    condition: Callable[[], Awaitable[bool]] | Callable[[], bool],
    *,
    within: float = 10.0,
    message: str = "condition",
) -> None:
    """Poll ``condition`` (sync or async) with short sleeps until it holds or ``within`` passes."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + within
    while True:
        result = condition()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if loop.time() > deadline:
            raise AssertionError(f"{message} not met within {within} s")
        await asyncio.sleep(0.02)


class Cluster:
    """Writes and reads raw objects through the real kubernetes-asyncio client."""

    def __init__(self, api: Any) -> None:
        self.api = api

    @staticmethod
    def _path(obj: dict[str, Any], *, name: bool = True) -> str:
        prefix, plural = PLURALS[(obj["apiVersion"], obj["kind"])]
        meta = obj["metadata"]
        base = prefix
        if obj["kind"] != "Namespace":
            base += f"/namespaces/{meta.get('namespace', 'default')}"
        base += f"/{plural}"
        return f"{base}/{meta['name']}" if name else base

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj``, or replace its spec if it exists (like ``kubectl apply``)."""
        try:
            return await request_json(
                self.api, method="POST", path=self._path(obj, name=False), what="create", body=obj
            )
        except KubeApiError as error:
            if error.code != 409:
                raise
        # The controller may write the object's status between our read and our write: read
        # again and retry, as kubectl apply does on a conflict.
        for _attempt in range(10):
            current = await self.get(obj)
            assert current is not None
            body = json.loads(json.dumps(obj))
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            if "status" in current:
                body["status"] = current["status"]
            try:
                return await request_json(
                    self.api, method="PUT", path=self._path(obj), what="replace", body=body
                )
            except KubeApiError as error:
                if error.code != 409:
                    raise
        raise AssertionError(f"{obj['kind']} {obj['metadata']['name']}: still conflicting")

    async def delete(self, obj: dict[str, Any]) -> None:
        try:
            await request_json(self.api, method="DELETE", path=self._path(obj), what="delete")
        except KubeApiError as error:
            if error.code != 404:
                raise

    async def get(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return await request_json(self.api, method="GET", path=self._path(obj), what="get")
        except KubeApiError as error:
            if error.code == 404:
                return None
            raise

    async def namespace(self, name: str) -> None:
        await self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})


class PolicyWatch:
    """An open ``?watch=true`` stream: each line is one policy."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.received: list[dict[str, Any]] = []

    async def next(self, *, within: float = 10.0) -> dict[str, Any]:
        line = await asyncio.wait_for(self.response.content.readline(), within)
        if not line:
            raise EOFError("the watch stream ended")
        policy: dict[str, Any] = json.loads(line)
        self.received.append(policy)
        return policy

    async def until(
        self, predicate: Callable[[dict[str, Any]], bool], *, within: float = 10.0
    ) -> dict[str, Any]:
        """Read lines until one satisfies ``predicate`` (or the latest already does)."""
        if self.received and predicate(self.received[-1]):
            return self.received[-1]
        loop = asyncio.get_running_loop()
        deadline = loop.time() + within
        while True:
            policy = await self.next(within=max(0.01, deadline - loop.time()))
            if predicate(policy):
                return policy

    @property
    def latest(self) -> dict[str, Any]:
        return self.received[-1]

    def close(self) -> None:
        self.response.close()


class PolicyClient:
    """A client of one controller's policy API."""

    def __init__(self, session: aiohttp.ClientSession, url: str) -> None:
        self.session = session
        self.url = url

    def _url(self, namespace: str, service: str, port: int, client: str | None) -> str:
        url = f"{self.url}/v1/outbound/{namespace}/{service}/{port}"
        return url + (f"?clientNamespace={client}" if client else "")

    async def get(
        self, service: str, port: int = 80, *, namespace: str = "default", client: str | None = None
    ) -> dict[str, Any]:
        async with self.session.get(self._url(namespace, service, port, client)) as response:
            assert response.status == 200, await response.text()
            result: dict[str, Any] = await response.json()
            return result

    async def watch(
        self, service: str, port: int = 80, *, namespace: str = "default", client: str | None = None
    ) -> PolicyWatch:
        url = self._url(namespace, service, port, client)
        url += ("&" if "?" in url else "?") + "watch=true"
        response = await self.session.get(url)
        assert response.status == 200, await response.text()
        watch = PolicyWatch(response)
        await watch.next()
        return watch


def controller_config(kubeconfig: str, **overrides: Any) -> ControllerConfig:
    """A config for tests: free ports, quick leases and grace periods."""
    settings: dict[str, Any] = {
        "kubeconfig": kubeconfig,
        "policy_addr": LOCAL,
        "admin_addr": LOCAL,
        "lease_namespace": "default",
        "lease_duration": 1.0,
        "lease_renew_deadline": 0.6,
        "lease_retry_period": 0.1,
        "watch_grace": 0.2,
        "status_retry_initial": 0.05,
        "reconnect_initial": 0.05,
        "reconnect_maximum": 0.2,
        "status_retry_maximum": 0.5,
    }
    settings.update(overrides)
    return ControllerConfig(**settings)


StartController = Callable[..., Awaitable[Controller]]
