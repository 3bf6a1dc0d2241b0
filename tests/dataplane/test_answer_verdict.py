"""What ``http1._as_received`` says of an answer's bytes, with no verdict remembered (every head
new, as from a backend whose every head differs) and with the verdicts remembered (each head
asked about twice): the same, head by head.

An answer goes to the client with its head as received only when its status line is one the
edge would write, it has one ``Content-Length`` whose whole value is digits and that ends the
answer with its read, and it has no hop-by-hop header but ``Connection: keep-alive`` and
``Keep-Alive``, whose lines are cut out (``tests/security/test_answer_as_received.py`` checks the
same through the edge). Names are found at the start of a line only, in any case.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

import pytest

from interlock.dataplane import http1

Asked = Callable[[bytes], tuple[int, str, bytes, bool, bytes] | None]


@pytest.fixture(params=["every head new", "verdicts remembered"])
def verdict(request: pytest.FixtureRequest) -> Iterator[Asked]:
    # The remembered verdicts emptied (the dictionary itself: it is ``Final``, and the compiled
    # build reads it without looking it up in the module), before each question when every
    # head is to be new.
    new = request.param == "every head new"
    http1._forget_verdicts()

    def asked(data: bytes) -> tuple[int, str, bytes, bool, bytes] | None:
        first = http1._as_received(data)
        if new:
            http1._forget_verdicts()
        assert http1._as_received(data) == first  # asked again: the same (remembered or not)
        if new:
            http1._forget_verdicts()
        return first

    yield asked
    http1._forget_verdicts()


def answer(*lines: bytes, body: bytes = b"ok") -> bytes:
    return b"\r\n".join(lines) + b"\r\n\r\n" + body


@pytest.mark.parametrize(
    ("lines", "status", "dated"),
    [
        ((b"HTTP/1.1 200 OK", b"Content-Length: 2"), (200, "OK"), False),
        ((b"HTTP/1.1 200 OK", b"Date: x", b"Content-Length: 2"), (200, "OK"), True),
        ((b"HTTP/1.1 200 OK", b"Content-Length: 2", b"date: x"), (200, "OK"), True),
        ((b"HTTP/1.1 404 Not Found", b"CONTENT-LENGTH:\t2 ", b"X-A: 1"), (404, "Not Found"), False),
        ((b"HTTP/1.1 200 OK", b"content-length:2"), (200, "OK"), False),
        ((b"HTTP/1.1 200 OK", b"Content-Length: 002"), (200, "OK"), False),
        # Names that begin like the ones looked for, and names within values, are other names.
        (
            (
                b"HTTP/1.1 200 OK",
                b"Connection-Id: 1",
                b"TEX: 1",
                b"Dates: 1",
                b"Proxy: 1",
                b"X-A: connection: close",
                b"X-B: x\tTransfer-Encoding: chunked",
                b"Content-Length: 2",
            ),
            (200, "OK"),
            False,
        ),
    ],
)
def test_a_head_that_may_go_as_received(
    verdict: Asked, lines: tuple[bytes, ...], status: tuple[int, str], dated: bool
) -> None:
    data = answer(*lines)
    head = data.partition(b"\r\n\r\n")[0]
    assert verdict(data) == (*status, head, dated, b"ok")


@pytest.mark.parametrize(
    ("lines", "dated"),
    [
        ((b"HTTP/1.1 200 OK", b"Connection: keep-alive", b"Content-Length: 2"), False),
        ((b"HTTP/1.1 200 OK", b"Content-Length: 2", b"connection: keep-alive"), False),
        (
            (
                b"HTTP/1.1 200 OK",
                b"Server: nginx",
                b"Date: x",
                b"Content-Type: text/plain",
                b"Content-Length: 2",
                b"Connection: keep-alive",
            ),
            True,
        ),
        (
            (
                b"HTTP/1.1 200 OK",
                b"Content-Type: text/plain",
                b"Date: x",
                b"Connection: keep-alive",
                b"Keep-Alive: timeout=5",
                b"Content-Length: 2",
            ),
            True,
        ),
        ((b"HTTP/1.1 200 OK", b"Content-Length: 2", b"KEEP-ALIVE: 5"), False),
        (
            (
                b"HTTP/1.1 200 OK",
                b"CONNECTION:Keep-Alive\t",
                b"Date: x",
                b"Connection:  keep-alive ",
                b"Content-Length: 2",
                b"Connection-Id: 1",
            ),
            True,
        ),
    ],
)
def test_a_head_saying_keep_alive_goes_as_received_without_those_lines(
    verdict: Asked, lines: tuple[bytes, ...], dated: bool
) -> None:
    # What the usual path drops (hop-by-hop) is cut out; every other line stays as it came.
    cut = (b"connection:", b"keep-alive:")
    kept = [line for line in lines if not line.lower().startswith(cut)]
    assert verdict(answer(*lines)) == (200, "OK", b"\r\n".join(kept), dated, b"ok")


@pytest.mark.parametrize(
    "lines",
    [
        # Hop-by-hop names, in any case, wherever they stand.
        (b"HTTP/1.1 200 OK", b"Connection: close", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"Content-Length: 2", b"connection: keep-alive, close"),
        (b"HTTP/1.1 200 OK", b"Connection: close, keep-alive", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"Connection: keep-alive, X-A", b"X-A: 1", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"Connection: keep-alive", b"Connection: close", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"Connection: close", b"Keep-Alive: 5", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"Keep-Alive: 5"),
        (b"HTTP/1.1 200 OK", b"Connection: keepalive", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"Connection:", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"Connection: keep-alive"),
        (b"HTTP/1.1 200 OK", b"Date: x", b"Content-Length: 2", b"KEEP-ALIVE: 5", b"Connection: x"),
        (b"HTTP/1.1 200 OK", b"Content-Length: 2", b"Te: trailers"),
        (b"HTTP/1.1 200 OK", b"Trailer: X-Sum", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"Content-Length: 2", b"Transfer-Encoding: chunked"),
        (b"HTTP/1.1 200 OK", b"Upgrade: h2c", b"Content-Length: 2", b"Date: x"),
        (b"HTTP/1.1 200 OK", b"Content-Length: 2", b"Proxy-Authenticate: Basic"),
        (b"HTTP/1.1 200 OK", b"pRoXy-anything: 1", b"Content-Length: 2"),
        # Status lines the edge would not write, or whose answers it frames itself.
        (b"HTTP/1.1 200 Fine", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OKAY", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK ", b"Content-Length: 2"),
        (b"HTTP/1.0 200 OK", b"Content-Length: 2"),
        (b"http/1.1 200 OK", b"Content-Length: 2"),
        (b"HTTP/1.1 299 Odd", b"Content-Length: 2"),
        (b"HTTP/1.1 204 No Content", b"Content-Length: 2"),
        (b"HTTP/1.1 304 Not Modified", b"Content-Length: 2"),
        (b"HTTP/1.1 101 Switching Protocols", b"Content-Length: 2"),
        (b"HTTP/1.1 103 Early Hints", b"Content-Length: 2"),
        # No length, or one that is not all digits, or two; two Dates.
        (b"HTTP/1.1 200 OK", b"Date: x"),
        (b"HTTP/1.1 200 OK", b"X-Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"X-A: content-length: 2"),
        (b"HTTP/1.1 200 OK", b"Content-Length: 2x"),
        (b"HTTP/1.1 200 OK", b"Content-Length: 0x2"),
        (b"HTTP/1.1 200 OK", b"Content-Length: 1 1"),
        (b"HTTP/1.1 200 OK", b"Content-Length: 2", b"Content-Length: 2"),
        (b"HTTP/1.1 200 OK", b"Content-Length: 2", b"Date: x", b"Date: y"),
        (b"HTTP/1.1 200 OK",),
    ],
)
def test_a_head_that_may_not_go_as_received(verdict: Asked, lines: tuple[bytes, ...]) -> None:
    assert verdict(answer(*lines)) is None


def test_only_an_answer_its_length_ends_with_its_read_goes_as_received(verdict: Asked) -> None:
    head = (b"HTTP/1.1 200 OK", b"Content-Length: 2")
    assert verdict(answer(*head, body=b"o")) is None
    assert verdict(answer(*head, body=b"ok!")) is None
    assert verdict(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n") is None
    assert verdict(answer(*head)) is not None


def test_an_answer_with_the_head_looked_at_last_is_judged_by_its_own_bytes() -> None:
    # The last head (with its blank line) is recognised at the start of the next answer without
    # a search: that answer's body still decides, and a head that only begins alike is its own.
    http1._forget_verdicts()
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 2"
    try:
        assert http1._as_received(head + b"\r\n\r\nok") == (200, "OK", head, False, b"ok")
        assert http1._as_received(head + b"\r\n\r\no") is None  # the body still coming
        assert http1._as_received(head + b"\r\n\r\nokHTTP/1.1 200 OK") is None  # more after it
        assert http1._as_received(head + b"\r\nConnection: close\r\n\r\nok") is None
        assert http1._as_received(head + b"\r\n\r\nno") == (200, "OK", head, False, b"no")
    finally:
        http1._forget_verdicts()
