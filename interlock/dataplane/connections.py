"""Client connections of the data plane: bounded in time (the header timeout), and logged
through interlock's logger without what the client sent.

aiohttp's server closes a connection that has no request in progress after its keep-alive
timeout (the edge's idle timeout), but a client that sends a first byte and then dribbles the
rest of its headers (slowloris) is never timed out, and neither is one that stops in the middle
of its headers. :class:`GuardedServer` adds the missing bound: from the first byte of a request
until its headers are complete, at most ``header_timeout`` seconds, then ``408`` and close.
Body reads are bounded where the body is read (``proxy.ClientBody``).

aiohttp's server logs a malformed request as an ERROR with a traceback, through the standard
``logging`` module — so to stderr whatever ``--log-level`` says — and the parser's message quotes
the offending bytes (an oversized session cookie, say). :data:`HTTP_SERVER_LOGGER` takes its
records instead and re-logs them through loguru: a client's malformed request at DEBUG, anything
else at ERROR, and only the exception's type and status, never its message or the request.

This leans on two attributes of aiohttp's ``RequestHandler`` (``_waiter``: a future the handler
awaits while it has no parsed request; ``_messages``: parsed requests not yet handled). The mesh
listener serves every HTTP/1.1 connection with it; the edge only those an upgrade request handed
over (its own HTTP/1.1 server, ``http1_server.py``, bounds the others), so
``tests/security/test_starvation.py`` now exercises the edge's server, not this one.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from aiohttp import web
from aiohttp.http_exceptions import HttpProcessingError
from aiohttp.web_protocol import RequestHandler
from loguru import logger

from interlock.dataplane.answers import BAD_REQUEST, INTERNAL_ERROR, answer
from interlock.dataplane.wire import answer_response


class _ToLoguru(logging.Handler):
    """aiohttp's server records → loguru, reduced to what cannot hold request data."""

    def emit(self, record: logging.LogRecord) -> None:
        error = record.exc_info[1] if record.exc_info else None
        if error is None:
            # aiohttp's own debug lines ("Ignored premature client disconnection", ...): the
            # template only, its arguments unformatted.
            logger.debug("HTTP server: {}", str(record.msg))
        elif isinstance(error, HttpProcessingError):
            logger.debug("malformed request refused with {}: {}", error.code, type(error).__name__)
        else:
            logger.error("error handling a request: {}", type(error).__name__)


HTTP_SERVER_LOGGER = logging.getLogger("interlock.dataplane.http")
"""The logger the front doors' aiohttp servers write to; it never reaches stderr by itself (the
loguru lines name this module, the edge's and the mesh listener's alike)."""
HTTP_SERVER_LOGGER.propagate = False
HTTP_SERVER_LOGGER.setLevel(logging.DEBUG)
HTTP_SERVER_LOGGER.addHandler(_ToLoguru())

_REQUEST_TIMEOUT = (
    b"HTTP/1.1 408 Request Timeout\r\nConnection: close\r\nContent-Type: text/plain\r\n"
    b"X-Interlock-Reason: header-timeout\r\n"
    b"Content-Length: 50\r\n\r\nheader-timeout: the request headers took too long\n"
)


class _GuardedHandler(RequestHandler):
    """A connection whose request headers must be complete ``header_timeout`` s after they
    started."""

    __slots__ = ("_header_deadline", "_header_timeout")

    def __init__(self, manager: web.Server, *, header_timeout: float, **kwargs: Any) -> None:
        super().__init__(manager, **kwargs)
        self._header_timeout = header_timeout
        self._header_deadline: asyncio.TimerHandle | None = None

    def data_received(self, data: bytes) -> None:
        waiting = self._waiting_for_headers()
        super().data_received(data)
        if not waiting:
            return
        if self._waiting_for_headers():
            if self._header_deadline is None and data:
                self._header_deadline = self._loop.call_later(
                    self._header_timeout, self._headers_too_slow
                )
        else:
            self._cancel_header_deadline()

    def connection_lost(self, exc: BaseException | None) -> None:
        self._cancel_header_deadline()
        super().connection_lost(exc)

    def handle_error(
        self,
        request: web.BaseRequest,
        status: int = 500,
        exc: BaseException | None = None,
        message: str | None = None,
    ) -> web.StreamResponse:
        """aiohttp's answer to a malformed request (or a crashed handler), in the data plane's
        answer format and without aiohttp's ``Server`` banner."""
        response = super().handle_error(request, status, exc, message)
        reason = BAD_REQUEST if status < 500 else INTERNAL_ERROR
        plain = answer_response(answer(reason, status=status))
        plain.force_close()
        del response
        return plain

    def _waiting_for_headers(self) -> bool:
        waiter = self._waiter
        return waiter is not None and not waiter.done() and not self._messages

    def _cancel_header_deadline(self) -> None:
        if self._header_deadline is not None:
            self._header_deadline.cancel()
            self._header_deadline = None

    def _headers_too_slow(self) -> None:
        self._header_deadline = None
        if not self._waiting_for_headers() or self.transport is None:
            return
        self.transport.write(_REQUEST_TIMEOUT)
        self.force_close()
        self.transport.close()


class GuardedServer(web.Server):
    """``aiohttp.web.Server`` whose connections time out on slow request headers."""

    def __init__(self, handler: Any, *, header_timeout: float, **kwargs: Any) -> None:
        kwargs.setdefault("logger", HTTP_SERVER_LOGGER)
        super().__init__(handler, **kwargs)
        self._header_timeout = header_timeout

    def __call__(self) -> RequestHandler:
        return _GuardedHandler(
            self, loop=self._loop, header_timeout=self._header_timeout, **self._kwargs
        )
