"""The HTTP/1.1 server of the policy API and the admin server, without ``aiohttp.web_*``.

``interlock run`` serves a handful of ``GET`` paths (:mod:`interlock.api.routes`). aiohttp's
low-level server (``web_server``, ``web_protocol``, ``web_request``, ``web_response``,
``web_exceptions``, ``web_log``, ``html``) cost 0.8 to 0.9 MiB of RSS for that (issue 29 item 5,
``docs/benchmarks.md`` "Memory at rest, round seven"); this module serves the same answers on
what the Kubernetes client loads anyway: aiohttp's C request parser
(``aiohttp.http_parser.HttpRequestParser``) and ``BaseProtocol``'s write flow control.

What a connection gets:

- requests parsed by aiohttp's parser with its limits (request line and each header
  :data:`MAX_LINE` bytes, :data:`MAX_HEADERS` headers); a request it refuses, or a body
  declared larger than :data:`MAX_BODY`, is answered ``400`` (``413``) and the connection
  closed; what was wrong is logged at DEBUG by its kind only, never with the request's bytes
  (a header value may be a credential);
- keep-alive (HTTP/1.1 by default, HTTP/1.0 with ``Connection: keep-alive``); pipelined
  requests answered in order, reading paused while :data:`QUEUE` are waiting;
- a timeout for the request head: a connection that has not sent a whole request head
  ``head_timeout`` seconds after it opened or after its last answer is closed (slow or idle
  clients alike, as aiohttp's keep-alive timeout did);
- one task per request (none while a connection is idle), cancelled when the client goes
  away (a watch stream ends at once, not at its next write); a body the handler did not read
  is not waited for: the connection is closed after the answer instead;
- answers as aiohttp's wrote them: the status line with the status's phrase, the response's
  headers in order, then ``Content-Length`` (or ``Transfer-Encoding: chunked`` for a
  :class:`StreamResponse`), ``Date``, ``Server: interlock`` and ``Connection`` as keep-alive
  needs it; ``HEAD`` gets the head only; a handler's unexpected error is ``500`` with the
  status's description, or its traceback when asyncio's debug mode is on.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import traceback
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Mapping
from http import HTTPStatus
from types import MappingProxyType
from typing import ClassVar

from aiohttp.base_protocol import BaseProtocol
from aiohttp.helpers import rfc822_formatted_time
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.http_parser import HttpRequestParser, RawRequestMessage
from aiohttp.streams import StreamReader
from loguru import logger
from multidict import CIMultiDict, CIMultiDictProxy, MultiDictProxy
from yarl import URL

from interlock.kube.safelog import log_failure

SERVER = "interlock"
"""The ``Server`` header of every answer: aiohttp's default (``Python/3.x aiohttp/3.y``) tells a
scanner which versions to look up."""

MAX_LINE = 8190
"""Bytes of the request line and of each header (aiohttp's defaults)."""
MAX_HEADERS = 128
"""Headers in a request."""
MAX_BODY = 65536
"""Bytes of body a request may declare (``Content-Length``); no route reads one."""
QUEUE = 8
"""Pipelined requests waiting on one connection before it stops reading."""
HEAD_TIMEOUT = 75.0
"""Seconds a connection may take to send a whole request head (aiohttp's keep-alive timeout)."""
_READ_LIMIT = 2**16
"""A body's buffer size; reading pauses at twice it (``StreamReader``'s high-water mark)."""
_NO_PARAMETERS: Mapping[str, str] = MappingProxyType({})
_NO_BODY_STATUS = frozenset({204, 304})


class BodyError(Exception):
    """A request's body broke off or was malformed (set on its payload by the parser)."""


class Request:
    """One parsed request, as handlers see it."""

    __slots__ = ("_connection", "_head_sent", "_message", "match_info")

    def __init__(self, connection: _Connection, message: RawRequestMessage) -> None:
        self._connection = connection
        self._message = message
        self._head_sent = False
        self.match_info: Mapping[str, str] = _NO_PARAMETERS
        """The route's ``{name}`` segments (:mod:`interlock.api.routes`)."""

    @property
    def method(self) -> str:
        return self._message.method

    @property
    def version(self) -> tuple[int, int]:
        return (self._message.version.major, self._message.version.minor)

    @property
    def headers(self) -> CIMultiDictProxy[str]:
        return self._message.headers

    @property
    def rel_url(self) -> URL:
        """The request target as parsed (path and query)."""
        return self._message.url

    @property
    def path(self) -> str:
        """The decoded path."""
        return self._message.url.path

    @property
    def query_string(self) -> str:
        return self._message.url.query_string

    @property
    def query(self) -> MultiDictProxy[str]:
        return self._message.url.query

    @property
    def remote(self) -> str | None:
        """The peer's address, without its port."""
        return self._connection.peer

    @property
    def keep_alive(self) -> bool:
        return not self._message.should_close

    async def send_continue(self) -> None:
        """``100 Continue`` (to an HTTP/1.1 ``Expect: 100-continue``)."""
        await self._connection.send(b"HTTP/1.1 100 Continue\r\n\r\n")


class StreamResponse:
    """An answer whose body is written as it goes: chunked for HTTP/1.1, to the connection's
    end for HTTP/1.0. :meth:`prepare` sends the head; :meth:`write` waits while the client's
    socket is full (and raises ``ConnectionResetError`` once the client is gone)."""

    __slots__ = (
        "_chunked",
        "_connection",
        "_eof_sent",
        "_no_body",
        "headers",
        "keep_alive",
        "status",
    )

    def __init__(self, *, status: int = 200, headers: Mapping[str, str] | None = None) -> None:
        self.status = status
        self.headers: CIMultiDict[str] = CIMultiDict(headers or {})
        self.keep_alive = True
        """Whether the connection may serve another request after this answer."""
        self._connection: _Connection | None = None
        self._chunked = False
        self._no_body = False
        self._eof_sent = False

    @property
    def prepared(self) -> bool:
        return self._connection is not None

    def _length(self) -> int | None:
        return None

    async def prepare(self, request: Request) -> None:
        """Send the head (once)."""
        if self._connection is not None:
            return
        connection = self._connection = request._connection
        request._head_sent = True
        headers = self.headers
        self._no_body = (
            request.method == "HEAD" or self.status in _NO_BODY_STATUS or self.status < 200
        )
        keep_alive = self.keep_alive and request.keep_alive
        length = self._length()
        if length is not None:
            if self.status not in _NO_BODY_STATUS and self.status >= 200:
                headers["Content-Length"] = str(length)
        elif request.version >= (1, 1):
            self._chunked = not self._no_body
            if self._chunked:
                headers["Transfer-Encoding"] = "chunked"
        elif not self._no_body:
            keep_alive = False  # HTTP/1.0: the body ends with the connection
        if length != 0 and not self._no_body:
            headers.setdefault("Content-Type", "application/octet-stream")
        if "Date" not in headers:
            headers["Date"] = rfc822_formatted_time()
        headers["Server"] = SERVER
        if "Connection" not in headers:
            if keep_alive:
                if request.version == (1, 0):
                    headers["Connection"] = "keep-alive"
            elif request.version == (1, 1):
                headers["Connection"] = "close"
        self.keep_alive = keep_alive
        connection.write(self._head(request.version) + self._first_body())

    def _head(self, version: tuple[int, int]) -> bytes:
        try:
            phrase = HTTPStatus(self.status).phrase
        except ValueError:
            phrase = ""
        lines = [f"HTTP/{version[0]}.{version[1]} {self.status} {phrase}\r\n"]
        for name, value in self.headers.items():
            if "\r" in value or "\n" in value or "\r" in name or "\n" in name:
                raise ValueError(f"a newline in the answer's header {name!r}")
            lines.append(f"{name}: {value}\r\n")
        lines.append("\r\n")
        return "".join(lines).encode("latin-1")

    def _first_body(self) -> bytes:
        return b""

    async def write(self, data: bytes) -> None:
        """Send ``data`` as the body's next part; wait while the client is not reading."""
        connection = self._connection
        if connection is None:
            raise RuntimeError("write() before prepare()")
        if self._eof_sent:
            raise RuntimeError("write() after write_eof()")
        if self._no_body or not data:
            return
        if self._chunked:
            data = b"%x\r\n%b\r\n" % (len(data), data)
        await connection.send(data)

    async def write_eof(self) -> None:
        """End the body (the last chunk)."""
        if self._eof_sent:
            return
        self._eof_sent = True
        connection = self._connection
        if connection is not None and self._chunked:
            await connection.send(b"0\r\n\r\n")


class Response(StreamResponse):
    """An answer whose body is known: ``text`` (UTF-8, ``text/plain`` unless ``content_type``
    says otherwise, with ``charset=utf-8``) or ``body`` (bytes, ``content_type`` as given)."""

    __slots__ = ("body",)

    def __init__(
        self,
        *,
        status: int = 200,
        text: str | None = None,
        body: bytes | None = None,
        content_type: str | None = None,
        headers: Mapping[str, str] | None = None,
    ) -> None:
        super().__init__(status=status, headers=headers)
        if text is not None:
            self.body = text.encode()
            if "Content-Type" not in self.headers:
                self.headers["Content-Type"] = f"{content_type or 'text/plain'}; charset=utf-8"
        else:
            self.body = body or b""
            if content_type is not None and "Content-Type" not in self.headers:
                self.headers["Content-Type"] = content_type

    def _length(self) -> int:
        return len(self.body)

    def _first_body(self) -> bytes:
        return b"" if self._no_body else self.body

    async def write_eof(self) -> None:
        self._eof_sent = True


def json_response(
    data: object, *, status: int = 200, content_type: str = "application/json"
) -> Response:
    """``data`` as JSON (``json.dumps``'s defaults, as aiohttp's ``json_response``)."""
    return Response(status=status, text=json.dumps(data), content_type=content_type)


class HTTPException(Exception):
    """Raised by a handler: answered with :attr:`status`, ``text`` (by default
    ``"404: Not Found"`` and the like, as aiohttp's) and ``headers``."""

    status: ClassVar[int] = 500

    def __init__(self, *, text: str | None = None, headers: Mapping[str, str] | None = None):
        self.text = text if text is not None else f"{self.status}: {HTTPStatus(self.status).phrase}"
        self.headers: dict[str, str] = dict(headers or {})
        super().__init__(self.text)

    def response(self) -> Response:
        response = Response(status=self.status, text=self.text)
        response.headers.extend(self.headers)
        return response


class HTTPForbidden(HTTPException):
    status = 403


class HTTPNotFound(HTTPException):
    status = 404


class HTTPMethodNotAllowed(HTTPException):
    status = 405

    def __init__(self, method: str, allowed: Iterable[str], *, text: str | None = None):
        super().__init__(text=text, headers={"Allow": ",".join(sorted(allowed))})
        self.method = method


class HTTPExpectationFailed(HTTPException):
    status = 417


Handler = Callable[[Request], Awaitable[StreamResponse]]
_Item = tuple[RawRequestMessage, StreamReader] | HttpProcessingError
"""A request parsed (its head and its body's stream), or what the parser refused."""


class HttpServer:
    """Serves ``handler`` on every connection it makes protocols for (``loop.create_server``'s
    factory); :meth:`pre_shutdown` and :meth:`shutdown` stop it as aiohttp's server did."""

    def __init__(
        self, handler: Handler, *, debug: bool = False, head_timeout: float = HEAD_TIMEOUT
    ) -> None:
        self.handler = handler
        self.debug = debug
        """Whether a handler's unexpected error is answered with its traceback."""
        self.head_timeout = head_timeout
        self.connections: set[_Connection] = set()

    def __call__(self) -> _Connection:
        return _Connection(self)

    def pre_shutdown(self) -> None:
        """Close the connections waiting for a request; the others close after their answer."""
        for connection in list(self.connections):
            connection.stop()

    async def shutdown(self, grace: float) -> None:
        """Wait up to ``grace`` seconds for the handlers running, then cancel them and close
        every connection."""
        tasks = [c.task for c in self.connections if c.task is not None]
        if tasks:
            await asyncio.wait(tasks, timeout=grace)
        for connection in list(self.connections):
            connection.abort()


class _Connection(BaseProtocol):
    """One client connection: parses requests, answers them one at a time, in order."""

    __slots__ = ("_closing", "_parser_", "_queue", "_server", "_timer", "peer", "task")

    def __init__(self, server: HttpServer) -> None:
        loop = asyncio.get_running_loop()
        parser = HttpRequestParser(
            self,
            loop,
            _READ_LIMIT,
            max_line_size=MAX_LINE,
            max_field_size=MAX_LINE,
            max_headers=MAX_HEADERS,
            payload_exception=BodyError,
            auto_decompress=False,
        )
        super().__init__(loop, parser)
        self._parser_ = parser
        self._server = server
        self._queue: deque[_Item] = deque()
        self._timer: asyncio.TimerHandle | None = None
        self._closing = False
        """No more requests are read: after the answers queued, the connection closes."""
        self.task: asyncio.Task[bool] | None = None
        """The request being answered."""
        self.peer: str | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        super().connection_made(transport)
        peer = transport.get_extra_info("peername")
        self.peer = str(peer[0]) if isinstance(peer, tuple) and peer else None
        self._server.connections.add(self)
        self._wait_for_head()

    def _wait_for_head(self) -> None:
        self._timer = self._loop.call_later(self._server.head_timeout, self._head_timed_out)

    def _head_timed_out(self) -> None:
        self._timer = None
        if self.task is None and not self._queue and self.transport is not None:
            logger.debug("HTTP: closing a connection from {} that sent no request head", self.peer)
            self.transport.close()

    def data_received(self, data: bytes) -> None:
        if self._closing or self.transport is None:
            return
        try:
            messages, upgraded, _tail = self._parser_.feed_data(data)
        except HttpProcessingError as exc:
            # What the parser refused is logged by its kind only: its message quotes the bytes.
            logger.debug("HTTP: malformed request from {}: {}", self.peer, type(exc).__name__)
            self._queue.append(exc)
            self._closing = True
            messages, upgraded = [], False
        for message, payload in messages:
            self._queue.append((message, payload))
        if upgraded:
            # No route upgrades: the request is answered, then the connection closes.
            self._closing = True
        if len(self._queue) >= QUEUE:
            self._pause_reading_for_buffer()
        if self._queue and self.task is None:
            self._next()

    def _next(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        item = self._queue.popleft()
        if self._buffer_paused and not self._queue:
            self._resume_reading_for_buffer()
        task = self.task = self._loop.create_task(self._answer(item))
        task.add_done_callback(self._answered)

    def _answered(self, task: asyncio.Task[bool]) -> None:
        self.task = None
        if task.cancelled():
            return  # the client went away, or the server stopped
        error = task.exception()
        if error is not None:
            log_failure("HTTP: answering a request failed", error=error)
        transport = self.transport
        if transport is None:
            return
        if error is not None or not task.result():
            transport.close()
        elif self._queue:
            self._next()
        elif self._closing:
            transport.close()
        else:
            self._wait_for_head()

    async def _answer(self, item: _Item) -> bool:
        """Answer one request; whether the connection may serve the next one."""
        if isinstance(item, HttpProcessingError):
            if self.transport is not None:
                self.transport.write(_refusal(400))
            return False
        message, payload = item
        request = Request(self, message)
        response = await self._respond(request, message)
        if response is None:
            return False  # a stream broke off: the client sees the connection close
        try:
            await response.prepare(request)
            await response.write_eof()
        except ConnectionError:
            return False
        # A body the handler did not read is not waited for.
        return response.keep_alive and payload.is_eof()

    async def _respond(self, request: Request, message: RawRequestMessage) -> StreamResponse | None:
        """The answer to ``request``; ``None`` when the handler failed after it had sent its
        head (no second answer can follow)."""
        declared = message.headers.get("Content-Length", "0")
        if not declared.isdigit() or int(declared) > MAX_BODY:
            response: StreamResponse = Response(status=413, text="413: Request Entity Too Large")
            response.keep_alive = False
            return response
        try:
            return await self._server.handler(request)
        except HTTPException as exc:
            return None if request._head_sent else exc.response()
        except Exception as error:
            # A plain traceback: loguru's own would print every frame's variables.
            log_failure(
                "HTTP: the handler of {} {} failed", request.method, request.path, error=error
            )
            if request._head_sent:
                return None
            description = HTTPStatus.INTERNAL_SERVER_ERROR.description
            if self._server.debug:
                description = traceback.format_exc()
            response = Response(status=500, text=f"500 Internal Server Error\n\n{description}")
            response.keep_alive = False
            return response

    async def send(self, data: bytes) -> None:
        """Write ``data``; wait while the client's socket is full."""
        if self.transport is None:
            raise ConnectionResetError("the client went away")
        self.transport.write(data)
        await self._drain_helper()

    def write(self, data: bytes) -> None:
        if self.transport is None:
            raise ConnectionResetError("the client went away")
        self.transport.write(data)

    def stop(self) -> None:
        """Read no more requests; close now if none is being answered."""
        self._closing = True
        self._queue.clear()
        if self.task is None and self.transport is not None:
            self.transport.close()

    def abort(self) -> None:
        """Cancel the handler running and close."""
        if self.task is not None:
            self.task.cancel()
        if self.transport is not None:
            self.transport.close()

    def connection_lost(self, exc: BaseException | None) -> None:
        super().connection_lost(exc)
        self._server.connections.discard(self)
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._queue.clear()
        if self.task is not None:
            self.task.cancel()  # the client is gone: so is its request's handler
        with contextlib.suppress(HttpProcessingError):  # a request cut short: nobody to answer
            self._parser_.feed_eof()


def _refusal(status: int) -> bytes:
    body = f"{status}: {HTTPStatus(status).phrase}".encode()
    return (
        f"HTTP/1.1 {status} {HTTPStatus(status).phrase}\r\n"
        "Content-Type: text/plain; charset=utf-8\r\n"
        f"Content-Length: {len(body)}\r\nDate: {rfc822_formatted_time()}\r\n"
        f"Server: {SERVER}\r\nConnection: close\r\n\r\n"
    ).encode() + body


__all__ = [
    "HEAD_TIMEOUT",
    "SERVER",
    "HTTPException",
    "HTTPExpectationFailed",
    "HTTPForbidden",
    "HTTPMethodNotAllowed",
    "HTTPNotFound",
    "Handler",
    "HttpServer",
    "Request",
    "Response",
    "StreamResponse",
    "json_response",
]
