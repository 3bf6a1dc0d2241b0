"""What the environment may change about the Kubernetes client: a proxy, read once; never netrc.

The client reads ``$HTTPS_PROXY``/``$NO_PROXY`` when it is built (aiohttp's rule) and sends its
requests through that proxy; ``~/.netrc`` (``$NETRC``) is not consulted for the API server.
``interlock/kube/client.py``'s docstring says why: per request, both were two thread hops.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from interlock.kube.client import api_client
from interlock.kube.resources import SERVICE
from interlock.kube.transport import request_json


class ConnectProxy:
    """An HTTP proxy that records each request's head, tunnels ``CONNECT`` (https) and forwards
    the rest (http) to the host their absolute-form target names."""

    def __init__(self) -> None:
        self.heads: list[list[str]] = []
        self.port = 0
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._tunnel, "127.0.0.1", 0)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()
        await self._server.wait_closed()

    async def _tunnel(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = (await reader.readuntil(b"\r\n\r\n")).decode("latin-1").split("\r\n")[:-2]
        self.heads.append(head)
        method, target, version = head[0].split(" ")
        if method == "CONNECT":  # https: a tunnel
            host, _, port = target.rpartition(":")
            up_reader, up_writer = await asyncio.open_connection(host, int(port))
            writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:  # http: the request forwarded in origin-form, without the proxy's own field
            url = urlsplit(target)
            assert url.hostname is not None and url.port is not None
            up_reader, up_writer = await asyncio.open_connection(url.hostname, url.port)
            origin = url.path + (f"?{url.query}" if url.query else "")
            fields = [f for f in head[1:] if not f.lower().startswith("proxy-authorization:")]
            up_writer.write("\r\n".join([f"{method} {origin} {version}", *fields, "", ""]).encode())

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(ConnectionError):
                while data := await source.read(65536):
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))


@pytest.fixture
async def proxy() -> AsyncIterator[ConnectProxy]:
    proxy = ConnectProxy()
    await proxy.start()
    try:
        yield proxy
    finally:
        await proxy.stop()


@pytest.fixture
def kubeconfig(server: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "NO_PROXY",
                 "no_proxy", "ALL_PROXY", "all_proxy", "NETRC"):  # fmt: skip
        monkeypatch.delenv(name, raising=False)
    return str(server.write_kubeconfig(tmp_path / "kubeconfig"))


async def _list_services(kubeconfig: str) -> list[Any]:
    async with api_client(kubeconfig=kubeconfig, in_cluster=False) as api:
        listing = await request_json(
            api, method="GET", path=SERVICE.collection_path(), what="list services"
        )
    items: list[Any] = listing["items"]
    return items


def _server_authority(kubeconfig: str) -> str:
    for line in Path(kubeconfig).read_text().splitlines():
        if line.strip().startswith("server:"):
            return line.split("://", 1)[1].strip().rstrip("/")
    raise AssertionError("no server in the kubeconfig")


async def test_the_proxy_the_environment_names_carries_the_requests(
    kubeconfig: str, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://robot:pa55@127.0.0.1:{proxy.port}")
    monkeypatch.setenv("HTTP_PROXY", f"http://robot:pa55@127.0.0.1:{proxy.port}")
    assert isinstance(await _list_services(kubeconfig), list)
    assert proxy.heads, "the request did not go through the proxy"
    target = _server_authority(kubeconfig)
    first = proxy.heads[0]
    assert first[0].split(" ")[1] in (target, f"http://{target}{SERVICE.collection_path()}")
    credentials = base64.b64encode(b"robot:pa55").decode()
    assert f"Proxy-Authorization: Basic {credentials}" in first


async def test_no_proxy_exempts_the_api_server(
    kubeconfig: str, proxy: ConnectProxy, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HTTPS_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{proxy.port}")
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    assert isinstance(await _list_services(kubeconfig), list)
    assert proxy.heads == []


async def test_a_netrc_entry_for_every_host_does_not_break_the_bearer_token(
    kubeconfig: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # With aiohttp's trust_env, a `default` netrc entry became Basic credentials for the API
    # server too, and aiohttp refused every request that also carried the kubeconfig's
    # Authorization header ("Cannot combine AUTHORIZATION header with AUTH argument").
    netrc = tmp_path / "netrc"
    netrc.write_text("default login someone password not-for-the-api-server\n")
    netrc.chmod(0o600)
    monkeypatch.setenv("NETRC", str(netrc))
    assert isinstance(await _list_services(kubeconfig), list)
