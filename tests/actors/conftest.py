"""Fixtures of the actor tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from tests.kit.outbound_harness import Outbound, start_outbound


@pytest.fixture
async def outbound() -> AsyncIterator[Outbound]:
    running = start_outbound()
    yield running
    running.watches.close()
    await running.system.shutdown()
