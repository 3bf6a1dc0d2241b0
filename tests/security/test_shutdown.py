"""SIGTERM with requests in flight ends within a bounded drain, Lease released first.

``interlock run`` runs as a real process (embedded API server, edge) in front of a backend that
accepts connections and never answers. After SIGTERM the process must release the Lease before
the edge drains, drain for at most ``--edge-drain-timeout`` (1 s here), and exit 0. The deadline
waited for is generous (45 s, while aiohttp's own drain was 60 s): it tells "bounded" from
"waits for the upstream", and nothing is timed.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import signal
import sys
from pathlib import Path

from tests.kit.echo_backends import local_slice
from tests.kit.edge_objects import INGRESS_CLASS_OBJ, backend_service, ingress
from tests.kit.lanes import ENDPOINT_HOST

from .conftest import wait_until

HOST = "hang.example.com"


def _manifests(directory: Path, *, port: int) -> None:
    objects = [
        INGRESS_CLASS_OBJ,
        backend_service("hang"),
        local_slice("hang", {"": port}, name="hang-slice"),
        ingress("hang", HOST, backend="hang"),
    ]
    (directory / "objects.json").write_text(
        json.dumps({"apiVersion": "v1", "kind": "List", "items": objects})
    )


async def test_sigterm_with_requests_in_flight_exits_0_within_the_drain(tmp_path: Path) -> None:
    accepted: list[asyncio.StreamWriter] = []

    async def never_answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(writer)
        with contextlib.suppress(ConnectionError):
            await reader.read(-1)

    backend = await asyncio.start_server(never_answer, ENDPOINT_HOST, 0)
    port = backend.sockets[0].getsockname()[1]
    manifests = tmp_path / "manifests"
    manifests.mkdir()
    _manifests(manifests, port=port)
    stderr_path = tmp_path / "stderr.log"
    with stderr_path.open("wb") as stderr:
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            "-m",
            "interlock",
            "run",
            "--embedded",
            "--manifests",
            str(manifests),
            "--edge-addr",
            "127.0.0.1:0",
            "--policy-addr",
            "127.0.0.1:0",
            "--admin-addr",
            "127.0.0.1:0",
            "--edge-drain-timeout",
            "1",
            "--log-level",
            "INFO",
            stdout=asyncio.subprocess.PIPE,
            stderr=stderr,
            env={**os.environ, "PYTHONUNBUFFERED": "1"},
        )
    clients: list[asyncio.StreamWriter] = []
    readers: list[asyncio.StreamReader] = []
    try:
        assert process.stdout is not None
        edge_url = ""
        while not edge_url:
            line = (await asyncio.wait_for(process.stdout.readline(), 120)).decode()
            assert line, f"interlock run ended early: {stderr_path.read_text()[-2000:]}"
            if line.startswith("edge data plane listening on http://"):
                edge_url = line.split("http://", 1)[1].strip()
        host, _, edge_port = edge_url.rpartition(":")

        async def one_request() -> None:
            reader, writer = await asyncio.open_connection(host, int(edge_port))
            writer.write(f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode())
            await writer.drain()
            clients.append(writer)
            readers.append(reader)

        # Until the Ingress is served, requests are answered at once (404/503); keep sending
        # until three of them hang at the backend.
        async def three_in_flight() -> None:
            while len(accepted) < 3:
                await one_request()
                await asyncio.sleep(0.1)

        await asyncio.wait_for(three_in_flight(), 120)
        # The Lease must be held for "released first" to mean anything.
        await wait_until(
            lambda: "became leader" in stderr_path.read_text(), deadline=120, what="leading"
        )
        process.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(process.wait(), 45) == 0
        log = stderr_path.read_text()
        released = log.find("stopped leading")
        draining = log.find("edge data plane stopping")
        assert 0 <= released < draining, log[-3000:]
        # The clients in flight were answered (or cut off) rather than left waiting.
        for reader in readers[-3:]:
            await asyncio.wait_for(reader.read(-1), 30)
    finally:
        if process.returncode is None:
            process.kill()
            await process.wait()
        for writer in clients + accepted:
            writer.close()
        backend.close()
