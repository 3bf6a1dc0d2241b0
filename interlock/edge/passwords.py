"""basicAuth's bcrypt checks, off the event loop and bounded: :class:`PasswordChecker`.

bcrypt is slow on purpose (tens of milliseconds per check at cost 10, far more at higher costs).
Run on the event loop, forty concurrent wrong-password requests to one route stalled every other
host of the edge for seconds. The checks run here instead, in a small thread pool of their own:
the no-threads rule of the actor runtime is about actor state, and a bcrypt check touches none
(it is a pure function of a password and a hash; the answer is cached back on the event loop).

Checks in flight (queued or running) are capped: beyond :attr:`ProxyLimits.password_checks`, a
request is refused at once with 503 and ``Retry-After`` instead of queueing without bound, so a
guesser fills at most the queue, not the process's memory and every worker for minutes. A
check counts until its thread finishes, even when its client left (bcrypt cannot be
interrupted), so opening and closing connections does not get around the cap. An unknown user's
check runs against a dummy hash of the same cost, through the same pool: it waits and costs the
same as a known user's.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import threading
from collections.abc import Callable
from dataclasses import dataclass

from interlock.edge.modules.basic_auth import BasicAuth, PasswordCheck, verify_password
from interlock.edge.modules.view import Rejection, reject

BUSY = reject(503, "too many password checks in progress\n", {"Retry-After": "1"})


@dataclass(frozen=True, slots=True)
class PasswordCheckStatistics:
    workers: int
    max_pending: int
    pending: int
    """Checks queued or running."""
    running: int
    """Checks a worker is computing now."""
    refused_busy: int
    """Requests answered 503 because ``max_pending`` checks were in flight."""


class PasswordChecker:
    """Runs :class:`PasswordCheck` s in ``workers`` threads, at most ``max_pending`` at once."""

    def __init__(
        self,
        *,
        workers: int = 2,
        max_pending: int = 64,
        verify: Callable[[bytes, bytes], bool] = verify_password,
    ) -> None:
        if workers < 1 or max_pending < 1:
            raise ValueError("password checks: workers and max_pending must be at least 1")
        self._workers = workers
        self._max_pending = max_pending
        self._verify = verify
        self._pool: concurrent.futures.ThreadPoolExecutor | None = None
        self._pending = 0
        self._running = 0
        self._running_lock = threading.Lock()
        self._refused_busy = 0

    async def check(self, auth: BasicAuth, check: PasswordCheck) -> Rejection | None:
        """The answer of ``auth`` once ``check`` ran, or 503 when too many are in flight."""
        if self._pending >= self._max_pending:
            self._refused_busy += 1
            return BUSY
        if self._pool is None:
            self._pool = concurrent.futures.ThreadPoolExecutor(
                max_workers=self._workers, thread_name_prefix="interlock-bcrypt"
            )
        loop = asyncio.get_running_loop()
        self._pending += 1
        future = self._pool.submit(self._run, check.password, check.hashed)
        future.add_done_callback(lambda _: _call_soon(loop, self._finished))
        valid = await asyncio.wrap_future(future)
        return auth.record(check, valid=valid)

    def _run(self, password: bytes, hashed: bytes) -> bool:
        with self._running_lock:
            self._running += 1
        try:
            return self._verify(password, hashed)
        finally:
            with self._running_lock:
                self._running -= 1

    def _finished(self) -> None:
        self._pending -= 1

    def statistics(self) -> PasswordCheckStatistics:
        with self._running_lock:
            running = self._running
        return PasswordCheckStatistics(
            workers=self._workers,
            max_pending=self._max_pending,
            pending=self._pending,
            running=running,
            refused_busy=self._refused_busy,
        )

    def close(self) -> None:
        """Drop queued checks; running ones finish in their threads (bcrypt cannot stop)."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pool = None


def _call_soon(loop: asyncio.AbstractEventLoop, callback: Callable[[], None]) -> None:
    """From a worker thread: run ``callback`` on the loop, unless the loop is already gone."""
    with contextlib.suppress(RuntimeError):
        loop.call_soon_threadsafe(callback)
