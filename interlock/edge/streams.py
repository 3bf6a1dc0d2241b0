"""The edge's HTTP/1.1 requests and HTTP/2 streams: decided by the steps (``steps.py``), then
forwarded by :class:`~interlock.dataplane.streams.StreamForwarder`.

The edge's listeners serve HTTP/1.1 (``dataplane/http1_server.py``) and HTTP/2 (h2c with prior
knowledge on the plain port, h2 by ALPN on the TLS port: ``dataplane/http2_server.py``). Both
hand each request here as an :class:`~interlock.dataplane.request_stream.H2Request` with a
responder for its wire. :func:`~interlock.edge.steps.decide` refuses it or admits it; an
admitted request goes upstream (h2c to gRPC and h2c backends, HTTP/1.1 to the others) with the
modules' request and response header changes and compression. Only a request that upgrades its
connection takes ``server.py``'s aiohttp handler instead (its upgrade relay is built on
aiohttp's objects), through the same steps.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable

from interlock.dataplane import answers as reasons
from interlock.dataplane.access_log import Exchange, begin, resume
from interlock.dataplane.http1_server import Http1Responder, Work
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.request_stream import H2Request, Responder
from interlock.dataplane.streams import (
    ExpressFront,
    Prepared,
    StreamForwarder,
    send_answer,
    send_plain,
)
from interlock.edge.modules.ingress_nginx import holding
from interlock.edge.steps import (
    Admitted,
    EdgeFront,
    ModuleSteps,
    Refusal,
    decide_now,
    log_answer,
)


class EdgeStreams(ExpressFront):
    """Serves the edge's HTTP/1.1 requests and HTTP/2 streams (see the module docstring)."""

    def __init__(self, front: EdgeFront, *, forwarder: StreamForwarder, traffic: Traffic) -> None:
        self._front = front
        self.forwarder = forwarder
        self._traffic = traffic

    def express(self, request: H2Request, responder: Http1Responder) -> Work | None:
        """:meth:`handle` for an HTTP/1.1 request without a body, without the connection's
        task when it can (:meth:`StreamForwarder.express`): None when it was sent so, else
        the rest of :meth:`handle` from where it got, to run on the task."""
        # As begin() makes it, without making it current (see access_log.resume); each text cut
        # only when longer than its bound (a slice of a shorter one is a call that copies
        # nothing), the query cut off only when there is one (``in``, ~110 instructions, where
        # ``partition`` made a tuple, ~215, and ``find`` is ~200).
        host, method, path = request.authority, request.method, request.path
        if "?" in path:
            path = path.partition("?")[0]
        exchange = Exchange(
            "edge",
            host if len(host) <= 256 else host[:256],
            method if len(method) <= 16 else method[:16],
            path if len(path) <= 2048 else path[:2048],
            self._traffic.clock(),
        )
        decided = decide_now(self._front, request, exchange)
        prepared = None
        if isinstance(decided, Admitted):
            prepared = self.forwarder.express(
                request,
                responder,
                decided.decision,
                decided.headers,
                decided.query,
                decided.protocol,
                decided.hooks,
                decided.where,
                exchange,
                self,  # front
            )
            if prepared is None:
                return None
        return functools.partial(self.handle, request, responder, exchange, decided, prepared)

    def answered(self, exchange: Exchange, responder: Http1Responder) -> None:
        """An express answer relayed whole (:class:`~interlock.dataplane.streams.ExpressFront`)."""
        self._traffic.record(
            exchange, status=responder.status or 0, sent=responder.bytes, reason=""
        )
        responder.express_done()

    def finish(
        self,
        exchange: Exchange,
        responder: Http1Responder,
        where: str,
        forwarding: Awaitable[reasons.Answer | None],
    ) -> Awaitable[None]:
        """The rest of an express answer, on the connection's task: the end of :meth:`handle`
        (:meth:`_finish`: a coroutine function does not override the base's plain method)."""
        return self._finish(exchange, responder, where, forwarding)

    async def _finish(
        self,
        exchange: Exchange,
        responder: Http1Responder,
        where: str,
        forwarding: Awaitable[reasons.Answer | None],
    ) -> None:
        resume(exchange)
        failed = await forwarding
        reason = "" if failed is None else await _failed(responder, failed, where)
        self._traffic.record(
            exchange, status=responder.status or 0, sent=responder.bytes, reason=reason
        )

    async def handle(
        self,
        request: H2Request,
        responder: Responder,
        exchange: Exchange | None = None,
        decided: Refusal | Admitted | ModuleSteps | None = None,
        prepared: Prepared | reasons.Answer | None = None,
    ) -> None:
        """One request, counted (and logged) as one exchange once answered (from where
        :meth:`express` got: ``exchange`` begun, ``decided``, ``prepared`` by the engine)."""
        if exchange is None or decided is None:
            exchange = begin(
                "edge",
                host=request.authority,
                method=request.method,
                path=request.path.partition("?")[0],
                clock=self._traffic.clock,
            )
            decided = decide_now(self._front, request, exchange)
        else:
            resume(exchange)
        # A list, not an optional: mypyc (the compiled build) reads a local in a finally with
        # the type it had at the try's end, so a None left there by an exception (a client gone)
        # became a TypeError.
        held: list[holding] = []
        try:
            if isinstance(decided, ModuleSteps):
                # Only a route's modules take what is given back at the end (ingressNginx's
                # limit-connections slot): a request decided at once holds nothing.
                slot = holding()
                held.append(slot)
                slot.__enter__()
                decided = await decided.run(self._front, request, exchange)
            if isinstance(decided, Admitted):
                if isinstance(prepared, reasons.Answer):  # the engine's, in express()
                    failed: reasons.Answer | None = prepared
                else:
                    failed = await self.forwarder.forward(
                        request,
                        responder,
                        decided.decision,
                        headers=decided.headers,
                        query=decided.query,
                        protocol=decided.protocol,
                        body=decided.body,
                        hooks=decided.hooks,
                        where=decided.where,
                        prepared=prepared,
                    )
                reason = "" if failed is None else await _failed(responder, failed, decided.where)
            else:
                reason = await refuse(responder, decided)
        finally:
            for slot in held:
                slot.__exit__(None, None, None)
        self._traffic.record(
            exchange, status=responder.status or 0, sent=responder.bytes, reason=reason
        )


async def _failed(responder: Responder, failed: reasons.Answer, where: str) -> str:
    """The answer to an admitted request that nothing was relayed for (upstream failures)."""
    log_answer(failed, where)
    if failed.reason == reasons.BODY_TIMEOUT:
        responder.close_after()
    return await send_answer(responder, failed, with_detail=False)


async def refuse(responder: Responder, refusal: Refusal) -> str:
    """Send the edge's refusal on a stream; returns its reason."""
    if refusal.close:
        responder.close_after()
    decided = refusal.answer
    if refusal.module_body is not None:
        await send_plain(
            responder,
            decided.status,
            refusal.module_body.encode(),
            [*decided.headers, (reasons.REASON_HEADER, decided.reason)],
        )
        return decided.reason
    return await send_answer(responder, decided, with_detail=refusal.with_detail)
