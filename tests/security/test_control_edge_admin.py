"""The ``interlock edge`` admin API answers only calls carrying its token.

Whoever calls the admin API decides what the edge serves: a ``PUT`` of empty modules used to
strip a route's basicAuth from anyone who reached the port. ``interlock edge`` runs here as a
real process at ``--log-level DEBUG``; the controller's side (``HttpEdge`` with the token)
programs a basicAuth route, and an attacker without the token, or with another one, is refused
401 and changes nothing. The token appears nowhere in the process's output.
"""

from __future__ import annotations

import base64
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from interlock.edge.http_provider import HttpEdge
from interlock.edge.provider import PermanentEdgeError
from tests.kit.cli_process import Running, http_get, interlock_argv
from tests.kit.edge_admin import ROUTE, STRIPPED, guard_with_basic_auth

TOKEN = "pl4nted-edge-admin-token-0123456789"
HOST = "shop.example"


def _call(method: str, url: str, *, body: bytes | None = None, **headers: str) -> int:
    request = urllib.request.Request(url, data=body, method=method, headers=headers)
    request.add_header("Content-Type", "application/json")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        refused = error
    challenge = refused.headers.get("WWW-Authenticate", "")
    assert refused.code != 401 or challenge.startswith("Bearer"), challenge
    return int(refused.code)


def test_interlock_edge_refuses_to_start_without_a_token_file(tmp_path: Path) -> None:
    edge = Running(
        interlock_argv("edge", "--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0"),
        log=tmp_path / "edge.log",
    )
    try:
        assert edge.wait(within=60.0) != 0
        assert "--admin-token-file is required" in edge.log.read_text()
    finally:
        edge.stop()


async def test_the_admin_api_refuses_calls_without_its_token(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text(TOKEN + "\n")
    argv = ["--listen", "127.0.0.1:0", "--admin", "127.0.0.1:0", "--log-level", "DEBUG"]
    edge = Running(
        interlock_argv("edge", *argv, "--admin-token-file", str(token_file)),
        log=tmp_path / "edge.log",
    )
    try:
        data_plane = edge.wait_for(r"edge listening on (http://\S+)")[1]
        admin = edge.wait_for(r"edge admin API on (http://\S+)")[1]
        # The controller's side: the token read from the same file.
        await guard_with_basic_auth(admin, TOKEN, HOST)
        assert http_get(f"{data_plane}/", headers={"Host": HOST})[0] == 401
        modules_url = f"{admin}/v1/hosts/{HOST}/routes/{ROUTE.replace('/', '%2F')}/modules"
        for headers in (
            {},
            {"Authorization": "Bearer wrong-token"},
            {"Authorization": f"Bearer {TOKEN}x"},
            {"Authorization": f"Bearer {TOKEN[:-1]}"},
            {"Authorization": f"Basic {base64.b64encode(TOKEN.encode()).decode()}"},
            {"Authorization": TOKEN},
        ):
            assert _call("PUT", modules_url, body=STRIPPED, **headers) == 401, headers
            assert _call("DELETE", f"{admin}/v1/hosts/{HOST}/routes/x", **headers) == 401
            assert _call("GET", f"{admin}/v1/snapshot", **headers) == 401, headers
        # The route still asks for the password: nothing the attacker sent was applied.
        assert http_get(f"{data_plane}/", headers={"Host": HOST})[0] == 401
        # The controller's side without the token is refused too: a permanent error naming it.
        async with HttpEdge(base_url=admin, token=None) as anonymous:
            with pytest.raises(PermanentEdgeError, match=r"401.*--admin-token-file"):
                await anonymous.snapshot()
        assert _call("GET", f"{admin}/healthz") == 200  # reveals nothing: open to probes
        assert _call("GET", f"{admin}/v1/snapshot", Authorization=f"Bearer {TOKEN}") == 200
    finally:
        edge.stop()
    output = edge.output() + edge.log.read_text()
    assert TOKEN not in output
