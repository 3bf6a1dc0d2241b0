"""``--edge-workers N``: N data-plane processes serving the edge's ports, programmed as one.

Python serves one core per process; nginx and HAProxy use every core with worker processes or
threads. So the controller starts N ``interlock edge`` children (:class:`EdgeWorkers`), each
listening on the edge's ports with ``SO_REUSEPORT`` (the kernel spreads new connections over
them) and on an admin API of its own (``127.0.0.1``, a free port, a token made at start in a
file only this user can read). One :class:`~interlock.edge.fanout.FanOutEdge` over their
:class:`~interlock.edge.http_provider.HttpEdge` clients is the provider the EdgeActors program:
a call succeeds only once every worker carried it out, so a backend is attached only after its
modules applied everywhere, and a call one worker refuses leaves all on the last good
configuration and reaches the route's status naming that worker.

A worker that exits is started again on the same ports and reprogrammed with everything the
others serve (:meth:`FanOutEdge.replay`) before it counts again; until then every call fails
(transiently) and is retried, so no configuration reaches some workers and not others. A new
worker takes connections as soon as it listens: until reprogrammed it answers 404 to every host
(it forwards nothing, so no route goes unguarded). Stopping sends each worker SIGTERM: it stops
accepting and drains its requests in flight (``--edge-drain-timeout``), as a single edge does.

With ``pushed_upstreams`` (what ``interlock run`` uses) the workers are started with
``--pushed-upstreams`` and resolve backends from the controller's upstream tables, which
:attr:`EdgeWorkers.upstream_sync` gives a restarted worker whole before it is reprogrammed
(:mod:`interlock.controller.worker_upstreams`); without, through cluster DNS as ``interlock
edge`` does.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import os
import secrets
import shutil
import signal
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import aiohttp
from loguru import logger

from interlock.dataplane.metrics import TrafficStatistics
from interlock.edge.fanout import FanOutEdge
from interlock.edge.http_provider import HttpEdge
from interlock.edge.provider import EdgeError
from interlock.edge.server import EdgeAddresses
from interlock.edge.worker_traffic import statistics_from_json
from interlock.logs import LogFormat
from interlock.model.moduleset import SecretValue


class UpstreamSync(Protocol):
    """What keeps the workers' upstream tables (``controller.worker_upstreams``)."""

    async def sync(self, client: HttpEdge) -> None:
        """Give ``client``'s worker the whole table; raises an :class:`EdgeError`."""
        ...

    async def catch_up(self, client: HttpEdge) -> None:
        """Send ``client``'s worker (one being reprogrammed) what changed since its last push;
        raises an :class:`EdgeError`."""
        ...

    def forget(self, client: HttpEdge) -> None:
        """``client``'s worker was stopped before it counted: keep nothing for it."""
        ...

    def wake(self) -> None:
        """Push what changed to every running worker soon."""
        ...


START_TIMEOUT = 60.0
"""Seconds a worker may take to print where it listens."""

RESTART_DELAYS = (0.2, 0.5, 1.0, 2.0, 5.0)
"""Seconds before each further attempt to start (and reprogram) a worker that exited."""


@dataclass
class Worker:
    """One running child: its process, its admin API's client and its pid."""

    index: int
    process: asyncio.subprocess.Process
    client: HttpEdge
    admin_url: str
    output: asyncio.Task[None]

    @property
    def pid(self) -> int:
        return self.process.pid


class EdgeWorkers:
    """N ``interlock edge`` children on one set of ports; see the module docstring."""

    def __init__(
        self,
        *,
        count: int,
        listen: str,
        tls_listen: str | None = None,
        child_args: Sequence[str] = (),
        python: str = sys.executable,
        drain_timeout: float = 10.0,
        pushed_upstreams: bool = False,
        log_format: LogFormat = "text",
    ) -> None:
        """``child_args``: more ``interlock edge`` flags for every worker (limits, trusted
        proxies, ``--upstream``); ``drain_timeout``: theirs, to know how long stopping may take;
        ``pushed_upstreams``: the workers take the controller's upstream tables;
        ``log_format``: theirs (the controller's: in a container all land in one log)."""
        if count < 1:
            raise ValueError(f"--edge-workers: at least 1, not {count}")
        self.count = count
        self._listen = listen
        self._tls_listen = tls_listen
        self.child_args = list(child_args) + (["--pushed-upstreams"] if pushed_upstreams else [])
        """More ``interlock edge`` flags for every worker started from now on (a test adds
        ``--upstream``)."""
        self.upstream_sync: UpstreamSync | None = None
        """Gives a restarted worker the upstream tables before it is reprogrammed, and hears
        when it counts again (``interlock run``'s pusher)."""
        self._python = python
        self._log_format = log_format
        self._drain_timeout = drain_timeout
        self._token = SecretValue(secrets.token_urlsafe(32).encode())
        self._dir: Path | None = None
        self.workers: list[Worker] = []
        self.provider = FanOutEdge([])
        """What the EdgeActors program: every worker, all or nothing (none until started)."""
        self.addresses: EdgeAddresses | None = None
        self.restarts = 0
        """Workers started again after exiting."""
        self._supervisors: list[asyncio.Task[None]] = []
        self._stopping = False
        self._traffic: list[TrafficStatistics] = []

    # --- start and stop -------------------------------------------------------------------------

    async def start(self) -> EdgeAddresses:
        """Start every worker (the first picks the ports when they are 0); returns them."""
        self._dir = Path(tempfile.mkdtemp(prefix="interlock-edge-workers-"))
        token_file = self._dir / "admin-token"
        token_file.touch(mode=0o600)
        token_file.write_bytes(self._token.reveal())
        try:
            first, addresses = await self._spawn(0, self._listen, self._tls_listen)
            self.addresses = addresses
            self.workers = [first]
            for index in range(1, self.count):
                worker, _ = await self._spawn(index, *self._bound())
                self.workers.append(worker)
        except BaseException:
            await self.stop()
            raise
        self.provider.workers[:] = [worker.client for worker in self.workers]
        self._supervisors = [
            asyncio.create_task(self._supervise(index), name=f"edge worker {index + 1}")
            for index in range(self.count)
        ]
        logger.info(
            "edge: {} worker processes (pids {}) serving {}",
            self.count,
            ", ".join(str(w.pid) for w in self.workers),
            addresses,
        )
        return addresses

    async def stop(self) -> None:
        """SIGTERM every worker: each stops accepting and drains its requests in flight; one
        still running after its drain timeout (and a margin) is killed."""
        self._stopping = True
        for task in self._supervisors:
            task.cancel()
        for task in self._supervisors:
            with contextlib.suppress(asyncio.CancelledError):
                await task
        for worker in self.workers:
            if worker.process.returncode is None:
                with contextlib.suppress(ProcessLookupError):
                    worker.process.send_signal(signal.SIGTERM)
        await asyncio.gather(*(self._reap(worker) for worker in self.workers))
        self.workers = []
        if self._dir is not None:
            shutil.rmtree(self._dir, ignore_errors=True)
            self._dir = None

    async def _reap(self, worker: Worker) -> None:
        try:
            await asyncio.wait_for(worker.process.wait(), self._drain_timeout + 5.0)
        except TimeoutError:
            logger.warning(
                "edge worker {} (pid {}): still running; killed", worker.index + 1, worker.pid
            )
            with contextlib.suppress(ProcessLookupError):
                worker.process.kill()
            await worker.process.wait()
        await worker.client.close()
        await worker.output

    # --- one worker -----------------------------------------------------------------------------

    def _bound(self) -> tuple[str, str | None]:
        """The addresses the first worker bound, for the others (port 0 resolved)."""
        assert self.addresses is not None and self.addresses.http is not None
        http_port = self.addresses.http[1]
        host = self._listen.rpartition(":")[0]
        tls = None
        if self._tls_listen is not None and self.addresses.https is not None:
            tls = f"{self._tls_listen.rpartition(':')[0]}:{self.addresses.https[1]}"
        return f"{host}:{http_port}", tls

    async def _spawn(
        self, index: int, listen: str, tls_listen: str | None
    ) -> tuple[Worker, EdgeAddresses]:
        assert self._dir is not None
        args = [
            "-m",
            "interlock",
            "edge",
            "--listen",
            listen,
            "--admin",
            "127.0.0.1:0",
            "--admin-token-file",
            str(self._dir / "admin-token"),
            "--reuse-port",
            "--worker",
            str(index + 1),
            "--log-format",
            self._log_format,
        ]
        if tls_listen is not None:
            args += ["--tls-listen", tls_listen]
        process = await asyncio.create_subprocess_exec(
            self._python,
            *args,
            *self.child_args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            env={**os.environ, "INTERLOCK_EDGE_WORKER": str(index + 1)},
            preexec_fn=_die_with_parent(),
        )
        assert process.stdout is not None
        try:
            http, https, admin = await asyncio.wait_for(
                _announced(process.stdout, tls=tls_listen is not None), START_TIMEOUT
            )
        except BaseException:
            if process.returncode is None:
                process.kill()
            await process.wait()
            raise
        output = asyncio.create_task(
            _drain(process.stdout, index), name=f"edge worker {index + 1} stdout"
        )
        client = HttpEdge(base_url=admin, token=self._token)
        worker = Worker(index=index, process=process, client=client, admin_url=admin, output=output)
        return worker, EdgeAddresses(http=http, https=https)

    async def _supervise(self, index: int) -> None:
        """Start worker ``index`` again whenever it exits, reprogrammed before it counts."""
        while True:
            worker = self.workers[index]
            code = await worker.process.wait()
            if self._stopping:
                return
            logger.warning(
                "edge worker {} (pid {}) exited with {}; starting it again",
                index + 1,
                worker.pid,
                code,
            )
            await worker.client.close()
            await worker.output
            attempt = 0
            while True:
                try:
                    fresh, _ = await self._spawn(index, *self._bound())
                except (OSError, RuntimeError, TimeoutError) as error:
                    logger.warning("edge worker {}: cannot start: {}", index + 1, error)
                else:
                    sync = self.upstream_sync
                    try:
                        if sync is not None:
                            await sync.sync(fresh.client)
                        # Each backend replayed after the tables caught up: one attached to the
                        # others since the sync has its table since then, and the worker would
                        # refuse it (and be started once more) without.
                        await self.provider.replay(
                            fresh.client,
                            before_backend=None
                            if sync is None
                            else functools.partial(sync.catch_up, fresh.client),
                        )
                    except asyncio.CancelledError:  # stopping: this worker never counted
                        await self._discard(fresh)
                        raise
                    except EdgeError as error:
                        logger.warning(
                            "edge worker {}: cannot reprogram: {}", index + 1, error.message
                        )
                        await self._discard(fresh)
                    else:
                        self.workers[index] = fresh
                        self.provider.workers[index] = fresh.client
                        self.restarts += 1
                        if self.upstream_sync is not None:
                            self.upstream_sync.wake()  # what changed since its sync
                        logger.info(
                            "edge worker {} running again (pid {}), reprogrammed",
                            index + 1,
                            fresh.pid,
                        )
                        break
                await asyncio.sleep(RESTART_DELAYS[min(attempt, len(RESTART_DELAYS) - 1)])
                attempt += 1

    async def _discard(self, fresh: Worker) -> None:
        """Stop a worker started again that never counted."""
        if self.upstream_sync is not None:
            self.upstream_sync.forget(fresh.client)
        fresh.process.kill()
        await self._reap(fresh)

    # --- what the workers count -----------------------------------------------------------------

    async def refresh_traffic(self) -> None:
        """Read every worker's request counters (``GET /v1/worker``); a worker that does not
        answer keeps its last reading."""
        readings = await asyncio.gather(
            *(_worker_traffic(worker, self._token) for worker in self.workers),
            return_exceptions=True,
        )
        previous = self._traffic + [TrafficStatistics()] * (len(readings) - len(self._traffic))
        self._traffic = [
            reading if isinstance(reading, TrafficStatistics) else previous[i]
            for i, reading in enumerate(readings)
        ]

    def traffic(self) -> list[TrafficStatistics]:
        """Each worker's counters as last read by :meth:`refresh_traffic`."""
        return list(self._traffic)


_PR_SET_PDEATHSIG = 1


def _die_with_parent() -> Callable[[], None] | None:
    """What the child runs before ``exec`` to get SIGTERM when the controller dies, however it
    dies (SIGKILL, OOM), so no orphaned worker keeps serving the port with a configuration
    nobody updates any more; ``None`` off Linux. ``prctl`` is looked up here, in the parent:
    between ``fork`` and ``exec`` the child only calls it (loading a library there could wait
    for a lock another thread held at the fork)."""
    if not sys.platform.startswith("linux"):
        return None
    import ctypes

    prctl = ctypes.CDLL(None, use_errno=True).prctl

    def in_child() -> None:
        prctl(_PR_SET_PDEATHSIG, int(signal.SIGTERM), 0, 0, 0)

    return in_child


async def _announced(
    stdout: asyncio.StreamReader, *, tls: bool
) -> tuple[tuple[str, int], tuple[str, int] | None, str]:
    """Read a starting worker's lines up to its admin API's: (HTTP, HTTPS, admin URL)."""
    http: tuple[str, int] | None = None
    https: tuple[str, int] | None = None
    while True:
        raw = await stdout.readline()
        if not raw:
            raise RuntimeError("the worker exited before it listened (its log is above)")
        line = _announcement(raw)
        url = line.rpartition(" ")[2]
        if line.startswith("edge listening on "):
            http = _host_port(url)
        elif line.startswith("edge TLS listening on "):
            https = _host_port(url)
        elif line.startswith("edge admin API on "):
            if http is None or (tls and https is None):
                raise RuntimeError(f"the worker announced its admin API before its ports: {line}")
            return http, https, url


def _host_port(url: str) -> tuple[str, int]:
    authority = url.partition("://")[2]
    host, _, port = authority.rpartition(":")
    return host.strip("[]"), int(port)


async def _drain(stdout: asyncio.StreamReader, index: int) -> None:
    """Pass on what a worker prints after starting (its stop announcement), so its pipe never
    fills."""
    while line := await stdout.readline():
        logger.info("edge worker {}: {}", index + 1, _announcement(line))


def _announcement(raw: bytes) -> str:
    """A line a worker printed on stdout, as text: the ``msg`` of a JSON one (``--log-format
    json``), else the line."""
    line = raw.decode(errors="replace").strip()
    if line.startswith("{"):
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if isinstance(entry, dict) and isinstance(entry.get("msg"), str):
                return str(entry["msg"])
    return line


async def _worker_traffic(worker: Worker, token: SecretValue) -> TrafficStatistics:
    session = aiohttp.ClientSession()
    try:
        async with session.get(
            f"{worker.admin_url}/v1/worker",
            headers={"Authorization": "Bearer " + token.reveal().decode()},
            timeout=aiohttp.ClientTimeout(total=2.0),
        ) as response:
            response.raise_for_status()
            data = await response.json()
    finally:
        await session.close()
    return statistics_from_json(data["traffic"])
