"""A kubelet stand-in for the Gateway API conformance suite: Pods as processes in network
namespaces of their own.

The suite (``make conformance``) deploys ``echo-basic`` backends as Deployments and checks that a
Gateway routes to them, by the answers they echo and by their logs. These machines have no
kubelet and no container engine, so this runner does what a kubelet would for those Pods:

- registers a Node (``Ready``, its ``InternalIP`` and the port of its log server), and binds
  every pending Pod to it through ``pods/binding`` (there is no scheduler either);
- for each Pod whose image is an ``echo-basic`` image, resolves the container's environment and
  volumes (``tests/conformance/pods.py``), gives the Pod a network namespace of its own with its
  own address (a veth pair into the run's namespace, on a bridge there), and runs the
  ``echo-basic`` binary inside it; a container that exits is restarted (with backoff, its
  ``restartCount`` counted);
- patches ``pods/status`` (``Running``, ``podIP``/``podIPs``, ``Ready`` once the Pod's namespace
  has listening sockets) so kube-controller-manager's EndpointSlice controller publishes the
  endpoints interlock routes to;
- on deletion stops the processes, removes the namespace and deletes the Pod for good (grace 0);
- serves ``/containerLogs`` over HTTPS, which the API server proxies ``pods/log`` to: the suite's
  mirror tests read a backend's log to see that a mirrored request arrived;
- marks a Pod whose image it cannot run ``Failed`` with a reason, except the images the suite only
  needs to exist and be Ready (``pods.PLACEHOLDER_IMAGES``), which run a placeholder.

It runs inside the conformance run's network namespace (``hack/conformance/run.sh``), so the pod
addresses, the bridge and the log server exist only there.

    python -m tests.conformance.podrunner --kubeconfig admin.kubeconfig \\
        --echo-basic PATH --netns-prefix NAME --log-port PORT --state-dir DIR
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import contextlib
import datetime as dt
import ipaddress
import json
import os
import signal
import ssl
import sys
import tempfile
from collections.abc import AsyncIterator
from pathlib import Path

import aiohttp
import yaml
from aiohttp import web

from tests.conformance import pods
from tests.conformance.pods import LogLine, Obj, PodConfigError, PodFacts, Sources

NODE_NAME = "conformance-node"
HOST_IP = "127.0.0.1"
BRIDGE = "ilconf0"
POD_NETWORK = ipaddress.ip_network("10.244.0.0/16")
GATEWAY_IP = "10.244.0.1"


def log(message: str) -> None:
    print(f"podrunner: {message}", file=sys.stderr, flush=True)


def now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class ApiError(Exception):
    def __init__(self, status: int, text: str) -> None:
        super().__init__(f"{status}: {text[:300]}")
        self.status = status


class Api:
    """The few API calls a kubelet makes, over one aiohttp session, from a token kubeconfig."""

    def __init__(self, kubeconfig: Path) -> None:
        config = yaml.safe_load(kubeconfig.read_text())
        context_name = config["current-context"]
        context = next(c["context"] for c in config["contexts"] if c["name"] == context_name)
        cluster = next(c["cluster"] for c in config["clusters"] if c["name"] == context["cluster"])
        user = next(u["user"] for u in config["users"] if u["name"] == context["user"])
        self.server = cluster["server"].rstrip("/")
        self.ssl = ssl.create_default_context()
        if "certificate-authority-data" in cluster:
            ca = base64.b64decode(cluster["certificate-authority-data"]).decode()
            self.ssl.load_verify_locations(cadata=ca)
        self.headers = {"Authorization": f"Bearer {user['token']}"}
        self.session: aiohttp.ClientSession | None = None

    async def __aenter__(self) -> Api:
        self.session = aiohttp.ClientSession(
            headers=self.headers, connector=aiohttp.TCPConnector(ssl=self.ssl)
        )
        return self

    async def __aexit__(self, *_: object) -> None:
        if self.session is not None:
            await self.session.close()

    async def call(
        self,
        method: str,
        path: str,
        body: Obj | None = None,
        *,
        content_type: str = "application/json",
    ) -> Obj:
        assert self.session is not None
        data = None if body is None else json.dumps(body)
        headers = {"Content-Type": content_type} if body is not None else {}
        async with self.session.request(
            method, self.server + path, data=data, headers=headers
        ) as response:
            text = await response.text()
            if response.status >= 400:
                raise ApiError(response.status, text)
            return json.loads(text) if text else {}

    async def watch(self, path: str, resource_version: str) -> AsyncIterator[Obj]:
        assert self.session is not None
        params = {"watch": "1", "resourceVersion": resource_version, "timeoutSeconds": "300"}
        timeout = aiohttp.ClientTimeout(total=None, sock_read=400)
        async with self.session.get(self.server + path, params=params, timeout=timeout) as response:
            if response.status >= 400:
                raise ApiError(response.status, await response.text())
            async for raw in response.content:
                if raw.strip():
                    yield json.loads(raw)


async def run_command(*argv: str, check: bool = True) -> str:
    process = await asyncio.create_subprocess_exec(
        *argv, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE
    )
    out, err = await process.communicate()
    if check and process.returncode != 0:
        raise RuntimeError(f"{' '.join(argv)} exited {process.returncode}: {err.decode().strip()}")
    return out.decode()


class Network:
    """The bridge in the run's namespace and one namespace per Pod, joined to it by a veth pair."""

    def __init__(self, prefix: str) -> None:
        self.prefix = prefix
        self.hosts = POD_NETWORK.hosts()
        next(self.hosts)  # the bridge's own address
        self.count = 0

    async def setup(self) -> None:
        await run_command("ip", "link", "set", "lo", "up")
        await run_command("ip", "link", "add", BRIDGE, "type", "bridge")
        await run_command(
            "ip", "addr", "add", f"{GATEWAY_IP}/{POD_NETWORK.prefixlen}", "dev", BRIDGE
        )
        await run_command("ip", "link", "set", BRIDGE, "up")

    async def create(self) -> tuple[str, str]:
        """A new Pod namespace and its address: (namespace name, IP)."""
        self.count += 1
        name = f"{self.prefix}-{self.count}"
        veth = f"ilc{self.count}"
        address = str(next(self.hosts))
        await run_command("ip", "netns", "add", name)
        await run_command(
            "ip", "link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", name
        )
        await run_command("ip", "link", "set", veth, "master", BRIDGE, "up")
        inside = ("ip", "-n", name)
        await run_command(*inside, "link", "set", "lo", "up")
        await run_command(
            *inside, "addr", "add", f"{address}/{POD_NETWORK.prefixlen}", "dev", "eth0"
        )
        await run_command(*inside, "link", "set", "eth0", "up")
        await run_command(*inside, "route", "add", "default", "via", GATEWAY_IP)
        return name, address

    async def delete(self, name: str) -> None:
        await run_command("ip", "netns", "del", name, check=False)


def listening_sockets(pid: int) -> set[str]:
    """The TCP sockets listening in the network namespace of process ``pid`` (local addresses,
    hex as /proc writes them); empty when the process is gone."""
    found: set[str] = set()
    for table in ("tcp", "tcp6"):
        with contextlib.suppress(OSError):
            for line in Path(f"/proc/{pid}/net/{table}").read_text().splitlines()[1:]:
                fields = line.split()
                if len(fields) > 3 and fields[3] == "0A":
                    found.add(fields[1])
    return found


class Container:
    """One container of a Pod: its process, restarted when it exits, and its log lines."""

    def __init__(self, worker: PodWorker, spec: Obj, argv: list[str], env: dict[str, str]) -> None:
        self.worker = worker
        self.name: str = spec["name"]
        self.argv = argv
        self.env = env
        self.log: list[LogLine] = []
        self.process: asyncio.subprocess.Process | None = None
        self.ready = False
        self.restarts = 0
        self.started = now()
        self.task: asyncio.Task[None] | None = None

    def start(self) -> None:
        self.task = asyncio.create_task(self.supervise(), name=f"container {self.name}")

    async def _read(self, stream: asyncio.StreamReader) -> None:
        async for raw in stream:
            self.log.append(LogLine(now(), raw.decode(errors="replace").rstrip("\n")))

    async def supervise(self) -> None:
        backoff = 1.0
        while True:
            self.started = now()
            self.process = await asyncio.create_subprocess_exec(
                "ip", "netns", "exec", self.worker.netns, *self.argv,
                env=self.env,
                cwd=self.worker.folder,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                start_new_session=True,
            )  # fmt: skip
            assert self.process.stdout is not None and self.process.stderr is not None
            readers = [
                asyncio.create_task(self._read(self.process.stdout)),
                asyncio.create_task(self._read(self.process.stderr)),
            ]
            ready = asyncio.create_task(self._wait_ready(self.process))
            code = await self.process.wait()
            ready.cancel()
            await asyncio.gather(*readers, return_exceptions=True)
            self.ready = False
            self.restarts += 1
            self.log.append(LogLine(now(), f"[podrunner] container exited with code {code}"))
            log(
                f"{self.worker.key} container {self.name} exited {code}; restart in {backoff:.0f} s"
            )
            self.worker.status_changed.set()
            await asyncio.sleep(backoff)
            backoff = min(backoff * 2, 10.0)

    async def _wait_ready(self, process: asyncio.subprocess.Process) -> None:
        if self.worker.runnable == pods.PLACEHOLDER:
            self.ready = True
        else:
            # Ready once the namespace listens and the set of listening sockets has held
            # still for one poll (echo-basic opens its ports from several goroutines).
            previous: set[str] = set()
            while True:
                current = listening_sockets(process.pid)
                if current and current == previous:
                    break
                previous = current
                await asyncio.sleep(0.2)
            self.ready = True
        self.worker.status_changed.set()

    async def stop(self, grace: float) -> None:
        if self.task is not None:
            self.task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self.task
        process = self.process
        if process is None or process.returncode is not None:
            return
        with contextlib.suppress(ProcessLookupError):
            os.killpg(process.pid, signal.SIGTERM)
        try:
            await asyncio.wait_for(process.wait(), grace)
        except TimeoutError:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(process.pid, signal.SIGKILL)
            await process.wait()


class PodWorker:
    """One Pod bound to our Node, from start to removal."""

    def __init__(self, runner: Runner, pod: Obj) -> None:
        self.runner = runner
        self.pod = pod
        meta = pod["metadata"]
        self.key = f"{meta['namespace']}/{meta['name']}"
        self.uid: str = meta["uid"]
        self.gone = False
        self.changed = asyncio.Event()
        self.status_changed = asyncio.Event()
        self.containers: dict[str, Container] = {}
        self.netns = ""
        self.pod_ip = ""
        self.folder = ""
        self.runnable: str | None = None
        self.task = asyncio.create_task(self.run(), name=f"pod {self.key}")

    def update(self, pod: Obj, *, gone: bool = False) -> None:
        self.pod = pod
        self.gone = self.gone or gone
        self.changed.set()

    def terminating(self) -> bool:
        return self.gone or bool(self.pod["metadata"].get("deletionTimestamp"))

    async def _wait(self, event: asyncio.Event, within: float | None) -> None:
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(event.wait(), within)
        event.clear()

    async def patch_status(self, status: Obj) -> None:
        meta = self.pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/status"
        try:
            await self.runner.api.call(
                "PATCH", path, {"status": status}, content_type="application/merge-patch+json"
            )
        except ApiError as error:
            if error.status not in (404, 409):
                log(f"{self.key}: status patch failed: {error}")
        except (aiohttp.ClientError, TimeoutError) as error:
            log(f"{self.key}: status patch failed: {error!r}")

    async def run(self) -> None:
        try:
            if await self.start():
                await self.serve()
        except Exception as error:
            log(f"{self.key}: {type(error).__name__}: {error}")
        finally:
            await self.teardown()
            self.runner.workers.pop(self.uid, None)

    async def start(self) -> bool:
        """Start the Pod's containers (retrying while a Secret or ConfigMap is missing);
        False when the Pod ends (deleted, or cannot run) before it started."""
        spec = self.pod["spec"]
        images = [c.get("image", "") for c in spec["containers"]]
        kinds = {pods.runnable_for(image) for image in images}
        if None in kinds or len(kinds) != 1:
            message = (
                f"the conformance pod runner runs only echo-basic images (and placeholders for "
                f"{', '.join(pods.PLACEHOLDER_IMAGES)}); this Pod's images: {', '.join(images)}"
            )
            await self.patch_status(
                pods.failed_status(
                    self.pod, reason="ImageNotRunnable", message=message, host_ip=HOST_IP, now=now()
                )
            )
            log(f"{self.key}: Failed: {message}")
            while not self.terminating():
                await self._wait(self.changed, None)
            return False
        self.runnable = kinds.pop()
        self.netns, self.pod_ip = await self.runner.network.create()
        self.folder = tempfile.mkdtemp(prefix=f"{self.uid}-", dir=self.runner.state_dir)
        while not self.terminating():
            try:
                await self._configure()
                return True
            except (ApiError, aiohttp.ClientError, TimeoutError) as error:
                log(f"{self.key}: reading its Secrets and ConfigMaps failed: {error!r}; retrying")
                await self._wait(self.changed, 2.0)
            except PodConfigError as error:
                await self.patch_status(
                    pods.waiting_status(
                        self.pod,
                        reason="CreateContainerConfigError",
                        message=str(error),
                        host_ip=HOST_IP,
                        now=now(),
                    )
                )
                await self._wait(self.changed, 2.0)
        return False

    async def _configure(self) -> None:
        meta = self.pod["metadata"]
        namespace = meta["namespace"]
        secrets = await self.runner.api.call("GET", f"/api/v1/namespaces/{namespace}/secrets")
        config_maps = await self.runner.api.call(
            "GET", f"/api/v1/namespaces/{namespace}/configmaps"
        )
        sources = Sources(
            secrets={s["metadata"]["name"]: s for s in secrets.get("items", [])},
            config_maps={c["metadata"]["name"]: c for c in config_maps.get("items", [])},
        )
        facts = PodFacts(pod_ip=self.pod_ip, host_ip=HOST_IP)
        volume_dirs: dict[str, str] = {}
        for name, files in pods.volume_files(self.pod, sources, facts).items():
            folder = Path(self.folder, "volumes", name)
            folder.mkdir(parents=True, exist_ok=True)
            for relative, content in (files or {}).items():
                target = folder / relative
                target.parent.mkdir(parents=True, exist_ok=True)
                target.write_bytes(content)
                target.chmod(0o600)
            volume_dirs[name] = str(folder)
        containers: dict[str, Container] = {}
        for spec in self.pod["spec"]["containers"]:
            mounts = pods.mount_map(spec, volume_dirs)
            env = {
                key: pods.rewrite_paths(value, mounts)
                for key, value in pods.container_env(self.pod, spec, sources, facts).items()
            }
            base_env = {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOSTNAME": meta["name"]}
            args = [pods.rewrite_paths(pods.expand(a, env), mounts) for a in spec.get("args") or []]
            if self.runnable == pods.ECHO_BASIC:
                command = spec.get("command") or []
                if command and not command[0].endswith(pods.ECHO_BASIC):
                    raise PodConfigError(
                        f"Pod {self.key} container {spec['name']}: command {command[0]!r} is not "
                        f"echo-basic, and the runner runs no other program of the image"
                    )
                argv = [self.runner.echo_basic, *args]
            else:
                argv = ["sleep", "infinity"]
            containers[spec["name"]] = Container(self, spec, argv, {**base_env, **env})
        self.containers = containers
        for container in containers.values():
            container.start()
        log(f"{self.key}: started at {self.pod_ip} in {self.netns} ({self.runnable})")

    async def serve(self) -> None:
        reported: tuple[bool, int] | None = None
        while not self.terminating():
            ready = all(c.ready for c in self.containers.values())
            restarts = sum(c.restarts for c in self.containers.values())
            if (ready, restarts) != reported:
                started = min(c.started for c in self.containers.values())
                await self.patch_status(
                    pods.running_status(
                        self.pod,
                        pod_ip=self.pod_ip,
                        host_ip=HOST_IP,
                        started=started,
                        ready=ready,
                        restarts=restarts,
                        now=now(),
                    )
                )
                reported = (ready, restarts)
            waits = [
                asyncio.create_task(self._wait(self.changed, None)),
                asyncio.create_task(self._wait(self.status_changed, None)),
            ]
            _, pending = await asyncio.wait(waits, return_when=asyncio.FIRST_COMPLETED)
            for task in pending:
                task.cancel()

    async def teardown(self) -> None:
        grace = float(self.pod["spec"].get("terminationGracePeriodSeconds") or 30)
        await asyncio.gather(*(c.stop(min(grace, 5.0)) for c in self.containers.values()))
        if self.netns:
            await self.runner.network.delete(self.netns)
        if not self.gone:
            meta = self.pod["metadata"]
            path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}"
            body = {"gracePeriodSeconds": 0, "preconditions": {"uid": self.uid}}
            with contextlib.suppress(ApiError, aiohttp.ClientError, TimeoutError):
                await self.runner.api.call("DELETE", path, body)
        log(f"{self.key}: removed")


class Runner:
    def __init__(self, args: argparse.Namespace, api: Api) -> None:
        self.api = api
        self.echo_basic: str = args.echo_basic
        self.log_port: int = args.log_port
        self.state_dir: str = args.state_dir
        self.network = Network(args.netns_prefix)
        self.workers: dict[str, PodWorker] = {}
        self.binding: dict[str, asyncio.Task[None]] = {}

    async def register_node(self) -> None:
        node = {
            "apiVersion": "v1",
            "kind": "Node",
            "metadata": {
                "name": NODE_NAME,
                "labels": {"kubernetes.io/hostname": NODE_NAME, "kubernetes.io/os": "linux"},
            },
        }
        try:
            await self.api.call("POST", "/api/v1/nodes", node)
        except ApiError as error:
            if error.status != 409:
                raise
        at = pods.rfc3339(now())
        status = {
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "the conformance pod runner is running",
                    "lastHeartbeatTime": at,
                    "lastTransitionTime": at,
                }
            ],
            # InternalIP only: the API server dials a node's first address of its preferred
            # types, and a Hostname address would need DNS.
            "addresses": [{"type": "InternalIP", "address": HOST_IP}],
            "daemonEndpoints": {"kubeletEndpoint": {"Port": self.log_port}},
            "capacity": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
            "allocatable": {"cpu": "64", "memory": "256Gi", "pods": "1000"},
            "nodeInfo": {
                "architecture": "amd64",
                "operatingSystem": "linux",
                "kubeletVersion": "conformance-podrunner",
                "kubeProxyVersion": "",
                "containerRuntimeVersion": "process://",
                "osImage": "",
                "kernelVersion": "",
                "bootID": "",
                "machineID": "",
                "systemUUID": "",
            },
        }
        await self.api.call(
            "PATCH",
            f"/api/v1/nodes/{NODE_NAME}/status",
            {"status": status},
            content_type="application/merge-patch+json",
        )

    async def bind(self, pod: Obj) -> None:
        meta = pod["metadata"]
        path = f"/api/v1/namespaces/{meta['namespace']}/pods/{meta['name']}/binding"
        body = {
            "apiVersion": "v1",
            "kind": "Binding",
            "metadata": {"name": meta["name"], "uid": meta["uid"]},
            "target": {"apiVersion": "v1", "kind": "Node", "name": NODE_NAME},
        }
        try:
            await self.api.call("POST", path, body)
        except ApiError as error:
            if error.status not in (404, 409):
                log(f"{meta['namespace']}/{meta['name']}: binding failed: {error}")
        finally:
            self.binding.pop(meta["uid"], None)

    def dispatch(self, kind: str, pod: Obj) -> None:
        uid = pod["metadata"]["uid"]
        spec = pod.get("spec", {})
        worker = self.workers.get(uid)
        if kind == "DELETED":
            if worker is not None:
                worker.update(pod, gone=True)
            return
        if worker is not None:
            worker.update(pod)
            return
        if pod.get("status", {}).get("phase") in ("Failed", "Succeeded") and not pod[
            "metadata"
        ].get("deletionTimestamp"):
            return
        node = spec.get("nodeName")
        if not node:
            if uid not in self.binding and not pod["metadata"].get("deletionTimestamp"):
                self.binding[uid] = asyncio.create_task(self.bind(pod))
            return
        if node == NODE_NAME:
            self.workers[uid] = PodWorker(self, pod)

    async def watch_pods(self) -> None:
        while True:
            try:
                listing = await self.api.call("GET", "/api/v1/pods")
                version = listing["metadata"]["resourceVersion"]
                present = set()
                for pod in listing.get("items", []):
                    present.add(pod["metadata"]["uid"])
                    self.dispatch("MODIFIED", pod)
                for uid, worker in list(self.workers.items()):
                    if uid not in present:
                        worker.update(worker.pod, gone=True)
                while True:
                    async for event in self.api.watch("/api/v1/pods", version):
                        if event["type"] == "ERROR":
                            raise ApiError(event["object"].get("code", 500), str(event["object"]))
                        if event["type"] == "BOOKMARK":
                            continue
                        version = event["object"]["metadata"]["resourceVersion"]
                        self.dispatch(event["type"], event["object"])
            except (ApiError, aiohttp.ClientError, TimeoutError) as error:
                log(f"pod watch: {error}; listing again")
                await asyncio.sleep(1)

    def container(self, namespace: str, name: str, container: str) -> Container | None:
        for worker in self.workers.values():
            meta = worker.pod["metadata"]
            if meta["namespace"] == namespace and meta["name"] == name:
                return worker.containers.get(container)
        return None

    async def container_logs(self, request: web.Request) -> web.StreamResponse:
        found = self.container(
            request.match_info["namespace"],
            request.match_info["pod"],
            request.match_info["container"],
        )
        if found is None:
            raise web.HTTPNotFound(text="no such container on this node\n")
        query = request.query
        since = pods.parse_time(query["sinceTime"]) if "sinceTime" in query else None
        if "sinceSeconds" in query:
            since = now() - dt.timedelta(seconds=int(query["sinceSeconds"]))
        text = pods.select_log(
            found.log,
            since=since,
            tail=int(query["tailLines"]) if "tailLines" in query else None,
            timestamps=query.get("timestamps") == "true",
            limit_bytes=int(query["limitBytes"]) if "limitBytes" in query else None,
        )
        return web.Response(text=text, content_type="text/plain")

    async def serve_logs(self) -> web.AppRunner:
        app = web.Application()
        app.router.add_get("/containerLogs/{namespace}/{pod}/{container}", self.container_logs)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        cert, key = self_signed(Path(self.state_dir))
        context.load_cert_chain(cert, key)
        await web.TCPSite(runner, HOST_IP, self.log_port, ssl_context=context).start()
        return runner

    async def stop(self) -> None:
        for worker in list(self.workers.values()):
            worker.gone = True  # leave the Pods to the API server that is being stopped too
            worker.task.cancel()
        await asyncio.gather(*(w.task for w in list(self.workers.values())), return_exceptions=True)


def self_signed(folder: Path) -> tuple[str, str]:
    """A throwaway serving certificate for the log server (the API server does not verify a
    kubelet's certificate unless told to)."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, NODE_NAME)])
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now() - dt.timedelta(hours=1))
        .not_valid_after(now() + dt.timedelta(days=7))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(HOST_IP))]),
            critical=False,
        )
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "node.crt", folder / "node.key"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    key_path.chmod(0o600)
    return str(cert_path), str(key_path)


async def main(args: argparse.Namespace) -> None:
    Path(args.state_dir).mkdir(parents=True, exist_ok=True)
    async with Api(Path(args.kubeconfig)) as api:
        runner = Runner(args, api)
        await runner.network.setup()
        logs = await runner.serve_logs()
        await runner.register_node()
        log(f"node {NODE_NAME} registered; logs on https://{HOST_IP}:{args.log_port}")
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        watch = asyncio.create_task(runner.watch_pods())
        await stop.wait()
        watch.cancel()
        await runner.stop()
        await logs.cleanup()
        log("stopped")


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--kubeconfig", required=True)
    parser.add_argument("--echo-basic", required=True, help="the echo-basic binary")
    parser.add_argument("--netns-prefix", required=True, help="names of the Pods' namespaces")
    parser.add_argument("--log-port", type=int, required=True, help="the log server's port")
    parser.add_argument("--state-dir", required=True, help="volumes and the node certificate")
    return parser.parse_args(argv)


if __name__ == "__main__":
    asyncio.run(main(parse_args()))
