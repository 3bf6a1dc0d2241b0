"""The upstream request head from the client's bytes (``http1_server.head_as_sent``,
``plan.KnownHead``): taken only when the client's head is all of one read, begins with
the canonical request line, ends with its empty line with nothing after it, is ASCII and has
no header the edge keeps back; then the upstream reads from it the request line and the headers
the general head (``request_head`` over the same headers) gives, byte for byte when the client
wrote one space after each colon. Every other case is left to the general head: each case below
fails if its check is taken out (of ``head_as_sent``, ``Http1ServerProtocol``, ``request_head``
or ``steps``)."""

from __future__ import annotations

import dataclasses

import pytest
from multidict import CIMultiDict

from interlock.dataplane.http1 import request_head
from interlock.dataplane.http1_server import head_as_sent
from interlock.dataplane.plan import known_head
from interlock.dataplane.request_stream import H2Request
from interlock.edge.steps import Admitted, decide
from tests.kit.http1_parsing import backend_reads, parsed_requests

from .conftest import HOST, EdgeHarness

ADDRESS = ("10.0.0.7", 8080)
PLAIN = f"GET /a?b=c HTTP/1.1\r\nHost: {HOST}\r\nUser-Agent: test\r\nAccept: */*\r\n\r\n"


async def _heads(harness: EdgeHarness, request: H2Request) -> tuple[bytes, bytes, Admitted]:
    """The head sent upstream, and the general head of the same headers."""
    decided = await decide(harness.server.front, request, None)
    assert isinstance(decided, Admitted), decided
    path = decided.decision.path
    target = f"{path}?{decided.query}" if decided.query else path
    sent, _ = request_head(request.method, target, decided.headers, None, ADDRESS)
    general, _ = request_head(request.method, target, CIMultiDict(decided.headers), None, ADDRESS)
    return sent, general, decided


async def test_a_plain_request_goes_as_the_client_sent_it(harness: EdgeHarness) -> None:
    await harness.serve()
    (request,) = await parsed_requests(PLAIN.encode())
    assert head_as_sent(request) == PLAIN.encode()[:-2]
    sent, general, decided = await _heads(harness, request)
    assert type(decided.headers) is CIMultiDict
    assert known_head(decided.headers, request.method, request.path) is not None
    assert sent == general  # one space after each colon: the same bytes
    assert (
        sent
        == (
            PLAIN[:-2] + f"X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\n"
            f"X-Forwarded-Host: {HOST}\r\n\r\n"
        ).encode()
    )


async def test_other_whitespace_after_a_colon_reads_the_same(harness: EdgeHarness) -> None:
    await harness.serve()
    head = f"GET / HTTP/1.1\r\nHost:{HOST}\r\nUser-Agent: \t test\r\nAccept:  x  \r\n\r\n"
    (request,) = await parsed_requests(head.encode())
    assert head_as_sent(request) is not None
    sent, general, _ = await _heads(harness, request)
    assert backend_reads(sent) == backend_reads(general)


NOT_VERBATIM = {
    "hop-by-hop": f"GET / HTTP/1.1\r\nHost: {HOST}\r\nTE: trailers\r\n\r\n",
    "keep-alive": f"GET / HTTP/1.1\r\nHost: {HOST}\r\nKeep-Alive: timeout=5\r\n\r\n",
    "proxy-*": f"GET / HTTP/1.1\r\nHost: {HOST}\r\nProxy-Authorization: Basic eDp5\r\n\r\n",
    "connection": f"GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: keep-alive\r\n\r\n",
    "expect": f"GET / HTTP/1.1\r\nHost: {HOST}\r\nExpect: 100-continue\r\n\r\n",
    "two hosts": f"GET / HTTP/1.1\r\nHost: {HOST}\r\nHost: other.example\r\n\r\n",
    "underscore": f"GET / HTTP/1.1\r\nHost: {HOST}\r\nX_Role: admin\r\n\r\n",
    "held back": f"GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Forwarded-For: 6.6.6.6\r\n\r\n",
    "not ascii": f"GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Name: caf\xe9\r\n\r\n",
    "http/1.0": f"GET / HTTP/1.0\r\nHost: {HOST}\r\n\r\n",
    "empty lines first": f"\r\n\nGET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n",
    "two spaces after the method": f"GET  / HTTP/1.1\r\nHost: {HOST}\r\n\r\n",
    "two spaces before the version": f"GET /  HTTP/1.1\r\nHost: {HOST}\r\n\r\n",
    "an empty line after": f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n\r\n",
    "one byte after": f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\nG",
    "two empty lines after": f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n\r\n\r\n",
    "a request after": (
        f"GET / HTTP/1.1\r\nHost:{HOST}\r\nA:1\r\nB:2\r\nC:3\r\nD:4\r\nE:5\r\nF:6\r\nG:7\r\n"
        f"H:8\r\nI:9\r\nJ:0\r\n\r\nGET /admin HTTP/1.1\r\nHost: {HOST}\r\n\r\n"
    ),
}


@pytest.mark.parametrize("head", NOT_VERBATIM.values(), ids=NOT_VERBATIM.keys())
async def test_a_head_the_upstream_may_not_get_as_sent_is_made_anew(
    harness: EdgeHarness, head: str
) -> None:
    await harness.serve()
    requests = await parsed_requests(head.encode("latin-1"), count=head.count("HTTP/1."))
    for request in requests:
        assert head_as_sent(request) is None
        sent, general, decided = await _heads(harness, request)
        assert known_head(decided.headers, request.method, request.path) is None
        assert sent == general


async def test_a_head_read_in_two_parts_is_made_anew(harness: EdgeHarness) -> None:
    await harness.serve()
    data = PLAIN.encode()
    (request,) = await parsed_requests(data[:20], data[20:])
    assert head_as_sent(request) is None


async def test_a_head_begun_in_an_earlier_read_is_made_anew(harness: EdgeHarness) -> None:
    """The second read looks like a whole head where the first's line would end: it is not."""
    await harness.serve()
    line = b"GET /xxxxx HTTP/1.1\r\n"
    rest = f"X-Pad: aaa HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
    assert rest[10:21] == b" HTTP/1.1\r\n"
    (request,) = await parsed_requests(line, rest)
    assert head_as_sent(request) is None
    sent, general, _ = await _heads(harness, request)
    assert sent == general


async def test_a_head_that_ends_a_read_after_another_request_is_made_anew(
    harness: EdgeHarness,
) -> None:
    """The second request of a read: not its first bytes (even when its lines are the same)."""
    await harness.serve()
    data = PLAIN.encode()
    first, second = await parsed_requests(data + data, count=2)
    assert head_as_sent(first) is None  # bytes follow its head
    assert head_as_sent(second) is None


async def test_a_head_after_a_body_in_the_same_read_is_made_anew(harness: EdgeHarness) -> None:
    await harness.serve()
    post = f"POST / HTTP/1.1\r\nHost: {HOST}\r\nContent-Length: 4\r\n\r\n".encode()
    _first, second = await parsed_requests(post + b"ab", b"cd" + PLAIN.encode(), count=2)
    assert head_as_sent(second) is None


async def test_changed_headers_are_sent_as_they_are_now(harness: EdgeHarness) -> None:
    """A change after the head was made (a rule's filter, a host rewrite) is not lost."""
    await harness.serve()
    (request,) = await parsed_requests(PLAIN.encode())
    decided = await decide(harness.server.front, request, None)
    assert isinstance(decided, Admitted)
    decided.headers["X-Filter"] = "1"
    sent, _ = request_head("GET", "/a?b=c", decided.headers, None, ADDRESS)
    assert b"\r\nX-Filter: 1\r\n" in sent
    copied = decided.headers.copy()
    assert type(copied) is CIMultiDict


async def test_headers_decided_before_another_request_are_made_anew(
    harness: EdgeHarness,
) -> None:
    """One head is kept, the last decided: the earlier request's headers get the general head
    (the same bytes), never the later request's."""
    await harness.serve()
    other = PLAIN.replace("User-Agent: test", "User-Agent: other")
    (first,) = await parsed_requests(PLAIN.encode())
    (second,) = await parsed_requests(other.encode())
    earlier = await decide(harness.server.front, first, None)
    later = await decide(harness.server.front, second, None)
    assert isinstance(earlier, Admitted) and isinstance(later, Admitted)
    assert known_head(earlier.headers, "GET", "/a?b=c") is None
    assert known_head(later.headers, "GET", "/a?b=c") is not None
    sent, _ = request_head("GET", "/a?b=c", earlier.headers, None, ADDRESS)
    assert b"User-Agent: test\r\n" in sent and b"other" not in sent
    assert sent == request_head("GET", "/a?b=c", CIMultiDict(earlier.headers), None, ADDRESS)[0]
    copied, _ = request_head("GET", "/a?b=c", later.headers.copy(), None, ADDRESS)
    assert copied == request_head("GET", "/a?b=c", later.headers, None, ADDRESS)[0]


async def test_another_target_or_method_is_made_anew(harness: EdgeHarness) -> None:
    await harness.serve()
    (request,) = await parsed_requests(PLAIN.encode())
    decided = await decide(harness.server.front, request, None)
    assert isinstance(decided, Admitted)
    rewritten, _ = request_head("GET", "/b", decided.headers, None, ADDRESS)
    assert rewritten.startswith(b"GET /b HTTP/1.1\r\n")
    head, _ = request_head("HEAD", "/a?b=c", decided.headers, None, ADDRESS)
    assert head.startswith(b"HEAD /a?b=c HTTP/1.1\r\n")
    posted, _ = request_head("GET", "/a?b=c", decided.headers, b"x", ADDRESS)
    assert b"\r\nContent-Length: 1\r\n" in posted


async def test_cr_or_lf_in_the_edge_s_own_values_is_refused_as_before(
    harness: EdgeHarness,
) -> None:
    await harness.serve()
    (request,) = await parsed_requests(PLAIN.encode())
    forged = dataclasses.replace(request, peer="127.0.0.1\r\nX-Admin: 1")
    decided = await decide(harness.server.front, forged, None)
    assert isinstance(decided, Admitted)
    with pytest.raises(ValueError, match="CR or LF"):
        request_head("GET", "/a?b=c", decided.headers, None, ADDRESS)


async def test_a_post_without_a_length_gets_one(harness: EdgeHarness) -> None:
    await harness.serve()
    (request,) = await parsed_requests(f"POST / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
    sent, general, _ = await _heads(harness, request)
    assert b"\r\nContent-Length: 0\r\n" in sent
    assert sent == general


async def test_the_same_bytes_again_on_a_connection_give_the_same_head(
    harness: EdgeHarness,
) -> None:
    """A connection hands on its last read's object for the same bytes (and its target's text):
    the head found for it is found again, for that read and that request line only."""
    await harness.serve()
    data = PLAIN.encode()
    other = PLAIN.replace("User-Agent: test", "User-Agent: other").encode()
    first, second, third = await parsed_requests(data, data, other, count=3)
    assert second.first_read is first.first_read and second.path is first.path
    assert third.first_read is not first.first_read
    assert head_as_sent(first) == head_as_sent(second) == data[:-2]
    assert head_as_sent(third) == other[:-2]
    assert head_as_sent(second) == data[:-2]
    # The same read with another target or method is read again (and is no head as sent).
    assert head_as_sent(dataclasses.replace(second, path="/a?b=cd")) is None
    assert head_as_sent(dataclasses.replace(second, method="HEAD")) is None
    assert head_as_sent(second) == data[:-2]


async def test_the_same_head_again_gets_headers_of_its_own(harness: EdgeHarness) -> None:
    """Headers for the same read and peer again are made anew after a change (one request's
    changes never reach the next: test_kept_headers.py); another peer gets its own
    X-Forwarded-For, other bytes their headers."""
    await harness.serve()
    data = PLAIN.encode()
    other = PLAIN.replace("User-Agent: test", "User-Agent: other").encode()
    first, second, third = await parsed_requests(data, data, other, count=3)
    earlier = await decide(harness.server.front, first, None)
    assert isinstance(earlier, Admitted)
    earlier.headers["X-Filter"] = "1"
    later = await decide(harness.server.front, second, None)
    assert isinstance(later, Admitted)
    assert later.headers is not earlier.headers and "X-Filter" not in later.headers
    assert known_head(later.headers, "GET", "/a?b=c") is not None
    sent, general, _ = await _heads(harness, second)
    assert sent == general and b"X-Filter" not in sent
    moved = dataclasses.replace(second, peer="10.9.9.9")
    sent, general, decided = await _heads(harness, moved)
    assert decided.headers["X-Forwarded-For"] == "10.9.9.9"
    assert sent == general and b"X-Forwarded-For: 10.9.9.9\r\n" in sent
    # Other bytes, from the peer before (the same lines), after the same bytes again.
    for request, agent in ((second, "test"), (third, "other"), (second, "test")):
        sent, general, decided = await _heads(harness, request)
        assert decided.headers["User-Agent"] == agent
        assert sent == general and f"User-Agent: {agent}\r\n".encode() in sent


async def test_each_connection_keeps_its_own_last_head(harness: EdgeHarness) -> None:
    """Another connection's request in between takes nothing a connection keeps (connections
    interleave at any load): its same bytes again find the head it found."""
    await harness.serve()
    data = PLAIN.encode()
    mine, again = await parsed_requests(data, data, count=2)
    (theirs,) = await parsed_requests(data)
    found = head_as_sent(mine)
    assert head_as_sent(theirs) == found and head_as_sent(theirs) is not found
    assert head_as_sent(again) is found
    sent, general, _ = await _heads(harness, again)
    assert sent == general
