"""The edge's steps are one function (``interlock.edge.steps.decide``) for every entry point:
a plain HTTP/1.1 request (the edge's own server), one that asks to upgrade its connection
(handed to aiohttp's server) and an HTTP/2 stream get the same answers, and the stricter
behaviour of the two copies the steps once had holds for all of them. A request refused before
its body was read leaves its connection usable on either version (HTTP/1.1: closed when the
rest of the body cannot be told from the next request; HTTP/2: the body's credit returned)."""

from __future__ import annotations

import asyncio
import hashlib
import hmac

import pytest
from multidict import CIMultiDict

from interlock.dataplane.proxy import MAX_READ_BODY
from interlock.dataplane.request_stream import H2Request
from interlock.edge.modules import ModuleChain, RequestView
from interlock.edge.steps import Admitted, ModuleSteps, decide_now
from interlock.model.moduleset import Modules, SecretValue
from tests.kit.edge_routes import serve_route
from tests.kit.h2_client import H2Client
from tests.kit.request_bodies import EMPTY, WholeBody

from .conftest import BACKEND, HOST, EdgeHarness

KEY = b"github-webhook-secret"
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
    reader, writer = await asyncio.open_connection(*harness.server.addresses.http)
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
    client = await H2Client.connect(*harness.server.addresses.http)
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
    client = await H2Client.connect(*harness.server.addresses.http)
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
    its own field."""
    await harness.serve()
    await _serve_webhook(harness, "/hook")
    seen: list[RequestView] = []

    async def admit(self: ModuleChain, view: RequestView, **_: object) -> None:
        seen.append(view)

    monkeypatch.setattr(ModuleChain, "admit", admit)
    headers = CIMultiDict({"Host": HOST, "X-A": "1"})
    request = H2Request("POST", "https", HOST, "/hook?x=1", headers, "1.2.3.4", WholeBody(b"{}"))
    pending = decide_now(harness.server.front, request, None)
    assert isinstance(pending, ModuleSteps)
    assert isinstance(await pending.run(harness.server.front, request, None), Admitted)
    [view] = seen
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
    assert (view.raw_target, view.peer_certificate) == ("/hook?x=1", None)
