"""EdgeWorkers (``--edge-workers``): real ``interlock edge`` child processes on one port.

Requests reach more than one worker process; the workers' counters add up to the requests sent;
a worker that dies is started again and reprogrammed; stopping drains a request in flight.
"""

from __future__ import annotations

import asyncio
import json
import os
import signal
import sys
from collections.abc import AsyncIterator

import aiohttp
import pytest

from interlock.edge.provider import ApplyModules
from interlock.edge.worker_traffic import summed
from interlock.edge.workers import EdgeWorkers
from interlock.model.moduleset import Modules
from tests.kit.lanes import eventually_true

from .conftest import BACKEND, HOST, Backend

pytestmark = pytest.mark.timeout(180)


@pytest.fixture
async def workers(backend: Backend) -> AsyncIterator[EdgeWorkers]:
    started = EdgeWorkers(
        count=2,
        listen="127.0.0.1:0",
        child_args=["--upstream", f"default/web:80=127.0.0.1:{backend.port}"],
        drain_timeout=10.0,
    )
    await started.start()
    await started.provider.apply_modules(
        ApplyModules(host=HOST, route_id="r", path="/", path_type="Prefix", modules=Modules())
    )
    await started.provider.attach_backend(host=HOST, route_id="r", backend=BACKEND)
    yield started
    await started.stop()


def url(workers: EdgeWorkers, path: str = "/") -> str:
    assert workers.addresses is not None and workers.addresses.http is not None
    return f"http://127.0.0.1:{workers.addresses.http[1]}{path}"


async def get_on_new_connections(workers: EdgeWorkers, count: int) -> list[int]:
    statuses = []
    for _ in range(count):
        async with (
            aiohttp.ClientSession(connector=aiohttp.TCPConnector(force_close=True)) as session,
            session.get(url(workers), headers={"Host": HOST}) as response,
        ):
            await response.read()
            statuses.append(response.status)
    return statuses


async def test_new_connections_reach_more_than_one_worker_and_counters_add_up(
    workers: EdgeWorkers,
) -> None:
    statuses = await get_on_new_connections(workers, 40)
    assert statuses == [200] * 40

    # A worker counts a request once its answer is sent: the client may read the answer first.
    async def counted() -> bool:
        await workers.refresh_traffic()
        return sum(summed(workers.traffic()).requests.values()) == 40

    await eventually_true(counted, within=30, message="the workers counted the 40 requests")
    per_worker = [sum(stats.requests.values()) for stats in workers.traffic()]
    # SO_REUSEPORT spreads connections by their addresses: all 40 on one of two workers would
    # happen once in 2**39 runs.
    assert all(count > 0 for count in per_worker), per_worker
    assert sum(summed(workers.traffic()).requests.values()) == 40
    assert len({worker.pid for worker in workers.workers}) == 2


async def test_with_access_log_each_worker_logs_the_requests_it_served_naming_itself(
    backend: Backend, capfd: pytest.CaptureFixture[str]
) -> None:
    """``interlock run --edge-workers N --access-log`` starts its workers with
    ``--access-log`` (``tests/e2e/test_edge_workers.py``): each writes the in-process edge's
    JSON line for every request it served (to the stderr it shares with the controller), with
    ``"worker"``: which one."""
    started = EdgeWorkers(
        count=2,
        listen="127.0.0.1:0",
        child_args=["--upstream", f"default/web:80=127.0.0.1:{backend.port}", "--access-log"],
        drain_timeout=10.0,
    )
    await started.start()
    try:
        await started.provider.apply_modules(
            ApplyModules(host=HOST, route_id="r", path="/", path_type="Prefix", modules=Modules())
        )
        await started.provider.attach_backend(host=HOST, route_id="r", backend=BACKEND)
        assert await get_on_new_connections(started, 40) == [200] * 40

        # A worker writes a request's line when it counts it: once both counted 40, all 40
        # lines were written (read once: capfd's reading while they write could lose one).
        async def counted() -> bool:
            await started.refresh_traffic()
            return sum(summed(started.traffic()).requests.values()) == 40

        await eventually_true(counted, within=30, message="the workers counted the 40 requests")
        lines = [
            json.loads(line[line.index("{") :])
            for line in capfd.readouterr().err.splitlines()
            if '"front":"edge"' in line
        ]
    finally:
        await started.stop()
    assert len(lines) == 40
    assert {(line["host"], line["status"], line["route"]) for line in lines} == {(HOST, 200, "r")}
    # SO_REUSEPORT spread the 40 connections over both (all on one: once in 2**39 runs).
    assert sorted({line["worker"] for line in lines}) == [1, 2]


async def test_a_worker_that_dies_is_started_again_and_reprogrammed(
    workers: EdgeWorkers,
) -> None:
    dead = workers.workers[0].pid
    os.kill(dead, signal.SIGKILL)
    await eventually_true(
        lambda: workers.restarts == 1, within=120, message="the worker started again"
    )
    assert workers.workers[0].pid != dead
    served = [await worker.client.snapshot() for worker in workers.workers]
    assert served[0] == served[1]
    route = served[0].route(host=HOST, route_id="r")
    assert route is not None and route.backend == BACKEND
    assert await get_on_new_connections(workers, 20) == [200] * 20


async def test_stopping_drains_a_request_in_flight(workers: EdgeWorkers, backend: Backend) -> None:
    async with aiohttp.ClientSession() as session:
        request = asyncio.ensure_future(session.get(url(workers, "/hang"), headers={"Host": HOST}))
        await eventually_true(
            lambda: any(seen.path == "/hang" for seen in backend.seen),
            within=60,
            message="the request reached the backend",
        )
        processes = [worker.process for worker in workers.workers]
        stopping = asyncio.ensure_future(workers.stop())
        # Both workers got SIGTERM and stopped accepting, with the request still in flight.
        await eventually_true(
            lambda: refused(url(workers)), within=60, message="the workers stopped accepting"
        )
        assert not request.done()
        backend.release.set()
        response = await request
        assert response.status == 200
        assert await response.text() == "late"
        await stopping
    assert [process.returncode for process in processes] == [0, 0]


def refused(address: str) -> bool:
    import socket

    port = int(address.rsplit(":", 1)[1].split("/")[0])
    with socket.socket() as probe:
        return probe.connect_ex(("127.0.0.1", port)) != 0


CONTROLLER = """
import asyncio, sys
from interlock.edge.workers import EdgeWorkers

async def main() -> None:
    workers = EdgeWorkers(count=2, listen="127.0.0.1:0")
    await workers.start()
    print(" ".join(str(worker.pid) for worker in workers.workers), flush=True)
    await asyncio.Event().wait()

asyncio.run(main())
"""


def alive(pid: int) -> bool:
    """Whether ``pid`` runs (a zombie nobody reaped yet has stopped running)."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


async def test_workers_stop_when_their_controller_is_killed() -> None:
    controller = await asyncio.create_subprocess_exec(
        sys.executable, "-c", CONTROLLER, stdout=asyncio.subprocess.PIPE
    )
    assert controller.stdout is not None
    pids = [int(pid) for pid in (await controller.stdout.readline()).split()]
    assert len(pids) == 2 and all(alive(pid) for pid in pids)
    controller.kill()
    await controller.wait()
    await eventually_true(
        lambda: not any(alive(pid) for pid in pids),
        within=60,
        message="the orphaned workers stopped",
    )
