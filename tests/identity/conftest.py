"""Fixtures of the identity tests: the real OpenID provider (``idp.py``), and the e2e fixtures
(cluster of either lane, controllers) reused from ``tests/e2e/conftest.py`` rather than copied."""

from __future__ import annotations

import sys
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from e2e.conftest import cluster, http, kubeconfig, start_controller  # noqa: F401
from idp import StartIdp, TestIdp
from test_edge_scenarios import env  # noqa: F401


@pytest.fixture
async def start_idp() -> AsyncIterator[StartIdp]:
    started: list[TestIdp] = []

    async def start(redirect_uris: list[str]) -> TestIdp:
        idp = TestIdp(redirect_uris=redirect_uris)
        started.append(idp)
        await idp.start()
        return idp

    yield start
    for idp in started:
        await idp.close()
