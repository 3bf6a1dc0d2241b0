"""Where interlock's memory at rest goes: RSS at 0, 1,000 and 10,000 objects, and at start-up.

Two parts, all in one run:

1. the import graph at start-up: a fresh interpreter imports, one after another, the libraries
   and interlock's layers in the order ``interlock run`` needs them, and the RSS each step adds
   is printed with the number of modules it loaded (the heaviest top-level packages named);
2. ``interlock run`` as a child process (a follower: another replica holds the Lease, so no
   status is written) against the embedded API server (another child process) pre-loaded with
   N Services and N HTTPRoutes as ``benchmarks/outbound.py`` makes them: its RSS once
   ``/readyz`` answers 200, and the CPU time it used until then (``/proc/PID/stat``, every
   thread: the interpreter's start, the imports, the lists and the actors), for each N. With
   ``--edge`` it also serves the edge and the mesh listener (``--edge-addr`` and
   ``--mesh-addr`` on free ports; no ModuleSet, so no edge module is compiled): what they cost
   before any route uses them.

   Two ways to reach the API server, each its own row (``--config``):
   - ``in-cluster``: as the Deployment runs it (``charts/interlock``: ``interlock run`` with no
     ``--kubeconfig``, no ``$KUBECONFIG``, no ``~/.kube/config``), in a Pod: the child has
     ``KUBERNETES_SERVICE_HOST``/``_PORT`` set to the embedded server and, in a mount namespace
     of its own (``unshare --mount``, so nothing is written outside it), a tmpfs on ``/run``
     with a temporary directory bind-mounted on ``/var/run/secrets/kubernetes.io/serviceaccount``
     holding the server's bearer token and CA, so kubernetes-asyncio's ``load_incluster_config``
     is what configures the client. The embedded server accepts that token and no other. The
     row is checked: the child must not have PyYAML's C extension mapped (the kubeconfig loader
     imports PyYAML, the service-account loader does not), and the kubeconfig row must have it.
     Needs root (``unshare``/``mount``); without it the row is skipped and says so;
   - ``kubeconfig``: ``--kubeconfig`` the file the embedded server wrote (the loader, PyYAML).

With ``--where N`` it shows instead where the memory per Service+route pair goes: the
controller runs in this process under tracemalloc (started after the imports, so what is
traced is what start-up and the N pairs allocated) and what is alive once it is ready is
grouped by the innermost frame of interlock's code that allocated it, per file and per line,
divided by N. (The figures of a traced run are Python allocations, not RSS.)

    .venv/bin/python benchmarks/rest_memory.py [--scales 0 1000 10000] [--config in-cluster]
        [--edge] [--write-docs]
    .venv/bin/python benchmarks/rest_memory.py --scales 0 48 --tree DIR   # another checkout's

``--tree DIR`` imports and runs interlock from another checkout (a snapshot of main: a before and
after in one sitting, alternating the two); only the figures are printed, never written.
    .venv/bin/python benchmarks/rest_memory.py --where 2000
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import contextlib
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_report import command_lines, machine, report, rss_mib, tree_env

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
HEADING = "## Memory at rest"

STEPS = [
    "interlock",  # first, as in `interlock run`: it postpones aiohttp's CA loading
    "asyncio",
    "aiohttp",
    "pydantic",
    "loguru",
    "interlock.kube.library",
    "interlock.model",
    "interlock.mailbox",
    "interlock.actors",
    "interlock.kube",
    "interlock.edge",
    "interlock.api",
    "interlock.controller.app",
    "interlock.cli",  # the subcommands and their parsers, as `interlock run` imports them
    "uvloop",
]

IMPORT_PROBE = """
import collections, importlib, json, os, sys
def rss():
    for line in open("/proc/self/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
rows = [("interpreter", rss(), len(sys.modules), [])]
for name in STEPS:
    before = set(sys.modules)
    importlib.import_module(name)
    # What `interlock run`'s entry point does next, if this tree's does it (the installed
    # checkout's module is found too when the tree lacks it: look in the tree's package).
    package = os.path.dirname(sys.modules["interlock"].__file__)
    plugins = os.path.join(package, "pydantic_plugins.py")
    if name == "interlock" and os.path.exists(plugins):
        importlib.import_module("interlock.pydantic_plugins").disable()
    frozenlist = os.path.join(package, "frozenlist_python.py")
    if name == "interlock" and os.path.exists(frozenlist):
        importlib.import_module("interlock.frozenlist_python").prefer()
    new = collections.Counter(m.split(".")[0] for m in set(sys.modules) - before)
    rows.append((name, rss(), len(sys.modules) - len(before), new.most_common(3)))
print(json.dumps(rows))
"""


def import_graph(tree: str | None = None) -> list[tuple[str, float, int, list[tuple[str, int]]]]:
    import json

    code = f"STEPS = {STEPS!r}\n{IMPORT_PROBE}"
    # From the tree's folder: ``-c`` puts the working directory first on sys.path.
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        check=True,
        env=tree_env(tree),
        cwd=tree,
    )
    return [tuple(row) for row in json.loads(out.stdout)]  # type: ignore[misc]


EDGE_FLAGS = ["--edge-addr", "127.0.0.1:0", "--edge-workers", "1", "--mesh-addr", "127.0.0.1:0"]
"""``--edge``: what ``interlock run`` adds to serve the edge and the mesh listener (in its own
process: ``--edge-workers`` auto would start worker processes this RSS does not count)."""


CONFIGS = ("in-cluster", "kubeconfig")

SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"
"""Where a Pod's service account token and CA are mounted (kubernetes-asyncio reads them there)."""

IN_A_POD = (
    # In the child's own mount namespace: /run (/var/run) is a tmpfs of its own, in which the
    # service account's folder is the temporary one, bind-mounted; then `interlock run` (exec:
    # the same process, whose RSS is measured).
    'mount -t tmpfs -o size=1m,mode=755 interlock-bench /run && mkdir -p "$2" '
    '&& mount --bind "$1" "$2" && shift 2 && exec "$@"'
)


def cpu_seconds(pid: int) -> float:
    """The CPU time (user + system, every thread) process ``pid`` has used."""
    from bottleneck import parse_pid_stat

    with open(f"/proc/{pid}/stat") as stat:
        ticks = parse_pid_stat(stat.read()).ticks
    return ticks / os.sysconf("SC_CLK_TCK")


def can_run_in_a_pod() -> bool:
    """Whether the in-cluster row can be measured here (root, with ``unshare`` and ``mount``)."""
    import shutil

    return os.geteuid() == 0 and bool(shutil.which("unshare")) and bool(shutil.which("mount"))


def in_a_pod(
    command: list[str], *, kubeconfig: Path, workdir: Path, tree: str | None
) -> tuple[list[str], dict[str, str]]:
    """``command`` without ``--kubeconfig``, run as a Pod runs it (the module docstring), and
    its environment: the service account's token and CA written to a folder of ``workdir``."""
    import base64
    from urllib.parse import urlsplit

    import yaml

    config = yaml.safe_load(kubeconfig.read_text())
    cluster = config["clusters"][0]["cluster"]
    account = workdir / "serviceaccount"
    account.mkdir(mode=0o700)
    # As the kubelet projects them: the token without a newline, the CA's PEM, the namespace.
    (account / "token").write_text(config["users"][0]["user"]["token"])
    (account / "ca.crt").write_bytes(base64.b64decode(cluster["certificate-authority-data"]))
    (account / "namespace").write_text("default")
    home = workdir / "home"  # no ~/.kube/config
    home.mkdir()
    server = urlsplit(cluster["server"])
    at = command.index("--kubeconfig")
    command = command[:at] + command[at + 2 :]
    env = {k: v for k, v in (tree_env(tree) or os.environ).items() if k != "KUBECONFIG"}
    env |= {
        "HOME": str(home),
        "KUBERNETES_SERVICE_HOST": str(server.hostname),
        "KUBERNETES_SERVICE_PORT": str(server.port),
    }
    wrapped = ["unshare", "--mount", "--propagation", "private", "--", "sh", "-c", IN_A_POD]
    return [*wrapped, "sh", str(account), SERVICE_ACCOUNT, *command], env


def maps_yaml(pid: int) -> bool:
    """Whether process ``pid`` has PyYAML's C extension (``yaml/_yaml…so``) mapped."""
    with open(f"/proc/{pid}/maps") as maps:
        return any("/yaml/_yaml" in line for line in maps)


async def at_rest(
    n: int, *, flags: list[str], tree: str | None = None, config: str = "kubeconfig"
) -> tuple[float, float, float]:
    """(seconds to ready, RSS MiB when ready, CPU seconds to ready) of ``interlock run`` with N
    Services + routes, configured by ``config`` (:data:`CONFIGS`)."""
    import aiohttp
    from api_servers import EmbeddedServer
    from outbound import objects
    from peer_kopf import child_command, free_port

    with tempfile.TemporaryDirectory(prefix="interlock-bench-rest-") as tmp:
        server = await EmbeddedServer.start(objects(n, real=False), Path(tmp))
        port, admin = free_port(), free_port()
        command = child_command(
            "interlock", kubeconfig=server.kubeconfig, port=port, admin=admin, n=n
        )
        env = tree_env(tree)
        if config == "in-cluster":
            command, env = in_a_pod(
                command, kubeconfig=server.kubeconfig, workdir=Path(tmp), tree=tree
            )
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            *command,
            *flags,
            env=env,
            cwd=tree,
            stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            async with aiohttp.ClientSession() as http:
                while True:
                    if process.returncode is not None:
                        raise RuntimeError(f"interlock run exited with {process.returncode}")
                    try:
                        async with http.get(f"http://127.0.0.1:{admin}/readyz") as response:
                            if response.status == 200:
                                break
                    except aiohttp.ClientError:
                        pass
                    await asyncio.sleep(0.05)
            ready = time.perf_counter() - started
            cpu = cpu_seconds(process.pid)
            await asyncio.sleep(1.0)  # let the last responses' buffers go
            rss = rss_mib(process.pid)
            # The row is what it says: the service account's loader never imports PyYAML
            # (interlock's start-up does not either), the kubeconfig loader does.
            if maps_yaml(process.pid) != (config == "kubeconfig"):
                raise RuntimeError(
                    f"the {config} row's controller {'lacks' if config == 'kubeconfig' else 'has'}"
                    " PyYAML mapped: it was not configured as the row says"
                )
            return ready, rss, cpu
        finally:
            if process.returncode is None:
                with contextlib.suppress(ProcessLookupError):  # exited, not yet reaped
                    process.terminate()
            await process.wait()
            await server.stop()


async def where(n: int, *, depth: int = 10, top: int = 30) -> None:
    """Print where the controller's memory per Service+route pair goes at N pairs."""
    import gc
    import tracemalloc

    from api_servers import EmbeddedServer
    from bench_report import quiet_logs
    from outbound import follower, idle, objects

    quiet_logs()
    with tempfile.TemporaryDirectory(prefix="interlock-bench-where-") as tmp:
        server = await EmbeddedServer.start(objects(n, real=False), Path(tmp), start_within=1800)
        try:
            controller = follower(server)
            tracemalloc.start(depth)
            await controller.start()
            await controller.wait_ready(within=3600)
            await idle(controller)
            gc.collect()
            snapshot = tracemalloc.take_snapshot()
            tracemalloc.stop()
            await controller.stop()
        finally:
            await server.stop()
    by_file: collections.Counter[str] = collections.Counter()
    by_line: collections.Counter[str] = collections.Counter()
    for trace in snapshot.traces:
        frames = list(trace.traceback)
        ours = next((f for f in reversed(frames) if "/interlock/" in f.filename), None)
        where = ours.filename.split("/interlock/")[-1] if ours is not None else "(not interlock)"
        by_file[where] += trace.size
        allocated = frames[-1]
        line = f"{where}:{ours.lineno}" if ours is not None else where
        by_line[f"{line} ({Path(allocated.filename).name}:{allocated.lineno})"] += trace.size
    total = sum(by_file.values())
    print(f"{n:,} Services + routes: {total / 2**20:.1f} MiB traced, {total / n:,.0f} B per pair")
    print("\nper pair, by interlock file (innermost interlock frame of the allocation):")
    for name, size in by_file.most_common(top):
        print(f"{size / n:8,.0f} B  {name}")
    print("\nper pair, by line (and the line that allocated):")
    for name, size in by_line.most_common(top):
        print(f"{size / n:8,.0f} B  {name}")


def section(
    graph: list[tuple[str, float, int, list[tuple[str, int]]]],
    rest: dict[tuple[str, int], tuple[float, float, float]],
    command: str,
    flags: list[str],
    skipped: str = "",
) -> str:
    run = " ".join(["interlock run", *flags])
    lines = [
        HEADING,
        "",
        *command_lines(command),
        f"{machine()} (shared; RSS does not depend on the load).",
        "",
        f"`{run}` (a follower) against the embedded API server, RSS once `/readyz` is 200 "
        "and the CPU time it used until then; "
        "*in-cluster*: as a Pod runs it (the service account's token and CA, "
        "`load_incluster_config`), *kubeconfig*: with `--kubeconfig`:",
        "",
        "| Services / routes | configuration | RSS when ready | start → ready | CPU to ready |",
        "|---:|---|---:|---:|---:|",
    ]
    rows = sorted(rest.items(), key=lambda i: (i[0][1], i[0][0]))
    for (config, n), (ready, rss, cpu) in rows:
        lines.append(f"| {n:,} | {config} | {rss:.1f} MiB | {ready:.1f} s | {cpu:.2f} s |")
    if skipped:
        lines += ["", skipped]
    lines += [
        "",
        "Where the start-up RSS goes (each step imported in a fresh interpreter after the ones "
        "above it):",
        "",
        "| import | RSS after | added | modules | heaviest packages loaded |",
        "|---|---:|---:|---:|---|",
    ]
    previous = None
    for name, rss, modules, heaviest in graph:
        added = "" if previous is None else f"{rss - previous:+.1f} MiB"
        top = ", ".join(f"{pkg} ({count})" for pkg, count in heaviest)
        lines.append(f"| `{name}` | {rss:.1f} MiB | {added} | {modules} | {top} |")
        previous = rss
    lines += [
        "",
        "Reading it: `interlock.kube.library` is kubernetes-asyncio as interlock imports it — "
        "`ApiClient`, `Configuration` and the kubeconfig loaders, with the package `__init__` "
        "files (which import every generated API and model class, about a thousand modules and "
        "40 MiB) deferred until something asks for a typed API or model, which the controller "
        "never does (the step also imports `interlock.kube` and `interlock.mailbox`, which "
        "importing it brings along). The embedded API server (with the CEL library's REPL "
        "dependencies) is not imported by a controller that does not run it, nor are the "
        "edge's data plane and the mesh listener without `--edge-addr` / `--edge-admin-url` "
        "and `--mesh-addr` (`interlock run`'s defaults); with an edge, the "
        "modules that need cryptography or PyJWT (mutualTLS, jwt, oauth, oidc) are imported "
        "when a ModuleSet first configures one (`tests/controller/test_start_up_imports.py`).",
    ]
    return "\n".join(lines) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[0, 1000, 10_000])
    parser.add_argument(
        "--edge", action="store_true", help="run with an edge and a mesh listener (no ModuleSet)"
    )
    parser.add_argument(
        "--config",
        choices=[*CONFIGS, "both"],
        default="both",
        help="how the controller reaches the API server (default: both, a row each)",
    )
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument("--where", type=int, metavar="N", help="where the memory per pair goes")
    parser.add_argument("--tree", help="import and run interlock from this checkout instead")
    args = parser.parse_args()
    if args.where:
        asyncio.run(where(args.where))
        return 0
    tree = str(Path(args.tree).resolve()) if args.tree else None
    graph = import_graph(tree)
    flags = EDGE_FLAGS if args.edge else []
    configs = list(CONFIGS) if args.config == "both" else [args.config]
    skipped = ""
    if "in-cluster" in configs and not can_run_in_a_pod():
        configs.remove("in-cluster")
        skipped = "(The in-cluster rows need root, `unshare` and `mount`: not measured.)"
    rest = {
        (config, n): asyncio.run(at_rest(n, flags=flags, tree=tree, config=config))
        for n in args.scales
        for config in configs
    }
    command = (
        f".venv/bin/python benchmarks/rest_memory.py --scales {' '.join(map(str, args.scales))}"
        + (f" --config {args.config}" if args.config != "both" else "")
        + (" --edge" if args.edge else "")
        + (f" --tree {args.tree}" if args.tree else "")
    )
    if tree is not None:
        args.write_docs = False  # another checkout's figures are a comparison, not the docs'
    report(section(graph, rest, command, flags, skipped), HEADING, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
