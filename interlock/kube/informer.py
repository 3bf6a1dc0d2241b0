"""Informers: list then watch one kind, and hand every change to a sink exactly as it happened.

Everything interlock computes starts from these events, so an informer must never lose a change:
not when the watch connection drops, not when the API server compacts its history (410 Gone), and
not when requests fail for a while. It follows client-go's reflector:

- a paginated list delivers every object, then a watch continues from the list's resourceVersion
  (``allowWatchBookmarks`` lets an idle watch advance it, so a reconnect rarely needs a relist);
- the informer remembers what it delivered per key; after a 410 it relists and delivers only
  the difference: ``Upserted`` for objects whose resourceVersion changed and ``Deleted`` (with
  the last identity seen) for objects that vanished while it was not watching;
- failures back off exponentially with jitter (0.8 s to 30 s), and the backoff resets once the
  connection has been healthy for two minutes.

The sink is a plain synchronous callable because an actor's ``tell`` is synchronous: delivery is
a function call, never a queue that could grow without bound inside the informer.

What it remembers of an object is its identity (:class:`LastSeen`: apiVersion, kind, name,
namespace, uid, resourceVersion, labels), not the object: the actors keep the parsed fields they
read, and a second copy of every raw object (with a real server's ``managedFields``) was the
largest single part of the controller's memory per object. Who needs an object's whole current
state again (a poison message's resync) asks the API server: :meth:`Informer.fetch`.
"""

from __future__ import annotations

import asyncio
import json
import random
import sys
import time
from collections.abc import Callable, Coroutine, Sequence
from dataclasses import dataclass, field
from typing import Any, ClassVar

import aiohttp
from loguru import logger

from interlock.kube.library import ApiClient
from interlock.kube.resources import Resource
from interlock.kube.safelog import log_failure
from interlock.kube.transport import (
    KubeApiError,
    QueryParams,
    connection_error,
    open_request,
    request_json,
    status_error,
)
from interlock.mailbox.backoff import BackoffPolicy

DEFAULT_BACKOFF = BackoffPolicy(initial=0.8, maximum=30.0, jitter=1.0)
"""client-go's reflector backoff: 800 ms doubling to 30 s, plus up to 100 % jitter."""

_VERY_SHORT_WATCH = 1.0
"""A watch that ends cleanly this fast with no event is treated as a failure (as client-go does),
so that a server closing every watch at once cannot make us reconnect in a tight loop."""


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def object_key(obj: dict[str, Any]) -> str:
    """``namespace/name`` of a raw object, or ``name`` when it is cluster-scoped."""
    meta = _meta(obj)
    name = str(meta.get("name", ""))
    namespace = meta.get("namespace")
    return f"{namespace}/{name}" if namespace else name


def resource_version(obj: dict[str, Any]) -> str:
    """The object's ``metadata.resourceVersion`` ('' when absent)."""
    return str(_meta(obj).get("resourceVersion", ""))


@dataclass(frozen=True, slots=True)
class LastSeen:
    """What the store keeps of a delivered object: its kind and identity, not its contents.

    A slotted record, not a dict shaped like the object: the two dicts and their own copies of
    the apiVersion, kind and namespace strings took about 470 bytes an object, this 88 (its
    name, uid and resourceVersion are the strings the parsed object holds too). ``None``: the
    object had no such field.
    """

    api_version: str | None
    kind: str | None
    name: str | None
    namespace: str | None
    uid: str | None
    resource_version: str | None
    labels: dict[str, Any] | None
    """What a Deleted event after a relist needs beside the identity (an EndpointSlice's
    directory reads its Service from the labels)."""

    @classmethod
    def of(cls, obj: dict[str, Any]) -> LastSeen:
        meta = _meta(obj)
        return cls(
            api_version=_interned(obj.get("apiVersion")),
            kind=_interned(obj.get("kind")),
            name=meta.get("name"),
            namespace=_interned(meta.get("namespace")),
            uid=meta.get("uid"),
            resource_version=meta.get("resourceVersion"),
            labels=meta.get("labels"),
        )

    def as_object(self) -> dict[str, Any]:
        """The object a Deleted event after a relist carries: this identity, no contents."""
        fields = (
            ("name", self.name),
            ("namespace", self.namespace),
            ("uid", self.uid),
            ("resourceVersion", self.resource_version),
            ("labels", self.labels),
        )
        return {
            "apiVersion": self.api_version,
            "kind": self.kind,
            "metadata": {name: value for name, value in fields if value is not None},
        }


def _interned(value: Any) -> Any:
    # The few apiVersions, kinds and namespaces every object repeats are kept once.
    return sys.intern(value) if type(value) is str else value


@dataclass(frozen=True, slots=True, repr=False)
class _ObjectEvent:
    """What an informer tells its sink about one object; the raw object never reaches a trace."""

    __trace_redact__: ClassVar[frozenset[str]] = frozenset({"obj"})

    resource: Resource
    obj: dict[str, Any] = field(compare=False)
    """The raw object as the API server sent it (for a Deleted after a relist, the identity
    the store kept: :meth:`LastSeen.as_object`); never mutate it."""

    @property
    def key(self) -> str:
        """``namespace/name`` of the object."""
        return object_key(self.obj)

    @property
    def namespace(self) -> str:
        """The object's namespace ('' when cluster-scoped)."""
        return str(_meta(self.obj).get("namespace", ""))

    @property
    def name(self) -> str:
        return str(_meta(self.obj).get("name", ""))

    @property
    def resource_version(self) -> str:
        return resource_version(self.obj)

    def trace_summary(self) -> str:
        """``Service default/web rv=123``: what a trace line shows instead of the object."""
        return f"{self.resource.kind} {self.key} rv={resource_version(self.obj)}"

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.trace_summary()})"


@dataclass(frozen=True, slots=True, repr=False)
class Upserted(_ObjectEvent):
    """An object was created or changed (or first seen by a list): ``obj`` is its new state."""


@dataclass(frozen=True, slots=True, repr=False)
class Deleted(_ObjectEvent):
    """An object is gone: ``obj`` is its last state (from the DELETED event), or after a relist
    only the identity the store kept of it (:meth:`LastSeen.as_object`)."""


InformerEvent = Upserted | Deleted
Sink = Callable[[InformerEvent], None]


@dataclass(frozen=True, slots=True)
class InformerStatistics:
    """What an informer has done so far, for ``/metrics`` and ``/debug``."""

    objects: int
    """Objects currently known (delivered and not deleted)."""
    events: int
    """Events delivered to the sink (Upserted and Deleted)."""
    relists: int
    """Lists after the initial one (each follows a 410 Gone)."""
    reconnects: int
    """Retries after a failure or a dropped connection (each waited for the backoff)."""
    watches: int
    """Watch requests opened (one more each time the server ends a watch at its timeout)."""
    bookmarks: int
    """BOOKMARK events received (each advances the resourceVersion)."""
    sink_errors: int
    """Events whose delivery raised in the sink (logged; the informer goes on)."""
    last_error: str | None
    """The latest failure, or None if there has been none."""


@dataclass(kw_only=True, eq=False)
class ReconnectBackoff:
    """The delay before each retry: exponential with jitter, reset after a healthy period.

    Like client-go's backoff manager: if the previous backoff started longer than
    ``healthy_reset`` seconds ago, the connection was healthy in between and the next delay starts
    again from the initial one.
    """

    policy: BackoffPolicy
    healthy_reset: float
    rng: random.Random
    clock: Callable[[], float]
    _attempt: int = field(default=0, init=False)
    _last: float | None = field(default=None, init=False)

    def next_delay(self) -> float:
        """Seconds to wait before the next attempt; each call counts as one more failure."""
        now = self.clock()
        if self._last is not None and now - self._last >= self.healthy_reset:
            self._attempt = 0
        self._last = now
        delay = self.policy.delay(self._attempt, self.rng)
        self._attempt += 1
        return delay


class _WatchExpired(Exception):
    """The watch's resourceVersion is too old (410): only a relist can continue."""


@dataclass(kw_only=True, eq=False)
class _Reflector:
    """List and watch of one resource in one namespace (or all): the informer's unit of work."""

    api: ApiClient
    resource: Resource
    namespace: str | None
    sink: Sink
    label_selector: str | None
    backoff: ReconnectBackoff
    watch_timeout: int
    page_size: int
    clock: Callable[[], float]
    store: dict[str, LastSeen] = field(default_factory=dict, init=False)
    """By key, what was delivered of each object."""
    resource_version: str = field(default="", init=False)
    listed: asyncio.Event = field(default_factory=asyncio.Event, init=False)
    events: int = field(default=0, init=False)
    relists: int = field(default=0, init=False)
    reconnects: int = field(default=0, init=False)
    watches: int = field(default=0, init=False)
    bookmarks: int = field(default=0, init=False)
    sink_errors: int = field(default=0, init=False)
    last_error: str | None = field(default=None, init=False)
    _path: str = field(init=False)
    _scope: str = field(init=False)

    def __post_init__(self) -> None:
        namespace = self.namespace
        self._path = self.resource.collection_path(namespace=namespace)
        self._scope = (
            f"{self.resource.kind} in namespace {namespace}" if namespace else self.resource.kind
        )

    async def run(self) -> None:
        # A reflector run again after being cancelled resumes watching from where it stopped.
        need_list = not self.listed.is_set()
        expired_in_a_row = 0
        while True:
            retry_after: float | None = None
            try:
                if need_list:
                    if self.listed.is_set():
                        self.relists += 1
                    await self._list()
                    need_list = False
                    self.listed.set()
                await self._watch()
                expired_in_a_row = 0
                continue
            except _WatchExpired:
                logger.info("{}: resourceVersion expired, relisting", self._scope)
                need_list = True
                expired_in_a_row += 1
                # One relist is the cure for a 410; a second one in a row without a watch in
                # between means something is wrong upstream, so it waits like any other failure.
                if expired_in_a_row == 1:
                    continue
                self.last_error = f"list/watch {self._scope}: resourceVersion expired repeatedly"
            except KubeApiError as error:
                self.last_error = str(error)
                retry_after = error.retry_after
            except Exception as error:
                # A bug (or an answer we did not foresee) must not silently end this informer:
                # everything downstream would go stale. Log it and start over like client-go.
                self.last_error = f"list/watch {self._scope}: {type(error).__name__}: {error}"
                log_failure("{} failed", self._scope, error=error)
            self.reconnects += 1
            delay = max(self.backoff.next_delay(), retry_after or 0.0)
            logger.warning("{} (retrying in {:.2f}s)", self.last_error, delay)
            await asyncio.sleep(delay)

    def _query(self) -> list[tuple[str, str]]:
        return [("labelSelector", self.label_selector)] if self.label_selector else []

    def _deliver(self, event: InformerEvent) -> None:
        self.events += 1
        # A cluster-scoped object's message has no "ns/name" prefix to read its fields from:
        # bound instead (only then: bind costs an object per event).
        log = logger if event.namespace else logger.bind(kind=event.resource.kind, name=event.name)
        log.debug(
            "{} {}: {} (rv={})",
            event.resource.kind,
            event.key,
            "deleted" if isinstance(event, Deleted) else "upserted",
            event.resource_version,
        )
        try:
            self.sink(event)
        except Exception as error:
            self.sink_errors += 1
            log_failure("sink raised on {}", event.trace_summary(), error=error)

    def _complete(self, obj: dict[str, Any]) -> dict[str, Any]:
        # Items of a list response carry no apiVersion/kind (watch events do); consumers should
        # not have to care where an object came from.
        obj.setdefault("apiVersion", self.resource.api_version)
        obj.setdefault("kind", self.resource.kind)
        return obj

    async def _list(self) -> None:
        seen: set[str] = set()
        continue_token: str | None = None
        list_version = ""
        while True:
            query: QueryParams = [("limit", str(self.page_size)), *self._query()]
            if continue_token:
                query = [*query, ("continue", continue_token)]
            try:
                page = await request_json(
                    self.api,
                    method="GET",
                    path=self._path,
                    what=f"list {self._scope}",
                    query=query,
                    request_timeout=60.0,
                )
            except KubeApiError as error:
                if error.expired and continue_token:
                    # The snapshot behind the continue token was compacted: start over. Objects
                    # already delivered stay in the store, so unchanged ones are not re-sent.
                    seen.clear()
                    continue_token = None
                    continue
                raise
            for item in page.get("items") or []:
                if not isinstance(item, dict):
                    continue
                obj = self._complete(item)
                key = object_key(obj)
                seen.add(key)
                previous = self.store.get(key)
                if previous is None or previous.resource_version != _meta(obj).get(
                    "resourceVersion"
                ):
                    self.store[key] = LastSeen.of(obj)
                    self._deliver(Upserted(self.resource, obj))
            meta = _meta(page)
            list_version = str(meta.get("resourceVersion", "")) or list_version
            continue_token = meta.get("continue") or None
            if not continue_token:
                break
            await asyncio.sleep(0)  # let other tasks run between pages of a large list
        for key in [key for key in self.store if key not in seen]:
            self._deliver(Deleted(self.resource, self.store.pop(key).as_object()))
        self.resource_version = list_version
        logger.debug("list {}: {} objects at rv={}", self._scope, len(seen), list_version)

    async def _watch(self) -> None:
        """Watch from the current resourceVersion until the stream ends (at its timeout)."""
        what = f"watch {self._scope}"
        query: QueryParams = [
            ("watch", "true"),
            ("allowWatchBookmarks", "true"),
            ("timeoutSeconds", str(self.watch_timeout)),
            ("resourceVersion", self.resource_version),
            *self._query(),
        ]
        started = self.clock()
        self.watches += 1
        # The server ends the watch after timeoutSeconds; a read that stalls much longer means
        # the connection is dead without the kernel knowing.
        timeout = aiohttp.ClientTimeout(sock_connect=30.0, sock_read=self.watch_timeout + 30.0)
        response = await open_request(
            self.api,
            method="GET",
            path=self._path,
            what=what,
            query=query,
            request_timeout=timeout,
        )
        received = 0
        async with response:
            if response.status != 200:
                body = await _read_status_body(response)
                if response.status == 410:
                    raise _WatchExpired
                raise status_error(
                    what=what, code=response.status, body=body, headers=response.headers
                )
            try:
                async for line in response.content:
                    if line.strip():
                        received += 1
                        self._handle(json.loads(line), what=what)
            except (TimeoutError, aiohttp.ClientError, OSError) as error:
                raise connection_error(what=what, error=error) from error
            except ValueError as error:
                raise KubeApiError(
                    what=what, code=0, reason="BadWatchEvent", message=str(error)
                ) from error
        logger.debug(
            "watch {}: ended after {} events, {:.0f}s (resumes from rv={})",
            self._scope,
            received,
            self.clock() - started,
            self.resource_version,
        )
        if received == 0 and self.clock() - started < _VERY_SHORT_WATCH:
            raise KubeApiError(
                what=what, code=0, reason="VeryShortWatch", message="closed at once with no event"
            )

    def _handle(self, event: Any, *, what: str) -> None:
        kind = event.get("type") if isinstance(event, dict) else None
        obj = event.get("object") if isinstance(event, dict) else None
        if not isinstance(obj, dict):
            raise KubeApiError(what=what, code=0, reason="BadWatchEvent", message=f"{kind}")
        if kind == "ERROR":
            code = obj.get("code")
            if code == 410 or obj.get("reason") in ("Expired", "Gone"):
                raise _WatchExpired
            raise status_error(what=what, code=code if isinstance(code, int) else 0, body=obj)
        version = resource_version(obj)
        if kind == "BOOKMARK":
            self.bookmarks += 1
            if version:
                self.resource_version = version
            return
        if version:
            self.resource_version = version
        key = object_key(obj)
        if kind in ("ADDED", "MODIFIED"):
            self.store[key] = LastSeen.of(obj)
            self._deliver(Upserted(self.resource, obj))
        elif kind == "DELETED":
            self.store.pop(key, None)
            self._deliver(Deleted(self.resource, obj))


async def _read_status_body(response: aiohttp.ClientResponse) -> object:
    try:
        return json.loads(await response.read())
    except (TimeoutError, ValueError, aiohttp.ClientError, OSError):
        return None


class Informer:
    """List+watch of one resource (per namespace, or cluster-wide), delivering to ``sink``.

    ``run()`` runs until cancelled; ``ready`` is set once the initial list of every namespace has
    been delivered.
    """

    def __init__(
        self,
        api: ApiClient,
        resource: Resource,
        *,
        sink: Sink,
        namespaces: Sequence[str] | None = None,
        label_selector: str | None = None,
        backoff: BackoffPolicy = DEFAULT_BACKOFF,
        healthy_reset: float = 120.0,
        watch_timeout: int = 290,
        page_size: int = 500,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
        name: str | None = None,
    ) -> None:
        self.resource = resource
        self.name = name or f"{resource.kind}.{resource.version}"
        """How statistics and logs name this informer (the kind and version by default)."""
        self.ready = asyncio.Event()
        """Set once the initial list has been delivered to the sink (for every namespace)."""
        scopes: list[str | None] = (
            list(dict.fromkeys(namespaces))
            if namespaces is not None and resource.namespaced
            else [None]
        )
        shared_rng = rng or random.Random()
        self._api = api
        self._label_selector = label_selector
        self._reflectors = [
            _Reflector(
                api=api,
                resource=resource,
                namespace=scope,
                sink=sink,
                label_selector=label_selector,
                backoff=ReconnectBackoff(
                    policy=backoff, healthy_reset=healthy_reset, rng=shared_rng, clock=clock
                ),
                watch_timeout=watch_timeout,
                page_size=page_size,
                clock=clock,
            )
            for scope in scopes
        ]

    async def run(self) -> None:
        """List and watch until cancelled; failures are retried, never raised.

        Running it again after a cancellation resumes from the last resourceVersion seen (a
        relist follows if that is too old), delivering only what changed in between.
        """
        await _run_all(
            [reflector.run for reflector in self._reflectors],
            [reflector.listed for reflector in self._reflectors],
            self.ready,
        )

    async def fetch(self, namespace: str, name: str) -> dict[str, Any] | None:
        """The object ``namespace/name`` as the API server has it now (None when it is gone, or
        no longer matches this informer's label selector).

        A ``list`` with ``fieldSelector=metadata.name=NAME``, not a ``get``: the informer's
        RBAC grants ``list`` and ``watch`` (``manifests/rbac.yaml``), and a ``get`` of each kind
        would be a verb used only on this rare path (found on the real server: the read after a
        poison message was refused with 403). Raises :class:`KubeApiError` when the server
        cannot answer (the caller decides whether to try again)."""
        resource = self.resource
        what = f"get {resource.describe(namespace=namespace, name=name)}"
        query: list[tuple[str, str]] = [("fieldSelector", f"metadata.name={name}")]
        if self._label_selector:
            query.append(("labelSelector", self._label_selector))
        found = await request_json(
            self._api,
            method="GET",
            path=resource.collection_path(namespace=namespace or None),
            what=what,
            query=query,
        )
        for item in found.get("items") or []:
            if isinstance(item, dict) and (item.get("metadata") or {}).get("name") == name:
                item.setdefault("apiVersion", resource.api_version)
                item.setdefault("kind", resource.kind)
                return item
        return None

    def statistics(self) -> InformerStatistics:
        """Counters summed over the namespaces; ``last_error`` is the latest one recorded."""
        reflectors = self._reflectors
        errors = [r.last_error for r in reflectors if r.last_error]
        return InformerStatistics(
            objects=sum(len(r.store) for r in reflectors),
            events=sum(r.events for r in reflectors),
            relists=sum(r.relists for r in reflectors),
            reconnects=sum(r.reconnects for r in reflectors),
            watches=sum(r.watches for r in reflectors),
            bookmarks=sum(r.bookmarks for r in reflectors),
            sink_errors=sum(r.sink_errors for r in reflectors),
            last_error=errors[-1] if errors else None,
        )


class InformerSet:
    """Several informers run together, ready when every one of them is ready.

    The controller is only ready (``/readyz``) once the initial list of *every* kind has been
    delivered: a route computed before its backend Services were listed would be published with
    ``exists: false`` and then flap.
    """

    def __init__(self, informers: Sequence[Informer]) -> None:
        names = [informer.name for informer in informers]
        if len(set(names)) != len(names):
            raise ValueError(f"informer names must be unique, got {names}")
        self.informers = tuple(informers)
        self.ready = asyncio.Event()
        """Set once every informer is ready."""

    async def run(self) -> None:
        """Run every informer until cancelled."""
        await _run_all(
            [informer.run for informer in self.informers],
            [informer.ready for informer in self.informers],
            self.ready,
        )

    async def fetch(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        """The current object of ``kind`` from the API server (None when it is gone, or when no
        informer here reads that kind)."""
        for informer in self.informers:
            if informer.resource.kind == kind:
                obj = await informer.fetch(namespace, name)
                if obj is not None:
                    return obj
        return None

    def statistics(self) -> dict[str, InformerStatistics]:
        """Each informer's statistics by its name."""
        return {informer.name: informer.statistics() for informer in self.informers}


async def _run_all(
    runs: Sequence[Callable[[], Coroutine[Any, Any, None]]],
    parts_ready: Sequence[asyncio.Event],
    ready: asyncio.Event,
) -> None:
    """Run every part until cancelled (a part that raises cancels the others); ``ready`` is set
    once every part's event is."""

    async def await_ready() -> None:
        for event in parts_ready:
            await event.wait()
        ready.set()

    async with asyncio.TaskGroup() as group:
        for run in runs:
            group.create_task(run())
        group.create_task(await_ready())
