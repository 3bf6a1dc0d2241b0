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

    def take_whole(self) -> bytes | None:
        whole, self._body = self._body, b""
        return None if self.empty else whole

    async def chunks(self, *, within: float | None = None) -> AsyncIterator[bytes]:
        whole, self._body = self._body, b""
        if whole:
            yield whole


EMPTY = WholeBody(b"")
