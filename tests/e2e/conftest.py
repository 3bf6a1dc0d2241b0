"""End-to-end fixtures: an embedded API server, controllers against it, and clients of both.

Everything goes over real HTTP: the test writes objects through the kubernetes-asyncio client,
the controller sees them through its informers, and the test reads policies from the policy API
as a mesh proxy would. Reusable by every e2e test (outbound and edge):

- ``api_server``: a running :class:`EmbeddedApiServer` (short bookmark interval).
- ``cluster``: :class:`~e2e_clients.Cluster`, ``apply``/``delete``/``get`` through the client.
- ``start_controller(**config_overrides)``: starts a :class:`Controller` against ``api_server``
  with free ports, short leases and grace periods; waits until it is ready; stopped at teardown.
- ``controller``: one started controller; ``policy``: a :class:`~e2e_clients.PolicyClient`.

The helper classes live in ``e2e_clients.py`` (import them from there, not from conftest).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from e2e_clients import Cluster, PolicyClient, StartController, controller_config
from kubernetes_asyncio import config as kube_config

from interlock.app import Controller
from interlock.embedded import EmbeddedApiServer, running_api_server


@pytest.fixture
async def api_server() -> AsyncIterator[EmbeddedApiServer]:
    async with running_api_server(bookmark_interval=0.2) as server:
        yield server


@pytest.fixture
def kubeconfig(api_server: EmbeddedApiServer, tmp_path: Path) -> str:
    return str(api_server.write_kubeconfig(tmp_path / "kubeconfig"))


@pytest.fixture
async def cluster(kubeconfig: str) -> AsyncIterator[Cluster]:
    api = await kube_config.new_client_from_config(config_file=kubeconfig)
    async with api:
        yield Cluster(api)


@pytest.fixture
async def start_controller(kubeconfig: str) -> AsyncIterator[StartController]:
    started: list[Controller] = []

    async def start(**overrides: Any) -> Controller:
        controller = Controller(controller_config(kubeconfig, **overrides))
        started.append(controller)
        await controller.start()
        await controller.wait_ready(within=10.0)
        return controller

    yield start
    for controller in reversed(started):
        await controller.stop()


@pytest.fixture
async def controller(start_controller: StartController) -> Controller:
    return await start_controller(lease_identity="replica-1")


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


@pytest.fixture
def policy(controller: Controller, http: aiohttp.ClientSession) -> PolicyClient:
    assert controller.policy_site is not None
    return PolicyClient(http, controller.policy_site.url)
