"""Fixtures for the runtime tests."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from interlock.mailbox import ActorSystem


@pytest.fixture
async def system() -> AsyncIterator[ActorSystem]:
    actors = ActorSystem()
    yield actors
    await actors.shutdown(timeout=1.0)
