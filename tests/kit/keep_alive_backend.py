"""A backend that keeps its connections and answers each request as a test scripts it: bytes,
nothing (the connection closed), an answer held until released, or one in two parts (the
express path's and the answer-as-received tests, ``tests/security/``)."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from dataclasses import dataclass, field

OK = b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok"


@dataclass(frozen=True)
class Slow:
    """An answer in two parts: ``first`` once :attr:`KeepAliveBackend.head` is set, ``rest``
    once :attr:`KeepAliveBackend.release` is."""

    first: bytes
    rest: bytes


@dataclass
class KeepAliveBackend:
    """Answers the n-th request it gets with ``answers[n]`` (the last one for the rest): bytes,
    or ``b""`` (the connection closed without an answer), or None (no answer until
    :attr:`release` is set), or :class:`Slow`."""

    answers: list[bytes | Slow | None]
    requests: list[bytes] = field(default_factory=list)
    connections: int = 0
    closed_by_edge: asyncio.Event = field(default_factory=asyncio.Event)
    release: asyncio.Event = field(default_factory=asyncio.Event)
    head: asyncio.Event = field(default_factory=asyncio.Event)
    address: tuple[str, int] = ("", 0)
    released: bytes = OK
    """What a held answer (None) is once :attr:`release` is set."""

    async def serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                self.requests.append(head)
                answer = self.answers[min(len(self.requests), len(self.answers)) - 1]
                if answer is None:  # until released, or until the edge closes the connection
                    eof = asyncio.ensure_future(reader.read(1))
                    released = asyncio.ensure_future(self.release.wait())
                    await asyncio.wait([eof, released], return_when=asyncio.FIRST_COMPLETED)
                    released.cancel()
                    if eof.done():
                        self.closed_by_edge.set()
                        break
                    eof.cancel()
                    answer = self.released
                elif isinstance(answer, Slow):
                    await self.head.wait()
                    writer.write(answer.first)
                    await writer.drain()
                    await self.release.wait()
                    answer = answer.rest
                if not answer:
                    break
                writer.write(answer)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            self.closed_by_edge.set()
        except asyncio.CancelledError:
            pass  # the test is over
        finally:
            writer.close()


@contextlib.asynccontextmanager
async def keep_alive_backend(
    answers: list[bytes | Slow | None], *, released: bytes = OK
) -> AsyncIterator[KeepAliveBackend]:
    backend = KeepAliveBackend(answers=answers, released=released)
    server = await asyncio.start_server(backend.serve, "127.0.0.1", 0)
    backend.address = ("127.0.0.1", server.sockets[0].getsockname()[1])
    try:
        yield backend
    finally:
        server.close()
