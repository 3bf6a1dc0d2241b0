"""Answers on the wire: the data plane's own responses, without a library banner.

aiohttp adds ``Server: Python/3.x aiohttp/3.y`` to every response that does not set one: it
tells an attacker which versions to look up, and it says nothing a client needs.
:class:`PlainResponse` is a ``web.Response`` that sends no ``Server`` header it was not given;
:func:`answer_response` renders an :class:`~interlock.dataplane.answers.Answer` in the one
format of ``docs/answers.md``.
"""

from __future__ import annotations

from collections.abc import Mapping

from aiohttp import web

from interlock.dataplane.answers import REASON_HEADER, Answer


class PlainResponse(web.Response):
    """A ``web.Response`` without the ``Server`` header aiohttp would add."""

    async def _prepare_headers(self) -> None:
        had_server = "Server" in self.headers
        await super()._prepare_headers()
        if not had_server:
            self.headers.popall("Server", None)


def answer_response(answer: Answer, *, with_detail: bool = False) -> web.Response:
    """The response for ``answer``: its status, ``X-Interlock-Reason``, its extra headers and
    the text body ``<reason>: <sentence>`` (the detail instead, when ``with_detail``); a gRPC
    answer (``Content-Type: application/grpc``, the status in ``grpc-status``) has no body."""
    grpc = any(name == "grpc-status" for name, _ in answer.headers)
    response = (
        PlainResponse(status=answer.status)
        if grpc
        else PlainResponse(
            status=answer.status, text=answer.body(with_detail=with_detail), charset="utf-8"
        )
    )
    response.headers[REASON_HEADER] = answer.reason
    for name, value in answer.headers:
        response.headers[name] = value
    return response


def plain_response(
    status: int, text: str, *, reason: str, headers: Mapping[str, str] | None = None
) -> web.Response:
    """A response whose body someone else wrote (a module's refusal), with our reason header."""
    response = PlainResponse(status=status, text=text)
    if headers:
        response.headers.update(headers)
    response.headers[REASON_HEADER] = reason
    return response


class TunnelEstablished(web.StreamResponse):
    """``200 Connection established``, the answer that opens a ``CONNECT`` tunnel: sent at
    once, with no ``Server`` banner and no body framing (RFC 9110 §9.3.6: none is allowed)."""

    def __init__(self) -> None:
        super().__init__(status=200, reason="Connection established")

    async def _prepare_headers(self) -> None:
        await super()._prepare_headers()
        self.headers.popall("Server", None)
