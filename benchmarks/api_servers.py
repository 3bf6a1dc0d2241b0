"""The API server a benchmark runs the controller against: the embedded one or a real one.

A benchmark measured only against the embedded server measures interlock against code we
wrote, with no TLS, no authentication, no admission, no etcd and no priority-and-fairness. The
same benchmark body runs against either :class:`EmbeddedServer` (a child process, pre-loaded
from a manifest) or :class:`RealServer` (``hack/real-cluster.sh``: etcd and kube-apiserver on
loopback; the benchmark's objects created through the API as cluster admin, the controller
talking as the identity ``manifests/rbac.yaml`` grants, exactly as in a cluster).

Both give the benchmark: the controller's kubeconfig and Lease namespace, an admin
:meth:`request` for the changes it times, and :meth:`stop` (a real cluster the benchmark started
is brought down; one it was pointed at with ``--cluster-dir`` is left running).
"""

from __future__ import annotations

import asyncio
import base64
import json
import ssl
import sys
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import aiohttp
import yaml

ROOT = Path(__file__).resolve().parent.parent
REAL_CLUSTER_SH = ROOT / "hack" / "real-cluster.sh"
CREATE_CONCURRENCY = 32
"""Admin creates in flight while loading a real server (the admin identity is exempt from
priority-and-fairness, so this bounds only our own load on a shared machine)."""


def collection_path(obj: dict[str, Any]) -> str:
    api_version, kind = obj["apiVersion"], obj["kind"]
    namespace = obj["metadata"].get("namespace", "default")
    prefix = "/api/v1" if api_version == "v1" else f"/apis/{api_version}"
    plural = {
        "Service": "services",
        "HTTPRoute": "httproutes",
        "Lease": "leases",
    }[kind]
    return f"{prefix}/namespaces/{namespace}/{plural}"


@dataclass
class Response:
    status: int
    body: str


def _kubeconfig_cluster(path: Path) -> dict[str, str]:
    cluster: dict[str, str] = yaml.safe_load(path.read_text())["clusters"][0]["cluster"]
    return cluster


@dataclass
class EmbeddedServer:
    """The embedded API server in a child process (its RSS is not the controller's)."""

    process: asyncio.subprocess.Process
    kubeconfig: Path
    base: str
    name: str = "embedded"
    lease_namespace: str = "default"

    @classmethod
    async def start(
        cls, objects: list[dict[str, Any]], workdir: Path, *, start_within: float = 600.0
    ) -> EmbeddedServer:
        manifest = workdir / "objects.yaml"
        kubeconfig = workdir / "kubeconfig"
        # JSON documents are YAML documents; writing JSON keeps generation and parsing quick.
        manifest.write_text("\n---\n".join(json.dumps(doc) for doc in objects))
        code = (
            "import asyncio, sys\n"
            "from interlock.embedded import serve_forever\n"
            "asyncio.run(serve_forever(host='127.0.0.1', port=0, "
            f"kubeconfig_path={str(kubeconfig)!r}, manifests=[{str(manifest)!r}]))\n"
        )
        process = await asyncio.create_subprocess_exec(
            sys.executable, "-c", code, stdout=asyncio.subprocess.PIPE
        )
        assert process.stdout is not None
        try:
            while True:
                line = await asyncio.wait_for(process.stdout.readline(), start_within)
                if not line:
                    raise RuntimeError("the embedded API server exited")
                if line.startswith(b"kubeconfig:"):
                    break
        except BaseException:
            # Not ready in time (or interrupted): the child would outlive the benchmark.
            if process.returncode is None:
                process.terminate()
                await process.wait()
            raise
        base = _kubeconfig_cluster(kubeconfig)["server"]
        return cls(process=process, kubeconfig=kubeconfig, base=base)

    @property
    def controller_kubeconfig(self) -> str:
        return str(self.kubeconfig)

    def session(self) -> aiohttp.ClientSession:
        # The kubeconfig's token and certificate authority: the server refuses anyone else.
        config = yaml.safe_load(self.kubeconfig.read_text())
        ca = base64.b64decode(_kubeconfig_cluster(self.kubeconfig)["certificate-authority-data"])
        return aiohttp.ClientSession(
            base_url=self.base,
            headers={"Authorization": f"Bearer {config['users'][0]['user']['token']}"},
            connector=aiohttp.TCPConnector(ssl=ssl.create_default_context(cadata=ca.decode())),
        )

    async def request(
        self, http: aiohttp.ClientSession, method: str, path: str, body: Any = None
    ) -> Response:
        async with http.request(method, path, json=body) as response:
            return Response(response.status, await response.text())

    async def flow_control(self) -> dict[tuple[str, str], dict[str, float]]:
        return {}

    async def histograms(self) -> dict[str, tuple[float, float]]:
        return {}

    async def stop(self, *, keep: bool = False) -> None:
        self.process.terminate()
        await self.process.wait()


@dataclass
class RealServer:
    """etcd + kube-apiserver (+ kube-controller-manager) from ``hack/real-cluster.sh``."""

    directory: Path
    env: dict[str, str]
    started_here: bool
    name: str = "real"
    lease_namespace: str = "interlock-system"
    loaded: list[dict[str, Any]] = field(default_factory=list)
    _ssl: ssl.SSLContext = field(init=False)

    def __post_init__(self) -> None:
        self._ssl = ssl.create_default_context(cafile=str(self.directory / "pki" / "ca.crt"))

    @classmethod
    async def start(cls, objects: list[dict[str, Any]], *, cluster_dir: Path | None) -> RealServer:
        started_here = cluster_dir is None
        directory = cluster_dir or Path(tempfile.mkdtemp(prefix="interlock-bench-real-"))
        if started_here:
            up = await asyncio.create_subprocess_exec(
                str(REAL_CLUSTER_SH), "up", str(directory), stderr=asyncio.subprocess.PIPE
            )
            _, err = await up.communicate()
            if up.returncode != 0:
                down = await asyncio.create_subprocess_exec(
                    str(REAL_CLUSTER_SH), "down", str(directory)
                )
                await down.wait()
                raise RuntimeError(f"{REAL_CLUSTER_SH} up {directory}: {err.decode()}")
        env = dict(
            line.split("=", 1)
            for line in (directory / "cluster.env").read_text().splitlines()
            if "=" in line
        )
        server = cls(directory=directory, env=env, started_here=started_here)
        await server.load(objects)
        return server

    @property
    def base(self) -> str:
        return self.env["APISERVER_URL"]

    @property
    def controller_kubeconfig(self) -> str:
        return str(self.directory / "controller.kubeconfig")

    def session(self) -> aiohttp.ClientSession:
        return aiohttp.ClientSession(
            base_url=self.base,
            headers={"Authorization": f"Bearer {self.env['ADMIN_TOKEN']}"},
            connector=aiohttp.TCPConnector(ssl=self._ssl, limit=CREATE_CONCURRENCY),
        )

    async def request(
        self, http: aiohttp.ClientSession, method: str, path: str, body: Any = None
    ) -> Response:
        async with http.request(method, path, json=body) as response:
            return Response(response.status, await response.text())

    async def load(self, objects: Iterable[dict[str, Any]]) -> None:
        """Create ``objects`` as cluster admin; those left by an earlier run (409) are kept."""
        gate = asyncio.Semaphore(CREATE_CONCURRENCY)

        async def create(http: aiohttp.ClientSession, obj: dict[str, Any]) -> None:
            async with gate:
                response = await self.request(http, "POST", collection_path(obj), obj)
            if response.status not in (201, 409):
                name = obj["metadata"]["name"]
                raise RuntimeError(
                    f"create {obj['kind']} {name}: {response.status} {response.body}"
                )

        objects = list(objects)
        self.loaded = objects
        async with self.session() as http:
            # A Lease left by an earlier run on a reused cluster may be released (free to take):
            # start from the one given, held by "another replica".
            for obj in objects:
                if obj["kind"] == "Lease":
                    path = f"{collection_path(obj)}/{obj['metadata']['name']}"
                    await self.request(http, "DELETE", path)
            present = await self._present(http, objects)
            missing = [
                obj
                for obj in objects
                if obj["kind"] == "Lease"
                or (collection_path(obj), obj["metadata"]["name"]) not in present
            ]
            await asyncio.gather(*(create(http, obj) for obj in missing))

    async def _present(
        self, http: aiohttp.ClientSession, objects: list[dict[str, Any]]
    ) -> set[tuple[str, str]]:
        """``(collection, name)`` of the objects already there (a cluster kept by ``--keep``):
        a list per collection, not one refused create per object."""
        present: set[tuple[str, str]] = set()
        for path in {collection_path(obj) for obj in objects}:
            token = ""
            while True:
                query = f"?limit=5000&continue={token}" if token else "?limit=5000"
                response = await self.request(http, "GET", path + query)
                if response.status != 200:
                    break
                page = json.loads(response.body)
                present.update((path, item["metadata"]["name"]) for item in page["items"])
                token = page["metadata"].get("continue") or ""
                if not token:
                    break
        return present

    async def histograms(self) -> dict[str, tuple[float, float]]:
        """The API server's and etcd's latency histograms that a Service change passes through,
        as ``series → (sum of seconds, count)``: subtract two readings for a phase's means."""
        async with self.session() as http, http.get("/metrics") as response:
            text = await response.text()
        found = _histogram_sums(text, SERVER_HISTOGRAMS)
        async with (
            aiohttp.ClientSession() as http,
            http.get(f"{self.env['ETCD_URL']}/metrics") as response,
        ):
            found.update(_histogram_sums(await response.text(), ETCD_HISTOGRAMS))
        return found

    async def flow_control(self) -> dict[tuple[str, str], dict[str, float]]:
        """Priority-and-fairness counters per (flow schema, priority level), from ``/metrics``."""
        async with self.session() as http, http.get("/metrics") as response:
            text = await response.text()
        wanted = {
            "apiserver_flowcontrol_dispatched_requests_total": "dispatched",
            "apiserver_flowcontrol_rejected_requests_total": "rejected",
            "apiserver_flowcontrol_request_wait_duration_seconds_sum": "wait_s",
            "apiserver_flowcontrol_request_wait_duration_seconds_count": "waited",
        }
        found: dict[tuple[str, str], dict[str, float]] = {}
        for line in text.splitlines():
            name, _, rest = line.partition("{")
            if name not in wanted:
                continue
            labels_text, _, value = rest.rpartition("} ")
            labels = dict(part.split("=", 1) for part in labels_text.split(",") if "=" in part)
            key = (
                labels.get("flow_schema", "").strip('"'),
                labels.get("priority_level", "").strip('"'),
            )
            entry = found.setdefault(key, {})
            entry[wanted[name]] = entry.get(wanted[name], 0.0) + float(value)
        return found

    async def stop(self, *, keep: bool = False) -> None:
        """Bring down a cluster started here; on one given with ``--cluster-dir``, delete the
        benchmark's objects so that the next run starts from none (no status written yet),
        unless ``keep`` (the run wrote no status: the next one may start from these)."""
        if keep and not self.started_here:
            return
        if self.started_here:
            down = await asyncio.create_subprocess_exec(
                str(REAL_CLUSTER_SH), "down", str(self.directory), stderr=asyncio.subprocess.PIPE
            )
            await down.communicate()
            return
        gate = asyncio.Semaphore(CREATE_CONCURRENCY)

        async def delete(http: aiohttp.ClientSession, obj: dict[str, Any]) -> None:
            async with gate:
                path = f"{collection_path(obj)}/{obj['metadata']['name']}"
                await self.request(http, "DELETE", path)

        async with self.session() as http:
            await asyncio.gather(*(delete(http, obj) for obj in self.loaded))


SERVER_HISTOGRAMS = {
    "apiserver_request_duration_seconds": 'resource="services"',
    "etcd_request_duration_seconds": "services",
    "apiserver_watch_cache_read_wait_seconds": 'resource="services"',
}
"""kube-apiserver's histograms a Service change passes (name → a text its series contain)."""
ETCD_HISTOGRAMS = {
    "etcd_disk_wal_fsync_duration_seconds": "",
    "etcd_disk_backend_commit_duration_seconds": "",
}
"""etcd's: every committed write waits for the WAL's fsync and the backend's commit."""


def _histogram_sums(text: str, wanted: dict[str, str]) -> dict[str, tuple[float, float]]:
    """``name{labels} → (sum, count)`` of the histograms ``wanted`` names in a Prometheus text."""
    found: dict[str, list[float]] = {}
    for line in text.splitlines():
        head, _, value = line.rpartition(" ")
        name, _, labels = head.partition("{")
        for suffix, slot in (("_sum", 0), ("_count", 1)):
            base = name.removesuffix(suffix)
            if base != name and base in wanted and wanted[base] in labels:
                series = f"{base}{{{labels}" if labels else base
                found.setdefault(series, [0.0, 0.0])[slot] = float(value)
    return {series: (sums, count) for series, (sums, count) in found.items()}


ApiServer = EmbeddedServer | RealServer
