"""The data plane's own answers: one format, a reason token, no library banner."""

from __future__ import annotations

from aiohttp import web
from aiohttp.test_utils import make_mocked_request

from interlock.dataplane.answers import REASON_HEADER, REASONS, answer
from interlock.dataplane.wire import answer_response


async def test_every_reason_renders_with_its_token_and_no_server_banner() -> None:
    for reason, (status, sentence) in REASONS.items():
        response = answer_response(answer(reason, "Service shop/web is secret"))
        request = make_mocked_request("GET", "/")
        await response.prepare(request)
        assert response.status == status
        assert response.headers[REASON_HEADER] == reason
        assert "Server" not in response.headers
        assert response.text == f"{reason}: {sentence}\n"
        assert "shop/web" not in (response.text or "")


async def test_detail_only_when_asked() -> None:
    response = answer_response(answer("no-route", "Service shop/web: no rule"), with_detail=True)
    assert isinstance(response, web.Response)
    assert response.text == "no-route: Service shop/web: no rule\n"


async def test_a_malformed_request_gets_the_format_without_a_banner() -> None:
    import asyncio

    from interlock.dataplane.upstreams import StaticUpstreams
    from interlock.edge.inprocess import InProcessEdge
    from interlock.edge.server import EdgeServer

    server = EdgeServer(edge=InProcessEdge(), upstreams=StaticUpstreams())
    host, port = (await server.start(addr="127.0.0.1:0")).http
    try:
        reader, writer = await asyncio.open_connection(host, port)
        writer.write(b"GET / HTTP/1.1\r\nHost: a\r\nBad Header\r\n\r\n")
        await writer.drain()
        received = await asyncio.wait_for(reader.read(), 30)
        writer.close()
    finally:
        await server.stop()
    head = received.split(b"\r\n\r\n", 1)[0].lower()
    assert head.split(b"\r\n", 1)[0].split(b" ")[1] == b"400"
    assert b"x-interlock-reason: bad-request" in head
    assert b"\r\nserver:" not in head
