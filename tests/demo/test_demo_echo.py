"""The demo's echo servers show the backend name, path and headers, never credentials."""

from __future__ import annotations

import aiohttp

from interlock.demo.echo import EchoServer


async def test_echo_answers_with_name_path_and_headers_but_not_authorization() -> None:
    server = EchoServer(name="echo-v1")
    await server.start()
    try:
        assert server.port > 0
        async with (
            aiohttp.ClientSession() as session,
            session.post(
                f"http://127.0.0.1:{server.port}/hello?x=1",
                headers={"X-Interlock": "demo", "Authorization": "Basic ZGVtbzpkZW1v"},
            ) as response,
        ):
            assert response.status == 200
            body = await response.json()
    finally:
        await server.stop()
    assert body["backend"] == "echo-v1"
    assert body["method"] == "POST"
    assert body["path"] == "/hello?x=1"
    assert body["headers"]["X-Interlock"] == "demo"
    assert "Authorization" not in body["headers"]
