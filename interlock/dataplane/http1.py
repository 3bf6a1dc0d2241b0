"""The data plane's HTTP/1.1 client: keep-alive upstream connections, pooled per address.

Every proxied request ends in one upstream exchange, and aiohttp's client made that exchange
the largest part of the edge's time per request (about a quarter of its Python time: request
and response objects, a URL, a timer context, a payload writer, a stream reader and their
callbacks, for a request whose head and headers the proxy already has in hand). This client
does only what a reverse proxy needs: write the head it is given in one ``write``, parse the
answer with ``httptools`` (llhttp, the parser in C that Node.js and uvicorn use), and stream both
bodies with back-pressure. The duties stay those of ``interlock.dataplane.proxy``: the caller
removes hop-by-hop headers; this module frames the body (``Content-Length`` as given or
``chunked``).

Bounds, as aiohttp's connector had them: connections per upstream address (in use, pooled or
being opened) and in all; a request that finds its address at the limit waits for a connection
within the connect timeout (then ``TimeoutError``: 504). Between two reads from the upstream no
more than the read timeout may pass (``UpstreamReadTimeout``). A pooled connection that the
upstream closed while it idled is retried once on a new connection when nothing of the answer
arrived and the body can be sent again; idle connections are closed after
:data:`KEEPALIVE_SECONDS`.

Errors are ``aiohttp.ClientError`` subclasses, so the engine and the relay treat them as they
treated aiohttp's: :class:`UpstreamConnectError` (nothing sent; the engine tries the next
address), :class:`UpstreamProtocolError` (the exchange broke: 502, or a cut connection once the
client has its status line).
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import ssl as ssl_module
from collections import deque
from collections.abc import AsyncIterator, Callable
from http import HTTPStatus
from typing import Any, Final, cast

import aiohttp
import httptools
from multidict import CIMultiDict, CIMultiDictProxy, istr

from interlock.dataplane.header_names import CONTENT_LENGTH, HOST, TRANSFER_ENCODING
from interlock.dataplane.interpreted import UpstreamReadTimeout, response_chunks
from interlock.dataplane.plan import known_head
from interlock.dataplane.source import Address
from interlock.dataplane.turn_writes import HeldWrites

KEEPALIVE_SECONDS: Final = 15.0
"""How long an idle pooled connection stays open (aiohttp's default too)."""

HIGH_WATER: Final = 256 * 1024
"""Unread response body buffered before the upstream is asked to wait (pause reading)."""

MAX_RESPONSE_HEAD: Final = 64 * 1024
"""Most bytes read of an answer before its headers are complete: a larger head is a
502 (nginx's "upstream sent too big header"; Envoy's limit is 60 KiB), not relayed — a backend
must not make the edge hold, and its clients receive, headers without bound."""

_FIELD: Final = ": "
"""Between a header's name and value (``_FIELD.join((name, value))`` is the header line)."""

# Requests without a body that go without ``Content-Length: 0`` (aiohttp's list too).
_BODYLESS_METHODS: Final = frozenset({"GET", "HEAD", "OPTIONS", "TRACE"})

_NAME_CACHE_SIZE: Final = 256
"""Most answer header names kept decoded (``_names``); ``_NAME_CACHE_LENGTH`` the longest."""
_NAME_CACHE_LENGTH: Final = 64

_names: Final[dict[bytes, str]] = {}
"""An answer header name's bytes -> its text: a backend sends the same names on every answer.
Keyed by the exact bytes, so a name decodes as it did; bounded in count and length, so a backend
sending new names fills it once and then pays the decode as before. The text is an ``istr``
(equal, hashed and written as the ``str``): the answer's ``CIMultiDict`` and its copies take its
folded form instead of folding the name again."""


def _name(raw: bytes) -> str:
    name = istr(raw.decode("utf-8", "surrogateescape"))
    if len(_names) < _NAME_CACHE_SIZE and len(raw) <= _NAME_CACHE_LENGTH:
        _names[raw] = name
    return name


STATUS_LINES: Final = {
    status.value: f"HTTP/1.1 {status.value} {status.phrase}" for status in HTTPStatus
}
"""Each known status's line, made once: what the edge's HTTP/1.1 server writes
(``Http1Responder._render``), and what an answer relayed as received begins with."""

_AS_RECEIVED: Final = {
    line[:12].encode(): ((line + "\r\n").encode(), len(line) + 2, status, line[13:])
    for status, line in STATUS_LINES.items()
    if status >= 200 and status not in (204, 304)
}
"""The status lines of an answer whose head may be relayed as received (:attr:`Http1Response.raw`),
by their first 12 bytes (``HTTP/1.1 200``): the line with its CRLF, its length, its status and
reason. HTTP/1.1, a known status written as the server writes it, with a body (not 1xx, 101, 204
or 304, which the server handles itself). A slice, a look-up and a compare: finding the line's end
first (``find``) cost ~1,250 instructions more."""

_FIELDS: Final = re.compile(
    rb"\r\n(content-length:[^\r]*|date:|connection:[^\r]*"
    rb"|keep-alive:|te:|trailer:|transfer-encoding:|upgrade:|proxy-)"
)
"""In a lowered head, the header lines that decide its verdict, in one ``findall``: a
``Content-Length`` or a ``Connection`` with its value (to its line's end), a ``Date``, and the
start of any other hop-by-hop line (``Keep-Alive`` among them) —
``interlock.dataplane.proxy.HOP_BY_HOP``'s names and any ``Proxy-*`` (a name ends at its colon:
llhttp refuses whitespace before it). Each line is looked at from its CRLF, so a name inside a
value is not one."""

_DATE: Final = b"date:"
_CONTENT_LENGTH: Final = b"content-length:"
_CONNECTION: Final = b"connection:"
_KEEP_ALIVE_NAME: Final = b"keep-alive:"
_KEEP_ALIVE: Final = b"keep-alive"
_BLANKS: Final = b" \t"
_CUT_LINES: Final = re.compile(rb"\r\n(?:connection|keep-alive):[^\r]*")
"""In a lowered head, each ``Connection`` and ``Keep-Alive`` line, from the CRLF before it to
its end (:func:`_relayed`)."""


Whole = tuple[int, str, bytes, bool, int]
"""What :func:`_whole` found in an answer's bytes: its status (0: it may not go as received),
reason, head to relay (the status line and header lines, the last without its CRLF; its
``Connection: keep-alive`` and ``Keep-Alive`` lines cut out, :func:`_relayed`: then shorter than
the bytes before the blank line), whether it has a ``Date``, and where its body starts in those
bytes (after the blank line)."""


def _as_received(data: bytes) -> tuple[int, str, bytes, bool, bytes] | None:
    """Whether the answer that ``data`` holds may go to the client with its head as received:
    its status, reason, head (the status line and header lines, the last without its CRLF:
    what comes before the blank line; without its ``Connection: keep-alive`` and ``Keep-Alive``
    lines, if any: :func:`_relayed`), whether it has a ``Date``, and its body; None when it
    must be rendered again. :func:`_whole`'s answer, with the body cut out (what the
    connection uses is :func:`_whole`: no body copied, no tuple made)."""
    status, reason, head, dated, body_at = _whole(data)
    return (status, reason, head, dated, data[body_at:]) if status else None


def _whole(data: bytes) -> Whole:
    """:func:`_as_received`'s answer, as a :data:`Whole` (status 0 when it must be rendered
    again: not the whole answer and nothing more, a head over :data:`MAX_RESPONSE_HEAD`, or one
    :func:`_verdict` refuses). What llhttp checks (one ``Content-Length`` of digits, no
    ``Transfer-Encoding`` with it, CR and LF only as line ends, no folded lines) it still
    checks: the answer is relayed only once parsed whole, or once an answer of these very head
    bytes and a body of this length was (:attr:`_Last.parsed`: llhttp would say the same of it
    again)."""
    last = _last
    if data.startswith(last.whole):
        # The head looked at last, and its blank line (most answers: a backend sends the same
        # head until its Date changes): where a partition would find the blank line too, as the
        # last head came from one, so no search, and the head kept, not a copy of it.
        relayed, verdict = last.relayed, last.verdict
        body_at = len(last.whole)
    else:
        # One partition, not a find and two slices (~1,500 instructions fewer).
        head, blank, _ = data.partition(_BLANK_LINE)
        if not blank or len(head) + 4 > MAX_RESPONSE_HEAD:
            return _NOT_WHOLE
        if len(head) > _VERDICT_LONGEST:
            verdict = _verdict(head)
            relayed = _relayed(head) if verdict[3] >= 0 else head
        else:
            found = _verdicts.get(head)
            if found is None:
                verdict = _verdict(head)
                if len(_verdicts) >= _VERDICTS_MOST:
                    _verdicts.clear()
                    _cut.clear()
                _verdicts[head] = verdict
                relayed = head
                if verdict[3] >= 0:
                    relayed = _relayed(head)
                    if relayed is not head:
                        _cut[head] = relayed
            else:
                verdict = found
                # Most backends' heads have no line to cut: no second look-up for them.
                relayed = _cut.get(head, head) if _cut else head
            last.head, last.whole, last.verdict = head, head + _BLANK_LINE, verdict
            last.relayed = relayed
            last.parsed = False
        body_at = len(head) + 4
    status, reason, dated, length = verdict
    if length != len(data) - body_at:
        return _NOT_WHOLE  # refused (-1), the body still coming, or more after it
    return status, reason, relayed, dated, body_at


_NOT_WHOLE: Final = (0, "", b"", False, 0)
_BLANK_LINE: Final = b"\r\n\r\n"
_REFUSED: Final = (0, "", False, -1)

_cut: Final[dict[bytes, bytes]] = {}
"""A head of :data:`_verdicts` that may go as received once its ``Connection: keep-alive``
and ``Keep-Alive`` lines are cut out -> that head (:func:`_relayed`): only such heads, emptied with
:data:`_verdicts`."""

_verdicts: Final[dict[bytes, tuple[int, str, bool, int]]] = {}
"""A head's bytes -> :func:`_verdict`'s: a backend sends the same head again and again (within a
second, its ``Date`` too), and a plain request whose head is looked at costs ~12,500
instructions more than one whose head is found here (its hash and a look-up). Keyed by the
exact bytes, so a head gets the verdict it would get; at most :data:`_VERDICTS_MOST` heads of
at most :data:`_VERDICT_LONGEST` bytes (emptied when full: new ``Date`` values keep coming)."""
_VERDICTS_MOST: Final = 256
_VERDICT_LONGEST: Final = 1024


class _Last:
    """The last head given a verdict, with its blank line, and its verdict (:data:`_last`)."""

    __slots__ = ("head", "parsed", "relayed", "verdict", "whole")

    def __init__(self) -> None:
        self.head = b""
        self.whole = _BLANK_LINE  # head + _BLANK_LINE
        self.verdict = _REFUSED  # what _verdict(b"") says
        self.relayed = b""
        """The head to relay: :attr:`head` itself, or it without its ``Connection:
        keep-alive`` and ``Keep-Alive`` lines (:func:`_relayed`)."""
        self.parsed = False
        """llhttp parsed an answer of this head whole, from the start of a message, its
        message ending where the answer's bytes did (``UpstreamConnection.data_received``): an
        answer of the same head bytes and a body of the same length is taken without it."""


_last: Final = _Last()
"""The head :func:`_whole` looked at last and its verdict, looked at before
:data:`_verdicts`: the next answer of a backend mostly has the same head (until its ``Date``
changes). An answer that begins with that head and its blank line (``startswith``: compared
byte for byte, so a head gets the verdict it would get) is neither searched for its blank line
(``partition``) nor hashed for a look-up, and its head is not copied (~1,100 instructions a
plain request, compiled). Only heads :data:`_verdicts` would keep."""


def _forget_verdicts() -> None:
    """Empty :data:`_verdicts` and :data:`_last` (what a test looking at verdicts given anew
    does)."""
    _verdicts.clear()
    _cut.clear()
    _last.head, _last.whole, _last.verdict, _last.relayed = b"", _BLANK_LINE, _REFUSED, b""
    _last.parsed = False


def _verdict(head: bytes) -> tuple[int, str, bool, int]:
    """An answer head's status, reason, whether it has a ``Date``, and its ``Content-Length``,
    when it may be relayed as received; else :data:`_REFUSED` (a status line of another
    version, status or spelling; no ``Content-Length`` that ``int()`` reads, or more than one;
    a hop-by-hop header but ``Connection: keep-alive`` and ``Keep-Alive``; more than one
    ``Date``).

    ``Connection: keep-alive`` is what nginx and many other backends send with every HTTP/1.1
    answer (Node.js's http server a ``Keep-Alive: timeout=5`` line too): lines the usual path
    drops (``proxy.without_hop_by_hop``), and which change nothing of how llhttp frames the
    answer or whether the connection is kept (an HTTP/1.1 answer is kept alive without them).
    Such a head is relayed with those lines cut out (:func:`_relayed`). A ``Connection`` with
    any other token (``close``, or a header's name to drop too) still sends the answer the
    usual way."""
    known = _AS_RECEIVED.get(head[:12])
    if known is None or head[: known[1]] != known[0]:
        return _REFUSED
    found = _FIELDS.findall(head.lower())
    fields = []
    for field in found:
        if field[:11] == _CONNECTION:
            if field[11:].strip(_BLANKS) != _KEEP_ALIVE:
                return _REFUSED  # each Connection line must say keep-alive alone
        elif field != _KEEP_ALIVE_NAME:
            fields.append(field)
    found = fields
    if len(found) == 2:  # the usual head: its length and its Date, in either order
        length, date = found
        if length == _DATE:
            length, date = date, length
        if date != _DATE:
            return _REFUSED
        dated = True
    elif len(found) == 1:
        length, dated = found[0], False
    else:
        return _REFUSED
    if length[:15] != _CONTENT_LENGTH:
        # A hop-by-hop name, a Date alone, or no length (int() below would refuse what follows
        # such a name too: said here, not left to it).
        return _REFUSED
    try:
        # What llhttp takes for a length (digits, blanks around) int() takes for the same.
        return known[2], known[3], dated, int(length[15:])
    except ValueError:
        return _REFUSED  # llhttp refuses it


def _relayed(head: bytes) -> bytes:
    """``head`` without its ``Connection`` and ``Keep-Alive`` lines (the CRLF before each and
    the line: the last line has no CRLF after it), or ``head`` itself when it has none. Only
    for a head :func:`_verdict` let go as received: each ``Connection`` line says keep-alive.
    The lines are found in the lowered head (ASCII letters only: each byte where it was) and
    cut out of the head itself, so what stays is as received."""
    parts = []
    start = 0
    for line in _CUT_LINES.finditer(head.lower()):
        at, end = line.span()
        parts.append(head[start:at])
        start = end
    if not start:
        return head
    parts.append(head[start:])
    return b"".join(parts)


def _text(raw: bytes) -> str:
    """``raw.decode("utf-8", "surrogateescape")``: strict UTF-8 first, the compiled build's
    direct call (with an error handler named, the codec and the handler are looked up by name
    on every call); the same text whenever it succeeds, else decoded as before."""
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError:
        return raw.decode("utf-8", "surrogateescape")


class _HeaderList:
    """Collects an answer's headers from its head as :meth:`UpstreamConnection.on_header`
    does (:meth:`Http1Response.headers_as_parsed`)."""

    __slots__ = ("headers",)

    def __init__(self) -> None:
        self.headers: list[tuple[str, str]] = []

    def on_header(self, name: bytes, value: bytes) -> None:
        self.headers.append((_names.get(name) or _name(name), _text(value)))


_NO_HEADERS: Final[CIMultiDictProxy[str]] = CIMultiDictProxy(CIMultiDict())
"""The headers of an answer relayed as received until :meth:`Http1Response.headers_as_parsed`
(read-only, shared: not a proxy made per answer)."""


class UpstreamConnectError(aiohttp.ClientConnectionError):
    """A connection to the upstream could not be opened; nothing was sent."""

    def __init__(self, address: Address, os_error: OSError) -> None:
        super().__init__(f"cannot connect to {address[0]}:{address[1]}: {os_error}")
        self.address = address
        self.os_error = os_error


class UpstreamProtocolError(aiohttp.ClientConnectionError):
    """The upstream broke the exchange: closed or reset the connection, or did not speak
    HTTP/1.1."""


class _HeadTooLarge(Exception):
    """The headers of an answer passed :data:`MAX_RESPONSE_HEAD` (raised in a parser
    callback)."""


class StaleConnection(Exception):
    """A reused connection failed before any byte of the answer: the upstream closed it (the
    request may be sent again on another)."""


class BufferedBody:
    """Body bytes buffered as they arrive and taken by one reader that waits for more: what an
    upstream's answer (:class:`Http1Response`) and a client's request body at the edge
    (``interlock.dataplane.http1_server``) share."""

    __slots__ = ("_parts", "_size", "_waiter")

    def __init__(self) -> None:
        # A list, not a deque: taken whole (:meth:`_take`), never from one end, and a list's
        # operations are the compiled build's own (a deque's are Python method calls), its
        # making a small allocation (a deque's is a block of 64 slots): one per upstream answer.
        self._parts: list[bytes] = []
        self._size = 0
        self._waiter: asyncio.Future[None] | None = None

    def _buffer(self, data: bytes) -> int:
        """Buffer ``data`` (waking the reader); the bytes now buffered."""
        self._parts.append(data)
        self._size += len(data)
        self._wake()
        return self._size

    def _take(self) -> bytes | None:
        """Everything buffered, as one chunk (None when nothing is)."""
        parts = self._parts
        if not parts:
            return None
        chunk = parts[0] if len(parts) == 1 else b"".join(parts)
        parts.clear()
        self._size = 0
        return chunk

    async def _more(self) -> None:
        """Until something is buffered or the body ends (:meth:`_wake`)."""
        self._waiter = asyncio.get_running_loop().create_future()
        try:
            await self._waiter
        finally:
            self._waiter = None

    def _wake(self) -> None:
        waiter = self._waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)


class Http1Response(BufferedBody):
    """The upstream's answer: status and headers read, the body streaming (:meth:`chunks`).

    Used as ``async with``, or :meth:`release`: a body read to its end leaves the connection
    pooled, one not read to its end closes it.
    """

    __slots__ = (
        "_connection",
        "_error",
        "dated",
        "done",
        "headers",
        "raw",
        "reason",
        "status",
    )

    dated: bool
    """:attr:`raw` has a ``Date`` header (set with it only)."""

    def __init__(
        self,
        connection: UpstreamConnection | None,
        status: int,
        reason: str,
        headers: CIMultiDictProxy[str],
    ) -> None:
        # BufferedBody.__init__, inlined: one answer per proxied request.
        self._parts: list[bytes] = []
        self._size = 0
        self._waiter: asyncio.Future[None] | None = None
        self._connection: UpstreamConnection | None = connection
        self.status = status
        self.reason = reason
        self.headers = headers
        self._error: BaseException | None = None
        self.done = False
        """The whole body has arrived (it may still be buffered here)."""
        self.raw: bytes | None = None
        """The head as received, when it may be relayed so (``UpstreamConnection.as_received``):
        the status line and header lines, the last without its CRLF (what came before the blank
        line); then :attr:`headers` are empty until :meth:`headers_as_parsed`."""

    def headers_as_parsed(self) -> None:
        """An answer whose head came :attr:`raw` that is relayed the usual way after all: its
        headers parsed from the head, as the connection parses them."""
        raw = self.raw
        if raw is not None:
            self.raw = None
            found = _HeaderList()
            httptools.HttpResponseParser(found).feed_data(raw + b"\r\n\r\n")
            self.headers = CIMultiDictProxy(CIMultiDict(found.headers))

    def chunks(self) -> AsyncIterator[bytes]:
        """The body, as it arrives (what is buffered comes as one chunk)."""
        return response_chunks(self)

    async def read(self) -> bytes:
        """The whole body."""
        return b"".join([chunk async for chunk in self.chunks()])

    def complete_body(self) -> bytes | None:
        """The whole body when it has all arrived (most small answers come with their
        headers), taken without an iterator; None while some of it is still to come."""
        if not self.done:
            return None
        return self._take() or b""

    def release(self) -> None:
        """Done with the answer: its connection is pooled if the body was complete."""
        connection, self._connection = self._connection, None
        if connection is not None and not self.done:
            connection.close()

    def close(self) -> None:
        """Done with the answer and its connection, whatever was read."""
        connection, self._connection = self._connection, None
        if connection is not None:
            connection.close()

    async def __aenter__(self) -> Http1Response:
        return self

    async def __aexit__(self, *exc: object) -> None:
        self.release()

    # ---- fed by the connection ----

    def _finish(self, error: BaseException | None = None) -> None:
        if error is None:
            self.done = True
            self._connection = None  # pooled (or closed) by the connection itself
        elif not self.done and self._error is None:
            self._error = error
        if self._waiter is not None:  # none when the answer came whole with its headers
            self._wake()


def whole_response(found: Whole, data: bytes) -> Http1Response:
    """The answer :func:`_whole` found whole in ``data``, as an :class:`Http1Response` whose
    head is :attr:`~Http1Response.raw` (its connection done with it already)."""
    status, reason, head, dated, body_at = found
    body = data[body_at:]
    response = Http1Response(None, status, reason, _NO_HEADERS)
    response.raw = head
    response.dated = dated
    response._parts.append(body)
    response._size = len(body)
    response.done = True
    return response


class AnswerTaker:
    """What takes an answer that came whole with its head as received
    (:attr:`UpstreamConnection.as_received`). An object with a method, not a callable: the
    compiled build calls a method of its own class directly, where a bound method is made for
    each answer, and called through Python's calling convention."""

    __slots__ = ()

    def take_whole(self, found: Whole, data: bytes) -> None:
        """An answer whole with its head as received: ``found`` (:data:`Whole`), ``data`` all
        its bytes as read (its head, blank line and body, nothing more). By default
        :meth:`take` with it as an :class:`Http1Response` (:func:`whole_response`); a taker
        that relays it from the bytes makes no response object (the express path's:
        ``interlock.dataplane.streams._Express``). Must not raise."""
        self.take(whole_response(found, data))

    def take(self, answer: Http1Response) -> None:
        """Relay ``answer`` as received, or call :meth:`Http1Response.headers_as_parsed`;
        must not raise."""
        raise NotImplementedError

    def answered(self, answer: asyncio.Future[Http1Response]) -> None:
        """The callback of the exchange's future, for an exchange sent without one
        (:meth:`UpstreamConnection.exchange` with a ``taker``) whose answer was not taken as
        received: its headers came, or it failed."""
        raise NotImplementedError


class AnswersKept(AnswerTaker):
    """A taker that keeps the answers it takes (:attr:`kept`), for a caller with nothing else
    to do with them (the connection's tests: an interpreted class cannot be a compiled class's
    subclass)."""

    __slots__ = ("answers", "kept")

    def __init__(self) -> None:
        self.kept: list[Http1Response] = []
        self.answers: list[asyncio.Future[Http1Response]] = []
        """The futures :meth:`answered` was called with."""

    def take(self, answer: Http1Response) -> None:
        self.kept.append(answer)

    def answered(self, answer: asyncio.Future[Http1Response]) -> None:
        self.answers.append(answer)


class _WholeCalls:
    """What the parser of a whole answer read at once, relayed as received, calls: only
    ``on_message_complete`` (not a call from C per header, its bytes decoded, nor for the
    message's start, its headers' end and its body, all known from the bytes already)."""

    __slots__ = ("on_message_complete",)

    def __init__(self, connection: UpstreamConnection) -> None:
        self.on_message_complete = connection._whole_message_complete


class UpstreamConnection(asyncio.Protocol):
    """One keep-alive connection to an upstream address, one exchange at a time."""

    def __init__(self, pool: UpstreamPool, address: Address) -> None:
        self._pool = pool
        self.address = address
        self._loop = loop = asyncio.get_running_loop()
        self._time = loop.time
        """The loop's clock, bound once: read with every exchange and every answer (a method
        looked up on the loop each time, whose class is Python's: ~150 instructions more)."""
        self.transport: asyncio.Transport | None = None
        self._out = HeldWrites(self._loop)
        """Every write of the connection, held for the end of the loop's turn (flushed before
        the transport closes)."""
        self.idle_since = 0.0
        self.idle = pool._idle.setdefault(address, [])
        """The pool's idle connections to :attr:`address`, where :meth:`UpstreamPool.give_back`
        puts this one (the list itself: not looked up by the address, a tuple hashed anew each
        time, on every exchange)."""
        self.reused = False
        self.reading_paused = False
        self.counted = True
        """Counted against the pool's limits (until :meth:`UpstreamPool.forget`)."""
        self._lost = False
        self._drain: asyncio.Future[None] | None = None
        # The exchange in progress.
        self._parser: httptools.HttpResponseParser | None = None
        self._spare: httptools.HttpResponseParser | None = None
        """The last answer's parser, at the start of a message again: the next exchange's (a
        parser made per exchange, which looks up each callback of this protocol, was ~4% of a
        plain proxied request). Kept only after an answer ended with nothing behind it."""
        self._whole: httptools.HttpResponseParser | None = None
        """:attr:`_spare`'s like, for whole answers relayed as received (:class:`_WholeCalls`)."""
        self.as_received: AnswerTaker | None = None
        """What takes this exchange's answer when it comes whole with its head as received
        (:attr:`Http1Response.raw`): its :meth:`~AnswerTaker.take` is called with it from the
        parser, instead of the exchange's future being resolved (a wake-up of the loop fewer);
        it relays it so or calls :meth:`Http1Response.headers_as_parsed`, and must not raise.
        Set after
        :meth:`exchange` (before the loop runs again: no answer can have come); looked at only
        with the answer's first bytes."""
        self._received: Whole | None = None
        """What :func:`_whole` found in the answer's bytes, for its parser."""
        self._received_data = b""
        """Those bytes (all of the read), while its parser reads them."""
        self._head_only = False
        self._header_list: list[tuple[str, str]] = []
        """The answer's headers so far, decoded as they come (no list of bytes to go over
        again once they are complete: ~3,000 instructions an answer)."""
        self._reason = b""
        self._head_size = 0
        """Bytes read of the answer while its headers were incomplete (its body's too, perhaps)."""
        self._informational = False
        self._answered = False
        self._body_sent = True
        self._headers: asyncio.Future[Http1Response] | None = None
        self._response: Http1Response | None = None
        self._sender: asyncio.Task[None] | None = None
        self._read_timeout = 0.0
        self._last_read = 0.0
        self._timer: asyncio.TimerHandle | None = None
        self._timer_at = 0.0
        """When :attr:`_timer` fires (on the loop's clock)."""

    # ---- asyncio.Protocol ----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport, only alike.
        self.transport = self._out.transport = cast(asyncio.Transport, transport)

    def data_received(self, data: bytes) -> None:
        parser = self._parser
        if parser is None:
            self.close()  # nothing was asked: not HTTP, or a late answer
            return
        self._last_read = self._time()
        self._answered = True
        whole: bytes | None = None  # the head of a whole answer parsed as such
        if self._response is None:
            if self.as_received is not None and not self._head_size and not self._head_only:
                # The answer's first bytes: when they are all of it and its head can be relayed
                # as received, parsed with one call from the parser (llhttp checks all of it).
                found = _whole(data)
                if found[0]:
                    self._spare = parser  # at the start of a message still
                    last = _last
                    whole = found[2]
                    if whole is last.relayed and last.parsed:
                        # These very bytes of head, with a body of this length, llhttp parsed
                        # whole before, from the start of a message (_Last.parsed): it would
                        # again, the same way (the body's bytes are not its concern once its
                        # length frames it). Taken without feeding them to it.
                        self._answer_whole(found, data)
                        return
                    self._received, self._received_data = found, data  # for its parser
                    parser = self._parser = self._whole or httptools.HttpResponseParser(
                        _WholeCalls(self)
                    )
                    self._whole = None
            # Read while the headers are incomplete: a bound on the head's size, exact enough
            # to skip counting each header of the usual small answer.
            self._head_size += len(data)
        try:
            parser.feed_data(data)
        except httptools.HttpParserUpgrade:
            self.close()  # a 101: the headers were delivered; the engine refuses it
        except httptools.HttpParserError as exc:
            if isinstance(exc.__context__, _HeadTooLarge):
                self._head_too_large()
            else:
                self._fail(UpstreamProtocolError(f"upstream {self._where()}: not HTTP/1.1: {exc}"))
                self.close()
            return
        if self._received is not None:  # never so: llhttp frames by the same Content-Length
            self._received, self._received_data = None, b""
            self._fail(UpstreamProtocolError(f"upstream {self._where()}: an answer not whole"))
            self.close()
            return
        if whole is not None and whole is _last.relayed:
            _last.parsed = True  # all of it parsed, its message ended where its bytes did
        if (
            self._response is None
            and self._parser is not None
            and self._head_size > MAX_RESPONSE_HEAD
        ):
            # Still no headers: httptools holds a header until it is whole, so the bytes read
            # while waiting for them are bounded too (1xx answers count).
            self._head_too_large()

    def _head_too_large(self) -> None:
        self._fail(
            UpstreamProtocolError(
                f"upstream {self._where()}: an answer head over {MAX_RESPONSE_HEAD} bytes"
            )
        )
        self.close()

    def eof_received(self) -> bool | None:
        return None  # close the transport; connection_lost decides what the EOF meant

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = True
        self._spare = self._whole = None
        self._stop_timer()
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_exception(UpstreamProtocolError(f"upstream {self._where()}: closed"))
        response = self._response
        if self._parser is not None and response is not None and self._until_close(response):
            self._complete()  # a body without a length ends with the connection
        elif self._parser is not None:
            if self.reused and not self._answered:
                self._fail(StaleConnection())
            else:
                self._fail(
                    UpstreamProtocolError(
                        f"upstream {self._where()} closed the connection before the end of its "
                        "answer"
                    )
                )
        self._pool.forget(self)

    def pause_writing(self) -> None:
        if self._drain is None:
            self._drain = self._loop.create_future()

    def resume_writing(self) -> None:
        drain, self._drain = self._drain, None
        if drain is not None and not drain.done():
            drain.set_result(None)

    # ---- httptools callbacks ----

    def on_message_begin(self) -> None:
        if self._parser is None:
            # Bytes after a finished answer, in the same read: the parser is somewhere in them.
            self._spare = None
        self._header_list = []
        self._reason = b""

    def on_status(self, status: bytes) -> None:
        self._reason += status

    def on_header(self, name: bytes, value: bytes) -> None:
        self._header_list.append((_names.get(name) or _name(name), _text(value)))

    def on_headers_complete(self) -> None:
        parser = self._parser
        if parser is None:
            return  # bytes after a finished answer: the connection is closed with them
        if self._head_size > MAX_RESPONSE_HEAD and (
            # Their bytes as received: surrogateescape gives back each byte it decoded.
            sum(
                len(name.encode("utf-8", "surrogateescape"))
                + len(value.encode("utf-8", "surrogateescape"))
                for name, value in self._header_list
            )
            + len(self._reason)
            > MAX_RESPONSE_HEAD
        ):
            # Only when that many bytes came with the head (its body too, perhaps) are the
            # headers themselves counted.
            raise _HeadTooLarge
        status = parser.get_status_code()
        if 100 <= status < 200 and status != 101:
            self._informational = True  # 103 Early Hints and the like: wait for the answer
            return
        headers: CIMultiDict[str] = CIMultiDict(self._header_list)
        response = self._response = Http1Response(
            self, status, _text(self._reason), CIMultiDictProxy(headers)
        )
        waiter = self._waiter()
        if waiter is not None and not waiter.done():
            waiter.set_result(response)
        if self._head_only or status == 101:
            self._complete(keep_alive=status != 101 and parser.should_keep_alive())

    def on_body(self, body: bytes) -> None:
        response = self._response
        if response is None:
            return
        # Buffered (BufferedBody._buffer, inlined: a call, and its _wake's, per answer); past
        # HIGH_WATER the upstream waits until the relay takes it.
        response._parts.append(body)
        size = response._size = response._size + len(body)
        if response._waiter is not None:
            response._wake()
        if size > HIGH_WATER and self.transport is not None:
            self.reading_paused = True
            self._stop_timer()
            self.transport.pause_reading()

    def on_message_complete(self) -> None:
        if self._informational:
            self._informational = False
            return
        parser = self._parser
        if parser is not None and self._response is not None:
            keep_alive = parser.should_keep_alive()
            if keep_alive:
                self._spare = parser  # dropped again if more bytes follow (on_message_begin)
            self._complete(keep_alive=keep_alive)

    # ---- the callbacks of an answer whose head is relayed as received ----

    def _whole_message_complete(self) -> None:
        parser, found = self._parser, self._received
        if parser is None or found is None:
            return
        self._received = None
        self._whole = parser  # at the start of a message again (dropped if the connection goes)
        data, self._received_data = self._received_data, b""
        self._answer_whole(found, data)

    def _answer_whole(self, found: Whole, data: bytes) -> None:
        """A whole answer relayed as received (:func:`_whole` found it so in ``data``, all
        of the read, and llhttp parsed it, or its very head before: ``data_received``): the
        exchange is over. Its taker gets it as found (:meth:`AnswerTaker.take_whole`: no
        :class:`Http1Response` made unless it asks for one)."""
        # _complete's, without the response it never had (nothing waits on its body). Kept
        # alive without asking the parser (``should_keep_alive``, a Python call): a head relayed
        # as received is HTTP/1.1 with a Content-Length, without a Transfer-Encoding header and
        # without a Connection header but "keep-alive" (_verdict), for which llhttp always says
        # yes (a Keep-Alive line changes nothing of it).
        self._parser = None
        if self._body_sent:
            self._pool.give_back(self)
        else:
            self.close()
        # The future is left unresolved (nothing else awaits it) when the answer is taken.
        waiter, self._headers = self._headers, None
        taker, self.as_received = self.as_received, None
        if taker is not None:
            try:
                taker.take_whole(found, data)
            except Exception as error:  # as the loop reports a failed callback
                self._loop.call_exception_handler(
                    {"message": "an answer as received was not taken", "exception": error}
                )
        elif waiter is not None and not waiter.done():
            waiter.set_result(whole_response(found, data))

    # ---- the exchange ----

    def exchange(
        self,
        head: bytes,
        *,
        body: bytes | AsyncIterator[bytes] | None,
        chunked: bool,
        head_only: bool,
        read_timeout: float,
        taker: AnswerTaker | None = None,
    ) -> asyncio.Future[Http1Response] | None:
        """Send a request; the answer once its headers arrived, to await (not a coroutine: the
        caller awaits the future itself, one frame less on every resumption). The caller
        closes the connection when the wait fails (and may set :attr:`as_received`).

        With a ``taker`` (:attr:`as_received` then), None: no future is made unless the answer
        is not taken as received — then one is made when its headers came or the exchange
        failed, with the taker's :meth:`~AnswerTaker.answered` as its callback (most answers
        are taken: a future made, given a callback and freed was ~2,000 instructions)."""
        transport = self.transport
        if transport is None or self._lost or self._out.closing():
            raise StaleConnection() if self.reused else UpstreamProtocolError("connection closed")
        parser, self._spare = self._spare, None
        self._parser = parser or httptools.HttpResponseParser(self)
        self._head_only = head_only
        self.as_received = taker
        self._received = None
        self._answered = False
        self._response = None
        self._head_size = 0
        headers = None if taker is not None else self._loop.create_future()
        self._headers = headers
        self._read_timeout = read_timeout
        if body is None or isinstance(body, bytes):
            # The transport found open above (this same call): not asked again.
            self._out.write_open(head + body if body else head)
            self._body_sent = True
            self._start_timer()
        else:  # the read timeout starts once the body has gone (as aiohttp's did)
            self._out.write(head)
            self._body_sent = False
            self._sender = self._loop.create_task(self._send(body, chunked=chunked))
        return headers

    async def _send(self, body: AsyncIterator[bytes], *, chunked: bool) -> None:
        try:
            async for chunk in body:
                transport = self.transport
                if transport is None or self._lost:
                    return
                if chunked:
                    if chunk:
                        self._out.write(b"%x\r\n%b\r\n" % (len(chunk), chunk))
                else:
                    self._out.write(chunk)
                if self._drain is not None:
                    await self._drain
            if chunked and self.transport is not None and not self._lost:
                self._out.write(b"0\r\n\r\n")
            self._body_sent = True
            if self._parser is not None and not self.reading_paused:
                self._start_timer()
        except asyncio.CancelledError:
            raise
        except UpstreamProtocolError:
            return  # the connection went; the reading side says so
        except Exception as exc:  # the client's body: a timeout, a reset
            self._fail(exc)
            self.close()
        finally:
            self._sender = None

    def resume(self) -> None:
        self.reading_paused = False
        if self.transport is not None and not self._lost:
            self.transport.resume_reading()
            if self._parser is not None and self._timer is None and self._body_sent:
                self._start_timer()

    def close(self) -> None:
        if self.transport is not None:
            self._out.flush()
            self.transport.close()
        sender = self._sender
        if sender is not None:
            sender.cancel()

    def _complete(self, *, keep_alive: bool = False) -> None:
        response = self._response
        self._parser = None
        self._response = None
        # The read timer stays armed: it finds no exchange when it fires, and the next
        # exchange on this connection keeps it (a timer made and cancelled per exchange
        # was most of what the upstream read timeout cost).
        if response is not None:
            response._finish()
        if keep_alive and self._body_sent:
            self._pool.give_back(self)
        else:
            # An answer before the whole body (a 413, say): the upstream reads no more of it,
            # and a connection in the middle of a request body cannot carry the next one.
            self.close()

    def _fail(self, error: BaseException) -> None:
        self._parser = None
        self._stop_timer()
        waiter = self._waiter()
        if waiter is not None and not waiter.done():
            waiter.set_exception(error)
        response, self._response = self._response, None
        if response is not None:
            response._finish(error)

    def _waiter(self) -> asyncio.Future[Http1Response] | None:
        """The exchange's future to resolve, once: its own, or for an exchange sent with a
        taker and not taken as received, one made now with the taker's
        :meth:`~AnswerTaker.answered` as its callback (None: resolved already, or nothing
        asked). :attr:`as_received` is done with either way."""
        waiter, self._headers = self._headers, None
        taker, self.as_received = self.as_received, None
        if waiter is None and taker is not None:
            waiter = self._loop.create_future()
            waiter.add_done_callback(taker.answered)
        return waiter

    def _check_read(self) -> None:
        self._timer = None
        if self._parser is None or self.reading_paused or not self._body_sent:
            return  # no exchange, or none being timed (the body is still going out)
        deadline = self._last_read + self._read_timeout
        if self._time() < deadline:
            self._timer_at = deadline
            self._timer = self._loop.call_at(deadline, self._check_read)
            return
        self._fail(
            UpstreamReadTimeout(f"upstream {self._where()}: nothing for {self._read_timeout:g} s")
        )
        self.close()

    def _start_timer(self) -> None:
        """The read timeout starts now. A timer already armed to fire no later than it is kept
        (:meth:`_check_read` re-arms itself until the deadline really passed)."""
        now = self._last_read = self._time()
        deadline = now + self._read_timeout
        timer = self._timer
        if timer is not None:
            if self._timer_at <= deadline:
                return
            timer.cancel()
        self._timer_at = deadline
        self._timer = self._loop.call_at(deadline, self._check_read)

    def _stop_timer(self) -> None:
        timer, self._timer = self._timer, None
        if timer is not None:
            timer.cancel()

    def _until_close(self, response: Http1Response) -> bool:
        headers = response.headers
        return (
            not self._head_only
            and response.status not in (204, 304)
            and "Content-Length" not in headers
            and "Transfer-Encoding" not in headers
        )

    def _where(self) -> str:
        return f"{self.address[0]}:{self.address[1]}"


class UpstreamPool:
    """Keep-alive connections per upstream address, bounded per address and in all."""

    def __init__(
        self,
        *,
        per_address: int,
        total: int,
        connect_timeout: float,
        ssl: ssl_module.SSLContext | None = None,
        server_hostname: str | None = None,
        peer_check: Callable[[dict[str, Any] | None], str | None] | None = None,
    ) -> None:
        """``ssl``: every connection of this pool speaks TLS with it (a pool of its own, so a
        plain and a TLS connection to one address are never mixed up), sending
        ``server_hostname`` as SNI (and checking it, if the context checks hostnames);
        ``peer_check``: why the verified peer certificate (``getpeercert()``) is refused, or
        None (a connection it refuses is closed before anything is sent)."""
        self._ssl = ssl
        self._server_hostname = server_hostname
        self._peer_check = peer_check
        self._per_address = per_address
        self._total_limit = total
        self._connect_timeout = connect_timeout
        self._idle: dict[Address, list[UpstreamConnection]] = {}
        """The idle connections per address: a list for each address with a connection open
        (made with its first, :attr:`UpstreamConnection.idle`), dropped with its last."""
        self._last_host = ""
        self._last_port = 0
        self._last_idle: list[UpstreamConnection] | None = None
        """The idle list :meth:`start` looked up last, and its address's host (that very string)
        and port: most requests go to the address the last one went to, and comparing a pointer
        and an int costs less than hashing the address tuple for a look-up (~500 instructions a
        request). None when that list may have left :attr:`_idle` (:meth:`_release_slot`)."""
        self._ready: UpstreamConnection | None = None
        """One idle connection kept out of :attr:`_idle`: the one given back while no other was
        kept so, and taken first. Most exchanges free a connection that the next request takes:
        a list emptied and filled again (``pop``, ``append``) gives back and allocates its items
        each time (~500 instructions an exchange, compiled)."""
        self._open: dict[Address, int] = {}
        self._total = 0
        self._waiters: deque[asyncio.Future[None]] = deque()
        self._sweep: asyncio.TimerHandle | None = None
        self._closed = False

    async def request(
        self,
        address: Address,
        method: str,
        target: str,
        headers: CIMultiDict[str],
        body: bytes | AsyncIterator[bytes] | None,
        *,
        read_timeout: float,
    ) -> Http1Response:
        """Send one request to ``address`` and return its answer once the headers arrived."""
        head, chunked = request_head(method, target, headers, body, address)
        replayable = body is None or isinstance(body, bytes)
        while True:
            # A pooled connection is taken without a coroutine: most requests find one.
            connection = self._idle_connection(address) or await self._acquire(address)
            try:
                sent = connection.exchange(
                    head,
                    body=body,
                    chunked=chunked,
                    head_only=method == "HEAD",
                    read_timeout=read_timeout,
                )
                assert sent is not None  # (no taker: a future)
                return await sent
            except BaseException as error:
                connection.close()
                if not isinstance(error, StaleConnection):
                    raise
                if replayable:
                    continue  # the upstream closed it while it idled: once more, on a new one
                raise UpstreamProtocolError(
                    f"upstream {address[0]}:{address[1]} closed a pooled connection"
                ) from None

    def start(
        self,
        address: Address,
        method: str,
        target: str,
        headers: CIMultiDict[str],
        *,
        read_timeout: float,
        taker: AnswerTaker | None = None,
    ) -> tuple[UpstreamConnection, asyncio.Future[Http1Response] | None] | None:
        """A request without a body sent on a pooled connection, without a coroutine: the
        connection and its answer to come (the caller closes the connection when the answer
        fails, and sends the request again with :meth:`request` when it fails with
        :class:`StaleConnection`). None when no connection to ``address`` is idle (nothing
        was sent): :meth:`request` then opens or waits for one. With a ``taker``, no future:
        the answer goes to it (:meth:`UpstreamConnection.exchange`)."""
        connection = self._ready
        if connection is not None and connection.address == address:
            self._ready = None  # (none while the pool is closed: close() empties it)
        else:
            host, port = address
            idle = self._last_idle
            if idle is None or host is not self._last_host or port != self._last_port:
                idle = self._idle.get(address)
                if idle is None:
                    return None
                self._last_host, self._last_port, self._last_idle = host, port, idle
            if not idle or self._closed:
                return None
            connection = idle.pop()  # _idle_connection's, inlined
        head, _ = request_head(method, target, headers, None, address)
        connection.reused = True
        try:
            sent = connection.exchange(
                head,
                body=None,
                chunked=False,
                head_only=method == "HEAD",
                read_timeout=read_timeout,
                taker=taker,
            )
        except StaleConnection:
            connection.close()
            return None  # closed while it idled: request() tries again on another
        return connection, sent

    def _idle_connection(self, address: Address) -> UpstreamConnection | None:
        """A pooled connection to ``address``, if one is idle (and the pool open)."""
        connection = self._ready
        if connection is not None and connection.address == address:
            self._ready = None
            connection.reused = True
            return connection
        idle = self._idle.get(address)
        if not idle or self._closed:
            return None
        connection = idle.pop()
        connection.reused = True
        return connection

    async def _acquire(self, address: Address) -> UpstreamConnection:
        """A new connection to ``address`` (the caller found none idle), or one that became
        idle while this waited for room under the pool's limits."""
        if self._closed:
            raise UpstreamProtocolError("the upstream pool is closed")
        async with asyncio.timeout(self._connect_timeout):
            while not self._has_room(address):
                connection = self._idle_connection(address)
                if connection is not None:
                    return connection
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                finally:
                    with contextlib.suppress(ValueError):
                        self._waiters.remove(waiter)
            self._open[address] = self._open.get(address, 0) + 1
            self._total += 1
            connection = UpstreamConnection(self, address)
            try:
                await asyncio.get_running_loop().create_connection(
                    lambda: connection,
                    address[0],
                    address[1],
                    ssl=self._ssl,
                    server_hostname=self._server_hostname if self._ssl is not None else None,
                )
            except BaseException as exc:
                if connection.transport is None:  # else connection_lost frees the slot
                    connection.counted = False
                    self._release_slot(address)
                if isinstance(exc, OSError):
                    raise UpstreamConnectError(address, exc) from None
                raise
            if self._peer_check is not None and connection.transport is not None:
                problem = self._peer_check(connection.transport.get_extra_info("peercert"))
                if problem is not None:
                    connection.close()  # its connection_lost frees the slot
                    raise UpstreamConnectError(
                        address, ssl_module.SSLCertVerificationError(problem)
                    )
        return connection

    def _has_room(self, address: Address) -> bool:
        if self._open.get(address, 0) >= self._per_address:
            return False
        if not self._total_limit or self._total < self._total_limit:
            return True
        # At the limit in all: an idle connection to another address makes room.
        ready = self._ready
        if ready is not None and ready.address != address:
            self._ready = None
            ready.close()
            return False  # its connection_lost frees the slot and wakes the waiters
        for other, idle in self._idle.items():
            if other != address and idle:
                idle.pop(0).close()
                return False  # its connection_lost frees the slot and wakes the waiters
        return False

    def give_back(self, connection: UpstreamConnection) -> None:
        """``connection`` finished its exchange and can serve the next. Called from its
        ``data_received`` (its parser's callbacks), which read the loop's clock as the answer's
        last bytes came: idle since then. Not ``asyncio.get_running_loop()``: on Python 3.11
        that is a ``getpid`` system call, one of the five a proxied request made."""
        if self._closed:
            connection.close()
            return
        connection.idle_since = connection._last_read
        if self._ready is None:
            self._ready = connection
        else:
            connection.idle.append(connection)
        if self._sweep is None:
            self._sweep = asyncio.get_running_loop().call_later(KEEPALIVE_SECONDS, self._expire)
        if self._waiters:  # most exchanges: none wait (only at a limit)
            self._wake()

    def forget(self, connection: UpstreamConnection) -> None:
        """``connection`` is closed: out of the pool, its slot free."""
        if self._ready is connection:
            self._ready = None
        else:
            idle = connection.idle
            if idle and connection in idle:
                idle.remove(connection)
        if connection.counted:
            connection.counted = False
            self._release_slot(connection.address)

    def _release_slot(self, address: Address) -> None:
        count = self._open.get(address, 0) - 1
        if count > 0:
            self._open[address] = count
        else:
            self._open.pop(address, None)
            if not self._idle.get(address):
                self._idle.pop(address, None)
                self._last_idle = None  # perhaps that list: start() looks it up again
        self._total -= 1
        self._wake()

    def _wake(self) -> None:
        # Every waiter looks again (a few at most: they wait only at a limit).
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_result(None)

    def _expire(self) -> None:
        self._sweep = None
        now = asyncio.get_running_loop().time()
        oldest = now
        ready = self._ready
        if ready is not None:
            if now - ready.idle_since >= KEEPALIVE_SECONDS:
                self._ready = None
                ready.close()
            else:
                oldest = ready.idle_since
        for idle in list(self._idle.values()):
            for connection in list(idle):
                if now - connection.idle_since >= KEEPALIVE_SECONDS:
                    idle.remove(connection)
                    connection.close()
                else:
                    oldest = min(oldest, connection.idle_since)
        if self._ready is not None or any(self._idle.values()):
            self._sweep = asyncio.get_running_loop().call_later(
                oldest + KEEPALIVE_SECONDS - now, self._expire
            )

    def close(self) -> None:
        """Close every connection, pooled or in use; waiting requests fail."""
        self._closed = True
        if self._sweep is not None:
            self._sweep.cancel()
            self._sweep = None
        ready, self._ready = self._ready, None
        if ready is not None:
            ready.close()
        for idle in list(self._idle.values()):
            for connection in list(idle):
                connection.close()
        self._idle.clear()
        self._last_idle = None
        for waiter in self._waiters:
            if not waiter.done():
                waiter.set_exception(UpstreamProtocolError("the upstream pool is closed"))


def request_head(
    method: str,
    target: str,
    headers: CIMultiDict[str],
    body: bytes | AsyncIterator[bytes] | None,
    address: Address,
) -> tuple[bytes, bool]:
    """The request line and headers, framing the body; and whether the body goes chunked.

    ``headers`` are the upstream headers, hop-by-hop ones already removed; they are not
    changed (what frames the body goes into a copy, made only then: a request can be sent
    again with the same headers). A header name or value holding CR or LF is refused
    (``ValueError``), as aiohttp refused it.

    Headers whose head is known (``plan.KnownHead``), unchanged since, for a request without a
    body to the target it names, are that head (its lines hold no CR or LF but their ends:
    llhttp and ``steps.decide_now`` checked them).
    """
    nothing = body is None and method in _BODYLESS_METHODS  # no body, none framed
    if nothing:
        known = known_head(headers, method, target)
        if known is not None:
            return known, False
    # Each looked up once (a look-up in a CIMultiDict is a generic call), and a length only
    # when there is a body to frame; framing it never adds a Host.
    has_length = not nothing and CONTENT_LENGTH in headers
    no_host = HOST not in headers
    chunked = body is not None and not isinstance(body, bytes) and not has_length
    empty = body is None and not nothing and not has_length  # framed as empty
    if isinstance(body, bytes) or chunked or empty or no_host:
        headers = headers.copy()
    if isinstance(body, bytes):
        headers[CONTENT_LENGTH] = str(len(body))
    elif chunked:
        headers[TRANSFER_ENCODING] = "chunked"
    elif empty:
        headers[CONTENT_LENGTH] = "0"
    if no_host:
        host, port = address
        host = f"[{host}]" if ":" in host else host
        headers["Host"] = host if port == 80 else f"{host}:{port}"
    # The head's pieces, joined once: no string made a line (``": ".join`` of each name and
    # value pair was ~600 instructions a header); and what goes between its line ends (method,
    # target, names, values), joined to be checked for CR and LF (one join and two ``in`` cost
    # less than ``str.count`` of each character in the head: a loop a character).
    parts = [method, " ", target, " HTTP/1.1\r\n"]
    checked = [method, target]
    for name, value in headers.items():
        parts.append(name)
        parts.append(_FIELD)
        parts.append(value)
        parts.append("\r\n")
        checked.append(name)
        checked.append(value)
    fields = "".join(checked)
    if "\r" in fields or "\n" in fields:
        raise ValueError("a header name or value holds CR or LF; the request is not sent")
    parts.append("\r\n")
    head = "".join(parts)
    try:  # strict first: the compiled build's direct call, the same bytes when it succeeds
        return head.encode(), chunked
    except UnicodeEncodeError:
        return head.encode("utf-8", "surrogateescape"), chunked
