"""``--log-level DEBUG`` writes no header value, whichever library logs it.

``interlock run`` runs as a real process at DEBUG (embedded API server, edge) in front of an echo
backend. Requests over HTTP/1.1 and over h2c carry planted secrets in the headers users put them
in — ``Authorization`` (Basic and Bearer), ``Cookie``, an API-key header — and the whole output
of the process (stdout and stderr) must hold none of them. The HTTP/2 library's HPACK decoder
logs every decoded header at DEBUG; so may any other library the process loads.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import sys
from pathlib import Path

from tests.kit.echo_backends import Echo, local_slice
from tests.kit.edge_objects import INGRESS_CLASS_OBJ, backend_service, ingress
from tests.kit.h2_client import h2_get
from tests.kit.raw_http1 import send_raw

from .conftest import wait_until

HOST = "secrets.example.com"
PASSWORD = "pl4nted-basic-password"
SECRETS = {
    "basic": PASSWORD,
    "basic, encoded": base64.b64encode(f"alice:{PASSWORD}".encode()).decode(),
    "bearer": "pl4nted-bearer-token",
    "cookie": "pl4nted-cookie-value",
    "api key": "pl4nted-api-key",
}


def _headers() -> dict[str, str]:
    return {
        "Authorization": f"Basic {SECRETS['basic, encoded']}",
        "Cookie": f"session={SECRETS['cookie']}",
        "X-Api-Key": SECRETS["api key"],
    }


def _bearer() -> dict[str, str]:
    return {"Authorization": f"Bearer {SECRETS['bearer']}", "X-Api-Key": SECRETS["api key"]}


async def test_a_debug_run_logs_no_header_value(tmp_path: Path) -> None:
    echo = Echo("secrets")
    await echo.start()
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    objects = [
        INGRESS_CLASS_OBJ,
        backend_service("secrets"),
        local_slice("secrets", {"": echo.port}, name="secrets-slice"),
        ingress("secrets", HOST, backend="secrets"),
    ]
    (manifests / "objects.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )
    stdout_path, stderr_path = tmp_path / "stdout.log", tmp_path / "stderr.log"
    with stdout_path.open("wb") as stdout, stderr_path.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "interlock",
            "run",
            "--embedded",
            "--manifests",
            str(manifests),
            "--write-kubeconfig",
            str(tmp_path / "kubeconfig"),
            "--edge-addr",
            "127.0.0.1:0",
            "--policy-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
            "--access-log",
            "--log-level",
            "DEBUG",
            stdout=stdout,
            stderr=stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    try:
        await wait_until(
            lambda: "edge data plane listening on http://" in stdout_path.read_text(),
            deadline=120,
            what="the edge listening",
        )
        line = next(
            line
            for line in stdout_path.read_text().splitlines()
            if line.startswith("edge data plane listening on http://")
        )
        edge_url = "http://" + line.split("http://", 1)[1].strip()
        host, _, port = edge_url[len("http://") :].rpartition(":")

        async def http1(headers: dict[str, str]) -> int:
            lines = "".join(f"{name}: {value}\r\n" for name, value in headers.items())
            request = f"GET /app HTTP/1.1\r\nHost: {HOST}\r\n{lines}Connection: close\r\n\r\n"
            return (await send_raw((host, int(port)), request.encode())).status

        async def served() -> bool:
            return await http1(_headers()) == 200

        await wait_until(served, deadline=120, what="the Ingress served")
        assert await http1(_bearer()) == 200
        for headers in (_headers(), _bearer()):
            reply = await h2_get(edge_url, authority=HOST, path="/app", headers=headers)
            assert reply.status == 200, reply
        # The secrets reached the backend: the edge relayed them, so it read them.
        seen = json.dumps(echo.received)
        assert SECRETS["bearer"] in seen and SECRETS["cookie"] in seen
        process.terminate()
        assert await asyncio.wait_for(process.wait(), 60) == 0
        output = stdout_path.read_text() + stderr_path.read_text()
        assert " DEBUG " in output or '"debug"' in output  # DEBUG lines were written
        leaked = {name for name, value in SECRETS.items() if value in output}
        assert not leaked, f"the DEBUG log holds {sorted(leaked)}"
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        await echo.stop()
