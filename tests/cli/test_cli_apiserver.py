"""`interlock apiserver`: the embedded API server alone, used by kubectl, stopped by SIGTERM."""

from __future__ import annotations

import asyncio
import base64
import contextlib
import re
import signal
import ssl
from collections.abc import AsyncIterator
from pathlib import Path

import yaml

from tests.kit.cli_process import interlock_argv


@contextlib.asynccontextmanager
async def running_apiserver(
    kubeconfig: Path, *args: str
) -> AsyncIterator[tuple[asyncio.subprocess.Process, str]]:
    """``interlock apiserver`` on a free port writing ``kubeconfig`` (and ``args``), and what it
    printed until it named the kubeconfig; killed at the end unless it exited."""
    proc = await asyncio.create_subprocess_exec(
        *interlock_argv(
            "apiserver", "--listen", "127.0.0.1:0", "--write-kubeconfig", str(kubeconfig), *args
        ),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    try:
        assert proc.stdout is not None
        printed = ""
        while "kubeconfig:" not in printed:
            line = await asyncio.wait_for(proc.stdout.readline(), timeout=90)
            assert line, f"apiserver exited early: {printed}"
            printed += line.decode()
        yield proc, printed
    finally:
        if proc.returncode is None:
            proc.kill()
            await proc.wait()


async def _kubectl(kubeconfig: Path, home: Path, *args: str) -> tuple[int, str, str]:
    proc = await asyncio.create_subprocess_exec(
        "kubectl",
        "--kubeconfig",
        str(kubeconfig),
        *args,
        env={"HOME": str(home), "PATH": "/usr/bin:/bin"},
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    out, err = await asyncio.wait_for(proc.communicate(), timeout=60)
    return proc.returncode or 0, out.decode(), err.decode()


async def test_apiserver_serves_kubectl_with_our_crds_and_stops_on_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    async with running_apiserver(kubeconfig) as (proc, printed):
        assert re.search(r"embedded Kubernetes API server: https://127\.0\.0\.1:\d+", printed)

        code, out, err = await _kubectl(kubeconfig, tmp_path, "get", "crd", "-o", "name")
        assert code == 0, err
        assert "customresourcedefinition.apiextensions.k8s.io/modulesets.interlock.dev" in out
        code, _, err = await _kubectl(kubeconfig, tmp_path, "create", "namespace", "team-a")
        assert code == 0, err
        code, out, err = await _kubectl(kubeconfig, tmp_path, "get", "ns", "team-a", "-o", "name")
        assert (code, out.strip()) == (0, "namespace/team-a"), err

        proc.send_signal(signal.SIGTERM)
        assert await asyncio.wait_for(proc.wait(), timeout=90) == 0


async def test_apiserver_rejects_a_bad_listen_address() -> None:
    proc = await asyncio.create_subprocess_exec(
        *interlock_argv("apiserver", "--listen", "nowhere"),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
    )
    _, err = await asyncio.wait_for(proc.communicate(), timeout=90)
    assert proc.returncode == 1
    assert "--listen: 'nowhere' is not HOST:PORT" in err.decode()


async def test_apiserver_answers_allowed_host_names_only(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kubeconfig"
    allowed = ("--allowed-host", "api.example.internal")
    async with running_apiserver(kubeconfig, *allowed) as (_proc, printed):
        url = re.search(r"https://127\.0\.0\.1:(\d+)", printed)
        assert url is not None, printed
        port = int(url[1])
        config = yaml.safe_load(kubeconfig.read_text())
        ca = base64.b64decode(config["clusters"][0]["cluster"]["certificate-authority-data"])
        tls = ssl.create_default_context(cadata=ca.decode())

        async def status(host: str) -> int:
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", port, ssl=tls, server_hostname="127.0.0.1"
            )
            writer.write(f"GET /healthz HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
            line = await asyncio.wait_for(reader.readline(), 30)
            writer.close()
            return int(line.split()[1])

        assert await status("api.example.internal:6443") == 200
        assert await status(f"127.0.0.1:{port}") == 200
        assert await status("evil.example") == 421
