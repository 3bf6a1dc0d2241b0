"""Watch responses: a stream of events, bookmarks and endings, as kube-apiserver writes them.

One JSON object per line (``{"type": "ADDED", "object": {...}}``) over a chunked response;
events already queued are written in one batch, so a 10,000-object initial state goes out in a
few large writes. Periodic BOOKMARKs carry the current resourceVersion while the watch is idle;
``timeoutSeconds`` ends the stream cleanly; ``sendInitialEvents`` (watch-list) ends the initial
state with an annotated bookmark; server-side Tables (``kubectl get -w``) carry their column
definitions on the first event only. How a watch *ends* is part of the contract too: a clean
end of stream, a broken connection (:meth:`Faults.drop_watches`) or an ERROR event with a 410
Status (a too-old resourceVersion, :meth:`Faults.expire_watches`).
"""

from __future__ import annotations

import asyncio
import contextlib
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from interlock.embedded.errors import ApiError, bad_request
from interlock.embedded.objects import StoredObject, encode
from interlock.embedded.registry import ResourceType
from interlock.embedded.store import ObjectStore
from interlock.embedded.table import render_table, wants_table
from interlock.embedded.watches import Watch, WatchClosed, WatchFilter

JSON = "application/json"
_WATCH_WRITE_BATCH = 256 * 1024


def query_flag(value: str | None) -> bool:
    """Query booleans: ``true``, ``True`` (kubernetes-asyncio) and ``1`` all mean yes."""
    return value is not None and value.strip().lower() in ("true", "1", "yes")


@dataclass(frozen=True, slots=True)
class _Kind:
    """The kind being watched and the apiVersion its objects are written in."""

    rtype: ResourceType
    api_version: str


@dataclass(slots=True)
class _WatchOptions:
    """How one watch stream is written (from its query and Accept header)."""

    timeout_seconds: float | None
    bookmarks: bool
    table: bool
    include_object: str
    first_table: bool = True
    """Tables carry column definitions on the first event only."""
    deadline: float | None = None


class WatchStreams:
    """Serves watch requests for one object store."""

    def __init__(self, *, store: ObjectStore, bookmark_interval: float) -> None:
        self._store = store
        self._bookmark_interval = bookmark_interval

    async def serve(
        self,
        request: web.Request,
        *,
        rtype: ResourceType,
        api_version: str,
        where: WatchFilter,
        query: dict[str, str],
        accept: str,
    ) -> web.StreamResponse:
        """Answer a watch request with a stream of events until it ends."""
        kind = _Kind(rtype=rtype, api_version=api_version)
        timeout_text = query.get("timeoutSeconds")
        try:
            timeout = float(timeout_text) if timeout_text else None
        except ValueError:
            raise bad_request(f"timeoutSeconds: invalid value {timeout_text!r}") from None
        send_initial_events = query_flag(query.get("sendInitialEvents"))
        options = _WatchOptions(
            timeout_seconds=timeout,
            bookmarks=query_flag(query.get("allowWatchBookmarks")),
            table=wants_table(accept),
            include_object=query.get("includeObject", "Metadata"),
        )
        response = web.StreamResponse(status=200, headers={"Content-Type": JSON})
        response.enable_chunked_encoding()
        try:
            watch = self._store.open_watch(
                rtype,
                where=where,
                # A watch-list starts from the current state whatever resourceVersion it names.
                resource_version=None if send_initial_events else query.get("resourceVersion"),
            )
        except ApiError as error:
            if error.code != 410:
                raise
            # A too-old resourceVersion is an ERROR event in a 200 stream, as on a real server.
            await response.prepare(request)
            await response.write(encode({"type": "ERROR", "object": error.status()}) + b"\n")
            await response.write_eof()
            return response
        initial_events = watch.pending() if send_initial_events else None
        initial_rv = self._store.resource_version
        await response.prepare(request)
        try:
            if initial_events is not None:
                await self._stream(response, kind, watch, options, limit=initial_events)
                # The watch-list protocol: a bookmark marks the end of the initial state.
                await response.write(self._bookmark_line(kind, initial_rv, initial_end=True))
            await self._stream(response, kind, watch, options, limit=None)
        except ConnectionResetError:
            return response  # the client went away mid-write
        finally:
            self._store.close_watch(watch)
        if watch.abrupt:
            # Simulate a broken connection: no clean end of the chunked stream.
            transport = request.transport
            if transport is not None:
                transport.abort()
            return response
        with contextlib.suppress(ConnectionResetError):
            if watch.expired:
                # What a real server sends a watcher that fell too far behind its history.
                expired = ApiError(
                    410,
                    f"too old resource version: {self._store.resource_version}",
                    reason="Expired",
                )
                await response.write(encode({"type": "ERROR", "object": expired.status()}) + b"\n")
            await response.write_eof()
        return response

    async def _stream(
        self,
        response: web.StreamResponse,
        kind: _Kind,
        watch: Watch,
        options: _WatchOptions,
        *,
        limit: int | None,
    ) -> None:
        """Write events until the watch ends (or, with ``limit``, after that many events)."""
        loop = asyncio.get_running_loop()
        if options.deadline is None and options.timeout_seconds:
            options.deadline = loop.time() + options.timeout_seconds
        written = 0
        while limit is None or written < limit:
            waits = []
            if options.deadline is not None:
                waits.append(options.deadline - loop.time())
            if options.bookmarks and limit is None:
                waits.append(self._bookmark_interval)
            wait = max(0.0, min(waits)) if waits else None
            try:
                async with asyncio.timeout(wait):
                    event_type, stored = await watch.next()
            except TimeoutError:
                if options.deadline is not None and loop.time() >= options.deadline:
                    return
                if options.bookmarks and watch.pending() == 0 and not watch.closed:
                    await response.write(self._bookmark_line(kind, self._store.resource_version))
                continue
            except WatchClosed:
                return
            batch = [(event_type, stored)]
            size = 0
            while (
                watch.pending()
                and size < _WATCH_WRITE_BATCH
                and (limit is None or written + len(batch) < limit)
            ):
                item = watch.next_nowait()
                if item is None:
                    break
                batch.append(item)
                size += len(item[1].encoded(kind.api_version))
            written += len(batch)
            await response.write(b"".join(self._event_line(kind, options, *e) for e in batch))

    def _event_line(
        self, kind: _Kind, options: _WatchOptions, event_type: str, stored: StoredObject
    ) -> bytes:
        if not options.table:
            return (
                b'{"type":"'
                + event_type.encode()
                + b'","object":'
                + stored.encoded(kind.api_version)
                + b"}\n"
            )
        table = render_table(
            kind.rtype,
            [stored.copy(kind.api_version)],
            now=self._store.now(),
            include_object=options.include_object,
            with_columns=options.first_table,
            metadata={"resourceVersion": str(stored.rv)},
        )
        options.first_table = False
        return encode({"type": event_type, "object": table}) + b"\n"

    @staticmethod
    def _bookmark_line(kind: _Kind, resource_version: int, *, initial_end: bool = False) -> bytes:
        metadata: dict[str, Any] = {"resourceVersion": str(resource_version)}
        if initial_end:
            metadata["annotations"] = {"k8s.io/initial-events-end": "true"}
        bookmark = {
            "type": "BOOKMARK",
            "object": {
                "kind": kind.rtype.kind,
                "apiVersion": kind.api_version,
                "metadata": metadata,
            },
        }
        return encode(bookmark) + b"\n"
