"""Request header names decoded once (``interlock.dataplane.http1_server._names``): a cached name
reaches the handler spelled as the client sent it, a body is still framed by a cached
``Transfer-Encoding`` or ``Content-Length`` whatever its case, and a client sending new names
cannot grow the cache past its bound."""

from __future__ import annotations

from interlock.dataplane import http1_server
from tests.kit.http1_parsing import served_requests


async def _serve(heads: list[bytes]) -> list[tuple[list[tuple[str, str]], bytes]]:
    """Each request's headers and body, as the handler saw them, over one connection."""
    served = await served_requests(*heads, count=len(heads), held_back=frozenset())
    return [(list(request.headers.items()), body) for request, body in served]


async def test_cached_names_keep_their_spelling_and_framing() -> None:
    heads = [
        b"POST / HTTP/1.1\r\nHost: a\r\nX-Name: 1\r\nTransfer-Encoding: chunked\r\n\r\n"
        b"2\r\nhi\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nx-NAME: 2\r\ntransfer-ENCODING: chunked\r\n\r\n"
        b"3\r\nhey\r\n0\r\n\r\n",
        b"POST / HTTP/1.1\r\nHost: a\r\nX-Name: 3\r\nCONTENT-length: 2\r\n\r\nok",
        b"POST / HTTP/1.1\r\nHost: a\r\nX-Name: 4\r\nContent-Length: 2\r\n\r\nno",
    ]
    seen = await _serve(heads)
    assert [body for _, body in seen] == [b"hi", b"hey", b"ok", b"no"]
    assert ("x-NAME", "2") in seen[1][0]
    assert ("X-Name", "1") in seen[0][0]
    assert ("transfer-ENCODING", "chunked") in seen[1][0]


async def test_new_names_do_not_grow_the_cache_past_its_bound() -> None:
    many = http1_server._NAME_CACHE_SIZE + 50
    lines = b"".join(b"X-%d: 1\r\n" % n for n in range(100))
    heads = [
        b"GET / HTTP/1.1\r\nHost: a\r\n"
        + lines.replace(b"X-", b"X-%d-" % batch)
        + b"X-"
        + b"a" * 100
        + b": long\r\n\r\n"
        for batch in range(many // 100 + 1)
    ]
    seen = await _serve(heads)
    assert len(seen) == len(heads)
    assert ("X-" + "a" * 100, "long") in seen[0][0]  # too long to keep, still decoded
    assert len(http1_server._names) <= http1_server._NAME_CACHE_SIZE
    assert all(len(raw) <= http1_server._NAME_CACHE_LENGTH for raw in http1_server._names)
