"""A request body for tests that hand an ``H2Request`` to the edge's steps directly: one that
has all arrived (``RequestBody``, as the servers' bodies are read)."""

from __future__ import annotations

from collections.abc import AsyncIterator


class WholeBody:
    """A request body that has all arrived."""

    timed_out = False

    def __init__(self, body: bytes) -> None:
        self._body = body
        self.empty = not body

    async def chunks(self, *, within: float | None = None) -> AsyncIterator[bytes]:
        if self._body:
            yield self._body


EMPTY = WholeBody(b"")
