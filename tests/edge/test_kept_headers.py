"""The upstream headers a connection keeps of its last head sent as received
(``http1_server.KeptHead``, ``steps.decide_now``): the next request with the same head from
the same peer gets them again only while nothing changed them; a change (even one undone
since), another peer, other bytes or another connection get headers of their own, with the
head those headers make."""

from __future__ import annotations

import dataclasses

from multidict import CIMultiDict

from interlock.dataplane.http1 import request_head
from interlock.dataplane.plan import known_head
from interlock.dataplane.request_stream import H2Request
from interlock.edge.steps import Admitted, decide
from tests.kit.http1_parsing import parsed_requests

from .conftest import HOST, EdgeHarness

ADDRESS = ("10.0.0.7", 8080)
PLAIN = f"GET /a?b=c HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: test\r\nAccept: */*\r\n\r\n"


async def _admitted(harness: EdgeHarness, request: H2Request) -> Admitted:
    decided = await decide(harness.server.front, request, None)
    assert isinstance(decided, Admitted), decided
    return decided


def _sent(decided: Admitted) -> bytes:
    """The head sent upstream for ``decided``'s headers, checked against the general head."""
    sent, _ = request_head("GET", "/a?b=c", decided.headers, None, ADDRESS)
    general, _ = request_head("GET", "/a?b=c", CIMultiDict(decided.headers), None, ADDRESS)
    assert sent == general
    return sent


async def test_unchanged_headers_are_handed_to_the_same_head_again(harness: EdgeHarness) -> None:
    await harness.serve()
    data = PLAIN.encode()
    first, second, third = await parsed_requests(data, data, data, count=3)
    earlier = await _admitted(harness, first)
    later = await _admitted(harness, second)
    last = await _admitted(harness, third)
    assert later.headers is earlier.headers and last.headers is earlier.headers
    assert known_head(last.headers, "GET", "/a?b=c") is not None
    assert _sent(last).startswith(data[:-2]) and b"X-Forwarded-For: 127.0.0.1\r\n" in _sent(last)


async def test_a_change_makes_the_next_request_s_headers_anew(harness: EdgeHarness) -> None:
    """Whatever changed the last request's headers (a rule's filter, the HTTP/2 upstream's
    ``Host``), even back to what they were, is not in the next request's."""
    await harness.serve()
    data = PLAIN.encode()
    first, second, third = await parsed_requests(data, data, data, count=3)
    earlier = await _admitted(harness, first)
    earlier.headers["X-Filter"] = "1"
    later = await _admitted(harness, second)
    assert later.headers is not earlier.headers and "X-Filter" not in later.headers
    assert b"X-Filter" not in _sent(later)
    later.headers.add("X-Undone", "1")
    later.headers.popall("X-Undone")
    last = await _admitted(harness, third)
    assert last.headers is not later.headers
    assert list(last.headers.items()) == list(later.headers.items())
    assert known_head(last.headers, "GET", "/a?b=c") is not None


async def test_another_peer_bytes_or_connection_get_headers_of_their_own(
    harness: EdgeHarness,
) -> None:
    await harness.serve()
    data = PLAIN.encode()
    other = PLAIN.replace("User-Agent: test", "User-Agent: other").encode()
    first, second, third = await parsed_requests(data, data, other, count=3)
    earlier = await _admitted(harness, first)
    moved = await _admitted(harness, dataclasses.replace(second, peer="10.9.9.9"))
    assert moved.headers is not earlier.headers
    assert moved.headers["X-Forwarded-For"] == "10.9.9.9"
    assert b"X-Forwarded-For: 10.9.9.9\r\n" in _sent(moved)
    changed = await _admitted(harness, third)
    assert changed.headers["User-Agent"] == "other" and b"User-Agent: other\r\n" in _sent(changed)
    (elsewhere,) = await parsed_requests(data)
    assert (await _admitted(harness, elsewhere)).headers is not earlier.headers
