"""The edge's HTTP/1.1 server: an asyncio Protocol on httptools, without aiohttp's server.

aiohttp's server was most of what a plain proxied request cost the edge: its request parser
wrapper, ``web.BaseRequest`` and ``web.StreamResponse`` objects, the payload writer, the
handler machinery — built per request for a proxy that needs a method, a target, headers and
a body stream. This protocol does only that: llhttp (``httptools``, the C parser of Node.js and
uvicorn) parses the requests, each becomes an :class:`~interlock.dataplane.request_stream.H2Request`
(the wire-neutral request the HTTP/2 streams already use) handed with an
:class:`Http1Responder` to the same handler as an HTTP/2 stream (``interlock.edge.streams``):
the same steps in the same order, one code path for both versions.

What a connection is held to (as aiohttp held it, ``ProxyLimits``):

* requests are answered one at a time and in order; pipelined requests wait their turn (reading
  pauses while one waits, so a client cannot queue requests without bound);
* a header whose name holds ``_`` is dropped unless ``underscores_in_headers`` says otherwise;
* a request's headers must be complete ``header_timeout`` s after its first byte (408, close),
  at most :data:`MAX_HEADERS` headers of at most :data:`MAX_FIELD_SIZE` bytes each and a
  request line of at most :data:`MAX_LINE_SIZE` bytes (431/414, close);
* a connection without a request in progress is closed after ``idle_timeout`` s;
* what a connection remembers of its last request's headers (to read the next one's for less:
  ``_Seen``) is bounded: its first 32 headers, values of at most 256 bytes; of its last
  request's target and the read it began in, one each (a read of at most 4,096 bytes), handed
  over again, as the same object, only for the same bytes, and the head sent as received made
  of that read, with the upstream headers made of it (``KeptHead``);
* a body read waits at most ``body_timeout`` s for the next bytes (408); a body is buffered up
  to :data:`HIGH_WATER` bytes before the client is made to wait;
* ``Expect: 100-continue`` is answered when the handler first reads the body (a request refused
  before that never makes the client send it);
* a response whose request body was not read to its end closes the connection (what is left
  of that body cannot be told from the next request).

A request that asks to upgrade the connection (WebSocket, another protocol) is handed, with
the rest of the connection, to aiohttp's server (``upgrade``): its upgrade relay needs
aiohttp's request and response objects, and upgrades are rare next to plain requests. The
request is replayed to it as parsed (request line and headers), once every request before it
was answered.
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import AsyncIterator, Awaitable, Callable, Sequence
from email.utils import formatdate
from http import HTTPStatus
from typing import Any, Final, cast

import httptools
from multidict import CIMultiDict, istr

from interlock.dataplane.answers import BAD_REQUEST, HEADER_TIMEOUT, INTERNAL_ERROR, answer
from interlock.dataplane.http1 import STATUS_LINES, BufferedBody, Whole
from interlock.dataplane.interpreted import request_chunks
from interlock.dataplane.limits import ProxyLimits
from interlock.dataplane.plan import multidict_version
from interlock.dataplane.proxy import HOP_BY_HOP, ClientBodyTimeout, HeadEdit
from interlock.dataplane.request_stream import H2Handler, H2Request, finish_answer
from interlock.dataplane.turn_writes import HeldWrites
from interlock.logs import module_logger

# Not loguru's logger itself: this module is compiled (interlock.logs.module_logger).
logger = module_logger(__name__)

MAX_LINE_SIZE: Final = 8190
"""Longest request line (aiohttp's ``max_line_size``); longer → 414."""

MAX_FIELD_SIZE: Final = 8190
"""Longest header name or value (aiohttp's ``max_field_size``); longer → 431."""

MAX_HEADERS: Final = 128
"""Most headers in one request; more → 431."""

HIGH_WATER: Final = 256 * 1024
"""Request body buffered, not yet read by the handler, before the client is made to wait."""

_NO_BODY_STATUSES: Final = frozenset({204, 304})

Work = Callable[[], Awaitable[None]]
"""What answers a request on the connection's task, once called there (made only then: a
coroutine made before its task runs would be left unawaited by a client that goes)."""

ExpressHandler = Callable[["H2Request", "Http1Responder"], "Work | None"]
"""A handler that answers a request without a body without the connection's task when it can:
None when it does (the responder's ``express_done``/``express_continue`` follow), else what
answers it on the task."""

_REASONS: Final = {status.value: status.phrase for status in HTTPStatus}

_STATUS_LINES: Final = STATUS_LINES
"""Each known status's line, made once (formatting an int per answer is not free)."""

_CONTINUE: Final = b"HTTP/1.1 100 Continue\r\n\r\n"

_METHODS: Final = {
    method.encode(): method
    for method in ("GET", "HEAD", "POST", "PUT", "DELETE", "OPTIONS", "PATCH", "CONNECT", "TRACE")
}
"""The usual methods' text by their bytes (a look-up, not a decode with its arguments parsed)."""

_UNDERSCORE: Final = ord("_")
"""Looked for in header names as a byte: ``b"_" in name`` first tries the bytes as an integer
(a TypeError made and cleared, per header)."""

_NAME_CACHE_SIZE: Final = 256
"""Most header names kept decoded (``_names``); ``_NAME_CACHE_LENGTH`` the longest one kept."""
_NAME_CACHE_LENGTH: Final = 64

_OTHER: Final = 0
_CONTENT_LENGTH: Final = 1
_TRANSFER_ENCODING: Final = 2
_EXPECT: Final = 3
_HOST: Final = 4
_CONNECTION: Final = 5
_HOP_BY_HOP: Final = 6
_CLOSE: Final = 7
_PROXY_CONNECTION: Final = 8
_HELD_BACK: Final = 9
"""Not a name's kind: a connection's ``held_back`` name (kept from the upstream as sent)."""
_KINDS: Final = {
    **dict.fromkeys(HOP_BY_HOP, _HOP_BY_HOP),
    "proxy-connection": _PROXY_CONNECTION,  # hop-by-hop; llhttp reads it as a Connection
    "content-length": _CONTENT_LENGTH,
    "transfer-encoding": _TRANSFER_ENCODING,  # hop-by-hop too
    "expect": _EXPECT,
    "host": _HOST,
    "connection": _CONNECTION,  # hop-by-hop too
    "close": _CLOSE,
}
"""What the server does with a header name besides keeping it: frames the body by it, answers
it (``Expect``), takes the authority from it, keeps it from the upstream (hop-by-hop), or — a
header named ``Close`` — keeps it unless ``Connection: close`` names it."""

_UNLISTING: Final = HOP_BY_HOP | {"close"}
"""A ``Connection`` value that is one of these names nothing the upstream would get (the usual
``close`` and ``keep-alive``; a header named ``Close`` aside)."""

_names: Final[dict[bytes, tuple[str, str, int, bool]]] = {}
"""A request header name's bytes -> its text, its lower case, its kind (:data:`_KINDS`; a
``Proxy-*`` name is hop-by-hop) and whether it holds ``_`` (``ProxyLimits.underscores_in_headers``
drops it; looking for the byte in every name was ~350 instructions a header): decoding, folding
and comparing the same dozen names on every request was ~500 instructions a header. Keyed by
the exact bytes, so a name decodes as it did; bounded in count and length, so a client sending
new names fills it once and then pays the decode as before. The text is an ``istr`` (equal,
hashed and written as the ``str``): the request's ``CIMultiDict`` and its copies take its folded
form instead of folding the name again."""


def _name(raw: bytes) -> tuple[str, str, int, bool]:
    name = istr(raw.decode("latin-1"))
    lower = name.lower()
    kind = _KINDS.get(lower, _HOP_BY_HOP if lower[:6] == "proxy-" else _OTHER)
    known = (name, lower, kind, _UNDERSCORE in raw)
    if len(_names) < _NAME_CACHE_SIZE and len(raw) <= _NAME_CACHE_LENGTH:
        _names[raw] = known
    return known


_SEEN_POSITIONS: Final = 32
"""Header positions a connection remembers the last header of (:class:`_Seen`)."""
_SEEN_LENGTH: Final = 256
"""Longest header value a connection remembers decoded (a longer one is decoded each time)."""


class _Seen:
    """The header a connection's last request had at one position (its first, second, ...),
    decoded: a client sends the same names, mostly with the same values, in the same order on
    every request of a connection, and the next request's header there is compared with it (two
    byte compares) instead of its name looked up in :data:`_names` (~430 instructions: a new
    bytes object hashed and compared) and its value decoded (~230) into a new field. Per
    connection, so a value is only ever compared with one its own client sent; at most
    :data:`_SEEN_POSITIONS` of them, values of at most :data:`_SEEN_LENGTH` bytes."""

    __slots__ = ("field", "kind", "name", "raw_name", "raw_value", "underscored", "value")

    def __init__(
        self,
        raw_name: bytes,
        raw_value: bytes,
        name: str,
        value: str,
        field: Any,
        kind: int,
        underscored: bool,
    ) -> None:
        self.raw_name = raw_name
        self.raw_value = raw_value
        self.name = name
        self.value = value
        self.field: Any = field
        """``(name, value)``, as the request's fields hold it (its name's text an ``istr``).
        ``Any``, not ``tuple[str, str]``: the compiled build keeps a fixed-length tuple unboxed
        and made a new tuple of it for each list it was put in."""
        self.kind = kind
        """Its name's kind (:data:`_KINDS`), :data:`_HELD_BACK` for one of the connection's
        held-back names."""
        self.underscored = underscored


class _Date:
    """The ``Date`` header value, formatted once a second (:meth:`Http1Responder._render` reads
    :attr:`second` and :attr:`value` itself: a call per answer cost more than the check)."""

    __slots__ = ("line", "second", "value")

    def __init__(self) -> None:
        self.second = 0
        self.value = ""
        self.line = b""
        """The header line, encoded (for a head relayed as received)."""

    def __call__(self) -> str:
        now = int(time.time())
        if now != self.second:
            self.refresh(now)
        return self.value

    def refresh(self, now: int) -> None:
        self.second = now
        self.value = formatdate(now, usegmt=True)
        self.line = f"Date: {self.value}\r\n".encode()


_date: Final = _Date()


class Http1Body(BufferedBody):
    """One request's body as the client sends it (the handler reads it with :meth:`chunks`)."""

    __slots__ = (
        "_connection",
        "_expect_continue",
        "_read",
        "_timeout",
        "empty",
        "ended",
        "timed_out",
    )

    def __init__(
        self, connection: Http1ServerProtocol, *, empty: bool, expect_continue: bool, timeout: float
    ) -> None:
        super().__init__()
        self._connection = connection
        self._timeout = timeout
        self._expect_continue = expect_continue and not empty
        self.empty = empty
        """The request has no body at all."""
        self.ended = empty
        """The whole body has arrived (it may still be buffered here)."""
        self.timed_out = False
        """A read waited longer than the body timeout."""
        self._read = False

    def feed(self, data: bytes) -> None:
        if self._buffer(data) > HIGH_WATER:
            self._connection.pause_reading_for_body()

    def end(self) -> None:
        self.ended = True
        self._wake()

    def take_whole(self) -> bytes | None:
        if not self.ended or self.empty or self._read:
            return None
        self._read = True
        whole = self._take()
        self._connection.resume_reading_for_body()
        return whole or b""

    def chunks(self, *, within: float | None = None) -> AsyncIterator[bytes]:
        """The body as it arrives; :class:`~interlock.dataplane.proxy.ClientBodyTimeout` when no
        byte came for ``within`` seconds (the edge's body timeout by default)."""
        return request_chunks(self, self._timeout if within is None else within)


class Http1Responder:
    """How a handler answers one HTTP/1.1 request: the ``H2Responder`` calls, on HTTP/1.1.

    The head waits for the first body bytes (one write for a small answer); a body whose length
    is not known is sent chunked (to an HTTP/1.0 client: until the connection closes).
    """

    __slots__ = (
        "_body",
        "_chunked",
        "_connection",
        "_head",
        "_head_only",
        "_until_close",
        "_version_10",
        "bytes",
        "ended",
        "keep_alive",
        "status",
    )

    def __init__(
        self,
        connection: Http1ServerProtocol,
        body: Http1Body,
        method: str,
        http10: bool,
        keep_alive: bool,
    ) -> None:
        """The answer to the request whose headers ``connection``'s parser just read
        (``keep_alive``: what its ``should_keep_alive()`` says; made per request, so
        positional arguments: keywords to a class cost a dict each)."""
        self._connection = connection
        self._body = body
        self._head_only = method == "HEAD"
        """No body goes out (HEAD; 1xx, 204 and 304 answers), whatever the handler sends."""
        self._version_10 = http10
        self.keep_alive = keep_alive
        """Whether the connection may serve another request after this one."""
        self._head: tuple[int, Sequence[tuple[str, str]]] | None = None
        self._chunked = False
        self._until_close = False
        self.status: int | None = None
        self.bytes = 0
        """Bytes sent to the client, headers included (nginx's ``$bytes_sent``)."""
        self.ended = False

    @property
    def started(self) -> bool:
        return self.status is not None

    def send_headers(self, status: int, headers: Sequence[tuple[str, str]], *, end: bool) -> None:
        self.status = status
        self._head = (status, headers)
        if end:
            self._write(self._render(length=0), end=True)

    async def send_data(self, data: bytes, *, end: bool = False) -> None:
        if self.send_now(data, end=end):
            await self._connection.drain()

    def send_now(self, data: bytes, *, end: bool = False) -> bool:
        """:meth:`send_data` without waiting for the client to take what was written (an
        express answer's); whether the client holds too much (:meth:`drain` waits)."""
        if self.ended:
            return False
        if self._head is not None:
            # A HEAD answer's length is that of the body a GET would get, when it is known.
            known = end and (data or not self._head_only)
            head = self._render(length=len(data) if known else None)
            if self._head_only:
                self._write(head, end=end)
            elif end and not self._chunked and not self._until_close:
                # The usual answer, whole and of a known length: _write and the connection's
                # write inlined (two Python calls a request fewer).
                out = head + data
                self.bytes += len(out)
                self.ended = True
                self._connection._out.write(out)  # (it writes only to an open transport)
            else:
                self._write(head + (self._frame(data, end=end) if self._chunked else data), end=end)
        elif self._head_only:
            if end:
                self._write(b"", end=True)
        else:
            self._write(self._frame(data, end=end), end=end)
        return self._connection.write_paused

    @property
    def as_received(self) -> bool:
        """Whether an upstream's answer head may be relayed as received
        (:meth:`relay_as_received`), as far as the request tells: an HTTP/1.1 request, not
        HEAD, that keeps the connection."""
        return self.keep_alive and not self._head_only and not self._version_10

    def relay_as_received(
        self, found: Whole, data: bytes, edit: HeadEdit | None = None
    ) -> bool | None:
        """An upstream's answer whose body has all arrived, its head as received: ``found``,
        what ``interlock.dataplane.http1._whole`` found in ``data``, all its bytes (its status,
        reason, head: a status line as :meth:`_render` writes it, a ``Content-Length``, nothing
        hop-by-hop (``Connection: keep-alive``/``Keep-Alive`` lines cut out already: then shorter
        than what comes before the blank line in ``data``); whether it has a ``Date``, and where
        its body starts); with ``edit``'s
        header change made on those bytes (the hooks' ``response_edit``: what rendering the
        changed headers again would write, for such a head) and a ``Date`` added when it then
        has none, else ``data`` itself. None when it must be rendered after all (the
        connection closing after it, the request's body not all read): nothing was taken or
        written. Else :meth:`send_now`'s answer: whether the client holds too much."""
        connection = self._connection
        if (
            not self.keep_alive
            or self._head_only
            or self._version_10
            or connection.closing
            or not self._body.ended
            or self.status is not None
        ):
            return None
        status, _, head, dated, body_at = found
        if dated and edit is None and len(head) + 4 == body_at:
            # Its head as in data (no Connection line cut out), blank line and body: what would
            # be joined again.
            out = data
        else:
            if edit is not None:
                head = edit.edited(head)
                if edit.dated is not None:
                    dated = edit.dated
            if dated:
                out = head + data[body_at - 4 :]  # the blank line and the body
            else:
                now = int(time.time())
                if now != _date.second:
                    _date.refresh(now)
                # The Date line (with its CRLF) after the head's last line, then the blank
                # line's last CRLF and the body.
                out = head + b"\r\n" + _date.line + data[body_at - 2 :]
        self.status = status
        self.bytes += len(out)
        self.ended = True
        connection._out.write(out)  # (it writes only to an open transport)
        return connection.write_paused

    def send_trailers(self, headers: Sequence[tuple[str, str]]) -> None:
        if self.ended:
            return
        head = b"" if self._head is None else self._render(length=None)
        if self._chunked and not self._head_only:
            trailer = "".join(f"{name}: {value}\r\n" for name, value in headers)
            self._write(head + b"0\r\n" + _encode(trailer) + b"\r\n", end=True)
        else:
            self._write(head, end=True)

    def reset(self) -> None:
        """The answer cannot be completed: the connection is cut (the only signal HTTP/1.1
        has that a body is incomplete)."""
        self.ended = True
        self.keep_alive = False
        self._connection.abort()

    def close_after(self) -> None:
        self.keep_alive = False

    # ---- an express answer: written by callbacks, without the connection's task ----

    def express(self, abandon: Callable[[], None]) -> None:
        """This answer is written without the connection's task (the express path:
        ``interlock.dataplane.streams.StreamForwarder.express``); ``abandon`` is called if the
        client goes first. :meth:`express_done` or :meth:`express_continue` ends it."""
        self._connection._abandon = abandon

    def express_done(self) -> None:
        """The express answer was sent: the connection goes on to its next request (what
        ``Http1ServerProtocol._serve`` does after a handler, without it)."""
        connection = self._connection
        connection._abandon = None
        connection._answering = None
        if connection._express_over is not None:  # the edge is stopping (close())
            _settle(connection._express_over)
        if not self.keep_alive or not self._body.ended:
            connection.abort()
        elif (
            connection._waiting
            or connection.lost
            or connection.closing
            or connection._handed_over is not None
        ):
            following = connection._following()
            if following is not None:
                connection._run(*following)
        else:  # _arm_idle, inlined (the connection is not lost)
            loop = connection._loop
            connection._idle_since = loop.time()
            if connection._idle_timer is None:
                connection._idle_timer = loop.call_later(
                    connection._limits.idle_timeout, connection._idled
                )

    def express_continue(self, work: Work) -> None:
        """The rest of the answer must wait for something: ``work`` finishes it on the
        connection's task, as the handler would have."""
        connection = self._connection
        connection._abandon = None
        connection._run(work, self)
        _settle(connection._express_over)  # close() waits for the task from here

    async def drain(self) -> None:
        """Until the client took what was written, when it holds too much."""
        if self._connection.write_paused:
            await self._connection.drain()

    def _frame(self, data: bytes, *, end: bool) -> bytes:
        if not self._chunked:
            return data
        if end:
            return b"%x\r\n%b\r\n0\r\n\r\n" % (len(data), data) if data else b"0\r\n\r\n"
        return b"%x\r\n%b\r\n" % (len(data), data) if data else b""

    def _write(self, data: bytes, *, end: bool) -> None:
        if data:
            self.bytes += len(data)
            self._connection.write(data)
        if end:
            self.ended = True
            if self._until_close:
                self.keep_alive = False

    def _render(self, *, length: int | None) -> bytes:
        """The status line and headers, framing the body: ``length`` when the whole body is
        known, else the headers' ``Content-Length``, else chunked (or until close)."""
        assert self._head is not None
        status, headers = self._head
        self._head = None
        line = _STATUS_LINES.get(status)
        # The head's pieces, joined once (no string made a line: ``name + ": " + value`` was two
        # concatenations a header); what goes between its line ends joined apart, to be checked
        # for CR and LF as request_head checks its head.
        parts = [line or f"HTTP/1.1 {status} Unknown", "\r\n"]
        checked: list[str] = []
        has_length = has_date = False
        # A list (what every caller passes) is walked by index in the compiled build, and its
        # pairs taken apart without an iterator each (typed here: mypy's narrowing loses it).
        pairs: list[tuple[str, str]] = headers if isinstance(headers, list) else list(headers)
        for name, value in pairs:
            # By length first: most names are neither, and lower() makes a string.
            size = len(name)
            if size == 14:
                if name.lower() == "content-length":
                    has_length = True
            elif size == 4 and name.lower() == "date":
                has_date = True
            parts.append(name)
            parts.append(": ")
            parts.append(value)
            parts.append("\r\n")
            checked.append(name)
            checked.append(value)
        if status < 200 or status in _NO_BODY_STATUSES:
            self._head_only = True
        elif not has_length:
            if length is not None:
                parts.append(f"Content-Length: {length}\r\n")
            elif self._head_only:
                pass
            elif self._version_10:
                self._until_close = True
                self.keep_alive = False
            else:
                self._chunked = True
                parts.append("Transfer-Encoding: chunked\r\n")
        if not has_date:
            now = int(time.time())
            if now != _date.second:
                _date.refresh(now)
            parts.append("Date: ")
            parts.append(_date.value)
            parts.append("\r\n")
        if not self.keep_alive or self._connection.closing or not self._body.ended:
            self.keep_alive = False
            parts.append("Connection: close\r\n")
        elif self._version_10:
            parts.append("Connection: keep-alive\r\n")
        fields = "".join(checked)
        if "\r" in fields or "\n" in fields:
            raise ValueError("a response header name or value holds CR or LF")
        parts.append("\r\n")
        head = "".join(parts)
        try:  # strict first: the compiled build's direct call, the same bytes when it succeeds
            return head.encode()
        except UnicodeEncodeError:
            return head.encode("utf-8", "surrogateescape")  # _encode, inlined


_Work = tuple["H2Request | Work", "Http1Responder"]
"""What answers one request on the connection's task (the request, for the handler), and its
answer."""


def _raising(error: Exception) -> Work:
    async def _raise() -> None:
        raise error

    return _raise


def _settle(waiter: asyncio.Future[None] | None) -> None:
    if waiter is not None and not waiter.done():
        waiter.set_result(None)


def _cancel(timer: asyncio.TimerHandle | None) -> None:
    if timer is not None:
        timer.cancel()


def _encode(text: str) -> bytes:
    return text.encode("utf-8", "surrogateescape")


class _HeadersTooLarge(Exception):
    def __init__(self, status: int) -> None:
        super().__init__(status)
        self.status = status


_BEGUN: Final = -1.0
"""``Http1ServerProtocol._headers_began`` for a head begun in the read being parsed."""

_HTTP11_LINE_END: Final = b" HTTP/1.1\r\n"
"""How a canonical HTTP/1.1 request line ends (``METHOD target HTTP/1.1``, one space apart)."""


class KeptHead:
    """What a connection keeps of its last request whose head went upstream as the client sent
    it (``Http1ServerProtocol.kept``, :func:`kept_head`): the read that head was all of, that
    request's method and target, and :func:`head_as_sent`'s answer (it depends on nothing
    else); then what the edge's steps made of it (``steps.decide_now``: the ``X-Forwarded-*``
    lines, the upstream headers and their version, the upstream head). Compared by identity:
    the connection hands on its last read's object for a read with the same bytes, so a
    client's bytes are only ever compared with its own, and one connection's requests never
    displace another's. Per connection, as :class:`_Seen`: what it holds is what that
    connection's last request sent.

    The upstream headers are handed to the connection's next request with the same head again
    while :attr:`version` says they are unchanged: the connection answers one request at a
    time, so the request they were made for is done with them by then, and whatever changed
    them (a rule's filter, the HTTP/2 upstream's ``Host``) changed their version, and the next
    request gets headers of its own."""

    __slots__ = ("added", "head", "headers", "method", "read", "target", "upstream", "version")

    def __init__(self) -> None:
        self.read = b""
        self.method = ""
        self.target = ""
        self.head = b""
        self.added: bytes | None = None
        """The ``X-Forwarded-*`` lines :attr:`upstream` ends with (the steps' own object; None
        while the steps made nothing of :attr:`head`)."""
        self.headers: CIMultiDict[str] = CIMultiDict()
        """The upstream headers made of :attr:`head` and :attr:`added`."""
        self.version = -1
        """:attr:`headers`' ``multidict.getversion`` when made (-1: none made; a version is
        never negative)."""
        self.upstream = b""
        """:attr:`head` and :attr:`added`: the upstream request's head."""


def kept_head(request: H2Request) -> KeptHead | None:
    """What ``request``'s connection keeps of its last head sent as received (None for a
    request that did not come from this server)."""
    body = request.body
    return body._connection.kept if isinstance(body, Http1Body) else None


_FIRST_READ_LENGTH: Final = 4096
"""Longest read a connection keeps to hand on again (``Http1ServerProtocol._first_read``)."""


def head_as_sent(request: H2Request) -> bytes | None:
    """The client's request line and header lines exactly as it sent them (each line with its
    CRLF; the empty line that ends the head left out), when the upstream may get them as they
    are: every header goes upstream as sent (``H2Request.first_read`` is set only then), in
    ASCII, and the head was all of one read — its first bytes the canonical request line
    (``METHOD target HTTP/1.1``), its last the empty line, none after it. llhttp refused any
    line a backend could read otherwise (bare CR or LF, folded lines, whitespace before a
    colon), so the backend reads the same headers from these bytes as the edge did (the
    whitespace after each colon as the client put it). None otherwise.

    The read holds this request's line from its start when ``" HTTP/1.1\\r\\n"`` ends where the
    canonical line would (what llhttp skips before a request is CR and LF, and a line with
    more than one space between its parts is longer); nothing after its empty line when it
    ends with that line and holds no other (one byte after it makes it end otherwise, two or
    more put that line before its last two bytes); and no other request came before it in the
    read (its empty line would be there). ``tests/edge/test_verbatim_head.py`` fails with any
    of these checks taken out."""
    read = request.first_read
    if read is None:
        return None
    # The same read as the connection's last head's (a client sends the same request again and
    # again on its connection: three compares instead of the checks and a decode, ~1,200
    # instructions a request, compiled).
    last = kept_head(request)
    method, target = request.method, request.path
    if last is not None and read is last.read and target is last.target and method == last.method:
        return last.head
    if read[-4:] != b"\r\n\r\n":
        return None
    end = len(method) + len(target) + 12  # both one character a byte
    head = read[:-2]
    if head[end - 11 : end] != _HTTP11_LINE_END:
        return None
    # Decoded as ASCII (which checks it is) and searched as text: compiled, both are direct
    # calls, where bytes' isascii and partition went through Python's generic method calls
    # (~1,130 instructions a request; ``in`` on bytes tries them as an integer first, a
    # TypeError made and cleared, and find parses its arguments and takes a buffer).
    try:
        text = head.decode("ascii")
    except UnicodeDecodeError:
        return None
    if "\r\n\r\n" in text:
        return None
    if last is not None and len(read) <= _FIRST_READ_LENGTH:
        last.read, last.method, last.target, last.head = read, method, target, head
        last.added = None  # what the steps made of the head before is not of this one
    return head


class Http1ServerProtocol(asyncio.Protocol):
    """Serves one client connection over HTTP/1.1 (see the module docstring)."""

    def __init__(
        self,
        handler: H2Handler,
        *,
        scheme: str,
        limits: ProxyLimits,
        upgrade: Callable[[], asyncio.Protocol],
        closed: Callable[[Http1ServerProtocol], None] = lambda _protocol: None,
        held_back: frozenset[str] = frozenset(),
        express: ExpressHandler | None = None,
    ) -> None:
        """``held_back``: lower-case names the front door never forwards as the client sent
        them, left out of each request's :attr:`~H2Request.forwardable` with the hop-by-hop
        ones. ``express``: what answers a request without a body when no other is in flight,
        instead of ``handler`` (:data:`ExpressHandler`)."""
        self._loop = asyncio.get_running_loop()
        self._held_back = held_back
        self.parser = httptools.HttpRequestParser(self)
        self._handler = handler
        """What answers each request (the edge's steps, ``EdgeStreams.handle``)."""
        self._express = express
        self._abandon: Callable[[], None] | None = None
        """What gives up the express answer in flight when the client goes (None: none is)."""
        self._express_over: asyncio.Future[None] | None = None
        """What :meth:`close` waits on while an express answer is in flight."""
        self._scheme = scheme
        self._limits = limits
        self._underscores = limits.underscores_in_headers
        """``limits.underscores_in_headers``, read once (not a compiled object's attribute)."""
        self._upgrade = upgrade
        """The server that takes a connection whose request upgrades it (aiohttp's)."""
        self._closed = closed
        self._transport: asyncio.Transport | None = None
        self._out = HeldWrites(self._loop)
        """Every write of the connection, held for the end of the loop's turn (flushed before
        the transport closes or changes hands)."""
        self._peer = ""
        self.lost = False
        self.closing = False
        """No further request is read (the edge is stopping, or this connection must close)."""
        # The message being parsed.
        self._fresh: bytes | None = None
        """The bytes being parsed, when they began between two requests (None: in a request's
        head or body, or after the first request's head in them): the head of a request may be
        all of them (:func:`head_as_sent`), and its request line begins them but for the CR and
        LF llhttp skips (its HTTP version read from them)."""
        self.kept = KeptHead()
        """What the connection keeps of its last head sent as received (:class:`KeptHead`)."""
        self._first_read = b""
        """The last request's ``first_read`` (:attr:`H2Request.first_read`), when at most
        :data:`_FIRST_READ_LENGTH` bytes."""
        self._url = b""
        self._target_bytes = b""
        """The last request's target as parsed; :attr:`_target` the same decoded."""
        self._target = ""
        self._headers: list[bytes] = []
        """The request's header names and values as parsed, in turn (name, value, name, ...)."""
        self._seen: list[_Seen] = []
        """The last request's headers by position, decoded (:class:`_Seen`)."""
        self._template: CIMultiDict[str] | None = None
        """The headers of the last requests, when they were the same as their :attr:`_seen`
        (None when one was not): a request whose headers are all as they were gets it, or a
        copy (:meth:`on_headers_complete`)."""
        self._template_size = 0
        """How many names and values :attr:`_template` was made from (``_headers``' length)."""
        self._template_version = -1
        """:attr:`_template`'s ``multidict.getversion`` when made (another after any change)."""
        self._parsing: Http1Body | None = None
        # Requests parsed, waiting for the one in flight to be answered.
        self._waiting: deque[tuple[H2Request, Http1Responder]] = deque()
        self._task: asyncio.Task[None] | None = None
        """The connection's one task: it answers its requests in turn, and waits for the next
        (:attr:`_next`) while the connection idles — not a task per request."""
        self._answering: Http1Responder | None = None
        """The answer of the request in flight (None: none is)."""
        self._next: asyncio.Future[_Work | None] | None = None
        """What :attr:`_task` waits on for the next request's work (None when it ends)."""
        self._handed_over: bytes | None = None
        # One timer each, re-armed only when it fires early: not two timers per request.
        self._header_timer: asyncio.TimerHandle | None = None
        self._headers_began: float | None = None
        """When the headers being read began (None: none are being read; :data:`_BEGUN`: in
        the read being parsed, its time taken at that read's end if they are not complete)."""
        self._idle_timer: asyncio.TimerHandle | None = None
        self._idle_since: float | None = None
        """When the connection last became idle (None: a request is in progress)."""
        self._paused_for: set[str] = set()
        self.write_paused = False
        """The transport asked to stop writing (:meth:`drain` waits)."""
        self._empty_body = Http1Body(
            self, empty=True, expect_continue=False, timeout=limits.body_timeout
        )
        """The body of every request that has none (nothing in it changes)."""
        self._drained: asyncio.Future[None] | None = None

    # ---- the connection ----

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        # uvloop's transports are not subclasses of asyncio.Transport, only alike.
        self._transport = self._out.transport = cast(asyncio.Transport, transport)
        peer = transport.get_extra_info("peername")
        self._peer = str(peer[0]) if isinstance(peer, tuple) else ""
        self._arm_idle()

    def data_received(self, data: bytes) -> None:
        if self.closing and self._answering is None and not self._waiting:
            return
        # Between two requests (no head, no body in progress): the next one begins in data,
        # after nothing but the CR and LF llhttp skips (on_headers_complete checks the rest).
        self._fresh = data if self._headers_began is None and self._parsing is None else None
        try:
            self.parser.feed_data(data)
            began = self._headers_began
            if began is not None:  # a head is incomplete
                if began == _BEGUN:
                    # The loop's time while this read is handled (uvloop's does not move in a
                    # callback; asyncio's, microseconds later).
                    self._headers_began = self._loop.time()
                if self._header_timer is None:
                    self._header_timer = self._loop.call_later(
                        self._limits.header_timeout, self._headers_too_slow
                    )
        except httptools.HttpParserUpgrade as upgrade:
            self._upgrade_after(data[int(upgrade.args[0]) :] if upgrade.args else b"")
        except httptools.HttpParserError as error:
            # httptools wraps what a callback raises: the limit that was hit is in its context.
            cause = error.__context__
            if isinstance(cause, _HeadersTooLarge):
                self._refuse(cause.status, "request headers over the limit")
            else:
                self._refuse(400, type(error).__name__)

    def eof_received(self) -> bool | None:
        # A client that half-closes has left (as aiohttp took it): the transport closes and
        # the request in flight is cancelled, and with it its upstream exchange.
        return None

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._cancel_timers()
        abandon, self._abandon = self._abandon, None
        if abandon is not None:
            abandon()  # as the task is cancelled below: the upstream exchange with it
        _settle(self._express_over)
        if self._parsing is not None:
            self._parsing._wake()
        if self._task is not None:
            self._task.cancel()
        self._waiting.clear()
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)
        self._closed(self)

    def pause_writing(self) -> None:
        self.write_paused = True

    def resume_writing(self) -> None:
        self.write_paused = False
        drained = self._drained
        if drained is not None and not drained.done():
            drained.set_result(None)

    async def drain(self) -> None:
        if self.write_paused and not self.lost:
            self._drained = self._loop.create_future()
            await self._drained

    def write(self, data: bytes) -> None:
        self._out.write(data)  # (it writes only to an open transport)

    def write_continue(self) -> None:
        if self._answering is not None:
            self.write(_CONTINUE)

    def abort(self) -> None:
        self.closing = True
        if self._transport is not None:
            self._out.flush()
            self._transport.close()

    def pause_reading_for_body(self) -> None:
        self._pause("body")

    def resume_reading_for_body(self) -> None:
        self._resume("body")

    def _pause(self, why: str) -> None:
        if not self._paused_for and self._transport is not None and not self.lost:
            self._transport.pause_reading()
        self._paused_for.add(why)

    def _resume(self, why: str) -> None:
        if why not in self._paused_for:
            return
        self._paused_for.discard(why)
        if not self._paused_for and self._transport is not None and not self.lost:
            self._transport.resume_reading()

    async def close(self, *, within: float) -> None:
        """Stop the connection: no new request is read, the one in flight (and those already
        read) may finish for at most ``within`` s, then they are cancelled and it closes."""
        self.closing = True
        self._stop_waiting()
        ends = self._loop.time() + within
        if self._abandon is not None:  # an express answer in flight
            over = self._express_over = self._loop.create_future()
            await asyncio.wait([over], timeout=within)
        task = self._task
        if task is not None:
            await asyncio.wait([task], timeout=max(ends - self._loop.time(), 0))
        if self._transport is not None:
            self._out.flush()
            self._transport.close()

    # ---- parser callbacks ----

    def on_message_begin(self) -> None:
        self._url = b""
        self._headers = []
        self._idle_since = None
        # Its time is taken only if the head is not complete at the end of this read (the
        # loop's time, a generic call, was ~300 instructions a request).
        self._headers_began = _BEGUN

    def on_url(self, url: bytes) -> None:
        self._url += url
        if len(self._url) > MAX_LINE_SIZE:
            raise _HeadersTooLarge(414)

    def on_header(self, name: bytes, value: bytes) -> None:
        if len(name) > MAX_FIELD_SIZE or len(value) > MAX_FIELD_SIZE:
            raise _HeadersTooLarge(431)
        headers = self._headers
        if len(headers) >= 2 * MAX_HEADERS:
            raise _HeadersTooLarge(431)
        # Name and value in turn, not a tuple each (made and freed per header).
        headers.append(name)
        headers.append(value)

    def on_headers_complete(self) -> None:
        self._headers_began = None
        parser = self.parser
        # The request's headers (made into its CIMultiDict in one call after the loop, not one
        # add() each), and what an upstream may get as sent, in the same pass
        # (H2Request.forwardable).
        fields: list[tuple[str, str]] = []
        forwardable: list[tuple[str, str]] = []
        authority: str | None = None
        listed = length = chunked = expect_continue = close_named = close_header = False
        connection = False  # a Connection or Proxy-Connection header (llhttp reads them)
        underscores = self._underscores
        held_back = self._held_back
        raw = self._headers
        seen = self._seen
        remembered = len(seen)
        # One tuple a header, put in both lists (a ``tuple[str, str]`` local is unboxed in the
        # compiled build, and was made into a new tuple for each).
        field: Any = None
        position = 0
        same = True  # every header as the last request had it at its position
        for index in range(0, len(raw), 2):
            raw_name = raw[index]
            raw_value = raw[index + 1]
            entry = seen[position] if position < remembered else None
            if entry is not None and raw_name == entry.raw_name:
                kind = entry.kind
                if entry.underscored and not underscores:
                    same = False
                    position += 1
                    continue  # see ProxyLimits.underscores_in_headers
                if raw_value == entry.raw_value:
                    field = entry.field
                    value = entry.value
                else:
                    same = False
                    value = raw_value.decode("latin-1")
                    field = (entry.name, value)
                    if len(raw_value) <= _SEEN_LENGTH:
                        entry.raw_value = raw_value
                        entry.value = value
                        entry.field = field
            else:
                same = False
                # Not ``get() or _name()``: the compiled build made a tuple of the found one
                # again to test it.
                known = _names.get(raw_name)
                if known is None:
                    known = _name(raw_name)
                name, lower, kind, underscored = known
                if underscored and not underscores:
                    position += 1
                    continue  # see ProxyLimits.underscores_in_headers
                if not kind and lower in held_back:
                    kind = _HELD_BACK
                value = raw_value.decode("latin-1")
                field = (name, value)
                if len(raw_value) <= _SEEN_LENGTH and (
                    position < remembered or position == remembered < _SEEN_POSITIONS
                ):
                    entry = _Seen(raw_name, raw_value, name, value, field, kind, underscored)
                    if position < remembered:
                        seen[position] = entry
                    else:
                        seen.append(entry)
                        remembered += 1
            position += 1
            fields.append(field)
            if not kind:
                forwardable.append(field)
            elif kind == _HOST:
                if authority is None:  # the first (the one a CIMultiDict's get() gives)
                    authority = value
                    forwardable.append(field)
            elif kind == _CONTENT_LENGTH:
                length = value.strip() != "0"
                forwardable.append(field)
            elif kind == _TRANSFER_ENCODING:
                chunked = True
            elif kind == _EXPECT:
                expect_continue = value.strip().lower() == "100-continue"
            elif kind == _CONNECTION:
                connection = True
                token = value.strip().lower()
                if token == "close":
                    close_named = True
                elif token not in _UNLISTING:
                    listed = True
            elif kind == _CLOSE:
                close_header = True
                forwardable.append(field)
            elif kind == _PROXY_CONNECTION:
                connection = True
        # Whether the request waits its turn (one is in flight, or the connection's task is
        # still finishing one): it is not answered now.
        waits = self._answering is not None or (self._next is None and self._task is not None)
        # The request's CIMultiDict when every header is as it was: the connection's last one
        # (_template), made anew if anything changed it since (its version). A request answered
        # now gets it itself: the requests before it are done with it (the connection answers
        # one at a time), so whatever changed it was theirs and is seen here. One that waits
        # gets a copy: the request in flight may still change the template. (A copy was ~500
        # instructions, and freeing it a request about as much.)
        template = self._template
        if not same:
            self._template = None
            headers: CIMultiDict[str] = CIMultiDict(fields)
        else:
            if (
                template is None
                or len(raw) != self._template_size
                or multidict_version(template) != self._template_version  # type: ignore[arg-type]
            ):
                template = self._template = CIMultiDict(fields)
                self._template_size = len(raw)
                self._template_version = multidict_version(template)  # type: ignore[arg-type]
            headers = template.copy() if waits else template
        fresh = self._fresh
        self._fresh = None  # a request after this one in the same read begins elsewhere in it
        # Names a Connection header lists (beyond the hop-by-hop ones), or no Host: the general
        # rules decide (proxy.without_hop_by_hop).
        first_read = None
        if listed or authority is None or (close_named and close_header):
            sorted_out = None
        else:
            sorted_out = forwardable
            if 2 * len(forwardable) == len(raw) and fresh is not None:
                # Every header may go upstream as sent: the read it began in, for head_as_sent
                # (the last such read's object when the bytes are the same: head_as_sent knows
                # it by identity).
                if fresh == self._first_read:
                    first_read = self._first_read
                else:
                    first_read = fresh
                    if len(fresh) <= _FIRST_READ_LENGTH:
                        self._first_read = fresh
        # A GET on HTTP/1.1 when the read this request began in holds its canonical request
        # line from its first byte, ``GET target HTTP/1.1`` (head_as_sent says why that is
        # exact: here the method is known from the line's first four bytes, which no other
        # method begins with). Without a Connection or Proxy-Connection header, llhttp then
        # keeps the connection (only those set its close flag, and a request never reads to
        # its end) and upgrades nothing (only those with an Upgrade header do, and CONNECT):
        # its three answers are known without the three calls (generic calls on the parser,
        # ~250 instructions each).
        url_length = len(self._url)
        if (
            fresh is not None
            and not connection
            and fresh[:4] == b"GET "
            and fresh[url_length + 4 : url_length + 15] == _HTTP11_LINE_END
        ):
            method = "GET"
            http10 = False
            keep_alive = True
        else:
            raw_method = parser.get_method()
            # GET compared first: a look-up hashes the method's bytes, new each request.
            if raw_method == b"GET":
                method = "GET"
            else:
                method = _METHODS.get(raw_method) or raw_method.decode("ascii", "replace")
            # HTTP/1.1 when the read this request began in holds its canonical request line
            # from its first byte (head_as_sent says why that is exact); else llhttp is asked,
            # whose get_http_version formats a string (~2,300 instructions a request).
            end = len(raw_method) + url_length + 12
            if fresh is not None and fresh[end - 11 : end] == _HTTP11_LINE_END:
                http10 = False
            else:
                http10 = parser.get_http_version() == "1.0"
            if parser.should_upgrade():
                return  # feed_data raises HttpParserUpgrade next: aiohttp takes the connection
            keep_alive = parser.should_keep_alive()
        # The target as text: the connection's last one when its bytes are the same (a
        # client asks for the same few targets; the same object, its hash kept, for
        # split_target's look-up, and no decode).
        url = self._url
        if url == self._target_bytes:
            target = self._target
        else:
            target = url.decode("latin-1")
            self._target_bytes = url
            self._target = target
        if length or chunked:
            body = Http1Body(
                self,
                empty=False,
                expect_continue=expect_continue and not http10,
                timeout=self._limits.body_timeout,
            )
            self._parsing = body
        else:
            body = self._empty_body
            self._parsing = None
        # Positional: a class called with keywords gets them as a dict, built and unpacked per
        # request (three times the cost of this call); the order is H2Request's fields'.
        request = H2Request(
            method,
            self._scheme,
            authority or "",
            target,  # path
            headers,
            self._peer,
            body,
            self._transport,
            "1.1",  # version
            sorted_out,
            first_read,
        )
        responder = Http1Responder(self, body, method, http10, keep_alive)
        if waits:
            self._waiting.append((request, responder))
            self._pause("pipelined")
            return
        self._answering = responder
        express = self._express
        if express is not None and body is self._empty_body:
            try:
                work = express(request, responder)
            except Exception as error:  # answered on the task as the handler's failure is
                work = _raising(error)
            if work is None:
                return  # answered by callbacks: express_done or express_continue follows
            self._run(work, responder)
        else:
            self._run(request, responder)

    def on_body(self, body: bytes) -> None:
        if self._parsing is not None:
            self._parsing.feed(body)

    def on_message_complete(self) -> None:
        if self._parsing is not None:
            self._parsing.end()
            self._parsing = None

    # ---- requests ----

    def _run(self, work: H2Request | Work, responder: Http1Responder) -> None:
        """``work`` answers ``responder``'s request on the connection's task (made if none is
        waiting for the next request); a request is answered by the handler."""
        waiting_for = self._next
        if waiting_for is not None:
            self._next = None
            waiting_for.set_result((work, responder))
        else:
            self._task = self._loop.create_task(self._serve(work, responder))

    async def _serve(self, work: H2Request | Work, responder: Http1Responder) -> None:
        """Answer a request (``work``), then each request that follows on the connection, in
        turn: one task for them all (a task made per request cost more than the wait for the
        next)."""
        this = asyncio.current_task()
        try:
            while True:
                try:
                    if isinstance(work, H2Request):
                        await self._handler(work, responder)
                    else:
                        await work()
                    if not responder.ended:
                        # What ``answer_with`` does, here without a coroutine of its own.
                        await finish_answer(responder)
                except asyncio.CancelledError:
                    self.abort()
                    return
                except (ConnectionError, ClientBodyTimeout) as error:
                    logger.debug(
                        "edge: HTTP/1.1 request from {}: {}", self._peer, type(error).__name__
                    )
                    self.abort()
                    return
                except Exception:
                    logger.exception(
                        "edge: HTTP/1.1 request from {}: the handler failed", self._peer
                    )
                    if responder.started:
                        self.abort()
                        return
                    plain = answer(INTERNAL_ERROR)
                    responder.keep_alive = False
                    responder.send_headers(
                        500, [("Content-Type", "text/plain; charset=utf-8")], end=False
                    )
                    await responder.send_data(plain.body(with_detail=False).encode(), end=True)
                self._answering = None
                # The request's whole body has arrived, or the next request cannot be read.
                if not responder.keep_alive or not responder._body.ended:
                    self.abort()
                    return
                if self._waiting or self.lost or self.closing or self._handed_over is not None:
                    following = self._following()
                    if following is None:
                        return
                else:
                    # The usual case, _following's last lines inlined (and _arm_idle's): the
                    # connection idles until its next request comes.
                    loop = self._loop
                    waiting_for = self._next = loop.create_future()
                    self._idle_since = loop.time()
                    if self._idle_timer is None:
                        self._idle_timer = loop.call_later(self._limits.idle_timeout, self._idled)
                    following = await waiting_for
                    if following is None:
                        return
                work, responder = following
        finally:
            if self._task is this:  # not one made since this one was told to end
                self._task = None
                self._answering = None
                self._next = None

    def _following(self) -> _Work | None:
        """The next request once one was answered, when one may be waiting or none may come: a
        pipelined one already read, else None (lost, closing, or handed over for an upgrade).
        (When none of these holds, :meth:`_serve` idles until the next request itself.)"""
        if self.lost:
            return None
        if self._waiting:
            request, responder = self._waiting.popleft()
            if not self._waiting:
                self._resume("pipelined")
            self._answering = responder
            return request, responder
        if self._handed_over is not None:
            self._hand_over(self._handed_over)
            return None
        if self.closing:
            self.abort()
        return None

    def _stop_waiting(self) -> None:
        """The connection takes no further request: its task, idle, ends."""
        waiting_for, self._next = self._next, None
        if waiting_for is not None and not waiting_for.done():
            waiting_for.set_result(None)

    # ---- limits ----

    def _arm_idle(self) -> None:
        self._idle_since = self._loop.time()
        if self._idle_timer is None and not self.lost:
            self._idle_timer = self._loop.call_later(self._limits.idle_timeout, self._idled)

    def _left_for(self, began: float | None, bound: float) -> float | None:
        """Seconds left of ``bound`` from ``began`` (None: nothing is being timed)."""
        return None if began is None else began + bound - self._loop.time()

    def _idled(self) -> None:
        self._idle_timer = None
        left = self._left_for(self._idle_since, self._limits.idle_timeout)
        if left is None or self.lost:
            return  # busy: armed again once idle
        if left > 0:
            self._idle_timer = self._loop.call_later(left, self._idled)
        elif self._transport is not None:
            self._out.flush()
            self._transport.close()

    def _headers_too_slow(self) -> None:
        self._header_timer = None
        left = self._left_for(self._headers_began, self._limits.header_timeout)
        if left is None or self.lost:
            return  # these headers were complete in time
        if left > 0:
            self._header_timer = self._loop.call_later(left, self._headers_too_slow)
        elif self._answering is None and not self._waiting:
            slow = answer(HEADER_TIMEOUT)
            self._say(slow.status, slow.reason, slow.body(with_detail=False))
        else:
            self.abort()

    def _cancel_timers(self) -> None:
        self._headers_began = self._idle_since = None
        _cancel(self._idle_timer)
        _cancel(self._header_timer)
        self._idle_timer = self._header_timer = None

    def _refuse(self, status: int, why: str) -> None:
        """A malformed request: 4xx and close (logged without anything the client sent)."""
        logger.debug("edge: malformed request refused with {}: {}", status, why)
        self._cancel_timers()
        refused = answer(BAD_REQUEST, status=status)
        in_flight, task = self._answering, self._task
        if in_flight is None and not self._waiting:
            self._say(status, refused.reason, refused.body(with_detail=False))
        elif (
            task is not None
            and in_flight is not None
            and not in_flight.started
            and not self._waiting
            and self._parsing is not None
        ):
            # The body of the request in flight is malformed (a bad chunk size, a bare LF):
            # the request is given up — and its upstream exchange with it — and answered as
            # any other malformed request, before the upstream said anything.
            in_flight.ended = True
            task.cancel()
            self._say(status, refused.reason, refused.body(with_detail=False))
        else:
            self._waiting.clear()
            self.closing = True
            self._pause("refused")

    def _say(self, status: int, reason: str, text: str) -> None:
        """An answer of the data plane's own, then close (no request of this connection is in
        flight)."""
        body = text.encode()
        self.write(
            _encode(
                f"HTTP/1.1 {status} {_REASONS.get(status, 'Unknown')}\r\n"
                "Content-Type: text/plain; charset=utf-8\r\n"
                f"X-Interlock-Reason: {reason}\r\nContent-Length: {len(body)}\r\n"
                f"Date: {_date()}\r\nConnection: close\r\n\r\n"
            )
            + body
        )
        self.abort()

    # ---- the hand-over to aiohttp, for upgrades ----

    def _upgrade_after(self, rest: bytes) -> None:
        """An upgrade request was parsed: aiohttp's server takes the connection once the
        requests before it are answered."""
        self._cancel_timers()
        parser = self.parser
        method = parser.get_method()
        version = parser.get_http_version().encode()
        head = b"%b %b HTTP/%b\r\n" % (method, self._url, version)
        underscores = self._limits.underscores_in_headers
        raw = self._headers
        head += b"".join(
            b"%b: %b\r\n" % (raw[index], raw[index + 1])
            for index in range(0, len(raw), 2)
            if underscores or b"_" not in raw[index]
        )
        replay = head + b"\r\n" + rest
        self._pause("upgrade")
        if self._answering is None and not self._waiting:
            self._hand_over(replay)
        else:
            self._handed_over = replay

    def _hand_over(self, replay: bytes) -> None:
        transport = self._transport
        if transport is None or self.lost:
            return
        self._handed_over = None
        self._stop_waiting()
        self._out.flush()
        protocol = self._upgrade()
        transport.set_protocol(protocol)
        protocol.connection_made(transport)
        protocol.data_received(replay)
        if self._paused_for:
            self._paused_for.clear()
            transport.resume_reading()
        self._closed(self)
