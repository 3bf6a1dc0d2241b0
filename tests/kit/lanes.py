"""One test suite, two API servers: the lane-agnostic cluster every e2e, kube and reliability
test talks to.

``INTERLOCK_TEST_CLUSTER=embedded`` (the default) runs each test against a fresh in-process
:class:`~interlock.embedded.EmbeddedApiServer`; ``INTERLOCK_TEST_CLUSTER=real`` runs it against a
real kube-apiserver and etcd started once per session by ``hack/real-cluster.sh``. Without this
layer a test proves only that interlock agrees with the server we wrote; with it the same test
body runs against both, and on the real lane the controller runs as the identity that
``manifests/rbac.yaml`` grants, so the real RBAC refuses any call the manifests do not allow.

A :class:`TestCluster` gives a test:

- ``admin_kubeconfig`` / ``api``: what the test writes with (cluster-admin);
- ``controller_kubeconfig``: what the controller under test uses (on the real lane the controller
  identity, through a loopback :class:`FaultProxy` so its watches can be cut);
- async object helpers over HTTP (``create``/``apply``/``get``/``list``/``patch``/``replace``/
  ``delete``/``resource_version``) instead of in-process store calls;
- ``faults``: dropped watch connections, errors and delays on the next matching requests,
  410 Gone (etcd compaction on the real lane), an API server restart;
- ``tick()``: makes the next creationTimestamp later than every earlier one.

On the real lane every test leaves nothing behind: objects and namespaces created after the
session's baseline are deleted (and waited for) when the test ends.
"""

from __future__ import annotations

import asyncio
import atexit
import base64
import concurrent.futures
import contextlib
import json
import os
import socket
import ssl
import subprocess
import tempfile
import time
from collections.abc import AsyncIterator, Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import aiohttp
import yaml
from aiohttp import web

from interlock.embedded import EmbeddedApiServer
from interlock.embedded.faults import Faults
from interlock.embedded.http import request_verb
from interlock.embedded.kubeconfig import write_kubeconfig
from interlock.kube.client import make_api_client
from interlock.kube.resources import (
    BACKEND_TLS_POLICY,
    ENDPOINT_SLICE,
    EVENT,
    GATEWAY,
    GATEWAY_CLASS,
    GRPC_ROUTE,
    HTTP_ROUTE,
    INGRESS,
    INGRESS_CLASS,
    LEASE,
    LISTENER_SET,
    MODULE_SET,
    REFERENCE_GRANT,
    REFERENCE_GRANT_V1BETA1,
    SECRET,
    SERVICE,
    TCP_ROUTE,
    TLS_ROUTE,
    Resource,
)
from interlock.kube.transport import KubeApiError, request_json
from interlock.mailbox.testing import eventually as _eventually

LANE = os.environ.get("INTERLOCK_TEST_CLUSTER", "embedded")
if LANE not in ("embedded", "real"):
    raise RuntimeError(f"INTERLOCK_TEST_CLUSTER={LANE!r}: expected 'embedded' or 'real'")
REAL = LANE == "real"

REPO = Path(__file__).resolve().parents[2]
REAL_CLUSTER_SH = REPO / "hack" / "real-cluster.sh"
CRDS = REPO / "manifests" / "crds"


def _local_address() -> str:
    # The address a UDP socket would leave from (no packet is sent): this machine's own
    # non-loopback IPv4, or loopback when there is none.
    with contextlib.suppress(OSError), socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))
        address: str = probe.getsockname()[0]
        if not address.startswith("127."):
            return address
    return "127.0.0.1"


ENDPOINT_HOST = _local_address() if REAL else "127.0.0.1"
"""Where tests' local backends listen and what their EndpointSlices name: a real API server
refuses endpoint addresses in the loopback range, so the real lane uses this machine's own
address (the embedded server accepts 127.0.0.1, which stays its lane's value)."""

LEASE_NAMESPACE = "interlock-system"
"""Where test controllers hold their Lease: the one namespace ``manifests/rbac.yaml`` grants
Leases in (the embedded lane creates it too, so test bodies are the same)."""

NAMESPACE = Resource("", "v1", "namespaces", "Namespace", namespaced=False)
CONFIG_MAP = Resource("", "v1", "configmaps", "ConfigMap", namespaced=True)
HTTP_ROUTE_V1BETA1 = Resource(
    "gateway.networking.k8s.io", "v1beta1", "httproutes", "HTTPRoute", namespaced=True
)
RESOURCES: dict[tuple[str, str], Resource] = {
    (r.api_version, r.kind): r
    for r in (
        SERVICE,
        SECRET,
        EVENT,
        ENDPOINT_SLICE,
        HTTP_ROUTE,
        HTTP_ROUTE_V1BETA1,
        GRPC_ROUTE,
        TLS_ROUTE,
        TCP_ROUTE,
        REFERENCE_GRANT,
        REFERENCE_GRANT_V1BETA1,
        INGRESS,
        INGRESS_CLASS,
        MODULE_SET,
        LEASE,
        NAMESPACE,
        CONFIG_MAP,
        GATEWAY,
        GATEWAY_CLASS,
        LISTENER_SET,
        BACKEND_TLS_POLICY,
    )
}

SWEPT = (
    SERVICE,
    SECRET,
    EVENT,
    ENDPOINT_SLICE,
    HTTP_ROUTE,
    GRPC_ROUTE,
    TLS_ROUTE,
    TCP_ROUTE,
    REFERENCE_GRANT,
    LISTENER_SET,
    INGRESS,
    INGRESS_CLASS,
    MODULE_SET,
    LEASE,
    CONFIG_MAP,
)
"""What a test may leave behind on the real lane (besides namespaces), swept after each test."""


def resource_of(obj: dict[str, Any]) -> Resource:
    try:
        return RESOURCES[(obj["apiVersion"], obj["kind"])]
    except KeyError:
        raise KeyError(
            f"tests/kit/lanes.py: no Resource for {obj.get('apiVersion')} {obj.get('kind')}; "
            "add it to RESOURCES"
        ) from None


def _object_path(obj: dict[str, Any], *, status: bool = False) -> str:
    resource = resource_of(obj)
    meta = obj["metadata"]
    namespace = meta.get("namespace", "default") if resource.namespaced else None
    if status:
        return resource.status_path(namespace=namespace, name=meta["name"])
    return resource.object_path(namespace=namespace, name=meta["name"])


async def eventually_true(
    condition: Callable[[], Any], *, within: float, message: str, interval: float = 0.05
) -> None:
    await _eventually(condition, within=within, message=message, interval=interval)


# --- faults --------------------------------------------------------------------------------------


class LaneFaults:
    """The faults a test can make, the same on both lanes.

    ``fail_next``/``delay_next``/``pending``/``clear`` are :class:`interlock.embedded.faults.Faults`
    rules that the :class:`FaultProxy` in front of the server applies, on both lanes, to the
    requests of the controller (and of the ``faulty_admin_kubeconfig`` client) — never to what
    the test itself writes. Dropped watches and compaction are the embedded server's own hooks
    on the embedded lane; the proxy and etcd on the real lane.
    """

    def __init__(
        self,
        proxy: FaultProxy,
        *,
        drop_watches: Callable[[], int],
        compact: Callable[[], Any],
        restart: Callable[[], Any],
    ) -> None:
        self.proxy = proxy
        self.rules = proxy.rules
        self.fail_next = self.rules.fail_next
        self.delay_next = self.rules.delay_next
        self._drop_watches = drop_watches
        self._compact = compact
        self._restart = restart

    def drop_watches(self) -> int:
        """Cut every open watch connection of the controller; returns how many."""
        return self._drop_watches()

    async def compact(self) -> None:
        """Forget the watch history: a watch from an older resourceVersion gets 410 Gone."""
        result = self._compact()
        if asyncio.iscoroutine(result):
            await result

    async def restart(self) -> None:
        """Restart the API server (same port, same data); every connection drops."""
        result = self._restart()
        if asyncio.iscoroutine(result):
            await result

    def hold_next(
        self, *, verbs: Collection[str] | None = None, path_contains: str | None = None
    ) -> HeldRequest:
        """Hold the next matching request of the controller until :meth:`HeldRequest.release`
        (a write *in flight*: sent, not yet applied); it is forwarded then even if the
        controller gave up on it meanwhile, as a slow API server applies it anyway."""
        return self.proxy.hold_next(verbs=verbs, path_contains=path_contains)

    def pending(self) -> int:
        return self.rules.pending()

    def clear(self) -> None:
        self.rules.clear()

    @contextlib.asynccontextmanager
    async def watches_cut(self) -> AsyncIterator[None]:
        """Cut every watch and refuse new ones (503) until the block ends.

        What happens inside the block (writes, a compaction) is not seen by any informer
        until it watches again, from its old resourceVersion — on either lane, however long
        the block takes.
        """
        self.rules.fail_next(10**9, 503, verbs=["watch"])
        self.drop_watches()
        try:
            yield
        finally:
            self.rules.clear()


# --- the cluster a test sees ---------------------------------------------------------------------


@dataclass
class TestCluster:
    """One test's view of its API server (either lane); see the module docstring."""

    __test__ = False  # not a test class, whatever pytest thinks of the name

    lane: str
    admin_kubeconfig: str
    controller_kubeconfig: str
    faulty_admin_kubeconfig: str
    """Cluster-admin, but through the faults (on the real lane: through the fault proxy), for
    tests of the kube layer that write their own fixtures with the client under test."""
    api: Any
    faults: LaneFaults
    clock_tick: Callable[[], Any]
    embedded: EmbeddedApiServer | None = None
    _created: list[dict[str, Any]] = field(default_factory=list)

    @property
    def real(self) -> bool:
        return self.lane == "real"

    async def tick(self) -> None:
        """Make the next creationTimestamp later than every earlier one (the embedded clock
        steps a second; on the real lane the wall clock passes into the next second)."""
        result = self.clock_tick()
        if asyncio.iscoroutine(result):
            await result

    async def create(self, obj: dict[str, Any]) -> dict[str, Any]:
        resource = resource_of(obj)
        namespace = obj["metadata"].get("namespace", "default") if resource.namespaced else None
        return await request_json(
            self.api,
            method="POST",
            path=resource.collection_path(namespace=namespace),
            what=f"create {resource.describe(namespace=namespace, name=obj['metadata']['name'])}",
            body=obj,
        )

    async def apply(self, obj: dict[str, Any]) -> dict[str, Any]:
        """Create ``obj``, or replace it if it exists (keeping its status, like kubectl apply)."""
        try:
            return await self.create(obj)
        except KubeApiError as error:
            if error.code != 409:
                raise
        # The controller may write the object's status between our read and our write: read
        # again and retry, as kubectl apply does on a conflict.
        for _attempt in range(20):
            current = await self.get(obj)
            if current is None:
                with contextlib.suppress(KubeApiError):
                    return await self.create(obj)
                continue
            body = json.loads(json.dumps(obj))
            body["metadata"]["resourceVersion"] = current["metadata"]["resourceVersion"]
            if "status" in current and "status" not in body:
                body["status"] = current["status"]
            try:
                return await self.replace(body)
            except KubeApiError as error:
                if error.code != 409:
                    raise
        raise AssertionError(f"{obj['kind']} {obj['metadata']['name']}: still conflicting")

    async def replace(self, obj: dict[str, Any]) -> dict[str, Any]:
        return await request_json(
            self.api, method="PUT", path=_object_path(obj), what="replace", body=obj
        )

    async def get(self, obj: dict[str, Any]) -> dict[str, Any] | None:
        try:
            return await request_json(self.api, method="GET", path=_object_path(obj), what="get")
        except KubeApiError as error:
            if error.code == 404:
                return None
            raise

    async def list(
        self,
        resource: Resource,
        *,
        namespace: str | None = None,
        label_selector: str | None = None,
    ) -> list[dict[str, Any]]:
        query = [("labelSelector", label_selector)] if label_selector else []
        listed = await request_json(
            self.api,
            method="GET",
            path=resource.collection_path(namespace=namespace),
            what=f"list {resource.kind}",
            query=query,
        )
        items: list[dict[str, Any]] = listed.get("items", [])
        for item in items:
            item.setdefault("apiVersion", resource.api_version)
            item.setdefault("kind", resource.kind)
        return items

    async def patch(
        self,
        obj: dict[str, Any],
        patch: Any,
        *,
        status: bool = False,
        content_type: str = "application/merge-patch+json",
    ) -> dict[str, Any]:
        return await request_json(
            self.api,
            method="PATCH",
            path=_object_path(obj, status=status),
            what="patch",
            body=patch,
            content_type=content_type,
        )

    async def delete(self, obj: dict[str, Any]) -> None:
        """Delete ``obj``; an object already gone is fine."""
        try:
            await request_json(self.api, method="DELETE", path=_object_path(obj), what="delete")
        except KubeApiError as error:
            if error.code != 404:
                raise

    def write_kubeconfig(self, path: str | os.PathLike[str]) -> Path:
        """Write :attr:`faulty_admin_kubeconfig` to ``path`` (returns the path)."""
        target = Path(path)
        target.write_text(Path(self.faulty_admin_kubeconfig).read_text())
        target.chmod(0o600)
        return target

    async def namespace(self, name: str) -> None:
        await self.apply({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})

    async def resource_version(self, resource: Resource = SERVICE) -> str:
        """The cluster's current resourceVersion (of a list, as a client sees it)."""
        listed = await request_json(
            self.api,
            method="GET",
            path=resource.collection_path(),
            what="list",
            query=[("limit", "1")],
        )
        version: str = listed["metadata"]["resourceVersion"]
        return version

    async def apply_manifests(self, paths: Iterable[str | os.PathLike[str]]) -> None:
        """Apply YAML files or folders, as ``kubectl apply --server-side`` would."""
        names = [str(p) for p in paths]
        if self.embedded is not None:
            report = await self.embedded.apply_manifests(names)
            assert report.ok, "\n".join(str(e) for e in report.errors)
            return
        args = ["kubectl", "--kubeconfig", self.admin_kubeconfig, "apply", "--server-side"]
        args += ["--force-conflicts"]
        for name in names:
            args += ["-f", name]
        process = await asyncio.create_subprocess_exec(
            *args, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.STDOUT
        )
        output, _ = await process.communicate()
        assert process.returncode == 0, f"{' '.join(args)}: {output.decode()}"


# --- the embedded lane ---------------------------------------------------------------------------


class OffsetClock:
    """The embedded server's clock: real time plus whatever ``tick()`` added."""

    def __init__(self) -> None:
        self.offset = timedelta()

    def __call__(self) -> datetime:
        return datetime.now(UTC) + self.offset

    def tick(self) -> None:
        self.offset += timedelta(seconds=1)


async def embedded_cluster(
    server: EmbeddedApiServer, clock: OffsetClock, directory: Path
) -> AsyncIterator[TestCluster]:
    kubeconfig = str(server.write_kubeconfig(directory / "kubeconfig"))
    ca_file = directory / "embedded-ca.crt"
    ca_file.write_bytes(server.tls.ca_pem)
    proxy = FaultProxy(server.url, str(ca_file))
    await proxy.start()
    # The proxy is plain HTTP on loopback, as on the real lane; the token still goes with every
    # request (the embedded server refuses requests without it).
    proxied = str(write_kubeconfig(directory / "proxied.kubeconfig", proxy.url, token=server.token))
    api = await make_api_client(kubeconfig=kubeconfig, in_cluster=False)
    faults = LaneFaults(
        proxy,
        drop_watches=server.faults.drop_watches,
        compact=server.faults.compact,
        restart=server.restart,
    )
    cluster = TestCluster(
        lane="embedded",
        admin_kubeconfig=kubeconfig,
        controller_kubeconfig=proxied,
        faulty_admin_kubeconfig=proxied,
        api=api,
        faults=faults,
        clock_tick=clock.tick,
        embedded=server,
    )
    try:
        await cluster.namespace(LEASE_NAMESPACE)
        yield cluster
    finally:
        await proxy.stop()
        await api.close()


@contextlib.asynccontextmanager
async def lane_cluster(
    directory: Path, plane: ControlPlane | None, **embedded_options: Any
) -> AsyncIterator[TestCluster]:
    """A :class:`TestCluster` for the ``async with`` block, in whatever event loop runs it
    (tests that drive their own loop, e.g. hypothesis histories, use this instead of the
    ``test_cluster`` fixture). ``plane`` is the ``control_plane`` fixture (None: embedded)."""
    if plane is not None:
        async for cluster in real_cluster(plane, directory):
            yield cluster
        return
    from interlock.embedded import running_api_server

    clock = OffsetClock()
    async with running_api_server(clock=clock, **embedded_options) as server:
        async for cluster in embedded_cluster(server, clock, directory):
            yield cluster


# --- the real lane: one control plane per session ------------------------------------------------


@dataclass
class ControlPlane:
    """A real etcd + kube-apiserver (+ kube-controller-manager) started by real-cluster.sh."""

    directory: Path
    env: dict[str, str]
    baseline: set[str] = field(default_factory=set)
    """uids of the objects that existed before any test ran (never swept)."""

    @property
    def admin_kubeconfig(self) -> str:
        return str(self.directory / "admin.kubeconfig")

    @property
    def url(self) -> str:
        return self.env["APISERVER_URL"]

    @property
    def etcd_url(self) -> str:
        return self.env["ETCD_URL"]

    @property
    def ca_file(self) -> str:
        return str(self.directory / "pki" / "ca.crt")

    def down(self) -> None:
        subprocess.run(
            [str(REAL_CLUSTER_SH), "down", str(self.directory)], check=False, capture_output=True
        )


def start_control_plane(*, watch_cache: bool) -> ControlPlane:
    """``hack/real-cluster.sh up`` in a fresh temporary directory; stopped at exit whatever
    happens (pytest's teardown, Ctrl-C, an exception)."""
    directory = Path(tempfile.mkdtemp(prefix="interlock-real-"))
    env = {
        **os.environ,
        "INTERLOCK_WATCH_CACHE": "true" if watch_cache else "false",
        # If this process is killed (atexit does not run), the script's watcher stops the plane.
        "INTERLOCK_CLUSTER_OWNER": str(os.getpid()),
    }
    plane = ControlPlane(directory, {})
    atexit.register(plane.down)
    started = subprocess.run(
        [str(REAL_CLUSTER_SH), "up", str(directory)],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    if started.returncode != 0:
        plane.down()
        raise RuntimeError(
            f"{REAL_CLUSTER_SH} up {directory} failed ({started.returncode}):\n{started.stderr}"
        )
    for line in (directory / "cluster.env").read_text().splitlines():
        key, _, value = line.partition("=")
        plane.env[key] = value
    return plane


def proxied_kubeconfig(path: Path, *, server: str, token: str) -> str:
    """A kubeconfig for the identity of ``token`` that talks plain HTTP to ``server`` (the
    proxy, which talks TLS to the API server)."""
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "real", "cluster": {"server": server}}],
                "users": [{"name": "user", "user": {"token": token}}],
                "contexts": [{"name": "proxied", "context": {"cluster": "real", "user": "user"}}],
                "current-context": "proxied",
            }
        )
    )
    path.chmod(0o600)
    return str(path)


@dataclass
class HeldRequest:
    """One request the :class:`FaultProxy` holds (:meth:`LaneFaults.hold_next`)."""

    verbs: frozenset[str] | None
    path_contains: str | None
    arrived: asyncio.Event = field(default_factory=asyncio.Event)
    """The request reached the proxy and is held."""
    answered: asyncio.Event = field(default_factory=asyncio.Event)
    """Released, forwarded, and the API server answered it (it was applied, or refused)."""
    _released: asyncio.Event = field(default_factory=asyncio.Event)

    def matches(self, verb: str, path: str) -> bool:
        if self.verbs is not None and verb not in self.verbs:
            return False
        return self.path_contains is None or self.path_contains in path

    def release(self) -> None:
        self._released.set()


class FaultProxy:
    """A loopback HTTP proxy between the controller and the API server (either lane).

    It forwards every request (TLS to a real server, plain HTTP to the controller), streams the
    answers (watches included), and makes the faults the embedded server makes by itself: cut
    every open watch connection, answer the next matching requests with an error or after a
    delay (the same :class:`~interlock.embedded.faults.Faults` rules). While the API server
    restarts it answers 503, as a load balancer in front of one would.
    """

    def __init__(self, upstream: str, ca_file: str | None = None) -> None:
        self.upstream = upstream.rstrip("/")
        self.rules = Faults(
            drop_watches=self.drop_watches, expire_watches=lambda: 0, compact=lambda: None
        )
        self.calls: list[tuple[str, str]] = []
        """(verb, path) of every request that came through, in order (the RBAC comparison)."""
        self._ssl: ssl.SSLContext | bool = (
            ssl.create_default_context(cafile=ca_file) if ca_file else False
        )
        self._watches: dict[asyncio.Task[Any], web.Request] = {}
        self._holds: list[HeldRequest] = []
        self._session: aiohttp.ClientSession | None = None
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(
            auto_decompress=False,
            timeout=aiohttp.ClientTimeout(total=None, sock_connect=5),
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=0),
        )
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_route("*", "/{tail:.*}", self._handle)
        self._runner = web.AppRunner(app, handle_signals=False, shutdown_timeout=0.5)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = self._runner.addresses[0][1]
        self.url = f"http://127.0.0.1:{port}"

    async def stop(self) -> None:
        self.drop_watches()
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    def hold_next(
        self, *, verbs: Collection[str] | None = None, path_contains: str | None = None
    ) -> HeldRequest:
        held = HeldRequest(frozenset(verbs) if verbs is not None else None, path_contains)
        self._holds.append(held)
        return held

    def drop_watches(self) -> int:
        cut = 0
        for task, request in list(self._watches.items()):
            if request.transport is not None:
                request.transport.close()
            task.cancel()
            cut += 1
        self._watches.clear()
        return cut

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        verb = request_verb(request.method, request.path, dict(request.query))
        self.calls.append((verb, request.path))
        fault = self.rules.for_request(verb=verb, path=request.path)
        if fault is not None:
            if fault.delay:
                await asyncio.sleep(fault.delay)
            if fault.error is not None:
                headers = {"Retry-After": str(fault.retry_after)} if fault.retry_after else {}
                return web.json_response(
                    fault.error.status(), status=fault.error.code, headers=headers
                )
        assert self._session is not None
        headers = {
            k: v
            for k, v in request.headers.items()
            if k.lower() not in ("host", "content-length", "transfer-encoding", "connection")
        }
        body = await request.read()
        held = next((h for h in self._holds if h.matches(verb, request.path)), None)
        if held is not None:
            self._holds.remove(held)
            held.arrived.set()
            await held._released.wait()
        task = asyncio.current_task()
        assert task is not None
        if verb == "watch":
            self._watches[task] = request
        try:
            async with self._session.request(
                request.method,
                self.upstream + request.path_qs,
                headers=headers,
                data=body or None,
            ) as upstream:
                if held is not None:
                    held.answered.set()
                response = web.StreamResponse(
                    status=upstream.status,
                    headers={
                        k: v
                        for k, v in upstream.headers.items()
                        if k.lower() not in ("content-length", "transfer-encoding", "connection")
                    },
                )
                await response.prepare(request)
                async for chunk in upstream.content.iter_any():
                    await response.write(chunk)
                await response.write_eof()
                return response
        except (aiohttp.ClientConnectionError, OSError) as error:
            if request.transport is None or request.transport.is_closing():
                # The client went away (or its watch was cut): nothing can reach it, and
                # aiohttp drops the answer quietly instead of logging a traceback.
                return web.Response(status=499)
            status = {
                "kind": "Status",
                "apiVersion": "v1",
                "status": "Failure",
                "reason": "ServiceUnavailable",
                "message": f"proxy: the API server is unreachable: {type(error).__name__}",
                "code": 503,
            }
            return web.json_response(status, status=503)
        finally:
            self._watches.pop(task, None)


async def _etcd(plane: ControlPlane, session: aiohttp.ClientSession, path: str, body: Any) -> Any:
    async with session.post(plane.etcd_url + path, json=body) as response:
        text = await response.text()
        assert response.status == 200, f"etcd {path}: {response.status} {text}"
        return json.loads(text)


async def compact_etcd(plane: ControlPlane) -> None:
    """Compact etcd at its current revision, two writes past what any watcher has seen.

    The writes go to a key outside ``/registry`` (no informer sees them), so every informer's
    resourceVersion is older than the compaction and its next watch gets 410 Gone — seen only
    when kube-apiserver serves watches from etcd (``INTERLOCK_WATCH_CACHE=false``).
    """
    key = base64.b64encode(b"/interlock-tests/compaction").decode()
    async with aiohttp.ClientSession() as session:
        revision = 0
        for _ in range(2):
            value = base64.b64encode(str(time.time()).encode()).decode()
            put = await _etcd(plane, session, "/v3/kv/put", {"key": key, "value": value})
            revision = int(put["header"]["revision"])
        await _etcd(plane, session, "/v3/kv/compaction", {"revision": revision, "physical": True})


async def restart_apiserver(plane: ControlPlane) -> None:
    process = await asyncio.create_subprocess_exec(
        str(REAL_CLUSTER_SH),
        "restart",
        str(plane.directory),
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
    )
    output, _ = await process.communicate()
    assert process.returncode == 0, f"real-cluster.sh restart: {output.decode()}"


async def _list_patiently(api: Any, resource: Resource) -> dict[str, Any]:
    # Just after `up` (or a restart) a CRD's storage may still be initializing: 429 for a while.
    loop = asyncio.get_running_loop()
    deadline = loop.time() + 60.0
    while True:
        try:
            return await request_json(
                api, method="GET", path=resource.collection_path(), what=f"list {resource.kind}"
            )
        except KubeApiError as error:
            if error.code not in (0, 429, 500, 503) or loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


async def _sweepable(api: Any, plane: ControlPlane) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = []
    for resource in (*SWEPT, NAMESPACE):
        listed = await _list_patiently(api, resource)
        for item in listed.get("items", []):
            meta = item["metadata"]
            if meta["uid"] in plane.baseline or meta.get("namespace", "").startswith("kube-"):
                continue
            item["apiVersion"] = resource.api_version
            item["kind"] = resource.kind
            found.append(item)
    return found


async def record_baseline(plane: ControlPlane) -> None:
    api = await make_api_client(kubeconfig=plane.admin_kubeconfig, in_cluster=False)
    try:
        plane.baseline = {item["metadata"]["uid"] for item in await _sweepable(api, plane)}
    finally:
        await api.close()


async def sweep(api: Any, plane: ControlPlane) -> None:
    """Delete whatever the test created and wait until it is gone (namespaces finalized)."""

    async def leftovers() -> list[dict[str, Any]]:
        return await _sweepable(api, plane)

    for _round in range(3):
        remaining = await leftovers()
        if not remaining:
            return
        for obj in remaining:
            path = _object_path(obj)
            if obj["metadata"].get("finalizers") and obj["kind"] != "Namespace":
                with contextlib.suppress(KubeApiError):
                    await request_json(
                        api,
                        method="PATCH",
                        path=path,
                        what="drop finalizers",
                        body={"metadata": {"finalizers": None}},
                        content_type="application/merge-patch+json",
                    )
            if obj["metadata"].get("deletionTimestamp"):
                continue
            with contextlib.suppress(KubeApiError):
                await request_json(api, method="DELETE", path=path, what="sweep")

        async def gone() -> bool:
            return not await leftovers()

        with contextlib.suppress(AssertionError):
            await eventually_true(gone, within=60.0, message="swept", interval=0.2)
            return
    left = [
        f"{o['kind']} {o['metadata'].get('namespace', '')}/{o['metadata']['name']}"
        for o in await leftovers()
    ]
    raise AssertionError(f"the real cluster still holds what a test created: {left}")


async def real_cluster(plane: ControlPlane, directory: Path) -> AsyncIterator[TestCluster]:
    proxy = FaultProxy(plane.url, plane.ca_file)
    await proxy.start()
    api = await make_api_client(kubeconfig=plane.admin_kubeconfig, in_cluster=False)
    faults = LaneFaults(
        proxy,
        drop_watches=proxy.drop_watches,
        compact=lambda: compact_etcd(plane),
        restart=lambda: restart_apiserver(plane),
    )
    cluster = TestCluster(
        lane="real",
        admin_kubeconfig=plane.admin_kubeconfig,
        controller_kubeconfig=proxied_kubeconfig(
            directory / "controller.kubeconfig",
            server=proxy.url,
            token=plane.env["CONTROLLER_TOKEN"],
        ),
        faulty_admin_kubeconfig=proxied_kubeconfig(
            directory / "proxied-admin.kubeconfig",
            server=proxy.url,
            token=plane.env["ADMIN_TOKEN"],
        ),
        api=api,
        faults=faults,
        clock_tick=_next_second,
    )
    try:
        yield cluster
    finally:
        await proxy.stop()
        try:
            await sweep(api, plane)
        finally:
            await api.close()


async def _next_second() -> None:
    # creationTimestamp has one-second resolution: wait until the wall clock (which the API
    # server on this machine shares) is in a later second than now.
    await asyncio.sleep(1.0 - time.time() % 1.0 + 0.01)


class ControlPlanes:
    """The session's real clusters, started on first use: the ordinary one, and (only if a
    test compacts the history) one whose API server serves watches from etcd."""

    def __init__(self) -> None:
        self._planes: dict[bool, ControlPlane] = {}

    def get(self, *, watch_cache: bool) -> ControlPlane:
        if watch_cache not in self._planes:
            plane = start_control_plane(watch_cache=watch_cache)
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                # Its own event loop, in a thread: the tests' loop may be running.
                pool.submit(asyncio.run, record_baseline(plane)).result()
            self._planes[watch_cache] = plane
        return self._planes[watch_cache]

    def down(self) -> None:
        for plane in self._planes.values():
            plane.down()
        self._planes.clear()
