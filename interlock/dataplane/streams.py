"""HTTP/2 streams through the engine: from a decision to an upstream answer, for both front doors.

:class:`~interlock.dataplane.engine.Engine` forwards aiohttp's HTTP/1.1 requests; a client's
HTTP/2 stream (``http2_server.py``) needs the same steps on another wire — the chosen
Service port's endpoints (round-robin, failure accrual skipping the failing ones), the rule's
request filters and host rewrite, the deadlines (504), the answer relayed through the rule's
response filters and the front door's hooks (the edge's modules). Without this module the edge
and the mesh listener would each carry their own copy, and drift.

Which version goes upstream (:func:`upstream_http2`): HTTP/2 (h2c, prior knowledge) when the
Service port's policy says its clients speak ``grpc`` or ``http2`` (GRPCRoutes, ``appProtocol:
kubernetes.io/h2c``) or when the request is a gRPC call; HTTP/1.1 otherwise — a browser that
chose h2 by ALPN reaches an HTTP/1.1 backend as before, through ``proxy.Forwarder``.
"""

from __future__ import annotations

import asyncio
import functools
import ssl
import zlib
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Final

import aiohttp
from multidict import CIMultiDict

from interlock.dataplane.access_log import Exchange, note_upstream, upstream_text
from interlock.dataplane.answers import (
    ENDPOINTS_FAILING,
    REASON_HEADER,
    UPSTREAM_FAILED,
    UPSTREAM_UNREACHABLE,
    Answer,
    answer,
)
from interlock.dataplane.engine import (
    MAX_ADDRESS_TRIES,
    NO_ANSWER,
    NO_HOOKS,
    RETRY_BUFFER,
    Engine,
    RetryBudget,
)
from interlock.dataplane.header_names import CONTENT_LENGTH, CONTENT_TYPE_LOWER, GRPC_STATUS
from interlock.dataplane.http1 import (
    AnswerTaker,
    Http1Response,
    StaleConnection,
    UpstreamConnection,
    Whole,
    whole_response,
)
from interlock.dataplane.http1_server import Http1Responder
from interlock.dataplane.http2_client import H2Failure, H2Upstreams, relay_h2
from interlock.dataplane.http2_frames import Headers
from interlock.dataplane.interpreted import replay, replayable_first
from interlock.dataplane.plan import Deadlines, Forward
from interlock.dataplane.proxy import (
    ClientBodyTimeout,
    Forwarder,
    ResponseHooks,
    without_hop_by_hop,
)
from interlock.dataplane.request_stream import H2Request, RequestBody, Responder
from interlock.dataplane.source import Address
from interlock.dataplane.upstream_tls import (
    MAX_VERIFIED_SETTINGS,
    peer_problem,
    unverified_client_context,
    verified_client_context,
)
from interlock.logs import module_logger
from interlock.model.backend_tls import BackendTLS

# Not loguru's logger itself: this module is compiled (interlock.logs.module_logger).
logger = module_logger(__name__)

Prepared = tuple[Sequence[Address], ResponseHooks]
"""What :meth:`Engine.prepare` gives a forward: the endpoints, and the hooks."""

HTTP2_PROTOCOLS: Final = frozenset({"grpc", "http2"})
"""Policy ``protocol`` values whose upstreams speak HTTP/2 (:meth:`StreamForwarder.express`
compares ``protocol`` with each of these strings: change both together)."""


def upstream_http2(headers: Mapping[str, str], protocol: str) -> bool:
    """Whether a client's HTTP/2 stream goes upstream as HTTP/2 (see the module docstring)."""
    if protocol in HTTP2_PROTOCOLS:
        return True
    if protocol == "http1":
        return False
    # Sliced, not ``startswith`` (whose arguments are parsed the slow way): every request.
    return headers.get(CONTENT_TYPE_LOWER, "")[:16] == "application/grpc"


def first_deadline(deadlines: Deadlines) -> float | None:
    """How long a stream may wait for its response headers: the rule's request and
    backendRequest timeouts, whichever is shorter (a stream may then last as long as it
    likes: gRPC streams do)."""
    bounds = [d for d in (deadlines.request, deadlines.attempt) if d is not None]
    return min(bounds) if bounds else None


async def send_answer(responder: Responder, decided: Answer, *, with_detail: bool) -> str:
    """Send an answer the data plane made itself on a stream, in the format of
    ``docs/answers.md`` (a gRPC answer — ``grpc-status`` among its headers — has no body);
    returns its reason."""
    headers = [(REASON_HEADER, decided.reason), *decided.headers]
    if any(name.lower() == "grpc-status" for name, _ in decided.headers):
        responder.send_headers(decided.status, headers, end=True)
        return decided.reason
    body = decided.body(with_detail=with_detail).encode()
    await send_plain(responder, decided.status, body, headers)
    return decided.reason


async def send_plain(
    responder: Responder, status: int, body: bytes, headers: Sequence[tuple[str, str]]
) -> None:
    """A text answer (the data plane's own, or a module's refusal) on a stream."""
    has_type = any(name.lower() == "content-type" for name, _ in headers)
    plain = [] if has_type else [("Content-Type", "text/plain; charset=utf-8")]
    responder.send_headers(status, [*plain, *headers], end=not body)
    if body:
        await responder.send_data(body, end=True)


class StreamForwarder:
    """Sends decided HTTP/2 streams upstream (h2c or HTTP/1.1) and relays the answers."""

    def __init__(self, *, engine: Engine, forwarder: Forwarder, connect_timeout: float) -> None:
        self._engine = engine
        self._forwarder = forwarder
        self._connect_timeout = connect_timeout
        self._h2 = H2Upstreams()
        self._h2_tls = H2Upstreams(tls=unverified_client_context(alpn=("h2",)))
        """h2 over TLS, for ``Forward.upstream_tls`` (an Ingress's ``backend-protocol: GRPCS``)."""
        self._h2_verified: dict[BackendTLS, H2Upstreams] = {}
        """h2 over TLS verified as a BackendTLSPolicy says (``Forward.backend_tls``), per
        setting (at most :data:`MAX_VERIFIED_SETTINGS`)."""

    async def close(self) -> None:
        await self._h2.close()
        await self._h2_tls.close()
        for upstreams in self._h2_verified.values():
            await upstreams.close()
        self._h2_verified.clear()

    async def _verified(self, tls: BackendTLS) -> H2Upstreams:
        """The h2 connections of one verified setting (raises ``ssl.SSLError`` when its CA
        bundle or client certificate cannot be loaded)."""
        found = self._h2_verified.get(tls)
        if found is not None:
            return found
        context = verified_client_context(tls, alpn=("h2",))
        if len(self._h2_verified) >= MAX_VERIFIED_SETTINGS:
            for stale in self._h2_verified.values():
                await stale.close()
            self._h2_verified.clear()
        found = H2Upstreams(
            tls=context,
            server_hostname=tls.hostname,
            peer_check=functools.partial(peer_problem, tls),
        )
        self._h2_verified[tls] = found
        return found

    async def forward(
        self,
        request: H2Request,
        responder: Responder,
        decision: Forward,
        *,
        headers: CIMultiDict[str] | None = None,
        query: str,
        protocol: str,
        body: bytes | None = None,
        hooks: ResponseHooks = NO_HOOKS,
        where: str,
        prepared: Prepared | None = None,
    ) -> Answer | None:
        """Send ``request`` as ``decision`` says and relay the answer to ``responder``; the
        answer to give instead when nothing was relayed.

        ``protocol`` is the policy's (which version goes upstream: :func:`upstream_http2`).
        ``headers`` are the upstream request headers the front door prepared (``Host`` is the
        authority the upstream gets; by default the client's headers without hop-by-hop ones,
        for its authority); the rule's request filters and host rewrite are applied here, its
        response filters before ``hooks``. ``body`` is the request body when the front
        door read it already (else it streams from the client). ``prepared``: what
        :meth:`Engine.prepare` gave for these ``headers`` already (:meth:`express`).
        """
        if headers is None:
            headers = without_hop_by_hop(request.headers)
            headers["Host"] = request.authority
        if prepared is None:
            ready = self._engine.prepare(decision, headers, hooks)
            if isinstance(ready, Answer):
                return ready
            prepared = ready
        found, hooks = prepared
        deadline = self._engine.deadline(decision)
        if upstream_http2(request.headers, protocol):
            return await self._http2(
                request,
                responder,
                decision,
                found,
                ReplayableBody(request.body, body),
                self._engine.retries(decision, deadline=deadline),
                headers,
                query,
                hooks,
                where,
            )
        if body is None and not request.body.empty:
            # All of it arrived (a small body mostly comes with its head): sent with the head,
            # one write, not a task's second one; and an upstream answering before reading it
            # leaves its connection reusable, not one in the middle of a body.
            body = request.body.take_whole()
        # Without a retry the request is sent once: no budget, nothing kept to replay (most
        # requests: the policy names no retry), and a body read already goes as it is.
        budget = (
            None if decision.retry is None else self._engine.retries(decision, deadline=deadline)
        )
        replay = None if budget is None else ReplayableBody(request.body, body)
        whole = body or None
        streamed = (
            None if body is not None or request.body.empty else ReplayableBody(request.body, None)
        )
        deadlines = decision.deadlines
        if (
            budget is None
            and len(found) == 1
            and decision.accrual is None
            and deadlines.request is None
            and deadlines.attempt is None
        ):
            # One try at one endpoint without a deadline (most requests): awaited here, not in
            # Engine.attempt's frame, which every resumption of this coroutine passes through.
            address = found[0]
            note_upstream(*address)
            data = streamed.chunks() if streamed is not None else whole
            try:
                upstream = await self._engine.send(
                    request.method, decision, address, query, headers, data
                )
            except (TimeoutError, aiohttp.ClientError, ClientBodyTimeout) as exc:
                outcome: Http1Response | Answer = self._engine.failed(
                    decision, address, exc, streamed, where
                )
            else:
                outcome = self._engine.answered(decision, address, upstream, where)
        else:
            outcome = await self._attempts(
                request,
                decision,
                found,
                budget,
                replay,
                whole,
                streamed,
                deadline,
                headers,
                query,
                where,
            )
        if isinstance(outcome, Answer):
            hooks.record_upstream(None)
            return outcome
        try:
            whole, compressor = _send_head(request, responder, outcome, hooks)
            if whole is not None:
                await responder.send_data(whole, end=True)
            else:
                await _relay_body(responder, outcome, compressor, where)
        finally:
            outcome.release()
        return None

    def express(
        self,
        request: H2Request,
        responder: Http1Responder,
        decision: Forward,
        headers: CIMultiDict[str],
        query: str,
        protocol: str,
        hooks: ResponseHooks,
        where: str,
        exchange: Exchange,
        front: ExpressFront,
    ) -> Prepared | Answer | None:
        """:meth:`forward` for an HTTP/1.1 request without a body, without a task: when it
        takes one try at one endpoint, without retry, failure accrual or deadline, over
        HTTP/1.1 and on a pooled connection, the request is sent now and the answer relayed by
        callbacks (:class:`_Express`). None when it was sent so; else what
        :meth:`Engine.prepare` came to, for :meth:`forward` (``prepared``) on the task.
        (Positional parameters: the edge calls it on every request, and each keyword is a
        look-up of its name.)"""
        prepared = self._engine.prepare(decision, headers, hooks)
        if isinstance(prepared, Answer):
            return prepared
        found, hooks = prepared
        deadlines = decision.deadlines
        if (
            len(found) != 1
            or decision.retry is not None
            or decision.accrual is not None
            or deadlines.request is not None
            or deadlines.attempt is not None
            or decision.backend_tls is not None
            # upstream_http2, inlined (a frame a request); ``in`` first: most requests have no
            # Content-Type, and ``in`` is a slot of the mapping's type where ``get`` is a method
            # looked up and called with its arguments parsed (~200 instructions, compiled)
            # HTTP2_PROTOCOLS's, as compared strings: ``in`` a frozenset is a call that hashes
            or protocol == "grpc"
            or protocol == "http2"
            or (
                protocol != "http1"
                and CONTENT_TYPE_LOWER in request.headers
                and request.headers.get(CONTENT_TYPE_LOWER, "")[:16] == "application/grpc"
            )
        ):
            return prepared
        address = found[0]
        host, port = address  # (compiled, a call with *address goes through Python's calling)
        exchange.upstream = upstream_text(host, port)  # note_upstream's, without the context
        express = _Express(
            self, request, responder, decision, prepared, headers, query, protocol, where
        )
        express.exchange, express.front = exchange, front
        started = self._forwarder.open_pooled(  # positional: keywords cost a look-up each
            request.method,
            address,
            decision.path,
            query,
            headers,
            deadlines.idle,
            decision.upstream_tls,
            # The answer's head relayed as received when nothing would change it, or only a
            # header change known in advance (made on its bytes: ``response_edit``): taken by
            # the express answer, with no future made unless it is not taken so.
            express
            if (hooks.inert or hooks.response_edit is not None) and responder.as_received
            else None,
        )
        if started is None:
            return prepared
        connection, answer = started
        express.connection = connection
        responder.express(express)  # called if the client goes (not a bound method made)
        if answer is not None:
            answer.add_done_callback(express.answered)
        return None

    async def _attempts(
        self,
        request: H2Request,
        decision: Forward,
        found: Sequence[Address],
        budget: RetryBudget | None,
        replay: ReplayableBody | None,
        whole: bytes | None,
        streamed: ReplayableBody | None,
        deadline: float | None,
        headers: CIMultiDict[str],
        query: str,
        where: str,
    ) -> Http1Response | Answer:
        """The request over HTTP/1.1 as often as ``budget`` allows: the last attempt's
        response, or the answer it came to."""
        while True:
            if replay is not None:
                whole, streamed = replay.body, replay.streamed
            outcome = await self._engine.attempt(
                request.method,
                decision,
                addresses=found,
                first=self._engine.turn(decision.target),
                query=query,
                # Not changed by the client: it frames the body in a copy of its own (chunked
                # while streaming, a length once replayed).
                headers=headers,
                body=whole,
                streamed=streamed,
                deadline=deadline,
                where=where,
            )
            if budget is None or replay is None:
                return outcome
            if isinstance(outcome, Answer):
                grpc, failure = None, outcome.reason in NO_ANSWER
            else:
                grpc, failure = outcome.headers.get(GRPC_STATUS), False
            wait = budget.next_wait(
                outcome.status, grpc, replayable=replay.replayable, failure=failure
            )
            if wait is None:
                return outcome
            if not isinstance(outcome, Answer):
                outcome.release()
            logger.debug("{}: retrying after {} ({} left)", where, outcome.status, budget.left)
            await asyncio.sleep(wait)

    async def _http2(
        self,
        request: H2Request,
        responder: Responder,
        decision: Forward,
        addresses: Sequence[Address],
        replay: ReplayableBody,
        budget: RetryBudget,
        headers: CIMultiDict[str],
        query: str,
        hooks: ResponseHooks,
        where: str,
    ) -> Answer | None:
        """The stream over h2c: an answer the policy retries is held back (not relayed) while
        the request can be sent again; a connection that cannot be opened moves on to the next
        address, as :meth:`Engine.attempt` does."""
        if decision.backend_tls is not None:
            try:
                upstreams = await self._verified(decision.backend_tls)
            except ssl.SSLError as error:
                # Neither the CA bundle's nor the key's content: only what could not be loaded.
                return answer(
                    UPSTREAM_FAILED,
                    f"{where}: TLS to the backend cannot be set up ({error.reason})",
                )
        else:
            upstreams = self._h2_tls if decision.upstream_tls else self._h2
        authority = headers.popone("Host", request.authority)
        if request.headers.get("te", "").strip().lower() == "trailers":
            headers["te"] = "trailers"  # hop-by-hop, yet gRPC servers require it

        def hold(status: int, grpc_status: str | None) -> bool:
            return budget.allows(status, grpc_status, replayable=replay.replayable)

        while True:
            candidates = self._engine.candidates(decision, addresses)
            if not candidates:
                return answer(
                    ENDPOINTS_FAILING, f"{decision.target.describe()}: every endpoint is failing"
                )
            failed: H2Failure | None = None
            for address in candidates[:MAX_ADDRESS_TRIES]:
                note_upstream(*address)
                failed = await relay_h2(
                    request,
                    responder,
                    body=replay.chunks(),
                    upstreams=upstreams,
                    address=address,
                    authority=authority,
                    path=decision.path + (f"?{query}" if query else ""),
                    headers=headers.items(),
                    connect_timeout=self._connect_timeout,
                    headers_timeout=first_deadline(decision.deadlines),
                    where=where,
                    response_edits=_ResponseEdits(hooks),
                    hold=hold,
                )
                status = responder.status if failed is None else failed.status
                self._engine.record(decision, address, failed=status is None or status >= 500)
                if failed is None or failed.reason != UPSTREAM_UNREACHABLE:
                    break
            if failed is None:
                hooks.record_upstream(responder.status)
                return None
            wait = budget.next_wait(
                failed.status,
                failed.grpc_status,
                replayable=replay.replayable,
                failure=not failed.held and failed.reason in NO_ANSWER,
            )
            if wait is None:
                hooks.record_upstream(None if not failed.held else failed.status)
                return Answer(status=failed.status, reason=failed.reason, detail=failed.detail)
            logger.debug("{}: retrying after {} ({} left)", where, failed.status, budget.left)
            await asyncio.sleep(wait)


class ExpressFront:
    """What a front door does with an express answer (:meth:`StreamForwarder.express`): a class
    the front door subclasses, not a ``Protocol``: compiled, a method of a value typed by a
    Protocol is a generic call (its name looked up, its arguments parsed: ~300 instructions a
    request), one of a native class a direct one."""

    __slots__ = ()

    def answered(self, exchange: Exchange, responder: Http1Responder) -> None:
        """The upstream's answer was relayed whole: count it, and end the express answer."""
        raise NotImplementedError

    def finish(
        self,
        exchange: Exchange,
        responder: Http1Responder,
        where: str,
        forwarding: Awaitable[Answer | None],
    ) -> Awaitable[None]:
        """What answers the request on the connection's task from here: ``forwarding`` comes
        to what :meth:`StreamForwarder.forward` would have (the answer to give instead, or
        None)."""
        raise NotImplementedError


class _Express(AnswerTaker):
    """One express answer (:meth:`StreamForwarder.express`): sent, its answer relayed by the
    callback of its answer's future, or by the connection's task from the first step that
    must wait (a body still coming, a client not taking what was written) or that is not the
    usual (a failure, an answer without a length)."""

    __slots__ = (
        "abandoned",
        "connection",
        "decision",
        "exchange",
        "forwarder",
        "front",
        "headers",
        "prepared",
        "protocol",
        "query",
        "request",
        "responder",
        "where",
    )

    connection: UpstreamConnection
    exchange: Exchange
    front: ExpressFront

    def __init__(
        self,
        forwarder: StreamForwarder,
        request: H2Request,
        responder: Http1Responder,
        decision: Forward,
        prepared: Prepared,
        headers: CIMultiDict[str],
        query: str,
        protocol: str,
        where: str,
    ) -> None:
        self.forwarder = forwarder
        self.request = request
        self.responder = responder
        self.decision = decision
        self.prepared = prepared
        self.headers = headers
        self.query = query
        self.protocol = protocol
        self.where = where
        self.abandoned = False

    def abandon(self) -> None:
        """The client went: the upstream exchange goes with it (as a cancelled task's)."""
        self.abandoned = True
        self.connection.close()

    def __call__(self) -> None:
        """:meth:`abandon`: what the responder calls if the client goes
        (``Http1Responder.express``). The object itself, not its bound method: one made and
        freed per request (~200 instructions, compiled)."""
        self.abandon()

    def answered(self, answer: asyncio.Future[Http1Response]) -> None:
        """The answer's headers came (its body too, mostly), or the exchange failed."""
        if self.abandoned:
            if not answer.cancelled():
                answer.exception()  # retrieved: the client went, nothing is to be done with it
            return
        responder = self.responder
        if answer.cancelled():  # as a task's wait would be: the connection is cut
            self.connection.close()
            responder.express_continue(_raising(asyncio.CancelledError()))
            return
        # Released below unless handed on. A list, not an optional: mypyc (the compiled build)
        # reads a local in a finally with the type it had at the try's end, so a None left by an
        # early return or an exception there became a TypeError.
        held: list[Http1Response] = []
        try:
            error = answer.exception()
            if error is not None:
                self.connection.close()  # as the pool's request() closes it
                responder.express_continue(lambda: self._finish(self._failed(error)))
                return
            upstream = answer.result()
            held.append(upstream)
            if upstream.raw is not None:  # from relay(): not relayed as received after all
                upstream.headers_as_parsed()
            where, hooks = self.where, self.prepared[1]
            if upstream.status == 101:  # what Engine.answered refuses (no accrual to count)
                outcome = self.forwarder._engine.answered(
                    self.decision, self.connection.address, upstream, where
                )
                if isinstance(outcome, Answer):
                    hooks.record_upstream(None)
                    responder.express_continue(lambda: self._finish(_resolved(outcome)))
                    return
            whole, compressor = _send_head(self.request, responder, upstream, hooks)
            if whole is None:
                held.clear()  # released by the relay
                responder.express_continue(
                    lambda: self._finish(_relay_rest(responder, upstream, compressor, where))
                )
                return
            paused = responder.send_now(whole, end=True)
        except Exception as failure:  # what the task does with a handler's failure
            responder.express_continue(_raising(failure))
            return
        finally:
            for response in held:
                response.release()
        if paused:  # the client is slow to take it: waited for on the task
            responder.express_continue(lambda: self._finish(_drained(responder)))
        else:
            self.front.answered(self.exchange, responder)

    def take_whole(self, found: Whole, data: bytes) -> None:
        """A whole answer with its head as received, from the connection's parser
        (``UpstreamConnection.as_received``: the hooks are inert, nothing of the head would
        change, or their only change is ``response_edit``'s), relayed so from its bytes (no
        :class:`Http1Response` made), that edit made on them; one the client side can no
        longer take so (the edge stopping) goes through :meth:`take`.

        What does not come here, and goes the usual way (parsed into an
        :class:`Http1Response`, the hooks run on its headers, the head rendered again): an
        answer not whole in the read that began it, with a hop-by-hop header (but ``Connection:
        keep-alive`` and ``Keep-Alive``, cut out of the head relayed: ``http1._relayed``),
        without one
        ``Content-Length`` (chunked, or until close), with a status the edge would write
        otherwise (1xx, 204, 304, unknown, not HTTP/1.1) or more than one ``Date``
        (``http1._whole``); the answer to a HEAD, HTTP/1.0 or closing request, or one whose
        body was not all read (``Http1Responder.relay_as_received``); and one whose hooks do
        more than a header change known in advance: a circuit breaker to tell, compression,
        a route's ResponseHeaderModifier, CORS, a session cookie (``response_edit`` None)."""
        if self.abandoned:  # the client went: the connection is closed with it
            return
        responder = self.responder
        try:
            # None for inert hooks; not None for others (taken for it: StreamForwarder.express).
            edit = self.prepared[1].response_edit
            paused = responder.relay_as_received(found, data, edit)
        except Exception as error:  # what the task does with a handler's failure
            responder.express_continue(_raising(error))
            return
        if paused is None:
            self.take(whole_response(found, data))
        elif paused:  # the client is slow to take it: waited for on the task
            self._drain_on_task()
        else:
            self.front.answered(self.exchange, responder)

    def take(self, answer: Http1Response) -> None:
        """A whole answer whose head the client side cannot take as received after all
        (:meth:`take_whole`): through :meth:`answered`, as any other."""
        if self.abandoned:
            return
        resolved: asyncio.Future[Http1Response] = asyncio.get_running_loop().create_future()
        resolved.set_result(answer)
        self.answered(resolved)

    def _drain_on_task(self) -> None:
        """The rest on the connection's task: until the client took what was written. A method
        of its own, not a lambda in :meth:`take_whole`: compiled, a function with a lambda makes the
        object its lambdas share on every call (and frees it), taken or not."""
        responder = self.responder
        responder.express_continue(lambda: self._finish(_drained(responder)))

    def _finish(self, forwarding: Awaitable[Answer | None]) -> Awaitable[None]:
        return self.front.finish(self.exchange, self.responder, self.where, forwarding)

    async def _failed(self, error: BaseException) -> Answer | None:
        """What the usual path comes to when the exchange failed before the answer's headers:
        a pooled connection found closed is sent again on another (``UpstreamPool.request``),
        another failure is the answer to give."""
        if isinstance(error, StaleConnection):
            return await self.forwarder.forward(
                self.request,
                self.responder,
                self.decision,
                headers=self.headers,
                query=self.query,
                protocol=self.protocol,
                where=self.where,
                prepared=self.prepared,
            )
        if not isinstance(error, (TimeoutError, aiohttp.ClientError)):
            raise error
        failed = self.forwarder._engine.failed(
            self.decision, self.connection.address, error, None, self.where
        )
        self.prepared[1].record_upstream(None)
        return failed


async def _resolved(outcome: Answer) -> Answer:
    return outcome


def _raising(error: BaseException) -> Callable[[], Awaitable[None]]:
    async def _raise() -> None:
        raise error

    return _raise


async def _drained(responder: Http1Responder) -> None:
    await responder.drain()


async def _relay_rest(
    responder: Http1Responder,
    upstream: Http1Response,
    compressor: zlib._Compress | None,
    where: str,
) -> None:
    """The rest of :meth:`StreamForwarder.forward` once the head was sent: the body."""
    try:
        await _relay_body(responder, upstream, compressor, where)
    finally:
        upstream.release()


def _send_head(
    request: H2Request, responder: Responder, upstream: Http1Response, hooks: ResponseHooks
) -> tuple[bytes | None, zlib._Compress | None]:
    """Send an HTTP/1.1 upstream's answer head to the stream, the hooks' header changes and
    compression applied: the whole body when one send carries it (most small answers come with
    their headers: no iterator), else None and the compressor to stream it through, if any."""
    if hooks.inert:  # a route without those modules: three calls that do nothing, skipped
        relayed = without_hop_by_hop(upstream.headers)
        gzip = False
    else:
        hooks.record_upstream(upstream.status)
        relayed = without_hop_by_hop(upstream.headers)
        hooks.response_headers(relayed)
        gzip = hooks.should_compress(request.headers, relayed)
    if gzip:
        relayed.popall("Content-Length", None)
        relayed["Content-Encoding"] = "gzip"
        relayed.add("Vary", "Accept-Encoding")
    responder.send_headers(upstream.status, list(relayed.items()), end=False)
    if gzip:
        return None, zlib.compressobj(wbits=31)
    # Without a length a body that came whole still goes as a streamed one (framed so).
    whole = upstream.complete_body() if CONTENT_LENGTH in relayed else None
    return whole, None


async def _relay_body(
    responder: Responder, upstream: Http1Response, compressor: zlib._Compress | None, where: str
) -> None:
    """An HTTP/1.1 upstream's answer body to the stream as it arrives (through ``compressor``
    when compressed)."""
    try:
        async for chunk in upstream.chunks():
            data = chunk if compressor is None else compressor.compress(chunk)
            if data:
                await responder.send_data(data)
        tail = b"" if compressor is None else compressor.flush()
        await responder.send_data(tail, end=True)
    except (TimeoutError, aiohttp.ClientError) as error:
        # Too late for a status: resetting the stream says the body is incomplete.
        logger.debug("{}: upstream body interrupted: {!r}", where, error)
        responder.reset()


class ReplayableBody:
    """A stream's request body that can be sent again: what the first attempt sends is kept
    (up to :data:`~interlock.dataplane.engine.RETRY_BUFFER` bytes), so a retry replays it once
    the client has sent all of it. A longer body, or one still arriving when the answer came,
    is not replayable: that request is not retried (the outbound-parity semantics)."""

    def __init__(self, source: RequestBody, body: bytes | None) -> None:
        self._source = source
        self._parts: list[bytes] = [] if body is None else [body]
        self._size = 0 if body is None else len(body)
        self._complete = body is not None or source.empty
        self._started = False

    @property
    def timed_out(self) -> bool:
        return self._source.timed_out

    @property
    def replayable(self) -> bool:
        return self._complete and self._size <= RETRY_BUFFER

    @property
    def body(self) -> bytes | None:
        """The whole body once known (None: none, or still streaming: see :attr:`streamed`)."""
        return b"".join(self._parts) if self._complete and self._size else None

    @property
    def streamed(self) -> ReplayableBody | None:
        """This body when it must stream from the client (the first attempt)."""
        return None if self._complete else self

    def chunks(self) -> AsyncIterator[bytes]:
        """The body from the start: replayed once complete, else read from the client (once:
        an attempt that never started reading, a connection that failed, leaves it unread)."""
        if self._complete:
            return replay(tuple(self._parts))
        if self._started:
            raise RuntimeError("a request body still streaming cannot be sent twice")
        return replayable_first(self)


class _ResponseEdits:
    """The hooks' response header changes, for an h2c answer's header list (trailers are the
    backend's own)."""

    __slots__ = ("_hooks",)

    def __init__(self, hooks: ResponseHooks) -> None:
        self._hooks = hooks

    def __call__(self, headers: Headers) -> Headers:
        multi: CIMultiDict[str] = CIMultiDict(headers)
        self._hooks.response_headers(multi)
        return [(name.lower(), value) for name, value in multi.items()]
