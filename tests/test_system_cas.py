"""aiohttp's default client contexts load the system's CAs on first use, not at import (issue 29,
item 5: 1.8 MiB of RSS the controller never uses), and verify exactly as before once they do.

Checked in a fresh interpreter that imports interlock before aiohttp, as ``interlock run`` does
(this test process imported aiohttp first, so nothing is postponed here), with ``SSL_CERT_FILE``
naming the one CA the system trusts for the check.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

from tests.kit.tls_certs import self_signed

CHECK = """
import asyncio, json, ssl, sys
import interlock.controller.app
import aiohttp
from aiohttp import connector, web

def cas():
    return [context.cert_store_stats()["x509"]
            for context in (connector._SSL_CONTEXT_VERIFIED, connector._SSL_CONTEXT_UNVERIFIED)]

async def serve(cert, key):
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.load_cert_chain(cert, key)
    app = web.Application()
    app.router.add_get("/", lambda request: web.Response(text="ok"))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0, ssl_context=context)
    await site.start()
    return runner, runner.addresses[0][1]

async def get(session, port, **kwargs):
    try:
        async with session.get(f"https://localhost:{port}/", **kwargs) as response:
            return await response.text()
    except aiohttp.ClientConnectorCertificateError:
        return "certificate refused"

async def main():
    found = {"imported": cas()}
    trusted, trusted_port = await serve(sys.argv[1], sys.argv[2])
    other, other_port = await serve(sys.argv[3], sys.argv[4])
    async with aiohttp.ClientSession() as session:
        found["trusted"] = await get(session, trusted_port)
        found["other"] = await get(session, other_port)
        found["other, ssl=False"] = await get(session, other_port, ssl=False)
    found["used"] = cas()
    await trusted.cleanup()
    await other.cleanup()
    print(json.dumps(found))

asyncio.run(main())
"""


def _pem_files(directory: Path, name: str) -> list[str]:
    cert, key = self_signed("localhost")
    (directory / f"{name}.crt").write_text(cert)
    (directory / f"{name}.key").write_text(key)
    return [str(directory / f"{name}.crt"), str(directory / f"{name}.key")]


def test_aiohttp_default_contexts_load_the_system_cas_on_first_use(tmp_path: Path) -> None:
    trusted = _pem_files(tmp_path, "trusted")
    other = _pem_files(tmp_path, "other")
    out = subprocess.run(
        [sys.executable, "-c", textwrap.dedent(CHECK), *trusted, *other],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "SSL_CERT_FILE": trusted[0], "SSL_CERT_DIR": str(tmp_path / "none")},
    )
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout) == {
        "imported": [0, 0],
        # Verified against the system's CAs (here: SSL_CERT_FILE) as aiohttp always did.
        "trusted": "ok",
        "other": "certificate refused",
        "other, ssl=False": "ok",
        "used": [1, 1],
    }
