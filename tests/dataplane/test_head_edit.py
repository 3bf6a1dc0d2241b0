"""An answer relayed from its bytes with the headers module's change made on them
(``HeadEdit``, ``Http1Responder.relay_as_received`` with an edit) writes what the usual path
writes for it: the answer parsed into an ``Http1Response``, the module chain's
``response_headers`` run on its headers, the head rendered again (``streams._send_head``).

Both paths write through the edge's HTTP/1.1 server (``Http1ServerProtocol``, its express
handler answering at once) to a recording transport, for the same upstream answer and the same
``ModuleChain``. Heads are generated with names the module removes or sets appearing once,
twice, in other cases or not at all, a ``Date`` or none (the module may remove or set it too),
the ``Content-Length`` anywhere. A head in the form a renderer writes (one space after the
colon, no blank at a value's end) comes out byte for byte the same; one spaced otherwise keeps
its spacing (as an answer relayed as received always did) and the same headers.
"""

from __future__ import annotations

import asyncio
import re

import httptools
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from interlock.dataplane import http1
from interlock.dataplane.http1 import whole_response
from interlock.dataplane.http1_server import Http1Responder, Http1ServerProtocol
from interlock.dataplane.limits import DEFAULT_LIMITS
from interlock.dataplane.proxy import HeadEdit
from interlock.dataplane.request_stream import H2Request
from interlock.dataplane.streams import _send_head
from interlock.edge.modules.chain import ModuleChain, compile_modules
from interlock.model.moduleset import Modules
from tests.kit.recording_transport import RecordingTransport

GET = b"GET / HTTP/1.1\r\nHost: a.example\r\n\r\n"

NAMES = [
    "X-A",
    "x-a",
    "X-B",
    "Server",
    "SERVER",
    "server",
    "X-Frame-Options",
    "x-frame-options",
    "Set-Cookie",
    "Cache-Control",
    "Content-Type",
    "Vary",
]
"""Names both the upstream and the module use (the module's a subset, in other cases)."""

MODULE_NAMES = [*NAMES, "Date", "date", "X-Added"]

value_text = st.text(
    st.characters(min_codepoint=0x20, max_codepoint=0x7E) | st.sampled_from(["\t", "é", "€"]),
    max_size=12,
).map(lambda value: value.strip(" \t"))
"""A header value as a renderer writes it: no blank at either end (llhttp strips them)."""


async def written(
    answer: bytes, chain: ModuleChain, *, edited: bool, edit: HeadEdit | None = None
) -> bytes:
    """What the edge's HTTP/1.1 server writes to a client's GET for ``answer``, an upstream's
    whole answer, under ``chain``: relayed from its bytes with ``edit`` (by default
    ``chain.response_edit``) made on them (``edited``), else by the usual path."""
    edit = chain.response_edit if edit is None else edit

    def express(request: H2Request, responder: Http1Responder) -> None:
        found = http1._whole(answer)
        assert found[0], answer
        if edited:
            assert responder.relay_as_received(found, answer, edit) is False
        else:
            upstream = whole_response(found, answer)
            upstream.headers_as_parsed()  # as _Express.answered does
            whole, compressor = _send_head(request, responder, upstream, chain)
            assert whole is not None and compressor is None
            responder.send_now(whole, end=True)
        responder.express_done()

    async def handler(request: H2Request, responder: object) -> None:
        raise AssertionError("answered by the express handler")

    protocol = Http1ServerProtocol(
        handler,
        scheme="http",
        limits=DEFAULT_LIMITS,
        upgrade=lambda: asyncio.Protocol(),
        express=express,
    )
    transport = RecordingTransport()
    protocol.connection_made(transport)
    protocol.data_received(GET)
    protocol._out.flush()
    protocol.connection_lost(None)
    assert not transport.closed
    return transport.written


async def both(
    answer: bytes, chain: ModuleChain, edit: HeadEdit | None = None
) -> tuple[bytes, bytes]:
    """The usual path's bytes and the edited relay's, for ``answer``: the usual path's taken
    before and after, so that a ``Date`` the edge adds is from the same second as one of them
    (the one with the relay's headers: a head spaced otherwise is never the same bytes, and
    picking ``after`` for it failed whenever the second turned between ``before`` and the
    relay)."""
    before = await written(answer, chain, edited=False)
    relayed = await written(answer, chain, edited=True, edit=edit)
    after = await written(answer, chain, edited=False)
    same = relayed == before or parsed(relayed) == parsed(before)
    return (before if same else after), relayed


def chain_of(response: dict[str, object]) -> ModuleChain:
    return compile_modules(Modules.model_validate({"headers": {"response": response}}), {})


def parsed(written: bytes) -> tuple[int, list[tuple[bytes, bytes]], bytes]:
    """Status, header lines (names lower-cased) and body of what was written."""
    headers: list[tuple[bytes, bytes]] = []
    body: list[bytes] = []

    class Calls:
        def on_header(self, name: bytes, value: bytes) -> None:
            headers.append((name.lower(), value))

        def on_body(self, data: bytes) -> None:
            body.append(data)

    parser = httptools.HttpResponseParser(Calls())
    parser.feed_data(written)
    return parser.get_status_code(), headers, b"".join(body)


@st.composite
def answers(draw: st.DrawFn, *, spaced: bool = False) -> bytes:
    """An upstream answer that may go as received: a known status, one ``Content-Length``
    anywhere among the headers, at most one ``Date``, nothing hop-by-hop; its header lines
    spaced as a renderer writes them, or (``spaced``) with blanks around the values."""
    status = draw(st.sampled_from([b"200 OK", b"201 Created", b"302 Found", b"404 Not Found"]))
    fields = draw(st.lists(st.tuples(st.sampled_from(NAMES), value_text), max_size=8))
    lines = [f"{name}: {value}".encode() for name, value in fields]
    if spaced:
        lines = [
            line.replace(b": ", b":" + b" " * draw(st.integers(0, 3)), 1)
            + b" " * draw(st.integers(0, 2))
            for line in lines
        ]
    body = draw(st.binary(max_size=24))
    lines.insert(draw(st.integers(0, len(lines))), b"Content-Length: %d" % len(body))
    if draw(st.booleans()):
        date = b"Date: Tue, 01 Dec 1998 10:00:00 GMT"
        lines.insert(draw(st.integers(0, len(lines))), date)
    return b"\r\n".join([b"HTTP/1.1 " + status, *lines]) + b"\r\n\r\n" + body


response_changes = st.fixed_dictionaries(
    {
        "add": st.dictionaries(st.sampled_from(MODULE_NAMES), value_text, max_size=4),
        "remove": st.lists(st.sampled_from(MODULE_NAMES), max_size=4),
    }
)

EXAMPLES = settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@EXAMPLES
@given(answer=answers(), changes=response_changes)
async def test_an_edited_head_is_written_as_the_usual_path_writes_it(
    answer: bytes, changes: dict[str, object]
) -> None:
    chain = chain_of(changes)
    assert chain.response_edit is not None
    usual, relayed = await both(answer, chain)
    assert relayed == usual


@EXAMPLES
@given(answer=answers(spaced=True), changes=response_changes)
async def test_an_edited_head_spaced_otherwise_has_the_same_headers(
    answer: bytes, changes: dict[str, object]
) -> None:
    chain = chain_of(changes)
    usual, relayed = await both(answer, chain)
    assert parsed(relayed) == parsed(usual)


@EXAMPLES
@given(answer=answers(), changes=response_changes)
async def test_a_compressed_route_s_answer_to_a_client_without_gzip_is_edited_as_usual(
    answer: bytes, changes: dict[str, object]
) -> None:
    """With compression, the chain has no edit; for a client that accepts no gzip (this GET)
    its ``uncompressed`` hooks have the headers module's, which writes what the usual path
    writes under the whole chain, compression on."""
    chain = compile_modules(
        Modules.model_validate(
            {"headers": {"response": changes}, "compression": {"enabled": True}}
        ),
        {},
    )
    assert chain.response_edit is None and chain.uncompressed is not None
    edit = chain.uncompressed.response_edit
    assert edit is not None
    usual, relayed = await both(answer, chain, edit)
    assert relayed == usual


async def test_the_headers_a_module_changes_are_changed_wherever_they_are() -> None:
    """The example of the module reference: ``Server`` removed (sent twice, in two cases, one
    of them the head's last line), ``X-Frame-Options`` set (the upstream's own value goes)."""
    answer = (
        b"HTTP/1.1 200 OK\r\nserver: a\r\nX-Frame-Options: SAMEORIGIN\r\nContent-Length: 2\r\n"
        b"Date: Tue, 01 Dec 1998 10:00:00 GMT\r\nSERVER: b\r\n\r\nok"
    )
    chain = chain_of({"add": {"X-Frame-Options": "DENY"}, "remove": ["Server"]})
    usual, relayed = await both(answer, chain)
    assert (
        relayed
        == usual
        == (
            b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nDate: Tue, 01 Dec 1998 10:00:00 GMT\r\n"
            b"X-Frame-Options: DENY\r\n\r\nok"
        )
    )


async def test_a_date_the_module_removes_is_the_edges_own() -> None:
    answer = b"HTTP/1.1 200 OK\r\nDate: Tue, 01 Dec 1998 10:00:00 GMT\r\nContent-Length: 0\r\n\r\n"
    usual, relayed = await both(answer, chain_of({"remove": ["date"]}))
    assert relayed == usual
    assert b"1998" not in relayed and len(re.findall(rb"\r\nDate: ", relayed)) == 1


@pytest.mark.parametrize(
    ("removed", "added"),
    [
        (["x-a"], [("X-A", "1\r\nX-Injected: 1")]),
        (["x-a"], [("X-A", "1\nX-Injected: 1")]),
        (["x-a"], [("X-A", "1\rX-Injected: 1")]),
        (["x-a"], [("X-A", "nul\x00")]),
        (["x-a\r\nx-injected"], [("X-A\r\nX-Injected", "1")]),
        (["x a"], [("X A", "1")]),
        (["x-a"], [("X-A", "\ud800")]),  # not encodable as the usual path encodes
        ([], [("X-A", "1")]),  # an added name the upstream may send too, not removed first
        (["content-length"], []),
        (["connection"], [("Connection", "close")]),
        (["transfer-encoding"], [("Transfer-Encoding", "chunked")]),
    ],
)
def test_a_change_the_usual_path_would_not_write_as_it_is_is_not_made_on_bytes(
    removed: list[str], added: list[tuple[str, str]]
) -> None:
    """What the headers module refuses when it is built (a value with a control character, a
    name that is not a token or that the proxy owns) is refused again by ``HeadEdit.of``: such
    an answer goes the usual way, which refuses CR and LF on every answer."""
    assert HeadEdit.of(removed, added) is None
    assert HeadEdit.of(["x-a"], [("X-A", "1")]) is not None


@pytest.mark.parametrize(
    "modules",
    [
        {"headers": {"response": {"add": {"X-A": "1"}}}, "compression": {"enabled": True}},
        {
            "headers": {"response": {"add": {"X-A": "1"}}},
            "circuitBreaker": {
                "errorThresholdPercentage": 50,
                "volumeThreshold": 20,
                "rollingWindow": "10s",
                "trippedDuration": "30s",
            },
        },
        {"ipRestriction": {"allow": ["10.0.0.0/8"]}},
    ],
)
def test_a_chain_that_does_more_than_change_headers_has_no_edit(
    modules: dict[str, object],
) -> None:
    assert compile_modules(Modules.model_validate(modules), {}).response_edit is None


def test_a_headers_module_with_no_response_change_has_an_empty_edit() -> None:
    chain = chain_of({})
    assert chain.response_edit is not None and not chain.inert
    head = b"HTTP/1.1 200 OK\r\nContent-Length: 0"
    assert chain.response_edit.edited(head) == head


def test_an_edit_kept_is_given_again_only_for_the_same_head() -> None:
    """The edit of the last head is kept (a backend sends the same head again and again), and
    given for an equal head only: never for another head, whichever came last."""
    edit = HeadEdit.of(["server", "x-b"], [("X-B", "2")])
    assert edit is not None
    one = b"HTTP/1.1 200 OK\r\nServer: a\r\nContent-Length: 0"
    two = b"HTTP/1.1 200 OK\r\nX-A: 1\r\nserver: b\r\nContent-Length: 0"
    for _ in range(2):
        for head in (one, bytes(bytearray(one))):  # the same head, and an equal one
            assert edit.edited(head) == b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\nX-B: 2"
        assert edit.edited(two) == b"HTTP/1.1 200 OK\r\nX-A: 1\r\nContent-Length: 0\r\nX-B: 2"
        assert edit.edited(b"") == b"\r\nX-B: 2"
