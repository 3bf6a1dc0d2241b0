"""The headers a connection hands a request whose headers are all as the last one's
(``Http1ServerProtocol._template``): the same object again for a request answered at once,
while nothing changed it; made anew after any change (one request's changes never reach the
next), and a copy for a request that waits its turn behind one in flight (which may still
change them)."""

from __future__ import annotations

import asyncio

from multidict import CIMultiDict

from interlock.dataplane.http1_server import Http1ServerProtocol
from interlock.dataplane.limits import DEFAULT_LIMITS
from interlock.dataplane.request_stream import H2Request, Responder
from tests.kit.recording_transport import RecordingTransport

HEAD = b"GET /a HTTP/1.1\r\nHost: a\r\nX-A: 1\r\nX-B: 2\r\n\r\n"
HEADERS = [("Host", "a"), ("X-A", "1"), ("X-B", "2")]


class _Connection:
    """One connection of the server; its handler keeps each request and answers it 204, after
    ``hold`` when set, changing the headers ``change`` names (the next request's only)."""

    def __init__(self) -> None:
        self.requests: list[H2Request] = []
        self.answered = asyncio.Event()
        self.hold: asyncio.Event | None = None
        self.change: list[str] = []
        self.protocol = Http1ServerProtocol(
            self._handle,
            scheme="http",
            limits=DEFAULT_LIMITS,
            upgrade=asyncio.Protocol,
            held_back=frozenset(),
        )
        self.protocol.connection_made(RecordingTransport())

    async def _handle(self, request: H2Request, responder: Responder) -> None:
        self.requests.append(request)
        if self.hold is not None:
            await self.hold.wait()
        for name in self.change:
            request.headers[name] = "changed"
        self.change = []
        responder.send_headers(204, [], end=True)
        self.answered.set()

    async def warm(self) -> None:
        """One request, whose headers the connection then knows (its first has no template:
        nothing is known to be the same yet); dropped from :attr:`requests`."""
        await self.send(HEAD, answered=1)
        self.requests.clear()

    async def send(self, data: bytes, *, answered: int) -> None:
        """``data`` read, then wait until ``answered`` requests were answered."""
        self.protocol.data_received(data)
        while len(self.requests) < answered or not self.answered.is_set():
            self.answered.clear()
            await asyncio.wait_for(self.answered.wait(), 30)
        for _ in range(3):  # the connection's task takes the answer's end
            await asyncio.sleep(0)

    def close(self) -> None:
        self.protocol.connection_lost(None)


async def test_unchanged_headers_are_handed_to_the_next_request_itself() -> None:
    connection = _Connection()
    await connection.warm()
    await connection.send(HEAD, answered=1)
    await connection.send(HEAD, answered=2)
    await connection.send(HEAD, answered=3)
    connection.close()
    first, second, third = connection.requests
    assert second.headers is first.headers and third.headers is first.headers
    assert list(third.headers.items()) == HEADERS


async def test_a_request_s_change_is_not_in_the_next_request_s_headers() -> None:
    connection = _Connection()
    await connection.warm()
    connection.change = ["X-A"]
    await connection.send(HEAD, answered=1)
    await connection.send(HEAD, answered=2)
    first, second = connection.requests
    assert first.headers["X-A"] == "changed"
    assert second.headers is not first.headers
    assert list(second.headers.items()) == HEADERS
    # A change undone (the same items, another version) is a change too.
    second.headers.add("X-C", "3")
    second.headers.popall("X-C")
    await connection.send(HEAD, answered=3)
    connection.close()
    third = connection.requests[2]
    assert third.headers is not second.headers
    assert list(third.headers.items()) == HEADERS


async def test_a_request_waiting_behind_one_in_flight_gets_a_copy() -> None:
    """Pipelined: the second request is parsed while the first, which has the template, is
    still in flight; what the first changes later is not in the second's."""
    connection = _Connection()
    await connection.warm()
    await connection.send(HEAD, answered=1)  # the template is made (the first answered)
    connection.hold = asyncio.Event()
    connection.change = ["X-B"]
    connection.protocol.data_received(HEAD + HEAD)
    for _ in range(5):
        await asyncio.sleep(0)
    held = connection.requests[1]
    assert held.headers is connection.requests[0].headers  # handed at once
    connection.hold.set()
    connection.hold = None
    await connection.send(b"", answered=3)
    connection.close()
    waited = connection.requests[2]
    assert held.headers["X-B"] == "changed"
    assert waited.headers is not held.headers
    assert isinstance(waited.headers, CIMultiDict)
    assert list(waited.headers.items()) == HEADERS
