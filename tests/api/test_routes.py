"""The controller's router (``interlock.api.routes``): answers as aiohttp.web's application did.

The policy API and the admin server moved off ``aiohttp.web`` (issue 29 item 5); what a client
sees must not have moved with them. The answers below are what ``web.Application`` with the
same routes and the ``Host`` middleware answered, byte for byte (status line, headers but the
date, body): 404 and 405 with aiohttp's bodies and ``Allow``, ``HEAD`` without a body, the
``Host`` guard around unknown paths too, ``Expect`` answered before the guard, path parameters
decoded as aiohttp's dispatcher decodes them.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator

import pytest

from interlock.api.hosts import host_guard
from interlock.api.http_server import Response, StreamResponse
from interlock.api.routes import Request, Routes
from interlock.api.serving import RunningSite, serve
from interlock.config import Address
from interlock.model.allowed_hosts import AllowedHosts


async def _echo(request: Request) -> StreamResponse:
    parts = ",".join(f"{name}={value}" for name, value in sorted(request.match_info.items()))
    return Response(text=f"{request.method} {parts}\n")


def _routes(*, guard: bool = True) -> Routes:
    routes = Routes(guard=host_guard(AllowedHosts()) if guard else None)
    routes.add_get("/healthz", _echo)
    routes.add_get("/debug/", _echo)
    routes.add_get("/debug/{name}", _echo)
    routes.add_get("/v1/outbound/{namespace}/{service}/{port}", _echo)
    return routes


@pytest.fixture
async def site() -> AsyncIterator[RunningSite]:
    running = await serve(_routes(), Address("127.0.0.1", 0))
    yield running
    await running.stop()


async def _ask(site: RunningSite, head: str) -> str:
    reader, writer = await asyncio.open_connection("127.0.0.1", site.address.port)
    writer.write(head.replace("\n", "\r\n").encode())
    try:
        answer = await asyncio.wait_for(reader.read(), 10)
    finally:
        writer.close()
    return re.sub(r"Date: [^\r]*\r\n", "", answer.decode("latin-1")).replace("\r\n", "\n")


def _get(path: str, *, method: str = "GET", host: str = "127.0.0.1", more: str = "") -> str:
    return f"{method} {path} HTTP/1.1\nHost: {host}\nConnection: close\n{more}\n"


def _text(status: str, body: str, *, extra: str = "") -> str:
    length = len(body.encode())
    return (
        f"HTTP/1.1 {status}\nContent-Type: text/plain; charset=utf-8\n{extra}"
        f"Content-Length: {length}\nServer: interlock\nConnection: close\n\n{body}"
    )


NOT_FOUND = _text("404 Not Found", "404: Not Found")
NOT_ALLOWED = _text("405 Method Not Allowed", "405: Method Not Allowed", extra="Allow: GET,HEAD\n")


async def test_routes_answer_as_the_aiohttp_application_did(site: RunningSite) -> None:
    assert await _ask(site, _get("/healthz")) == _text("200 OK", "GET \n")
    # HEAD is served with GET: the same head, no body.
    assert await _ask(site, _get("/healthz", method="HEAD")) == _text("200 OK", "HEAD \n")[:-6]
    assert await _ask(site, _get("/missing")) == NOT_FOUND
    for path in ("/healthz/", "//healthz", "/debug", "/debug/a/b", "/debug/a{b", "/debug/%7Bb"):
        assert await _ask(site, _get(path)) == NOT_FOUND, path
    for method in ("POST", "PUT", "DELETE", "OPTIONS"):
        asked = _get("/debug/x", method=method, more="Content-Length: 0\n")
        assert await _ask(site, asked) == NOT_ALLOWED, method
    assert await _ask(site, _get("/nowhere", method="POST")) == NOT_FOUND


async def test_path_parameters_are_decoded_as_aiohttps_dispatcher_decodes_them(
    site: RunningSite,
) -> None:
    # The decoded path, with %2F and %25 decoded only in the parameter's value.
    assert await _ask(site, _get("/debug/a%2Fb")) == _text("200 OK", "GET name=a/b\n")
    assert await _ask(site, _get("/debug/a%25b")) == _text("200 OK", "GET name=a%b\n")
    assert await _ask(site, _get("/%68ealthz?x=1")) == _text("200 OK", "GET \n")
    assert await _ask(site, _get("/v1/outbound/shop/%77eb/80")) == _text(
        "200 OK", "GET namespace=shop,port=80,service=web\n"
    )


async def test_the_host_guard_runs_around_every_route_the_unknown_ones_too(
    site: RunningSite,
) -> None:
    for path, method in (("/healthz", "GET"), ("/missing", "GET"), ("/healthz", "POST")):
        answer = await _ask(site, _get(path, method=method, host="evil.example"))
        assert answer.startswith("HTTP/1.1 421 Misdirected Request\n"), (path, method)
        assert "Host 'evil.example' is not one of this server's names" in answer


async def test_expect_is_answered_before_the_guard(site: RunningSite) -> None:
    continued = await _ask(site, _get("/healthz", more="Expect: 100-continue\n"))
    assert continued == "HTTP/1.1 100 Continue\n\n" + _text("200 OK", "GET \n")
    unknown = _text("417 Expectation Failed", "Unknown Expect: else")
    assert await _ask(site, _get("/healthz", more="Expect: else\n")) == unknown
    assert await _ask(site, _get("/missing", host="evil.example", more="Expect: else\n")) == unknown


async def test_every_answer_says_interlock_not_aiohttps_version(site: RunningSite) -> None:
    for head in (_get("/healthz"), _get("/missing"), "BROKEN\n\n"):
        answer = await _ask(site, head)
        assert "\nServer: interlock\n" in answer and "aiohttp" not in answer, head


async def test_without_a_guard_handlers_answer_any_host() -> None:
    running = await serve(_routes(guard=False), Address("127.0.0.1", 0))
    try:
        assert await _ask(running, _get("/healthz", host="evil.example")) == _text(
            "200 OK", "GET \n"
        )
    finally:
        await running.stop()


def test_a_route_is_an_exact_path_or_whole_segment_parameters() -> None:
    routes = _routes()
    assert routes.resolve("/healthz") == (_echo, {})
    assert routes.resolve("/debug/") == (_echo, {})
    assert routes.resolve("/debug/actors") == (_echo, {"name": "actors"})
    assert routes.resolve("/v1/outbound/a/b/c") == (
        _echo,
        {"namespace": "a", "service": "b", "port": "c"},
    )
    for path in ("/healthz/", "/debug", "/debug//", "/v1/outbound/a/b", "/v1/outbound//b/c", ""):
        assert routes.resolve(path) is None, path
    for bad, why in (
        ("healthz", "starts with '/'"),
        ("/healthz", "routed already"),
        ("/x/{name}.json", "a whole segment"),
        ("/x/{1}", "a whole segment"),
        ("/x/{a-b}", "a whole segment"),
        ("/x/}", "a whole segment"),
    ):
        with pytest.raises(ValueError, match=why):
            routes.add_get(bad, _echo)


async def test_stopping_runs_the_shutdown_callbacks_and_releases_the_port() -> None:
    routes = _routes()
    ended: list[str] = []

    async def end() -> None:
        ended.append("ended")

    routes.on_shutdown.append(end)
    running = await serve(routes, Address("127.0.0.1", 0))
    await running.stop()
    assert ended == ["ended"]
    with pytest.raises(ConnectionRefusedError):
        await asyncio.open_connection("127.0.0.1", running.address.port)


async def _boom(_request: Request) -> StreamResponse:
    raise RuntimeError("the handler's own words")


@pytest.mark.parametrize("debug", [False, True])
async def test_an_unexpected_error_shows_its_traceback_in_asyncio_debug_mode_only(
    debug: bool,
) -> None:
    # As aiohttp.web's application answered: 500, with the traceback only in debug mode.
    routes = _routes()
    routes.add_get("/boom", _boom)
    loop = asyncio.get_running_loop()
    was = loop.get_debug()
    loop.set_debug(debug)
    try:
        running = await serve(routes, Address("127.0.0.1", 0))
    finally:
        loop.set_debug(was)
    try:
        answer = await _ask(running, _get("/boom"))
    finally:
        await running.stop()
    head, _, body = answer.partition("\n\n")
    assert head.startswith("HTTP/1.1 500 Internal Server Error\n")
    if debug:
        assert body.startswith("500 Internal Server Error\n\nTraceback (most recent call last):")
        assert "RuntimeError: the handler's own words" in body
    else:
        assert body == "500 Internal Server Error\n\nServer got itself in trouble"
