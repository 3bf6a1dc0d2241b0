"""Fixtures for the embedded API server tests: a running server and clients pointed at it."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest
from kubernetes_asyncio import client, config

from interlock.embedded import EmbeddedApiServer, running_api_server


@pytest.fixture
async def api_server() -> AsyncIterator[EmbeddedApiServer]:
    async with running_api_server(bookmark_interval=0.05) as server:
        yield server


@pytest.fixture
def kubeconfig(api_server: EmbeddedApiServer, tmp_path: Path) -> Path:
    return api_server.write_kubeconfig(tmp_path / "kubeconfig")


@pytest.fixture
async def api_client(kubeconfig: Path) -> AsyncIterator[client.ApiClient]:
    api = await config.new_client_from_config(config_file=str(kubeconfig))
    async with api:
        yield api
