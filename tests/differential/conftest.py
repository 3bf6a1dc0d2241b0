"""The two API servers of the differential corpus, started once per test session.

The real one is ``hack/real-cluster.sh up`` (etcd and kube-apiserver from the binaries that
``hack/build-real-binaries.sh`` caches); the embedded one runs on its own event loop in a thread,
so the corpus drives both with the same blocking client. Both get the same CRDs: the Gateway
API v1.6.1 standard CRDs (``INTERLOCK_GATEWAY_API_DIR`` overrides where they are read) and
``manifests/crds/``.

When the binaries are missing the corpus cannot run: it fails (with the build command) in the
real lane (``INTERLOCK_TEST_CLUSTER=real``), in CI (``INTERLOCK_REQUIRE_BINARIES=1``) or when
``INTERLOCK_DIFFERENTIAL=1`` asks for it, and is skipped otherwise. ``INTERLOCK_DIFFERENTIAL=0``
skips it even when the binaries are there.
"""

from __future__ import annotations

import asyncio
import os
import re
import shutil
import subprocess
import tempfile
import threading
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest

from interlock.embedded import EmbeddedApiServer
from tests.differential.client import Target

REPO = Path(__file__).resolve().parents[2]
BUILD_COMMAND = "hack/build-real-binaries.sh"


def gateway_api_dir() -> Path:
    default = REPO.parent / "shared" / "gateway-api" / "v1.6.1" / "standard"
    return Path(os.environ.get("INTERLOCK_GATEWAY_API_DIR") or default)


def real_binaries() -> Path:
    """Where build-real-binaries.sh puts (or put) the binaries, from the script's own defaults."""
    if os.environ.get("INTERLOCK_REAL_BIN"):
        return Path(os.environ["INTERLOCK_REAL_BIN"])
    script = (REPO / "hack" / "build-real-binaries.sh").read_text()

    def default(name: str) -> str:
        match = re.search(rf'{name}="\$\{{{name}:-([^}}]+)\}}"', script)
        assert match, f"{BUILD_COMMAND}: no default {name}"
        return os.environ.get(name) or match.group(1)

    cache = Path(os.environ.get("INTERLOCK_CACHE") or Path.home() / ".cache" / "interlock")
    kubernetes, etcd = default("KUBERNETES_VERSION"), default("ETCD_VERSION")
    return cache / "bin" / f"kubernetes-{kubernetes}-etcd-{etcd}"


def _required() -> bool:
    return (
        os.environ.get("INTERLOCK_TEST_CLUSTER") == "real"
        or os.environ.get("INTERLOCK_DIFFERENTIAL") == "1"
        or os.environ.get("INTERLOCK_REQUIRE_BINARIES") == "1"  # CI sets it
    )


@pytest.fixture(scope="session")
def real_server() -> Iterator[Target]:
    if os.environ.get("INTERLOCK_DIFFERENTIAL") == "0":
        pytest.skip("differential corpus: INTERLOCK_DIFFERENTIAL=0")
    binaries = real_binaries()
    missing = [
        name
        for name in ("etcd", "kube-apiserver", "kube-controller-manager")
        if not (binaries / name).is_file()
    ]
    if missing:
        message = (
            f"differential corpus needs the real binaries ({', '.join(missing)} missing in "
            f"{binaries}); build them with: {BUILD_COMMAND}"
        )
        if _required():
            pytest.fail(message)
        pytest.skip(message)
    if not gateway_api_dir().is_dir():
        pytest.fail(
            f"Gateway API CRDs not found in {gateway_api_dir()} (INTERLOCK_GATEWAY_API_DIR)"
        )
    directory = Path(tempfile.mkdtemp(prefix="interlock-differential-"))
    env = {
        **os.environ,
        "INTERLOCK_REAL_BIN": str(binaries),
        "INTERLOCK_GATEWAY_API_DIR": str(gateway_api_dir()),
        "INTERLOCK_CONTROLLER_MANAGER": "false",
        "INTERLOCK_CLUSTER_OWNER": str(os.getpid()),  # stopped even if pytest is killed
    }
    script = str(REPO / "hack" / "real-cluster.sh")
    try:
        started = subprocess.run(
            ["bash", script, "up", str(directory)],
            env=env,
            capture_output=True,
            text=True,
            timeout=600,
            check=False,
        )
        if started.returncode != 0:
            pytest.fail(f"{script} up {directory} failed:\n{started.stderr[-3000:]}")
        facts = dict(
            line.split("=", 1) for line in (directory / "cluster.env").read_text().splitlines()
        )
        yield Target(
            name="real",
            url=facts["APISERVER_URL"],
            token=facts["ADMIN_TOKEN"],
            ca_file=str(directory / "pki" / "ca.crt"),
        )
    finally:
        stopped = subprocess.run(
            ["bash", script, "down", str(directory)], env=env, check=False, timeout=120
        )
        if stopped.returncode == 0:
            shutil.rmtree(directory, ignore_errors=True)  # etcd's data, certificates, logs


class _EmbeddedThread:
    """An EmbeddedApiServer on an event loop of its own, so blocking clients can call it."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()
        self.server = self.run(self._make())
        self.directory = Path(tempfile.mkdtemp(prefix="interlock-differential-embedded-"))
        self.ca_file = self.directory / "ca.crt"
        self.ca_file.write_bytes(self.server.tls.ca_pem)

    def target(self, name: str) -> Target:
        """How the corpus reaches this server: its URL, token and certificate authority."""
        return Target(
            name=name, url=self.server.url, token=self.server.token, ca_file=str(self.ca_file)
        )

    @staticmethod
    async def _make() -> EmbeddedApiServer:
        server = EmbeddedApiServer(bookmark_interval=1.0)
        await server.start()
        return server

    def apply(self, folders: list[Path]) -> None:
        report = self.run(self.server.apply_manifests(folders))
        refused = [
            result
            for result in report.results
            if result.error and result.kind == "CustomResourceDefinition"
        ]
        assert not refused, f"the embedded server refused CRDs: {refused}"

    def run(self, coroutine: Any) -> Any:
        future: Future[Any] = asyncio.run_coroutine_threadsafe(coroutine, self.loop)
        return future.result(timeout=300)

    def close(self) -> None:
        self.run(self.server.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(timeout=30)
        self.loop.close()
        shutil.rmtree(self.directory, ignore_errors=True)


@pytest.fixture(scope="session")
def embedded_server(real_server: Target) -> Iterator[Target]:
    embedded = _EmbeddedThread()
    try:
        embedded.apply([gateway_api_dir(), REPO / "manifests" / "crds"])
        yield embedded.target("embedded")
    finally:
        embedded.close()


@pytest.fixture(scope="session")
def builtin_server(real_server: Target) -> Iterator[Target]:
    """An embedded server given no Gateway API CRDs: it validates routes with its built-in
    schemas (``gateway_schemas.py``), which ``interlock run --embedded`` and the tests use."""
    embedded = _EmbeddedThread()
    try:
        embedded.apply([REPO / "manifests" / "crds"])
        yield embedded.target("builtin")
    finally:
        embedded.close()


@pytest.fixture(scope="session")
def servers(real_server: Target, embedded_server: Target) -> tuple[Target, Target]:
    return real_server, embedded_server
