"""A request on a route with a headers module goes upstream from the client's bytes too
(``HeaderRewrite.request_cut``, ``request_tail``; ``steps.decide_now``): the lines of the names
the module removes or sets cut out of the head as sent, its own lines and the three
``X-Forwarded-*`` added. The upstream reads from it the request line and the headers that the
usual head (``request_head`` over the same headers, rendered again) gives: byte for byte when
the client wrote one space after each colon, the same headers otherwise. A connection's kept
head (``KeptHead``) made under one change is never taken under another, or under none.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from multidict import CIMultiDict

from interlock.dataplane.http1 import request_head
from interlock.dataplane.http1_server import head_as_sent
from interlock.dataplane.plan import known_head
from interlock.dataplane.request_stream import H2Request
from interlock.edge.modules.headers import HeaderRewrite
from interlock.edge.steps import Admitted, decide
from interlock.model.module_settings import HeaderRewriteSettings
from interlock.model.moduleset import Modules
from tests.kit.http1_parsing import backend_reads, parsed_requests

from .conftest import HOST, EdgeHarness

ADDRESS = ("10.0.0.7", 8080)

NAMES = ["X-Team", "x-team", "X-TEAM", "X-Debug", "x-debug", "Accept", "User-Agent", "X-A"]
"""Names both the client and the module use (the module's in other cases too)."""

value_text = st.text(st.characters(min_codepoint=0x21, max_codepoint=0x7E), max_size=10)
"""A value as a client sends it here: ASCII (else the head goes the usual way), no blank at
either end (llhttp strips them)."""

module_value = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from(["\t", "é", "€"]),
    max_size=10,
).map(lambda value: value.strip(" \t"))

request_changes = st.fixed_dictionaries(
    {
        "add": st.dictionaries(st.sampled_from(NAMES), module_value, max_size=3),
        "remove": st.lists(st.sampled_from(NAMES), max_size=3),
    }
)

EXAMPLES = settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@st.composite
def request_heads(draw: st.DrawFn, *, spaced: bool = False) -> bytes:
    """A GET with ``Host`` and up to six other headers (names among :data:`NAMES`, repeated or
    not), spaced as a renderer writes them (one blank after the colon, none at the end) or
    (``spaced``) with zero to three blanks after the colon and up to two at the end."""
    fields = draw(st.lists(st.tuples(st.sampled_from(NAMES), value_text), max_size=6))
    before = st.integers(0, 3) if spaced else st.just(1)
    after = st.integers(0, 2) if spaced else st.just(0)
    lines = [
        f"{name}:{' ' * draw(before)}{value}{' ' * draw(after)}".encode() for name, value in fields
    ]
    lines.insert(draw(st.integers(0, len(lines))), f"Host: {HOST}".encode())
    return b"\r\n".join([b"GET /a?b=c HTTP/1.1", *lines]) + b"\r\n\r\n"


def _headers_module(changes: dict[str, object]) -> Modules:
    return Modules.model_validate({"headers": {"request": changes}})


async def _heads(harness: EdgeHarness, request: H2Request) -> tuple[bytes, bytes, Admitted]:
    """The head sent upstream, and the usual head of the same headers (a copy: no kept head)."""
    decided = await decide(harness.server.front, request, None)
    assert isinstance(decided, Admitted), decided
    sent, _ = request_head("GET", "/a?b=c", decided.headers, None, ADDRESS)
    usual, _ = request_head("GET", "/a?b=c", CIMultiDict(decided.headers), None, ADDRESS)
    return sent, usual, decided


@EXAMPLES
@given(head=request_heads(), changes=request_changes)
async def test_a_changed_head_is_the_usual_head(
    harness: EdgeHarness, head: bytes, changes: dict[str, object]
) -> None:
    await harness.serve(modules=_headers_module(changes))
    # Twice on one connection: made, then the connection's kept head.
    requests = await parsed_requests(head, head, count=2)
    for request in requests:
        assert head_as_sent(request) is not None
        sent, usual, decided = await _heads(harness, request)
        assert known_head(decided.headers, "GET", "/a?b=c") is not None  # from the bytes
        assert sent == usual


@EXAMPLES
@given(head=request_heads(spaced=True), changes=request_changes)
async def test_a_changed_head_spaced_otherwise_has_the_same_headers(
    harness: EdgeHarness, head: bytes, changes: dict[str, object]
) -> None:
    await harness.serve(modules=_headers_module(changes))
    (request,) = await parsed_requests(head)
    sent, usual, _ = await _heads(harness, request)
    assert backend_reads(sent) == backend_reads(usual)


PLAIN = (
    f"GET /a?b=c HTTP/1.1\r\nHost: {HOST}\r\nX-Debug: 1\r\nx-team: red\r\nAccept: */*\r\n\r\n"
).encode()


async def test_the_module_s_lines_are_cut_wherever_they_are(harness: EdgeHarness) -> None:
    await harness.serve(modules=_headers_module({"add": {"X-Team": "blue"}, "remove": ["X-Debug"]}))
    (request,) = await parsed_requests(PLAIN)
    sent, usual, _ = await _heads(harness, request)
    assert (
        sent
        == usual
        == (
            f"GET /a?b=c HTTP/1.1\r\nHost: {HOST}\r\nAccept: */*\r\nX-Team: blue\r\n"
            f"X-Forwarded-For: 127.0.0.1\r\nX-Forwarded-Proto: http\r\n"
            f"X-Forwarded-Host: {HOST}\r\n\r\n"
        ).encode()
    )


async def test_a_head_kept_under_one_change_is_not_taken_under_another(
    harness: EdgeHarness,
) -> None:
    """The same bytes again on one connection (its kept head found by identity), the route's
    modules swapped in between: each request's head is its own route's. A change that only
    removes adds no line of its own: its tail must still not be the plain route's lines."""
    only_remove = _headers_module({"remove": ["X-Debug"]})
    remove_and_add = _headers_module({"add": {"X-Team": "blue"}, "remove": ["X-Debug"]})
    order = [None, only_remove, None, remove_and_add, only_remove, remove_and_add, None]
    requests = await parsed_requests(*[PLAIN] * len(order), count=len(order))
    assert all(request.first_read is requests[0].first_read for request in requests)
    for modules, request in zip(order, requests, strict=True):
        await harness.serve(modules=modules)
        sent, usual, decided = await _heads(harness, request)
        assert known_head(decided.headers, "GET", "/a?b=c") is not None
        assert sent == usual
        assert (b"X-Debug: 1\r\n" in sent) == (modules is None)
        assert (b"X-Team: blue\r\n" in sent) == (modules is remove_and_add)


def test_a_change_s_tail_is_its_own_object() -> None:
    """``request_tail`` never hands back the lines it was given, nor another change's tail."""
    forwarded = b"X-Forwarded-For: 1.2.3.4\r\n\r\n"
    removes = HeaderRewrite(HeaderRewriteSettings(add=(), remove=("x-debug",)))
    other = HeaderRewrite(HeaderRewriteSettings(add=(), remove=("x-debug",)))
    tail = removes.request_tail(forwarded)
    assert tail == forwarded and tail is not forwarded
    assert removes.request_tail(bytes(bytearray(forwarded))) is tail
    assert other.request_tail(forwarded) is not tail
