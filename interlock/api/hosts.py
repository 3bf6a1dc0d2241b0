"""The ``Host`` guard of the policy API and the admin server (see
:mod:`interlock.model.allowed_hosts` for why): a request naming another host is answered
``421 Misdirected Request`` before any handler runs."""

from __future__ import annotations

from interlock.api.http_server import Response, StreamResponse
from interlock.api.routes import Guard, Handler, Request
from interlock.model.allowed_hosts import AllowedHosts, refusal

ALLOWED_HOST_FLAG = "--allowed-host"


def host_guard(allowed: AllowedHosts) -> Guard:
    """A guard (:class:`~interlock.api.routes.Routes`) answering 421 to a request whose
    ``Host`` ``allowed`` does not allow."""

    async def guard(request: Request, handler: Handler) -> StreamResponse:
        header = request.headers.get("Host")
        if not allowed.allows(header):
            assert header is not None
            return Response(status=421, text=refusal(header, flag=ALLOWED_HOST_FLAG))
        return await handler(request)

    return guard
