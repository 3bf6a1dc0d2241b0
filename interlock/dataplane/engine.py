"""The engine's I/O half: from a decision to an upstream answer — shared by both front doors.

:func:`~interlock.dataplane.plan.decide` says where a request goes; :class:`Engine` sends it
there: the endpoints of the chosen Service port (from a :class:`PolicySource`), round-robin
among those failure accrual has not taken out, the rule's request filters, per-attempt and
whole-request deadlines (504), retries of the statuses the policy names while the body can be
sent again, and the answer streamed back through the rule's response filters. The HTTP client
is :class:`~interlock.dataplane.proxy.Forwarder` (one connection pool: hop-by-hop headers,
streaming, bounded body reads), not a second one.

What a front door does before calling it: find the target Service port (the edge by its route's
backend, the mesh listener by the authority), build the upstream headers (hop-by-hop removed,
``X-Forwarded-*``, the edge's modules), then :meth:`Engine.route` and :meth:`Engine.forward`.
Both return an :class:`~interlock.dataplane.answers.Answer` when the data plane answers itself;
the front door renders it (:func:`~interlock.dataplane.wire.answer_response`).
"""

from __future__ import annotations

import asyncio
import itertools
import random
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping, Sequence
from typing import Final, Protocol

import aiohttp
from aiohttp import web
from multidict import CIMultiDict

from interlock.dataplane.access_log import note_retry, note_upstream
from interlock.dataplane.accrual import FailureAccrualTable
from interlock.dataplane.answers import (
    BACKEND_NOT_FOUND,
    BODY_TIMEOUT,
    ENDPOINTS_FAILING,
    ENDPOINTS_UNKNOWN,
    NO_READY_ENDPOINTS,
    UPGRADE_NOT_ASKED,
    UPSTREAM_FAILED,
    UPSTREAM_TIMEOUT,
    UPSTREAM_UNREACHABLE,
    Answer,
    answer,
)
from interlock.dataplane.filters import HeaderEdits, apply_all, set_host
from interlock.dataplane.http1 import Http1Response, UpstreamConnectError
from interlock.dataplane.plan import (
    Forward,
    PolicyPlan,
    RequestInfo,
    RetryPlan,
    compile_policy,
    decide,
    unrouted,
)
from interlock.dataplane.proxy import ClientBody, ClientBodyTimeout, Forwarder, ResponseHooks
from interlock.dataplane.source import Address, PolicySource, UpstreamError
from interlock.logs import module_logger
from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey

# Not loguru's logger itself: this module is compiled (interlock.logs.module_logger).
logger = module_logger(__name__)

NO_ANSWER: Final = frozenset((UPSTREAM_TIMEOUT, UPSTREAM_UNREACHABLE, UPSTREAM_FAILED))
"""The reasons of a try that got no answer from the upstream (a retry with ``failures`` retries
them whatever its statuses)."""

RETRY_BUFFER = 64 * 1024
"""Largest request body read whole so that a request can be retried (Linkerd's limit too);
a longer or unknown-length body streams, and its request is not retried."""

MAX_ADDRESS_TRIES = 3
"""Addresses tried in turn when a connection cannot even be opened (nothing was sent)."""


class StreamedBody(Protocol):
    """A request body read from the client as it is sent (aiohttp's, or an HTTP/2 stream's)."""

    @property
    def timed_out(self) -> bool:
        """The client stopped sending it (the front door's body timeout)."""
        ...

    def chunks(self) -> AsyncIterator[bytes]: ...


class NoHooks:
    """The :class:`~interlock.dataplane.proxy.ResponseHooks` of a front door without modules."""

    inert = True
    response_edit = None

    def should_compress(
        self, request_headers: Mapping[str, str], response_headers: Mapping[str, str]
    ) -> bool:
        return False

    def record_upstream(self, status: int | None, *, now: float | None = None) -> None:
        return None

    def response_headers(self, headers: CIMultiDict[str]) -> None:
        return None


NO_HOOKS = NoHooks()


class FilteredHooks:
    """A route's ResponseHeaderModifiers, then the front door's own hooks (the edge's modules
    last: an edge's ``headers.response.remove: [Server]`` holds whatever a route adds)."""

    __slots__ = ("_edits", "_inner")

    inert = False
    response_edit = None  # the route's edits are not made on an answer's bytes

    def __init__(self, edits: tuple[HeaderEdits, ...], inner: ResponseHooks) -> None:
        self._edits = edits
        self._inner = inner

    def should_compress(
        self, request_headers: Mapping[str, str], response_headers: Mapping[str, str]
    ) -> bool:
        return self._inner.should_compress(request_headers, response_headers)

    def record_upstream(self, status: int | None, *, now: float | None = None) -> None:
        self._inner.record_upstream(status, now=now)

    def response_headers(self, headers: CIMultiDict[str]) -> None:
        apply_all(self._edits, headers)
        self._inner.response_headers(headers)


def upstream_error_answer(error: UpstreamError) -> Answer:
    """The answer for a Service port without usable endpoints."""
    if error.status == 503:
        reason = ENDPOINTS_UNKNOWN if "not known yet" in error.message else NO_READY_ENDPOINTS
    else:
        reason = BACKEND_NOT_FOUND
    return answer(reason, error.message, status=error.status)


class RetryBudget:
    """The retries left to one request (the rule's ``retry``): which statuses, how many more,
    the backoff doubling from the policy's, never past the request's deadline."""

    __slots__ = ("_backoff", "_clock", "_retry", "deadline", "left")

    def __init__(
        self, retry: RetryPlan | None, *, deadline: float | None, clock: Callable[[], float]
    ) -> None:
        self._retry = retry
        self.deadline = deadline
        """When the whole request must be answered by (the engine's clock), or None."""
        self._clock = clock
        self._backoff = 0.0 if retry is None else retry.backoff
        self.left = 0 if retry is None else retry.retries

    def allows(
        self, status: int, grpc_status: str | None, *, replayable: bool, failure: bool = False
    ) -> bool:
        """Whether an answer with ``status`` (and ``grpc-status``) would be retried: the
        policy lists it (or it is a ``failure``, no answer from the upstream, and the policy
        retries those), retries are left, the backoff ends before the request's deadline, and
        the request's body can be sent again (``replayable``). A front door that must decide
        before it relays an answer (an HTTP/2 stream's) asks this first."""
        retry = self._retry
        if not replayable or self.left <= 0 or retry is None:
            return False
        if not (retry.retryable(status, grpc_status) or (failure and retry.failures)):
            return False
        return self.deadline is None or self._clock() + self._backoff < self.deadline

    def next_wait(
        self, status: int, grpc_status: str | None, *, replayable: bool, failure: bool = False
    ) -> float | None:
        """Seconds to wait before sending the request again (one retry spent, counted in the
        access log), or None: relay this answer."""
        if not self.allows(status, grpc_status, replayable=replayable, failure=failure):
            return None
        wait = self._backoff
        self.left -= 1
        self._backoff *= 2
        note_retry()
        return wait


def upstream_failure(error: Exception, *, where: str, address: Address) -> Answer:
    """The answer for an upstream exchange that raised ``error`` before its response headers:
    504 for a timeout, 502 when no connection could be opened (nothing was sent: the next
    address may be tried) or when the exchange failed."""
    if isinstance(error, TimeoutError):
        return answer(UPSTREAM_TIMEOUT, f"{where}: {address} did not answer in time")
    if isinstance(error, UpstreamConnectError):
        logger.debug("{}: cannot connect to {}: {}", where, address, error.os_error)
        return answer(UPSTREAM_UNREACHABLE, f"{where}: cannot connect to {address}")
    logger.debug("{}: upstream {} failed: {!r}", where, address, error)
    return answer(UPSTREAM_FAILED, f"{where}: {address} failed")


class Engine:
    """Routes requests by their Service port's policy and forwards them; see the module doc."""

    def __init__(
        self,
        *,
        source: PolicySource,
        forwarder: Forwarder,
        body_timeout: float,
        rng: random.Random | None = None,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._source = source
        self.policy_of = source.policy
        """The source's outbound policy of a Service port (None: none yet): a front door that
        finds none needs no :meth:`plan` call (the edge's usual case)."""
        self._forwarder = forwarder
        self._body_timeout = body_timeout
        self._rng = rng or random.Random()
        self._clock = clock
        self._plans: dict[tuple[ServicePortKey, str], PolicyPlan] = {}
        self._round_robin: dict[ServicePortKey, itertools.count[int]] = {}
        self.accrual = FailureAccrualTable(rng=self._rng.random)

    def plan(
        self, target: ServicePortKey, policy: OutboundPolicy | None = None
    ) -> PolicyPlan | None:
        """The compiled policy of ``target`` (compiled again only when the policy changed)."""
        if policy is None:
            policy = self._source.policy(target)
        if policy is None:
            return None
        key = (target, policy.client_namespace)
        plan = self._plans.get(key)
        if plan is None or plan.policy is not policy:
            plan = self._plans[key] = compile_policy(policy)
        return plan

    def route(
        self, target: ServicePortKey, request: RequestInfo, *, policy: OutboundPolicy | None = None
    ) -> Forward | Answer:
        """Where ``request`` to ``target`` goes (:func:`~interlock.dataplane.plan.decide`), by
        ``policy`` when the front door has it already (the mesh listener waits for it), else by
        the source's."""
        return self.route_by(self.plan(target, policy), target, request)

    def route_by(
        self, plan: PolicyPlan | None, target: ServicePortKey, request: RequestInfo
    ) -> Forward | Answer:
        """Where ``request`` to ``target`` goes by ``plan`` (:meth:`plan`, which a front door
        that needs the plan itself looks up once), or by none yet (the Service port itself)."""
        if plan is None:
            return unrouted(target, request)
        return decide(plan, request, self._rng.random())

    def prepare(
        self, decision: Forward, headers: CIMultiDict[str], hooks: ResponseHooks
    ) -> tuple[Sequence[Address], ResponseHooks] | Answer:
        """What every forward does first, whatever the wire: the ready endpoints of the
        decision's Service port (none: the answer to give), the rule's request filters and host
        rewrite applied to ``headers``, and ``hooks`` with the rule's response filters first."""
        found = self._source.addresses(decision.target)
        if isinstance(found, UpstreamError):
            return upstream_error_answer(found)
        if not found:
            return answer(NO_READY_ENDPOINTS, f"{decision.target.describe()} has no ready endpoint")
        filters = decision.filters
        if filters.request_headers:
            apply_all(filters.request_headers, headers)
        if filters.rewrite is not None and filters.rewrite.hostname is not None:
            set_host(headers, filters.rewrite.hostname)
        if filters.response_headers:
            hooks = FilteredHooks(filters.response_headers, hooks)
        return found, hooks

    async def forward(
        self,
        request: web.BaseRequest,
        decision: Forward,
        *,
        query: str,
        headers: CIMultiDict[str],
        body: bytes | None,
        hooks: ResponseHooks = NO_HOOKS,
        where: str,
    ) -> web.StreamResponse | Answer:
        """Send ``request`` as ``decision`` says and stream the answer back.

        ``headers`` are the upstream request headers the front door prepared; the rule's
        request filters are applied to them here. ``body`` is the body when it was read already
        (else it streams from the client). Returns the relayed response, or the answer to give.
        """
        prepared = self.prepare(decision, headers, hooks)
        if isinstance(prepared, Answer):
            return prepared
        addresses, hooks = prepared
        retry = decision.retry
        streamed: ClientBody | None = None
        if body is None and request.body_exists:
            length = request.content_length
            if retry is not None and length is not None and length <= RETRY_BUFFER:
                try:
                    body = await ClientBody(request, timeout=self._body_timeout).read(
                        max_size=RETRY_BUFFER
                    )
                except ClientBodyTimeout:
                    return answer(BODY_TIMEOUT)
        if body is None and request.body_exists:
            streamed = ClientBody(request, timeout=self._body_timeout)
        replayable = streamed is None
        deadline = self.deadline(decision)
        budget = self.retries(decision, deadline=deadline)
        while True:
            outcome = await self.attempt(
                request.method,
                decision,
                addresses=addresses,
                first=self.turn(decision.target),
                query=query,
                headers=headers,
                body=body if streamed is None else None,
                streamed=streamed,
                deadline=deadline,
                where=where,
            )
            if isinstance(outcome, Answer) and outcome.reason == BODY_TIMEOUT:
                return outcome
            status = outcome.status
            if isinstance(outcome, Answer):
                grpc, failure = None, outcome.reason in NO_ANSWER
            else:
                grpc, failure = outcome.headers.get("grpc-status"), False
            wait = budget.next_wait(status, grpc, replayable=replayable, failure=failure)
            if wait is not None:
                if not isinstance(outcome, Answer):
                    outcome.release()
                logger.debug("{}: retrying after {} ({} left)", where, status, budget.left)
                await asyncio.sleep(wait)
                continue
            if isinstance(outcome, Answer):
                hooks.record_upstream(None)
                return outcome
            hooks.record_upstream(status)
            remaining = None if deadline is None else max(deadline - self._clock(), 0.0)
            return await self._forwarder.relay(
                request, outcome, hooks=hooks, where=where, cut_after=remaining
            )

    async def attempt(
        self,
        method: str,
        decision: Forward,
        *,
        addresses: Sequence[Address],
        first: int,
        query: str,
        headers: CIMultiDict[str],
        body: bytes | None,
        streamed: StreamedBody | None,
        deadline: float | None,
        where: str,
    ) -> Http1Response | Answer:
        """One attempt: the upstream's response (headers read), or the answer it came to.

        A connection that cannot be opened moves on to the next address (nothing was sent, so
        this never runs a request twice); addresses failure accrual took out are skipped.
        """
        accrual = decision.accrual
        candidates = self._candidates(addresses, first, accrual is not None)
        if not candidates:
            return answer(
                ENDPOINTS_FAILING, f"{decision.target.describe()}: every endpoint is failing"
            )
        attempt_timeout = decision.deadlines.attempt
        last: Answer | None = None
        for address in candidates[:MAX_ADDRESS_TRIES]:
            note_upstream(*address)
            timeout = attempt_timeout
            if deadline is not None:
                remaining = deadline - self._clock()
                if remaining <= 0:
                    return answer(UPSTREAM_TIMEOUT, f"{where}: the request timeout passed")
                timeout = remaining if timeout is None else min(timeout, remaining)
            data = streamed.chunks() if streamed is not None else body
            try:
                upstream = await self.send(
                    method, decision, address, query, headers, data, headers_within=timeout
                )
            except (TimeoutError, aiohttp.ClientError, ClientBodyTimeout) as exc:
                failed = self.failed(decision, address, exc, streamed, where)
                if failed.reason == UPSTREAM_UNREACHABLE:
                    last = failed
                    continue
                return failed
            return self.answered(decision, address, upstream, where)
        assert last is not None
        return last

    def send(
        self,
        method: str,
        decision: Forward,
        address: Address,
        query: str,
        headers: CIMultiDict[str],
        data: bytes | AsyncIterator[bytes] | None,
        *,
        headers_within: float | None = None,
    ) -> Awaitable[Http1Response]:
        """One try of ``decision``'s request on ``address``, to await: the upstream's response
        once its headers arrived (raises as :meth:`Forwarder.open` does; :meth:`failed` turns
        that into the answer to give)."""
        return self._forwarder.open(
            method,
            address=address,
            path=decision.path,
            query=query,
            headers=headers,
            data=data,
            headers_within=headers_within,
            idle=decision.deadlines.idle,
            tls=decision.upstream_tls,
            backend_tls=decision.backend_tls,
        )

    def failed(
        self,
        decision: Forward,
        address: Address,
        error: Exception,
        streamed: StreamedBody | None,
        where: str,
    ) -> Answer:
        """The answer a try on ``address`` (:meth:`send`) that raised ``error`` comes to,
        counted for failure accrual (unless the client stopped sending its body): a connection
        that could not be opened is ``upstream-unreachable`` (nothing was sent: the next
        address may be tried)."""
        if streamed is not None and streamed.timed_out:
            logger.debug("{}: the client stopped sending its request body", where)
            return answer(BODY_TIMEOUT)
        self._record(decision, address, failed=True)
        return upstream_failure(error, where=where, address=address)

    def answered(
        self, decision: Forward, address: Address, upstream: Http1Response, where: str
    ) -> Http1Response | Answer:
        """What a try on ``address`` that got ``upstream``'s response headers comes to,
        counted for failure accrual: the response, or the answer to give instead of a 101
        nobody asked for."""
        if upstream.status == 101:
            # Upgrade is hop-by-hop and not forwarded, so the client did not ask for this.
            upstream.close()
            logger.debug("{}: upstream {} switched protocols unasked", where, address)
            self._record(decision, address, failed=True)
            return answer(UPGRADE_NOT_ASKED, f"{where}: {address} answered 101")
        if decision.accrual is not None:
            self._record(decision, address, failed=upstream.status >= 500)
        return upstream

    def deadline(self, decision: Forward) -> float | None:
        """When the whole request must be answered by (the rule's ``timeouts.request``), on
        the engine's clock."""
        bound = decision.deadlines.request
        return None if bound is None else self._clock() + bound

    def retries(self, decision: Forward, *, deadline: float | None) -> RetryBudget:
        """How often, and after how long, ``decision``'s request may be sent again."""
        return RetryBudget(decision.retry, deadline=deadline, clock=self._clock)

    def turn(self, target: ServicePortKey) -> int:
        """The next round-robin position among ``target``'s endpoints."""
        counter = self._round_robin.get(target)
        if counter is None:
            counter = self._round_robin[target] = itertools.count()
        return next(counter)

    def candidates(self, decision: Forward, addresses: Sequence[Address]) -> list[Address]:
        """The addresses to try for ``decision``, in turn: round-robin from the next one,
        without those failure accrual took out (for a front door's other wire, HTTP/2)."""
        return self._candidates(addresses, self.turn(decision.target), decision.accrual is not None)

    def record(self, decision: Forward, address: Address, *, failed: bool) -> None:
        """An attempt's outcome, for failure accrual."""
        self._record(decision, address, failed=failed)

    def _candidates(self, addresses: Sequence[Address], first: int, accrual: bool) -> list[Address]:
        count = len(addresses)
        if not accrual or not len(self.accrual):
            if count == 1:
                return [addresses[0]]  # one endpoint (often: a Service's cluster address)
            return [addresses[(first + i) % count] for i in range(min(count, MAX_ADDRESS_TRIES))]
        now = self._clock()
        ordered = (addresses[(first + i) % count] for i in range(count))
        return [a for a in ordered if self.accrual.available(a, now=now)]

    def _record(self, decision: Forward, address: Address, *, failed: bool) -> None:
        if decision.accrual is not None:
            self.accrual.record(
                address, failed=failed, settings=decision.accrual, now=self._clock()
            )
