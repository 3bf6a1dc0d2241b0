"""Leader election on a coordination.k8s.io/v1 Lease, with client-go's semantics.

Every replica computes everything and serves traffic from its own state, but only one may write
status and Events: two writers would fight over ``status.parents`` and double every Event. The
Lease names the holder; the holder renews ``renewTime`` every ``retry_period``; another replica
takes over only after it has seen the same record unchanged for ``leaseDurationSeconds`` (measured
on its own monotonic clock, so wall-clock skew between nodes does not matter). Every write is an
update conditioned on the resourceVersion that was read, so when two replicas race for an expired
Lease the API server accepts one and answers 409 to the other: never two leaders.

A leader that cannot renew for ``renew_deadline`` seconds steps down; ``renew_deadline`` is
shorter than ``lease_duration`` so it stops writing before anybody else may start. On shutdown
:meth:`LeaderElector.release` empties ``holderIdentity`` so that another replica takes over at its
next try instead of waiting for the Lease to expire.

``is_leader`` is also False while the last renewal is older than ``renew_deadline`` (a stalled
event loop cannot keep a leader writing), and turns True again when a renewal succeeds late. The
callbacks are told of that too (stopped, then started: a lapse): whoever held work back because
``is_leader`` said False must learn when it may go on. Without it the status writer kept a
ModuleSet's status queued until some unrelated message came, for minutes in the stress test.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from loguru import logger

from interlock.kube.library import ApiClient
from interlock.kube.resources import LEASE
from interlock.kube.safelog import log_failure
from interlock.kube.transport import KubeApiError, request_json

_JITTER = 1.2
"""client-go's jitter factor for retries while not leading: wait ``retry_period * (1 + 1.2 r)``."""


@dataclass(frozen=True, slots=True)
class LeaderElectorStatistics:
    is_leader: bool
    """Whether this replica currently holds the Lease."""
    holder: str
    """The holder this replica last observed ('' when released or unknown)."""
    acquisitions: int
    """Times this replica became leader."""
    renewals: int
    """Successful renewals while leading."""
    conflicts: int
    """Writes refused with 409 because another replica changed the Lease first."""
    failures: int
    """Attempts that failed for another reason (no connection, 5xx, ...)."""
    last_error: str | None


def _utc_now() -> datetime:
    return datetime.now(UTC)


def _micro_time(moment: datetime) -> str:
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class LeaderElector:
    """Campaigns for the Lease ``namespace/name`` as ``identity`` and keeps it while it can."""

    def __init__(
        self,
        api: ApiClient,
        *,
        namespace: str,
        name: str = "interlock",
        identity: str,
        lease_duration: float = 15.0,
        renew_deadline: float = 10.0,
        retry_period: float = 2.0,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = _utc_now,
        rng: random.Random | None = None,
        on_started_leading: Callable[[], None] | None = None,
        on_stopped_leading: Callable[[], None] | None = None,
    ) -> None:
        if not identity:
            raise ValueError(f"Lease {namespace}/{name}: identity must not be empty")
        if not lease_duration > renew_deadline > retry_period > 0:
            raise ValueError(
                f"Lease {namespace}/{name}: need lease_duration > renew_deadline > retry_period "
                f"> 0, got {lease_duration}, {renew_deadline}, {retry_period}"
            )
        self._api = api
        self._namespace = namespace
        self._name = name
        self.identity = identity
        self._lease_duration = lease_duration
        self._renew_deadline = renew_deadline
        self._retry_period = retry_period
        # A read and a write must both fit in the renew deadline, or a hung request would keep
        # the leader from noticing it can no longer renew.
        self._request_timeout = renew_deadline / 2
        self._clock = clock
        self._now = now
        self._rng = rng or random.Random()
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._path = LEASE.object_path(namespace=namespace, name=name)
        self._what = f"Lease {namespace}/{name}"
        # One read-modify-write at a time: a renewal racing a release would undo the release.
        self._lock = asyncio.Lock()
        self._observed_spec: dict[str, Any] | None = None
        self._observed_at = 0.0
        self._holding = False
        self._renewed_at = 0.0
        self._leading = False
        self._lapsed = False
        """A renewal came after ``renew_deadline``: ``is_leader`` was False meanwhile."""
        self._released = asyncio.Event()
        self._acquisitions = 0
        self._renewals = 0
        self._conflicts = 0
        self._failures = 0
        self._last_error: str | None = None

    @property
    def is_leader(self) -> bool:
        """True while this replica holds the Lease and renewed it within ``renew_deadline``.

        The time check makes this safe even if the renewal loop is starved: by the time another
        replica may take over (``lease_duration`` after the last renewal) this is already False.
        Whenever it turns True again, ``on_started_leading`` is called (after a late renewal
        too, preceded by ``on_stopped_leading``).
        """
        return self._holding and self._clock() - self._renewed_at < self._renew_deadline

    async def run(self) -> None:
        """Campaign, lead, and campaign again after losing the Lease; returns after release."""
        try:
            while not self._released.is_set():
                while not await self.try_acquire_or_renew():
                    if await self._sleep(self._retry_period * (1 + _JITTER * self._rng.random())):
                        return
                self._start_leading()
                while not await self._sleep(self._retry_period):
                    if await self.try_acquire_or_renew():
                        if self._lapsed and self.is_leader:
                            self._resume_leading()
                        continue
                    if not self._holding:
                        logger.warning("{}: another replica took the Lease", self._what)
                        break
                    if self._clock() - self._renewed_at >= self._renew_deadline:
                        logger.warning("{}: failed to renew in time, stepping down", self._what)
                        break
                self._stop_leading()
        finally:
            self._stop_leading()

    async def _sleep(self, seconds: float) -> bool:
        """Wait ``seconds``, or less if released; True when released."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._released.wait(), seconds)
        return self._released.is_set()

    async def try_acquire_or_renew(self) -> bool:
        """One attempt to take or keep the Lease; True if it was taken or renewed just now.

        A failed request (no connection, 5xx) changes nothing: a leader stays leader until its
        renew deadline passes. A 409, or finding another holder, ends this replica's hold at once.
        """
        async with self._lock:
            if self._released.is_set():
                return False
            previous = self._renewed_at
            try:
                held = await self._try_acquire_or_renew()
            except KubeApiError as error:
                if error.code != 409:
                    self._failures += 1
                    self._last_error = str(error)
                    logger.warning("{}: {}", self._what, error)
                    return False
                self._conflicts += 1
                held = False
            self._holding = held
            if held and self._clock() - previous >= self._renew_deadline:
                self._lapsed = True
            return held

    async def _try_acquire_or_renew(self) -> bool:
        attempt_at = self._clock()
        now = _micro_time(self._now())
        duration = max(1, math.ceil(self._lease_duration))
        try:
            lease = await self._read()
        except KubeApiError as error:
            if error.code != 404:
                raise
            created = await request_json(
                self._api,
                method="POST",
                path=LEASE.collection_path(namespace=self._namespace),
                what=f"create {self._what}",
                body={
                    "apiVersion": LEASE.api_version,
                    "kind": LEASE.kind,
                    "metadata": {"name": self._name, "namespace": self._namespace},
                    "spec": {
                        "holderIdentity": self.identity,
                        "leaseDurationSeconds": duration,
                        "acquireTime": now,
                        "renewTime": now,
                        "leaseTransitions": 0,
                    },
                },
                request_timeout=self._request_timeout,
            )
            self._observe(created, attempt_at)
            self._renewed_at = attempt_at
            return True
        spec = self._observe(lease, attempt_at)
        holder = str(spec.get("holderIdentity") or "")
        if holder and holder != self.identity:
            seconds = spec.get("leaseDurationSeconds")
            seconds = seconds if isinstance(seconds, int | float) else self._lease_duration
            if self._clock() < self._observed_at + seconds:
                return False
        transitions = spec.get("leaseTransitions")
        transitions = transitions if isinstance(transitions, int) else 0
        renewed = {
            "holderIdentity": self.identity,
            "leaseDurationSeconds": duration,
            "renewTime": now,
            "acquireTime": spec.get("acquireTime") if holder == self.identity else now,
            "leaseTransitions": transitions if holder == self.identity else transitions + 1,
        }
        await self._replace(lease, renewed)
        self._renewed_at = attempt_at
        if holder == self.identity:
            self._renewals += 1
        return True

    async def _read(self) -> dict[str, Any]:
        return await request_json(
            self._api,
            method="GET",
            path=self._path,
            what=f"read {self._what}",
            request_timeout=self._request_timeout,
        )

    async def _replace(self, lease: dict[str, Any], spec: dict[str, Any]) -> None:
        """Write ``spec``, conditioned on the resourceVersion read (409 if it changed since)."""
        meta = lease.get("metadata")
        meta = meta if isinstance(meta, dict) else {}
        body = {
            "apiVersion": LEASE.api_version,
            "kind": LEASE.kind,
            "metadata": {
                "name": self._name,
                "namespace": self._namespace,
                "resourceVersion": meta.get("resourceVersion", ""),
            },
            "spec": spec,
        }
        written = await request_json(
            self._api,
            method="PUT",
            path=self._path,
            what=f"update {self._what}",
            body=body,
            request_timeout=self._request_timeout,
        )
        self._observe(written, self._clock())

    def _observe(self, lease: dict[str, Any], at: float) -> dict[str, Any]:
        """Remember the Lease's record; its expiry is counted from when it last changed."""
        spec = lease.get("spec")
        spec = spec if isinstance(spec, dict) else {}
        if spec != self._observed_spec:
            self._observed_spec = spec
            self._observed_at = at
        return spec

    async def release(self) -> None:
        """Give up the Lease at once (on shutdown) so another replica need not wait for expiry.

        After this the elector no longer campaigns and :meth:`run` returns.
        """
        async with self._lock:
            self._released.set()
            was_holding = self._holding
            self._holding = False
            if was_holding:
                await self._release_lease()
        self._stop_leading()

    async def _release_lease(self) -> None:
        try:
            lease = await self._read()
            spec = self._observe(lease, self._clock())
            if spec.get("holderIdentity") != self.identity:
                return
            now = _micro_time(self._now())
            transitions = spec.get("leaseTransitions")
            await self._replace(
                lease,
                {
                    "holderIdentity": "",
                    "leaseDurationSeconds": 1,
                    "acquireTime": now,
                    "renewTime": now,
                    "leaseTransitions": transitions if isinstance(transitions, int) else 0,
                },
            )
        except KubeApiError as error:
            # The Lease will simply expire; nothing else depends on the release succeeding.
            self._last_error = str(error)
            logger.warning("{}: cannot release: {}", self._what, error)

    def _start_leading(self) -> None:
        self._lapsed = False
        if self._leading:
            return
        self._leading = True
        self._acquisitions += 1
        logger.info("{}: {} became leader", self._what, self.identity)
        self._notify(self._on_started, "on_started_leading")

    def _resume_leading(self) -> None:
        """A renewal succeeded after the renew deadline had passed: tell the callbacks that
        leadership lapsed and is back, as :attr:`is_leader` answered (False, then True), so
        that what they held back meanwhile goes on and what they trusted of the earlier term
        (another replica may have taken an expired Lease in between) is checked again."""
        self._lapsed = False
        logger.warning(
            "{}: renewed after its renew deadline ({:g} s) had passed: leading again",
            self._what,
            self._renew_deadline,
        )
        self._notify(self._on_stopped, "on_stopped_leading")
        self._notify(self._on_started, "on_started_leading")

    def _stop_leading(self) -> None:
        self._holding = False
        if not self._leading:
            return
        self._leading = False
        logger.info("{}: {} stopped leading", self._what, self.identity)
        self._notify(self._on_stopped, "on_stopped_leading")

    def _notify(self, callback: Callable[[], None] | None, label: str) -> None:
        if callback is None:
            return
        try:
            callback()
        except Exception as error:
            log_failure("{}: {} raised", self._what, label, error=error)

    def statistics(self) -> LeaderElectorStatistics:
        holder = str((self._observed_spec or {}).get("holderIdentity") or "")
        return LeaderElectorStatistics(
            is_leader=self.is_leader,
            holder=holder,
            acquisitions=self._acquisitions,
            renewals=self._renewals,
            conflicts=self._conflicts,
            failures=self._failures,
            last_error=self._last_error,
        )
