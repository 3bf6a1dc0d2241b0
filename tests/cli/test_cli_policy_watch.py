"""``interlock policy watch`` outlives the stream: it says when and why it ended and reconnects."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random

from aiohttp import web

from interlock.cli.policy import print_policy

POLICY = {"service": "web", "port": 80, "routes": [{"kind": "Default"}]}


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app, shutdown_timeout=1.0)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = runner.addresses[0][1]
    return runner, f"http://127.0.0.1:{port}/v1/outbound/default/web/80?watch=true"


async def test_a_watch_ended_by_the_server_is_reported_and_reopened() -> None:
    streams = 0

    async def watch(request: web.Request) -> web.StreamResponse:
        nonlocal streams
        streams += 1
        response = web.StreamResponse()
        await response.prepare(request)
        await response.write((json.dumps({**POLICY, "stream": streams}) + "\n").encode())
        if streams == 1:
            return response  # the controller went away: the stream ends
        await asyncio.Event().wait()
        return response

    app = web.Application()
    app.router.add_get("/v1/outbound/default/web/80", watch)
    runner, url = await _serve(app)
    out: list[str] = []
    err: list[str] = []
    slept: list[float] = []
    two_printed = asyncio.Event()

    def printed(text: str) -> None:
        out.append(text)
        if len(out) == 2:
            two_printed.set()

    async def sleep(delay: float) -> None:
        slept.append(delay)

    task = asyncio.create_task(
        print_policy(
            url,
            watch=True,
            pretty=True,
            out=printed,
            err=err.append,
            sleep=sleep,
            rng=random.Random(1),
        )
    )
    try:
        await asyncio.wait_for(two_printed.wait(), 30)
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task
        await runner.cleanup()
    assert [json.loads(text)["stream"] for text in out] == [1, 2]
    assert out[0].startswith("{\n  "), "--pretty indents"
    assert "watch ended: the server ended the stream" in err[0]
    assert "reconnecting in" in err[0]
    assert "reconnected to" in err[1]
    assert len(slept) == 1


async def test_an_unreachable_server_is_retried_with_growing_delays_and_said_plainly() -> None:
    # A port nobody listens on: bind one, note it, close it.
    server = await asyncio.start_server(lambda r, w: None, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    server.close()
    await server.wait_closed()
    err: list[str] = []
    slept: list[float] = []

    async def sleep(delay: float) -> None:
        slept.append(delay)
        if len(slept) == 4:
            raise asyncio.CancelledError

    url = f"http://127.0.0.1:{port}/v1/outbound/default/web/80?watch=true"
    task = asyncio.create_task(
        print_policy(url, watch=True, err=err.append, sleep=sleep, rng=random.Random(1))
    )
    with contextlib.suppress(asyncio.CancelledError):
        await asyncio.wait_for(task, 30)
    assert len(err) == 4
    assert f"watch ended: cannot connect to 127.0.0.1:{port} (connection refused)" in err[0]
    assert slept[3] > slept[0], "backoff grows"


async def test_a_client_error_ends_the_watch_with_status_1() -> None:
    async def missing(request: web.Request) -> web.Response:
        return web.Response(status=404, text="no such Service")

    app = web.Application()
    app.router.add_get("/v1/outbound/default/web/80", missing)
    runner, url = await _serve(app)
    err: list[str] = []
    try:
        code = await asyncio.wait_for(print_policy(url, watch=True, err=err.append), 30)
    finally:
        await runner.cleanup()
    assert code == 1
    assert err == ["error: HTTP 404: no such Service"]
