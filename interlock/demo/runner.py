"""Run the demo: echo backends, the embedded controller loaded with the examples, a live trace.

Everything here is what a person would otherwise do by hand before trying interlock: start two
backends, point EndpointSlices at them, start ``interlock run --embedded`` with the example
manifests and a trace file, then look up the ports to curl. The controller is the same
:class:`~interlock.controller.app.Controller` that ``interlock run`` starts; the demo only adds
its tracer (to print the trace live) and prints what to try.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import shutil
import socket
import sys
import tempfile
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO, TYPE_CHECKING

from interlock.config import (
    Address,
    AdminConfig,
    ClusterConfig,
    ControllerConfig,
    EdgeConfig,
    GatewayConfig,
    LeadershipConfig,
    MeshConfig,
    ObservabilityConfig,
    PolicyApiConfig,
)
from interlock.demo.echo import EchoServer
from interlock.demo.endpoints import write_endpoint_slices
from interlock.demo.live_trace import LiveTrace, TraceTee
from interlock.mailbox import Tracer

if TYPE_CHECKING:
    from interlock.controller.app import Controller

NAMESPACE = "default"
HOST = "demo.localhost"
"""The Ingress host of manifests/examples/ingress.yaml."""
GATEWAY_HOST = "gateway.localhost"
GATEWAY_PORT = 8088
"""The listener of the Gateway of manifests/examples/gateway.yaml (on 127.0.0.1 in the demo)."""
BACKENDS = ("echo-v1", "echo-v2")
"""The Services of manifests/examples/services.yaml that the echo servers stand in for."""
CLUSTER_ONLY = frozenset({"backends.yaml"})
"""Example files the demo does not load: the Deployments that back the echo Services in a real
cluster. The embedded API server runs no workloads (it does not serve apps/v1, so each
Deployment would be reported as an error), and the demo's echo processes stand in for them."""


class DemoError(Exception):
    """The demo cannot start; the message says why and what to do."""


@dataclass(frozen=True, kw_only=True)
class DemoOptions:
    """What ``interlock demo`` was asked for."""

    edge_addr: Address
    policy_addr: Address
    admin_addr: Address
    mesh_addr: Address | None = None
    """Where the mesh listener serves (``None``: no mesh listener)."""
    duration: float | None = None
    """Stop after this many seconds (non-interactive use); ``None`` runs until SIGINT/SIGTERM."""
    quiet_trace: bool = False
    """Write the trace file but do not print it live."""
    show_startup: bool = False
    """Also print the trace lines of start-up (actors starting, the first list of every
    object); by default the live trace begins with the first change after the banner."""
    manifests: Path | None = None
    """The repository's ``manifests/`` folder; ``None`` finds it next to the package."""


def default_manifests() -> Path:
    """The manifests shipped inside the package (a link to ``manifests/`` in a checkout)."""
    return Path(__file__).resolve().parent.parent / "manifests"


def available(address: Address) -> Address:
    """``address`` if its port is free now, else the same host with a free port (port 0 too).

    The friendly default ports (8080, 8090, 9090) are often taken on a developer's machine; the
    demo then runs on other ports and prints them, rather than failing.
    """
    family = socket.AF_INET6 if ":" in address.host else socket.AF_INET
    for port in dict.fromkeys((address.port, 0)):
        with socket.socket(family, socket.SOCK_STREAM) as probe:
            try:
                probe.bind((address.host, port))
            except OSError as error:
                if error.errno != errno.EADDRINUSE or port == 0:
                    raise DemoError(f"cannot listen on {address}: {error.strerror}") from None
                continue
            return Address(host=address.host, port=int(probe.getsockname()[1]))
    raise AssertionError("unreachable: port 0 either binds or raises")


def _url(address: Address) -> str:
    host = "127.0.0.1" if address.host in ("0.0.0.0", "") else address.host
    host = f"[{host}]" if ":" in host else host
    return f"http://{host}:{address.port}"


def example_manifests(root: Path) -> tuple[str, ...]:
    """The IngressClass and the example files under ``root`` that the demo loads (all but
    :data:`CLUSTER_ONLY`), or :class:`DemoError` naming what is missing."""
    wanted = (root / "ingressclass.yaml", root / "examples")
    missing = [str(path) for path in wanted if not path.exists()]
    if missing:
        raise DemoError(
            f"the demo's manifests are missing ({', '.join(missing)}): reinstall interlock, "
            "or pass the manifests/ folder of a checkout with --manifests"
        )
    examples = sorted(
        path
        for path in (root / "examples").iterdir()
        if path.suffix in (".yaml", ".yml", ".json") and path.name not in CLUSTER_ONLY
    )
    return (str(root / "ingressclass.yaml"), *(str(path) for path in examples))


def banner(
    *,
    edge: Address,
    policy_url: str,
    admin_url: str,
    admin_paths: Sequence[str],
    kubeconfig: str,
    examples: Path,
    trace_file: Path,
    backends: Sequence[tuple[str, int]],
    interlock: str = "interlock",
    kubectl_found: bool = True,
    mesh: Address | None = None,
) -> list[str]:
    """What the demo prints once it is ready: where things are and what to try. ``interlock``
    is how a shell runs this same interlock (see :func:`interlock_command`), so every printed
    command works as printed."""
    edge_url = _url(edge)
    policy = f"{policy_url}/v1/outbound/{NAMESPACE}/echo/80"
    kubectl = f"kubectl --kubeconfig {kubeconfig}"
    lines = [
        "interlock demo is ready.",
        "",
        f"  edge           {edge_url}  (host {HOST}; user demo, password demo — demo only)",
        f"  gateway        http://127.0.0.1:{GATEWAY_PORT}  (Gateway demo, host {GATEWAY_HOST})",
        f"  policy API     {policy}",
        f"  admin          {'  '.join(admin_url + path for path in admin_paths)}",
        *(() if mesh is None else (f"  mesh listener  {_url(mesh)}  (HTTP_PROXY for Services)",)),
        *(f"  backend        {name} on 127.0.0.1:{port}" for name, port in backends),
        f"  trace file     {trace_file}",
        "",
        "Try:",
        f"  curl -u demo:demo -H 'Host: {HOST}' {edge_url}/hello",
        f"  curl -H 'Host: {HOST}' {edge_url}/hello          # 401: modules run first",
        f"  curl -H 'Host: {GATEWAY_HOST}' http://127.0.0.1:{GATEWAY_PORT}/hello"
        "   # the Gateway: 50/50",
        f"  curl -u demo:demo -H 'Host: {GATEWAY_HOST}' http://127.0.0.1:{GATEWAY_PORT}/private"
        "   # an ExtensionRef's modules",
        *(
            ()
            if mesh is None
            else (
                f"  curl --proxy {_url(mesh)} http://echo.{NAMESPACE}/hello"
                "   # the mesh listener: the 80/20 split",
            )
        ),
        f"  curl {policy}",
        f"  {interlock} policy watch {NAMESPACE}/echo:80 --server {policy_url}",
        "",
        "Change things live (and watch the trace below and the policy):",
        *(() if kubectl_found else ("  (kubectl is not on PATH: install it to run these)",)),
        f"  {kubectl} get gateways,httproutes,ingresses,modulesets,services",
        f"  {kubectl} delete service echo-v2     # policy: echo-v2 exists: false",
        f"  {kubectl} apply -f {examples / 'services.yaml'}   # and back",
        "",
        f"Read the trace afterwards: {interlock} trace {trace_file}",
        "",
    ]
    return lines


def interlock_command() -> str:
    """How a shell runs the interlock that is running now: ``interlock`` when that is what PATH
    finds, else its absolute path (a venv not on PATH, ``dist/interlock``), or
    ``python -m interlock`` for a module run."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "__main__.py":
        return f"{sys.executable} -m interlock"
    found = shutil.which("interlock")
    if argv0.name != "interlock" or (found and Path(found).resolve() == argv0.resolve()):
        return "interlock"
    return str(argv0.resolve())


async def _served_paths(base: str, paths: Sequence[str]) -> list[str]:
    """The ``paths`` the admin server answers (so the banner never shows a dead link)."""
    import aiohttp

    served = []
    async with aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=5)) as http:
        for path in paths:
            async with http.get(base + path) as response:
                if response.status == 200:
                    served.append(path)
    return served


async def _settle(controller: Controller, tee: TraceTee, *, within: float = 5.0) -> None:
    """Wait (at most ``within`` seconds) until start-up's echoes are over — the Lease taken, the
    first status written and read back — dropping their trace lines from the live view, so the
    live trace shows the person's own changes, not start-up (the file keeps everything)."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(within):
            elector = controller.elector
            while elector is not None and not elector.is_leader:  # noqa: ASYNC110 - no event
                await asyncio.sleep(0.05)
            # Quiet means: idle, and no new trace line for a moment (status patches come back
            # through the informers a few milliseconds after they are written).
            while True:
                await controller.system.wait_idle()
                tee.discard_pending()
                await asyncio.sleep(0.25)
                if not tee.pending:
                    break
    tee.discard_pending()


async def run_demo(
    options: DemoOptions,
    *,
    out: Callable[[str], None] = print,
    stop: asyncio.Event | None = None,
) -> int:
    """Run the demo until ``stop`` is set, ``options.duration`` passed, or it is cancelled
    (``interlock demo`` cancels it on SIGINT/SIGTERM, see :mod:`interlock.cli.signals`)."""
    from interlock.controller.app import Controller

    root = options.manifests if options.manifests is not None else default_manifests()
    examples = example_manifests(root)
    workdir = Path(tempfile.mkdtemp(prefix="interlock-demo-"))
    trace_path = workdir / "trace.jsonl"
    kubeconfig = workdir / "kubeconfig"
    edge_addr = available(options.edge_addr)
    policy_addr = available(options.policy_addr)
    admin_addr = available(options.admin_addr)
    mesh_addr = None if options.mesh_addr is None else available(options.mesh_addr)

    echoes = [EchoServer(name=name) for name in BACKENDS]
    trace_file: IO[str] | None = None
    pump: asyncio.Task[None] | None = None
    controller: Controller | None = None
    tee: TraceTee | None = None
    stop = stop if stop is not None else asyncio.Event()
    try:
        for echo in echoes:
            await echo.start()
        slices = write_endpoint_slices(
            workdir / "endpointslices.yaml",
            namespace=NAMESPACE,
            host="127.0.0.1",
            ports={echo.name: echo.port for echo in echoes},
        )
        config = ControllerConfig(
            cluster=ClusterConfig(
                embedded=True,
                manifests=(*examples, str(slices)),
                write_kubeconfig=str(kubeconfig),
            ),
            leadership=LeadershipConfig(namespace=NAMESPACE),
            policy=PolicyApiConfig(addr=policy_addr),
            admin=AdminConfig(addr=admin_addr),
            edge=EdgeConfig(addr=edge_addr),
            mesh=MeshConfig(addr=mesh_addr),
            gateways=GatewayConfig(addresses=("127.0.0.1",)),
            observability=ObservabilityConfig(log_level="WARNING"),
        )
        controller = Controller(config)
        # Opening a local file takes microseconds; closed in the finally below.
        trace_file = open(trace_path, "a", encoding="utf-8")  # noqa: SIM115, ASYNC230
        live = None if options.quiet_trace else LiveTrace(out=out)
        tee = TraceTee(trace_file, live=live)
        controller.system.set_tracer(Tracer(write=tee.write))
        await controller.start()
        await controller.wait_ready()
        if not options.show_startup:
            await _settle(controller, tee)
        assert controller.policy_site is not None and controller.admin_site is not None
        for line in banner(
            edge=edge_addr,
            policy_url=controller.policy_site.url,
            admin_url=controller.admin_site.url,
            admin_paths=await _served_paths(
                controller.admin_site.url, ("/readyz", "/metrics", "/debug/")
            ),
            kubeconfig=str(kubeconfig),
            examples=root / "examples",
            trace_file=trace_path,
            backends=[(echo.name, echo.port) for echo in echoes],
            interlock=interlock_command(),
            kubectl_found=shutil.which("kubectl") is not None,
            mesh=None if controller.mesh is None else controller.mesh.address,
        ):
            out(line)
        if not options.quiet_trace:
            out("Live trace (actor, message, outcome <= the external event that caused it):")
        sys.stdout.flush()
        pump = asyncio.create_task(tee.pump(), name="demo-trace")
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(stop.wait(), options.duration)
        tee.drain()
        out("stopping the demo")
    finally:
        if tee is not None and not options.show_startup:
            # What the person caused is printed; shutdown's own lines (leadership given up)
            # only go to the file, as start-up's do.
            tee.drain()
            tee.mute()
        if controller is not None:
            await controller.stop()
        if pump is not None:
            pump.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await pump
        if trace_file is not None:
            trace_file.close()
        for echo in echoes:
            await echo.stop()
        if trace_file is not None:
            out(f"trace kept in {trace_path}: {interlock_command()} trace {trace_path}")
        sys.stdout.flush()
    return 0
