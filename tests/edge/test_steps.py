"""The edge's steps are one function (``interlock.edge.steps.decide``) for every entry point:
a plain HTTP/1.1 request (the edge's own server), one that asks to upgrade its connection
(handed to aiohttp's server) and an HTTP/2 stream get the same answers, and the stricter
behaviour of the two copies the steps once had holds for all of them. A request refused before
its body was read leaves its connection usable on either version (HTTP/1.1: closed when the
rest of the body cannot be told from the next request; HTTP/2: the body's credit returned)."""

from __future__ import annotations

import asyncio
import base64
import binascii
import hashlib
import hmac
from collections.abc import Mapping
from ipaddress import IPv4Address

import bcrypt
import pytest
from multidict import CIMultiDict

from interlock.dataplane.proxy import MAX_READ_BODY
from interlock.dataplane.request_stream import H2Request
from interlock.edge.modules import addresses
from interlock.edge.modules.basic_auth import verify_password
from interlock.edge.modules.circuit_breaker import CircuitBreaker
from interlock.edge.modules.webhook import WebhookVerification
from interlock.edge.passwords import PasswordChecker
from interlock.edge.steps import Admitted, ModuleSteps, Refusal, _request_view, decide_now
from interlock.model.moduleset import Modules, SecretValue
from tests.kit.edge_routes import serve_route
from tests.kit.h2_client import H2Client
from tests.kit.request_bodies import EMPTY, WholeBody

from .conftest import BACKEND, HOST, Backend, EdgeHarness

KEY = b"github-webhook-secret"
ALICE = bcrypt.hashpw(b"right", bcrypt.gensalt(rounds=4))
UPGRADE = "Connection: Upgrade\r\nUpgrade: websocket\r\n"


async def _serve_webhook(harness: EdgeHarness, path: str = "/") -> None:
    """``path`` on :data:`HOST` behind webhookVerification: a module that reads the body."""
    await serve_route(
        harness.edge,
        host=HOST,
        route_id="root" if path == "/" else "hook",
        path=path,
        modules=Modules.model_validate(
            {
                "webhookVerification": {
                    "provider": "github",
                    "secretRef": {"name": "hook", "key": "secret"},
                }
            }
        ),
        secrets={("hook", "secret"): SecretValue(KEY)},
        backend=BACKEND,
    )


async def _exchange(harness: EdgeHarness, data: bytes) -> tuple[int, str, bool]:
    """Send ``data`` on a new connection: the answer's status, its ``X-Interlock-Reason``, and
    whether the edge closes the connection after it (``Connection: close``, then the end of
    the stream)."""
    reader, writer = await asyncio.open_connection(*harness.address)
    try:
        writer.write(data)
        await writer.drain()
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), 30)
        lines = head.decode("latin-1").split("\r\n")
        headers = {
            name.strip().lower(): value.strip()
            for name, _, value in (line.partition(":") for line in lines[1:] if line)
        }
        await asyncio.wait_for(reader.readexactly(int(headers.get("content-length", "0"))), 30)
        closed = headers.get("connection", "").lower() == "close"
        if closed:
            assert await asyncio.wait_for(reader.read(1), 30) == b""
        return int(lines[0].split(" ", 2)[1]), headers.get("x-interlock-reason", ""), closed
    finally:
        writer.close()


def _post(body: bytes, *, extra: str = "") -> bytes:
    signature = hmac.new(KEY, body, hashlib.sha256).hexdigest()
    return (
        f"POST / HTTP/1.1\r\nHost: {HOST}\r\nX-Hub-Signature-256: sha256={signature}\r\n"
        f"{extra}Content-Length: {len(body)}\r\n\r\n"
    ).encode() + body


@pytest.mark.parametrize("extra", ["", UPGRADE], ids=["plain", "upgrade"])
async def test_an_oversized_body_for_a_module_is_refused_and_the_connection_closed(
    harness: EdgeHarness, extra: str
) -> None:
    """Once the edge stopped reading a body, what is left of it cannot be told from the next
    request: 413, and the connection is not reused — even when the whole body had arrived (a
    plain request's steps kept the connection open then)."""
    await _serve_webhook(harness)
    status, reason, closed = await _exchange(
        harness, _post(b"x" * (MAX_READ_BODY + 1), extra=extra)
    )
    assert (status, reason) == (413, "body-too-large")
    assert closed


@pytest.mark.parametrize("extra", ["", UPGRADE], ids=["plain", "upgrade"])
async def test_a_body_a_module_read_whole_is_forwarded_and_keeps_the_connection(
    harness: EdgeHarness, extra: str
) -> None:
    """The counterpart: a body within the bound is read, verified and forwarded (the backend
    answers an upgrade it does not take as a plain request), on a connection kept open."""
    await _serve_webhook(harness)
    assert await _exchange(harness, _post(b'{"action":"opened"}', extra=extra)) == (200, "", False)


@pytest.mark.parametrize(
    ("target", "host", "expected"),
    [
        ("/", "unknown.example.com", (404, "unknown-host")),
        ("/a/%2e%2e;x/b", HOST, (400, "bad-request")),
        ("/elsewhere", HOST, (404, "no-route")),
        ("/?q=1#fragment", HOST, (400, "bad-request")),
    ],
)
async def test_plain_and_upgrade_requests_are_refused_alike(
    harness: EdgeHarness, target: str, host: str, expected: tuple[int, str]
) -> None:
    await harness.serve(path="/only", path_type="Exact")
    for extra in ("", UPGRADE):
        request = f"GET {target} HTTP/1.1\r\nHost: {host}\r\n{extra}\r\n".encode()
        status, reason, _ = await _exchange(harness, request)
        assert (status, reason) == expected, extra


async def test_an_http2_connection_serves_on_after_bodies_it_did_not_read(
    harness: EdgeHarness,
) -> None:
    """A stream refused before its body was read gives the client its flow-control credit back
    (and stops the rest of the body): without it, 64 KiB of refused uploads held the
    connection's window, and the third 30 KB upload on the connection never went out."""
    await harness.serve()
    client = await H2Client.connect(*harness.address)
    try:
        for _ in range(6):
            reply = await client.request(
                authority="unknown.example.com", method="POST", body=b"x" * 30_000, within=30
            )
            assert (reply.status, reply.reason) == (404, "unknown-host")
    finally:
        await client.close()


async def test_an_oversized_http2_body_is_refused_and_the_connection_serves_on(
    harness: EdgeHarness,
) -> None:
    """HTTP/2 carries other streams on the connection: the 413 ends only this stream."""
    await _serve_webhook(harness)
    client = await H2Client.connect(*harness.address)
    try:
        reply = await client.request(
            authority=HOST, method="POST", body=b"x" * (MAX_READ_BODY + 1), within=30
        )
        assert (reply.status, reply.reason) == (413, "body-too-large")
        reply = await client.request(authority="unknown.example.com", within=30)
        assert (reply.status, reply.reason) == (404, "unknown-host")
    finally:
        await client.close()


async def test_a_route_without_modules_is_decided_without_waiting(harness: EdgeHarness) -> None:
    """``decide_now`` decides a request to a route without modules in one call; a route whose
    modules must be awaited gets the steps to await (``ModuleSteps``), which end alike."""
    await harness.serve()
    await _serve_webhook(harness, "/hook")
    front = harness.server.front
    plain = H2Request("GET", "http", HOST, "/a?b=c", CIMultiDict(Host=HOST), "1.2.3.4", EMPTY)
    decided = decide_now(front, plain, None)
    assert isinstance(decided, Admitted)
    assert decided.query == "b=c"
    assert decided.headers["X-Forwarded-For"] == "1.2.3.4"
    body = b"{}"
    signature = hmac.new(KEY, body, hashlib.sha256).hexdigest()
    hooked = H2Request(
        "POST",
        "http",
        HOST,
        "/hook",
        CIMultiDict({"Host": HOST, "X-Hub-Signature-256": f"sha256={signature}"}),
        "1.2.3.4",
        WholeBody(body),
    )
    pending = decide_now(front, hooked, None)
    assert isinstance(pending, ModuleSteps)
    finished = await pending.run(front, hooked, None)
    assert isinstance(finished, Admitted)
    assert finished.body == body


async def test_modules_see_each_field_of_the_request(
    harness: EdgeHarness, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``RequestView`` the steps build (positionally) carries each part of the request in
    its own field, and a module that reads the body gets the request's headers and body.
    (Observed at the webhook module and the view's builder: a compiled ``ModuleChain``,
    setup.py, calls its own methods directly, so a spy set on one would see nothing.)"""
    await harness.serve()
    await _serve_webhook(harness, "/hook")
    seen: list[tuple[Mapping[str, str], bytes | None]] = []

    def check(self: WebhookVerification, headers: Mapping[str, str], body: bytes | None) -> None:
        seen.append((headers, body))

    monkeypatch.setattr(WebhookVerification, "check", check)
    headers = CIMultiDict({"Host": HOST, "X-A": "1"})
    request = H2Request("POST", "https", HOST, "/hook?x=1", headers, "1.2.3.4", WholeBody(b"{}"))
    pending = decide_now(harness.server.front, request, None)
    assert isinstance(pending, ModuleSteps)
    assert isinstance(await pending.run(harness.server.front, request, None), Admitted)
    assert seen == [(headers, b"{}")]
    assert seen[0][0] is headers
    view = _request_view(request, "/hook", pending.params, HOST, b"{}", b"certificate")
    assert (view.method, view.path, dict(view.query), view.headers) == (
        "POST",
        "/hook",
        {"x": "1"},
        headers,
    )
    assert (view.authority, view.peer_ip, view.body, view.scheme) == (
        HOST,
        "1.2.3.4",
        b"{}",
        "https",
    )
    assert (view.raw_target, view.peer_certificate) == ("/hook?x=1", b"certificate")


USERS = {("users", "htpasswd"): SecretValue(b"alice:" + ALICE + b"\n")}
CHECKS = {
    "ipRestriction": {"deny": ["10.9.0.0/16"]},
    "rateLimit": {"requests": 3, "period": "1h"},
    "basicAuth": {"realm": "app", "secretRef": {"name": "users", "key": "htpasswd"}},
    "circuitBreaker": {"volumeThreshold": 1, "trippedDuration": "1h"},
    "headers": {"request": {"add": {"X-Team": "blue"}}},
}
CHALLENGE = (401, "unauthorized\n", 'Basic realm="app", charset="UTF-8"')


class CountingBcrypt:
    """bcrypt, counting the checks the password pool ran."""

    def __init__(self) -> None:
        self.checks = 0

    def __call__(self, password: bytes, hashed: bytes) -> bool:
        self.checks += 1
        return verify_password(password, hashed)


async def _guarded(harness: EdgeHarness, checks: dict[str, object]) -> CountingBcrypt:
    await serve_route(
        harness.edge,
        host=HOST,
        modules=Modules.model_validate(checks),
        secrets=USERS,
        backend=BACKEND,
    )
    bcrypt_checks = CountingBcrypt()
    harness.server.front.passwords = PasswordChecker(verify=bcrypt_checks)
    return bcrypt_checks


async def _decided(
    harness: EdgeHarness, *, peer: str = "203.0.113.7", password: str | None = None
) -> tuple[Refusal | Admitted, bool]:
    """``decide_now``'s answer to a GET from ``peer`` (as alice with ``password``, if given),
    and whether it had to be awaited (a ``ModuleSteps``: bcrypt not cached)."""
    headers = CIMultiDict({"Host": HOST})
    if password is not None:
        token = base64.b64encode(f"alice:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {token}"
    request = H2Request("GET", "http", HOST, "/", headers, peer, EMPTY)
    front = harness.server.front
    decided = decide_now(front, request, None)
    if isinstance(decided, ModuleSteps):
        return await decided.run(front, request, None), True
    return decided, False


def _refusal(decided: Refusal | Admitted) -> tuple[int, str | None, str | None]:
    """A module's refusal: its status, body and the challenge it carries, if any."""
    assert isinstance(decided, Refusal), decided
    headers = dict(decided.answer.headers)
    return decided.answer.status, decided.module_body, headers.get("WWW-Authenticate")


async def test_checks_run_in_order_whether_decided_at_once_or_after_bcrypt(
    harness: EdgeHarness,
) -> None:
    """A route whose checks answer at once (basicAuth's answer cached) is decided in one call,
    one with a bcrypt check to run is awaited; both in the documented order (ipRestriction,
    rateLimit, basicAuth, circuitBreaker) and with each module's own refusal."""
    bcrypt_checks = await _guarded(harness, CHECKS)
    # A denied address: refused first, with no bcrypt check and no rateLimit token spent.
    decided, awaited = await _decided(harness, peer="10.9.0.1", password="right")
    assert (_refusal(decided), awaited) == ((403, "forbidden\n", None), False)
    decided, awaited = await _decided(harness)  # no credentials: one token
    assert (_refusal(decided), awaited) == (CHALLENGE, False)
    decided, awaited = await _decided(harness, password="right")  # bcrypt: a second token
    assert isinstance(decided, Admitted) and awaited
    assert decided.headers["X-Team"] == "blue"
    decided, awaited = await _decided(harness, password="right")  # cached: the third token
    assert isinstance(decided, Admitted) and not awaited
    assert bcrypt_checks.checks == 1
    decided, awaited = await _decided(harness, password="right")  # the limit, before auth
    assert _refusal(decided)[:2] == (429, "too many requests\n") and not awaited
    # Another client: the circuit breaker, open, refuses only what basicAuth admitted.
    routes = harness.edge.routes_of_host(HOST)
    assert routes is not None
    chain = routes["root"].chain
    assert chain is not None
    chain.record_upstream(None)
    decided, awaited = await _decided(harness, peer="203.0.113.8")
    assert (_refusal(decided), awaited) == (CHALLENGE, False)
    decided, awaited = await _decided(harness, peer="203.0.113.8", password="right")
    assert _refusal(decided)[:2] == (503, "service unavailable: circuit open\n") and not awaited
    decided, awaited = await _decided(harness, peer="203.0.113.8", password="wrong")
    assert (_refusal(decided), awaited) == (CHALLENGE, True)
    decided, awaited = await _decided(harness, peer="203.0.113.9", password="wrong")
    assert (_refusal(decided), awaited) == (CHALLENGE, False)  # the failure cached
    assert bcrypt_checks.checks == 2


async def test_a_rate_limit_token_is_taken_once_for_a_request_awaiting_bcrypt(
    harness: EdgeHarness,
) -> None:
    """The checks before basicAuth ran when ``decide_now`` stopped at the bcrypt check: the
    awaited rest does not run them again (a second token per guess would halve the limit)."""
    bcrypt_checks = await _guarded(
        harness, {"rateLimit": {"requests": 2, "period": "1h"}, "basicAuth": CHECKS["basicAuth"]}
    )
    answers = [await _decided(harness, password=f"guess-{n}") for n in range(3)]
    assert [(_refusal(decided)[0], awaited) for decided, awaited in answers] == [
        (401, True),
        (401, True),
        (429, False),
    ]
    assert bcrypt_checks.checks == 2


@pytest.mark.parametrize(
    ("failing_part", "name", "password"),
    # What each module's check calls that is not compiled in the compiled build (setup.py:
    # a compiled module's own calls cannot be spied on): the client address's number (the
    # address ranges' look-up, for an address not judged last: the parsed peers are forgotten),
    # basicAuth's base64 decoding (for credentials not cached), the (interpreted) circuit
    # breaker.
    [
        (IPv4Address, "__int__", "right"),
        (binascii, "a2b_base64", "other"),
        (CircuitBreaker, "check", "right"),
    ],
    ids=["ipRestriction", "basicAuth", "circuitBreaker"],
)
async def test_a_module_that_fails_fails_closed(
    harness: EdgeHarness,
    backend: Backend,
    monkeypatch: pytest.MonkeyPatch,
    failing_part: object,
    name: str,
    password: str,
) -> None:
    """A check that raises, in the pass that decides at once, refuses the request (500)
    instead of letting it through."""
    await _guarded(harness, CHECKS)
    token = base64.b64encode(b"alice:right").decode()
    assert (await harness.get("/", headers={"Authorization": f"Basic {token}"}))[0] == 200
    assert len(backend.seen) == 1  # bcrypt ran; the next request's answer is cached

    def failing(*_: object, **__: object) -> None:
        raise RuntimeError("the module failed")

    monkeypatch.setattr(addresses, "_peers", {})
    monkeypatch.setattr(failing_part, name, failing)
    token = base64.b64encode(f"alice:{password}".encode()).decode()
    status, _, _ = await harness.get("/", headers={"Authorization": f"Basic {token}"})
    assert status == 500
    assert len(backend.seen) == 1
