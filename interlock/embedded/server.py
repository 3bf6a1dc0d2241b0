"""EmbeddedApiServer: a Kubernetes API server in-process, for running with no cluster and tests.

It wires the registry (kinds), the object store (objects, resourceVersions, watches), the HTTP
handler, fault injection and the audit log onto an aiohttp site bound to 127.0.0.1, and starts
like a fresh cluster: namespaces ``default``, ``kube-system``, ``kube-public`` and
``kube-node-lease`` exist and the Gateway API CRDs are installed. ``restart()`` keeps the data
and the port and drops every connection, as a real API server restart does.

It holds Secrets, so it authenticates as a real one does: every request but the health and
version probes must carry ``Authorization: Bearer`` with :attr:`EmbeddedApiServer.token` (random
per server unless given), which the kubeconfig it writes holds; anything else is answered 401.
It serves HTTPS with a certificate authority of its own (:mod:`interlock.embedded.tls`), also
in the kubeconfig: kubectl sends credentials to ``https://`` servers only.
"""

from __future__ import annotations

import asyncio
import os
import secrets
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator, Callable, Sequence
from contextlib import asynccontextmanager
from datetime import datetime
from pathlib import Path

from aiohttp import web

from interlock.embedded.audit import AuditLog
from interlock.embedded.crds import gateway_api_crds
from interlock.embedded.faults import Faults
from interlock.embedded.http import ApiHandler
from interlock.embedded.kubeconfig import write_kubeconfig
from interlock.embedded.manifests import ManifestReport, apply_manifests
from interlock.embedded.registry import BUILTIN_TYPES, Registry
from interlock.embedded.store import ObjectStore
from interlock.embedded.tls import ServerTls
from interlock.model.allowed_hosts import AllowedHosts

_INITIAL_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class EmbeddedApiServer:
    """A Kubernetes API server on ``host:port`` (port 0 picks a free one at ``start()``)."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        history_size: int = 10_000,
        bookmark_interval: float = 5.0,
        clock: Callable[[], datetime] | None = None,
        gateway_api_constraints: bool = True,
        token: str | None = None,
        allowed_hosts: AllowedHosts | None = None,
    ) -> None:
        """``gateway_api_constraints`` (default on): install the Gateway API route kinds and
        ReferenceGrant with the
        upstream v1.6.1 constraints, defaults and CEL rules (see gateway_schemas.py), so this
        server refuses at admission what a real one refuses; off, schemas that admit any spec
        (about 5 s less per 1,000 HTTPRoute creates, for benchmarks that load many).
        ``token``: the bearer token clients must send (default: a new random one).
        ``allowed_hosts``: ``Host`` names answered besides IP addresses and localhost (and
        ``host`` when it is a name); others get 421 (DNS rebinding)."""
        self.host = host
        self.token = token or secrets.token_urlsafe(32)
        """What every request must carry as ``Authorization: Bearer``; the kubeconfig holds it."""
        self.tls = ServerTls.create(host)
        """The certificate authority clients trust and the certificate the server presents."""
        self._server_ssl = self.tls.server_context()
        self.port = port
        self.registry = Registry()
        for rtype in BUILTIN_TYPES:
            self.registry.register(rtype)
        self.store = ObjectStore(self.registry, history_size=history_size, clock=clock)
        for name in _INITIAL_NAMESPACES:
            self.store.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
        for crd in gateway_api_crds(constrained=gateway_api_constraints):
            self.store.create(crd)
        self.faults = Faults(
            drop_watches=self.store.drop_watches,
            expire_watches=self.store.expire_watches,
            compact=self.store.compact,
        )
        self.audit = AuditLog()
        """The last requests answered (verb, path, query, status), for tests to count."""
        self._handler = ApiHandler(
            store=self.store,
            registry=self.registry,
            faults=self.faults,
            audit=self.audit,
            bookmark_interval=bookmark_interval,
            server_address=lambda: f"{self.host}:{self.port}",
            token=self.token,
            allowed_hosts=(allowed_hosts or AllowedHosts()).with_listening(host),
        )
        self._runner: web.AppRunner | None = None

    @property
    def url(self) -> str:
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"https://{host}:{self.port}"

    def auth_headers(self) -> dict[str, str]:
        """The ``Authorization`` header a client of this server must send."""
        return {"Authorization": f"Bearer {self.token}"}

    def client_ssl(self) -> ssl.SSLContext:
        """An SSL context trusting this server, for clients that call :attr:`url` directly."""
        return self.tls.client_context()

    async def start(self) -> None:
        if self._runner is not None:
            return
        self._handler.reset()
        runner = web.AppRunner(
            self._handler.application(),
            handle_signals=False,
            access_log=None,
            shutdown_timeout=1.0,
            # A client that goes away must end its watch at once, not at the next event.
            handler_cancellation=True,
        )
        await runner.setup()
        site = web.TCPSite(
            runner, self.host, self.port, reuse_address=True, ssl_context=self._server_ssl
        )
        try:
            await site.start()
        except BaseException:
            await runner.cleanup()
            raise
        self.port = int(runner.addresses[0][1])
        self._runner = runner

    async def stop(self) -> None:
        runner, self._runner = self._runner, None
        if runner is None:
            return
        # Open watches would otherwise keep their handlers (and shutdown) waiting.
        self.store.drop_watches()
        self._handler.stopping()
        await runner.cleanup()

    async def restart(self) -> None:
        """Stop and start again on the same port with the same data; connections drop."""
        await self.stop()
        await self.start()

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        """Write a kubeconfig for this server (its token, current-context set; mode 0600);
        returns its path."""
        if self._runner is None and self.port == 0:
            raise RuntimeError("start() the server first: its port is not known yet")
        return write_kubeconfig(path, self.url, token=self.token, ca_pem=self.tls.ca_pem)

    async def apply_manifests(self, paths: Sequence[str | os.PathLike[str]]) -> ManifestReport:
        """Apply YAML files or folders (Namespaces and CRDs first); bad documents are reported."""
        return await apply_manifests(self.store, paths)

    async def __aenter__(self) -> EmbeddedApiServer:
        await self.start()
        return self

    async def __aexit__(self, *exc_info: object) -> None:
        await self.stop()


@asynccontextmanager
async def running_api_server(
    host: str = "127.0.0.1",
    port: int = 0,
    *,
    history_size: int = 10_000,
    bookmark_interval: float = 5.0,
    clock: Callable[[], datetime] | None = None,
    allowed_hosts: AllowedHosts | None = None,
) -> AsyncIterator[EmbeddedApiServer]:
    """An :class:`EmbeddedApiServer`, started for the ``async with`` block and stopped after."""
    server = EmbeddedApiServer(
        host,
        port,
        history_size=history_size,
        bookmark_interval=bookmark_interval,
        clock=clock,
        allowed_hosts=allowed_hosts,
    )
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


def _say(line: str) -> None:
    print(line, flush=True)


async def serve_forever(
    *,
    host: str,
    port: int,
    kubeconfig_path: str | os.PathLike[str] | None,
    manifests: Sequence[str | os.PathLike[str]],
    announce: Callable[[str], None] = _say,
    allowed_hosts: AllowedHosts | None = None,
) -> None:
    """Run an embedded server until cancelled, printing its URL and kubeconfig path with
    ``announce`` (``interlock apiserver``: in JSON with ``--log-format json``); the kubeconfig goes
    to a temporary file when no path is given: it holds the token every client needs."""
    async with running_api_server(host, port, allowed_hosts=allowed_hosts) as server:
        report = await server.apply_manifests(manifests)
        for error in report.errors:
            print(f"manifest error: {error}", file=sys.stderr)
        announce(f"embedded Kubernetes API server: {server.url}")
        with tempfile.TemporaryDirectory(prefix="interlock-apiserver-") as directory:
            target = kubeconfig_path or Path(directory) / "kubeconfig"
            written = server.write_kubeconfig(target)
            announce(f"kubeconfig: {written} (kubectl --kubeconfig {written} get ns)")
            await asyncio.Event().wait()
