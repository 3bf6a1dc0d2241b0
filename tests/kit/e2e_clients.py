"""Clients used by the end-to-end tests: the cluster (``tests/kit/lanes.py``, either lane) and the
policy API (through aiohttp), plus a polling helper with a deadline."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import aiohttp

from interlock.config import (
    Address,
    AdminConfig,
    ClusterConfig,
    ControllerConfig,
    LeadershipConfig,
    PolicyApiConfig,
    StatusConfig,
)
from interlock.controller.app import Controller
from interlock.kube.resources import EVENT
from interlock.kube.transport import KubeApiError, request_json
from interlock.mailbox.testing import eventually as _eventually
from tests.kit.lanes import LEASE_NAMESPACE, TestCluster

Cluster = TestCluster
"""What e2e tests write with: the lane's :class:`~lanes.TestCluster` (admin identity)."""

LOCAL = Address("127.0.0.1", 0)


async def eventually(
    condition: Callable[[], Awaitable[bool]] | Callable[[], bool],
    *,
    within: float = 60.0,
    message: str = "condition",
) -> None:
    """Poll ``condition`` (sync or async) with short sleeps until it holds or ``within`` passes."""
    await _eventually(condition, within=within, message=message, interval=0.02)


async def create_if_absent(cluster: Cluster, obj: dict[str, Any]) -> None:
    """Create ``obj`` unless it exists (then leave it as it is: unlike ``apply``, no write)."""
    try:
        await cluster.create(obj)
    except KubeApiError as error:
        if error.code != 409:
            raise


async def object_events(
    api: Any, name: str, reason: str | None = None, *, namespace: str = "default"
) -> list[dict[str, Any]]:
    """The Events in ``namespace`` about the object ``name`` (with ``reason``, if given)."""
    listed = await request_json(
        api, method="GET", path=EVENT.collection_path(namespace=namespace), what="list events"
    )
    return [
        e
        for e in listed.get("items", [])
        if e.get("involvedObject", {}).get("name") == name
        and (reason is None or e.get("reason") == reason)
    ]


class PolicyWatch:
    """An open ``?watch=true`` stream: each line is one policy."""

    def __init__(self, response: aiohttp.ClientResponse) -> None:
        self.response = response
        self.received: list[dict[str, Any]] = []

    async def next(self, *, within: float = 60.0) -> dict[str, Any]:
        line = await asyncio.wait_for(self.response.content.readline(), within)
        if not line:
            raise EOFError("the watch stream ended")
        policy: dict[str, Any] = json.loads(line)
        self.received.append(policy)
        return policy

    async def until(
        self, predicate: Callable[[dict[str, Any]], bool], *, within: float = 60.0
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
        # A watch outlives the session's total timeout (an API server restart under load takes
        # longer than it); each read is bounded by ``PolicyWatch.next(within=...)`` instead.
        response = await self.session.get(
            url, timeout=aiohttp.ClientTimeout(total=None, sock_connect=30)
        )
        assert response.status == 200, await response.text()
        watch = PolicyWatch(response)
        await watch.next()
        return watch


TEST_POLICY = PolicyApiConfig(addr=LOCAL, watch_grace=0.2)
"""The policy API of a test controller: a free port, watches released quickly."""


def cluster_settings(kubeconfig: str, **settings: Any) -> ClusterConfig:
    """The cluster of a test controller: ``kubeconfig``, quick informer reconnects."""
    return ClusterConfig(
        kubeconfig=kubeconfig, reconnect_initial=0.05, reconnect_maximum=0.2, **settings
    )


def controller_config(
    kubeconfig: str, *, identity: str | None = None, **concerns: Any
) -> ControllerConfig:
    """A config for tests: free ports, quick grace periods; ``identity`` is the replica's in
    the Lease, ``concerns`` replace the test defaults of :class:`ControllerConfig`'s fields
    whole (``edge=EdgeConfig(addr=LOCAL)``).

    Leases are long enough that a loaded machine stalling the event loop for seconds does not
    cost the leader its Lease (a replica that stops releases it, so a takeover stays quick).
    """
    leadership = LeadershipConfig(
        namespace=LEASE_NAMESPACE, duration=8.0, renew_deadline=6.0, retry_period=0.2
    )
    settings: dict[str, Any] = {
        "cluster": cluster_settings(kubeconfig),
        "leadership": leadership if identity is None else replace(leadership, identity=identity),
        "policy": TEST_POLICY,
        "admin": AdminConfig(addr=LOCAL),
        "status": StatusConfig(retry_initial=0.05, retry_maximum=0.5),
    }
    settings.update(concerns)
    return ControllerConfig(**settings)


StartController = Callable[..., Awaitable[Controller]]
