"""What the data plane's compiled build (``INTERLOCK_MYPYC=1``, ``setup.py``) leaves to the
interpreter, interpreted in both builds so that they behave alike: the bodies' iterators (mypyc
compiles no async generator; the methods that return them are plain functions) and
``UpstreamReadTimeout`` (mypyc compiles no class deriving from two built-in exception types).
``interlock.dataplane.http1`` imports the class, as before. (A compiled subclass of multidict's
``CIMultiDict`` crashed in multidict's C code: what the edge knows of a request's upstream head
is kept beside its headers instead, ``plan.KnownHead``.)
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import aiohttp

if TYPE_CHECKING:
    from interlock.dataplane.http1 import Http1Response
    from interlock.dataplane.http1_server import Http1Body
    from interlock.dataplane.proxy import ClientBody
    from interlock.dataplane.streams import ReplayableBody


class UpstreamReadTimeout(aiohttp.ClientConnectionError, TimeoutError):
    """Nothing came from the upstream for the read timeout."""


async def response_chunks(response: Http1Response) -> AsyncIterator[bytes]:
    """An upstream answer's body, as it arrives (what is buffered comes as one chunk)."""
    while True:
        chunk = response._take()
        if chunk is not None:
            connection = response._connection
            if connection is not None and connection.reading_paused:
                connection.resume()
            yield chunk
            continue
        if response._error is not None:
            raise response._error
        if response.done:
            return
        await response._more()


async def request_chunks(body: Http1Body, within: float) -> AsyncIterator[bytes]:
    """An HTTP/1.1 request's body as it arrives; ``ClientBodyTimeout`` when no byte came for
    ``within`` seconds."""
    body._read = True
    if body._expect_continue:
        body._expect_continue = False
        body._connection.write_continue()
    while True:
        chunk = body._take()
        if chunk is not None:
            body._connection.resume_reading_for_body()
            yield chunk
            continue
        if body.ended:
            return
        if body._connection.lost:
            raise ConnectionResetError("the client closed the connection")
        try:
            async with asyncio.timeout(within):
                await body._more()
        except TimeoutError:
            body.timed_out = True
            raise _body_timeout(within) from None


async def aiohttp_chunks(body: ClientBody, within: float) -> AsyncIterator[bytes]:
    """An aiohttp request's body as it arrives; ``ClientBodyTimeout`` when no byte came for
    ``within`` seconds."""
    content = body._request.content
    while True:
        try:
            async with asyncio.timeout(within):
                chunk = await content.readany()
        except TimeoutError:
            body.timed_out = True
            raise _body_timeout(within) from None
        if not chunk:
            return
        yield chunk


def _body_timeout(timeout: float) -> Exception:
    # Imported here: proxy imports this module (through http1).
    from interlock.dataplane.proxy import ClientBodyTimeout

    return ClientBodyTimeout(f"no byte of the request body for {timeout:g} s")


async def replayable_first(body: ReplayableBody) -> AsyncIterator[bytes]:
    """A replayable body's first sending: read from the client, kept up to ``RETRY_BUFFER``."""
    from interlock.dataplane.engine import RETRY_BUFFER

    body._started = True
    async for chunk in body._source.chunks():
        body._size += len(chunk)
        if body._size <= RETRY_BUFFER:
            body._parts.append(chunk)
        else:
            body._parts.clear()
        yield chunk
    body._complete = True


async def replay(parts: tuple[bytes, ...]) -> AsyncIterator[bytes]:
    """A complete body sent again."""
    for part in parts:
        yield part
