"""Kubernetes Events (core/v1) about our objects, aggregated like client-go's correlator.

Events are how ``kubectl describe`` tells a user that a module was rejected or a backend is
missing. A controller that retries emits the same event again and again; creating an object each
time would flood etcd and bury the one useful line, so an identical event (same object, type,
reason and message) seen again within ``window`` seconds increments ``count`` and
``lastTimestamp`` of the existing Event instead. Recording an event is best effort: a failure is
logged and counted, never raised into the actor that wanted to tell the user something.
"""

from __future__ import annotations

import asyncio
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping
from dataclasses import KW_ONLY, dataclass, field
from datetime import UTC, datetime
from typing import Any, Literal

from loguru import logger

from interlock.kube.library import ApiClient
from interlock.kube.resources import EVENT
from interlock.kube.safelog import log_failure
from interlock.kube.transport import MERGE_PATCH, KubeApiError, request_json

MAX_MESSAGE_BYTES = 1024
"""The API server rejects longer event messages; longer ones are cut, not dropped."""

EventType = Literal["Normal", "Warning"]


def reference_to(obj: Mapping[str, Any]) -> dict[str, str]:
    """The ``regarding`` reference (apiVersion, kind, namespace, name, uid) of a raw object."""
    meta = obj.get("metadata")
    meta = meta if isinstance(meta, Mapping) else {}
    reference = {
        "apiVersion": str(obj.get("apiVersion", "")),
        "kind": str(obj.get("kind", "")),
        "namespace": str(meta.get("namespace", "")),
        "name": str(meta.get("name", "")),
        "uid": str(meta.get("uid", "")),
    }
    return {key: value for key, value in reference.items() if value}


def truncate_message(message: str, *, limit: int = MAX_MESSAGE_BYTES) -> str:
    """``message`` cut to at most ``limit`` UTF-8 bytes (ending in ``...``), never mid-character."""
    encoded = message.encode("utf-8")
    if len(encoded) <= limit:
        return message
    return encoded[: limit - 3].decode("utf-8", "ignore") + "..."


@dataclass(slots=True)
class _Recorded:
    namespace: str
    name: str
    count: int
    seen_at: float


@dataclass(frozen=True, slots=True)
class EventRecorderStatistics:
    created: int
    """Event objects created."""
    aggregated: int
    """Repeats folded into an existing Event by incrementing its count."""
    failed: int
    """Events that could not be recorded (logged)."""


def _utc_now() -> datetime:
    return datetime.now(UTC)


@dataclass(eq=False, repr=False)
class EventRecorder:
    """Creates core/v1 Events, folding repeats within ``window`` seconds into one with a count."""

    api: ApiClient
    _: KW_ONLY
    host: str
    """This replica (the Event's ``source.host`` and ``reportingInstance``)."""
    component: str = "interlock"
    """The Event's ``source.component`` and ``reportingComponent``."""
    window: float = 600.0
    """Seconds within which an identical event counts as a repeat."""
    max_tracked: int = 4096
    """At most this many recent events remembered for folding repeats (the oldest go first)."""
    clock: Callable[[], float] = time.monotonic
    """Monotonic seconds, for ``window``."""
    now: Callable[[], datetime] = _utc_now
    """The wall clock, for the Events' timestamps and names."""
    _recorded: OrderedDict[tuple[str, ...], _Recorded] = field(
        default_factory=OrderedDict, init=False
    )
    _lock: asyncio.Lock = field(default_factory=asyncio.Lock, init=False)
    """One event at a time: a repeat must see the Event its predecessor created, or two
    identical events racing would create two objects."""
    _sequence: int = field(default=0, init=False)
    _created: int = field(default=0, init=False)
    _aggregated: int = field(default=0, init=False)
    _failed: int = field(default=0, init=False)

    async def record(
        self, *, regarding: Mapping[str, str], type: EventType, reason: str, message: str
    ) -> None:
        """Record an event about ``regarding`` (see :func:`reference_to`); never raises."""
        namespace = regarding.get("namespace") or "default"
        message = truncate_message(message)
        key = (
            namespace,
            regarding.get("kind", ""),
            regarding.get("name", ""),
            regarding.get("uid", ""),
            type,
            reason,
            message,
        )
        subject = f"{regarding.get('kind', '')} {namespace}/{regarding.get('name', '')}"
        async with self._lock:
            try:
                await self._record(key, regarding, namespace, type, reason, message)
                logger.debug("{}: event {} {}: {}", subject, type, reason, message)
            except KubeApiError as error:
                self._failed += 1
                logger.warning("{}: cannot record {} event {}: {}", subject, type, reason, error)
            except Exception as error:
                # A bug here must not take down the actor that only wanted to inform the user.
                self._failed += 1
                log_failure("cannot record {} event {} for {}", type, reason, subject, error=error)

    async def _record(
        self,
        key: tuple[str, ...],
        regarding: Mapping[str, str],
        namespace: str,
        type: EventType,
        reason: str,
        message: str,
    ) -> None:
        timestamp = self.now().strftime("%Y-%m-%dT%H:%M:%SZ")
        previous = self._recorded.get(key)
        if previous is not None and self.clock() - previous.seen_at < self.window:
            try:
                await request_json(
                    self.api,
                    method="PATCH",
                    path=EVENT.object_path(namespace=previous.namespace, name=previous.name),
                    what=f"update Event {previous.namespace}/{previous.name}",
                    body={"count": previous.count + 1, "lastTimestamp": timestamp},
                    content_type=MERGE_PATCH,
                    request_timeout=10.0,
                )
            except KubeApiError as error:
                if error.code != 404:
                    raise
                # The Event expired (the API server keeps them about an hour): start a new one.
            else:
                previous.count += 1
                previous.seen_at = self.clock()
                self._recorded.move_to_end(key)
                self._aggregated += 1
                return
        name = self._event_name(regarding.get("name", "event"))
        involved = {
            field: regarding[field]
            for field in ("apiVersion", "kind", "namespace", "name", "uid", "fieldPath")
            if regarding.get(field)
        }
        body = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": name, "namespace": namespace},
            "involvedObject": involved,
            "reason": reason,
            "message": message,
            "type": type,
            "source": {"component": self.component, "host": self.host},
            "reportingComponent": self.component,
            "reportingInstance": self.host,
            "firstTimestamp": timestamp,
            "lastTimestamp": timestamp,
            "count": 1,
        }
        await request_json(
            self.api,
            method="POST",
            path=EVENT.collection_path(namespace=namespace),
            what=f"create Event {namespace}/{name}",
            body=body,
            request_timeout=10.0,
        )
        self._created += 1
        self._recorded[key] = _Recorded(
            namespace=namespace, name=name, count=1, seen_at=self.clock()
        )
        self._recorded.move_to_end(key)
        while len(self._recorded) > self.max_tracked:
            self._recorded.popitem(last=False)

    def _event_name(self, object_name: str) -> str:
        # client-go names events "<object>.<unix nanoseconds in hex>"; the sequence keeps names
        # unique when the clock does not move between two events (or is frozen in a test).
        self._sequence += 1
        nanoseconds = int(self.now().timestamp() * 1_000_000_000) + self._sequence
        return f"{object_name}.{nanoseconds:x}"

    def statistics(self) -> EventRecorderStatistics:
        return EventRecorderStatistics(
            created=self._created, aggregated=self._aggregated, failed=self._failed
        )
