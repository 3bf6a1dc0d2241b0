"""HTTPRoute ``rules[].retry`` served at a Gateway (both lanes, the experimental HTTPRoute CRD).

A backend answers an error status to the first requests of each request id and 200 after: the
Gateway sends a request again while the rule's ``codes`` list the status and its ``attempts``
last, and relays the backend's answer otherwise. A try that got no answer (the connection reset,
or ``timeouts.backendRequest`` passed) is retried whatever the codes; ``timeouts.request``
bounds the whole, retries included.
The backend counts what it was sent, so each case says how many tries reached it.
"""

from __future__ import annotations

import asyncio
import itertools
from collections import Counter
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from tests.kit.dataplane_env import service_obj, slice_obj
from tests.kit.e2e_clients import eventually
from tests.kit.gateway_env import GROUP, Env, gateway_obj, http_listener
from tests.kit.gateway_env import env as env
from tests.kit.gateway_env import experimental_httproutes as experimental_httproutes
from tests.kit.h2_client import h2_get
from tests.kit.lanes import ENDPOINT_HOST

pytestmark = pytest.mark.usefixtures("experimental_httproutes")


class Flaky:
    """Answers ``status`` to the first ``fail`` requests of each ``id`` (or, with ``hang``,
    holds the first ``hang`` without answering until it stops), then 200."""

    def __init__(self) -> None:
        self.seen: Counter[str] = Counter()
        self.port = 0
        self._stop = asyncio.Event()
        self._runner: web.AppRunner | None = None

    async def _handle(self, request: web.Request) -> web.Response:
        key = request.query["id"]
        self.seen[key] += 1
        if self.seen[key] <= int(request.query.get("hang", "0")):
            await self._stop.wait()
        if self.seen[key] <= int(request.query.get("reset", "0")):
            assert request.transport is not None
            request.transport.abort()  # the connection reset, no answer
            raise web.HTTPInternalServerError()  # never sent
        if self.seen[key] <= int(request.query.get("fail", "0")):
            return web.Response(status=int(request.query["status"]), text="failed")
        return web.Response(text="ok", headers={"X-Tries": str(self.seen[key])})

    async def start(self) -> None:
        app = web.Application()
        app.router.add_get("/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, shutdown_timeout=1)
        await self._runner.setup()
        site = web.TCPSite(self._runner, ENDPOINT_HOST, 0)
        await site.start()
        server = site._server
        assert server is not None and server.sockets
        self.port = server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        self._stop.set()
        if self._runner is not None:
            await self._runner.cleanup()


async def _backend(env: Env, service: str) -> AsyncIterator[Flaky]:
    backend = Flaky()
    await backend.start()
    await env.cluster.apply(service_obj(service))
    await env.cluster.apply(slice_obj(service, backend.port))
    try:
        yield backend
    finally:
        await backend.stop()


@pytest.fixture
async def flaky(env: Env) -> AsyncIterator[Flaky]:
    async for backend in _backend(env, "flaky"):
        yield backend


@pytest.fixture
async def fresh(env: Env) -> AsyncIterator[Flaky]:
    """A backend no request has reached yet: the edge holds no pooled connection to it, whose
    failure its HTTP/1.1 client would retry by itself (a keep-alive connection closed idle)."""
    async for backend in _backend(env, "fresh"):
        yield backend


def _rule(prefix: str, backend: str = "flaky", **settings: Any) -> dict[str, Any]:
    return {
        "matches": [{"path": {"type": "PathPrefix", "value": prefix}}],
        "backendRefs": [{"name": backend, "port": 80}],
        **settings,
    }


RULES = [
    _rule("/code-500", retry={"codes": [500], "attempts": 3, "backoff": "1ms"}),
    _rule("/all-codes", retry={"codes": [500, 502, 503, 504], "attempts": 2, "backoff": "1ms"}),
    _rule("/unset", retry={"codes": [502]}),
    _rule("/no-answer", "fresh", retry={"codes": [500], "attempts": 1, "backoff": "1ms"}),
    _rule(
        "/attempt-timeout",
        retry={"codes": [500], "attempts": 1, "backoff": "1ms"},
        timeouts={"backendRequest": "2s"},
    ),
    _rule(
        "/request-timeout",
        retry={"codes": [504], "attempts": 20, "backoff": "1ms"},
        timeouts={"request": "2s", "backendRequest": "500ms"},
    ),
]
ROUTE = {
    "apiVersion": f"{GROUP}/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "retries", "namespace": "default"},
    "spec": {"parentRefs": [{"name": "one"}], "rules": RULES},
}


async def _served(env: Env) -> str:
    """The Gateway's address once the route, with its retries, is served there."""
    await env.cluster.apply(gateway_obj("one", http_listener("http")))
    address = await env.address("one")
    probes = itertools.count()

    async def stored_with_retry() -> bool:
        # Just after the CRD changed, the API server may still prune the field: apply again.
        stored = await env.cluster.apply(ROUTE)
        return all("retry" in rule for rule in stored["spec"]["rules"])

    await eventually(stored_with_retry, message="the route is stored with its retries")

    async def retried() -> bool:
        status, _ = await _get(env, address, f"/code-500?id=probe-{next(probes)}&fail=1&status=500")
        return status == 200

    await eventually(retried, message="the route's retries are served")
    return address


async def _get(env: Env, address: str, path: str) -> tuple[int, str | None]:
    async with env.http.get(f"http://{address}{path}", headers={"Host": "shop.example"}) as answer:
        return answer.status, answer.headers.get("X-Tries")


async def test_listed_statuses_are_retried_as_often_as_attempts_say(env: Env, flaky: Flaky) -> None:
    address = await _served(env)
    cases = [
        # path, failures before success, status: the answer, the tries the backend saw
        ("/code-500", 2, 500, 200, 3),
        ("/code-500", 3, 500, 200, 4),
        ("/code-500", 4, 500, 500, 4),  # 1 try + 3 retries, all failed: the last answer
        ("/code-500", 2, 503, 503, 1),  # 503 is not listed
        ("/code-500", 1, 404, 404, 1),
        ("/all-codes", 2, 502, 200, 3),
        ("/all-codes", 3, 504, 504, 3),
        ("/all-codes", 1, 503, 200, 2),
        ("/unset", 1, 502, 200, 2),  # attempts unset: one retry
        ("/unset", 2, 502, 502, 2),
    ]
    for number, (prefix, fail, status, answered, tries) in enumerate(cases):
        key = f"case-{number}"
        got, _ = await _get(env, address, f"{prefix}?id={key}&fail={fail}&status={status}")
        assert (got, flaky.seen[key]) == (answered, tries), (prefix, fail, status)


async def test_a_try_without_an_answer_is_retried_whatever_the_codes(
    env: Env, flaky: Flaky, fresh: Flaky
) -> None:
    # The spec: implementations SHOULD retry on connection errors (disconnect, reset, timeout)
    # once a retry is configured; these rules list 500 only.
    address = await _served(env)
    status, tries = await _get(env, address, "/no-answer?id=reset-once&reset=1")
    assert (status, tries) == (200, "2")
    status, tries = await _get(env, address, "/attempt-timeout?id=slow-once&hang=1")
    assert (status, tries) == (200, "2")
    # The same over HTTP/2 (h2c with prior knowledge: the edge's stream front door).
    reply = await h2_get(
        f"http://{address}:80", authority="shop.example", path="/attempt-timeout?id=h2&hang=1"
    )
    assert (reply.status, reply.headers.get("x-tries")) == (200, "2")


async def test_the_request_timeout_bounds_the_retries(env: Env, flaky: Flaky) -> None:
    # Every try hangs: 20 retries of 500 ms would take 10 s, but the request has 2 s in all,
    # and each try lasts its 500 ms (or what is left of the 2 s), so at most 4 reach the backend.
    address = await _served(env)
    status, _ = await _get(env, address, "/request-timeout?id=always-slow&hang=100")
    assert status == 504
    assert 1 <= flaky.seen["always-slow"] <= 4
