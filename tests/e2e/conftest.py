"""End-to-end fixtures: a cluster (either lane), controllers against it, and clients of both.

Everything goes over real HTTP: the test writes objects through the kubernetes-asyncio client
(as cluster admin), the controller sees them through its informers (on the real lane as the
controller identity, through the fault proxy), and the test reads policies from the policy API
as a mesh proxy would. Reusable by every e2e test (outbound and edge):

- ``cluster``: the lane's :class:`~lanes.TestCluster` (``apply``/``delete``/``get``, faults);
- ``kubeconfig``: the controller's kubeconfig;
- ``start_controller(**config_overrides)``: starts a :class:`Controller` with free ports, short
  leases and grace periods; waits until it is ready; stopped at teardown.
- ``controller``: one started controller; ``policy``: a :class:`~e2e_clients.PolicyClient`.

The helper classes live in ``e2e_clients.py`` (import them from there, not from conftest).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import aiohttp
import pytest

from interlock.controller.app import Controller
from tests.kit.e2e_clients import PolicyClient, StartController, controller_config
from tests.kit.lanes import TestCluster


@pytest.fixture
def cluster(test_cluster: TestCluster) -> TestCluster:
    return test_cluster


@pytest.fixture
def kubeconfig(test_cluster: TestCluster) -> str:
    return test_cluster.controller_kubeconfig


@pytest.fixture
async def start_controller(kubeconfig: str) -> AsyncIterator[StartController]:
    started: list[Controller] = []

    async def start(**overrides: Any) -> Controller:
        controller = Controller(controller_config(kubeconfig, **overrides))
        started.append(controller)
        await controller.start()
        await controller.wait_ready(within=30.0)
        return controller

    yield start
    for controller in reversed(started):
        await controller.stop()


@pytest.fixture
async def controller(start_controller: StartController) -> Controller:
    return await start_controller(identity="replica-1")


@pytest.fixture
async def http() -> AsyncIterator[aiohttp.ClientSession]:
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=30)) as session:
        yield session


@pytest.fixture
def policy(controller: Controller, http: aiohttp.ClientSession) -> PolicyClient:
    assert controller.policy_site is not None
    return PolicyClient(http, controller.policy_site.url)
