"""Shared test configuration: which API server the tests run against (see ``tests/kit/lanes.py``).

``INTERLOCK_TEST_CLUSTER=embedded`` (default) or ``real``. Markers:

- ``embedded_only("why")``: the test needs something only the embedded server has; it is
  skipped on the real lane with that reason (never used to hide a failure);
- ``compaction``: the test compacts the watch history; on the real lane it runs on a second
  cluster whose kube-apiserver serves watches from etcd, so the compaction is seen as 410 Gone.

``INTERLOCK_TEST_LOOP=uvloop`` runs the asyncio tests on uvloop (what ``interlock run``, ``edge``
and ``demo`` run on by default) instead of asyncio's own loop: the behaviour must not depend on
the loop (uvloop's transports, for one, are not ``asyncio.Transport`` subclasses).
``INTERLOCK_TEST_HOLD_WRITES=always`` holds every write of the data plane's HTTP/1.1 connections
for the end of the loop's turn (``interlock/dataplane/turn_writes.py``), a path one request at a
time seldom takes.
"""

from __future__ import annotations

import asyncio
import os
from collections.abc import AsyncIterator, Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import settings

from tests.kit.lanes import (
    LANE,
    REAL,
    ControlPlane,
    ControlPlanes,
    TestCluster,
    lane_cluster,
)

# Hypothesis's per-example deadline (200 ms by default) is a timed assertion: a loaded machine
# fails a correct example with DeadlineExceeded (seen in tests/dataplane/test_filters.py). The
# properties are about results, never about speed.
settings.register_profile("interlock", deadline=None)
settings.load_profile("interlock")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", "embedded_only(reason): skipped on the real lane, with the reason why"
    )
    config.addinivalue_line(
        "markers",
        "compaction: compacts the watch history (real lane: a cluster without watch cache)",
    )


def pytest_report_header() -> str:
    return f"interlock test cluster: {LANE} (INTERLOCK_TEST_CLUSTER)"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    if not REAL:
        return
    for item in items:
        marker = item.get_closest_marker("embedded_only")
        if marker is not None:
            reason = marker.args[0] if marker.args else marker.kwargs.get("reason", "")
            if not reason:
                raise pytest.UsageError(f"{item.nodeid}: embedded_only needs a reason")
            item.add_marker(pytest.mark.skip(reason=f"embedded only: {reason}"))


if os.environ.get("INTERLOCK_TEST_HOLD_WRITES") == "always":
    # Every write of the data plane's HTTP/1.1 connections held for the end of the loop's turn
    # (interlock/dataplane/turn_writes.py), not only while turns write to several connections:
    # the held path under every test, which one request at a time seldom takes.
    import sys

    from interlock.dataplane import turn_writes

    turn_writes.SAMPLE_EVERY, turn_writes.QUIET_TURNS = 1, sys.maxsize

if os.environ.get("INTERLOCK_TEST_LOOP", "asyncio") == "uvloop":
    import uvloop

    def pytest_asyncio_loop_factories(
        config: pytest.Config, item: pytest.Item
    ) -> dict[str, Callable[[], asyncio.AbstractEventLoop]]:
        return {"uvloop": uvloop.new_event_loop}


@pytest.fixture(scope="session")
def control_planes() -> Iterator[ControlPlanes]:
    planes = ControlPlanes()
    try:
        yield planes
    finally:
        planes.down()


@pytest.fixture
def control_plane(
    request: pytest.FixtureRequest, control_planes: ControlPlanes
) -> ControlPlane | None:
    """The real control plane this test uses (None on the embedded lane)."""
    if not REAL:
        return None
    compacts = request.node.get_closest_marker("compaction") is not None
    return control_planes.get(watch_cache=not compacts)


@pytest.fixture
def embedded_server_options() -> dict[str, Any]:
    """Keyword arguments of the embedded lane's server (a folder's conftest may override)."""
    return {"bookmark_interval": 0.2}


@pytest.fixture
async def test_cluster(
    control_plane: ControlPlane | None,
    embedded_server_options: dict[str, Any],
    tmp_path: Path,
) -> AsyncIterator[TestCluster]:
    async with lane_cluster(tmp_path, control_plane, **embedded_server_options) as cluster:
        yield cluster
