"""Where interlock's memory at rest goes: RSS at 0, 1,000 and 10,000 objects, and at start-up.

Two parts, all in one run:

1. the import graph at start-up: a fresh interpreter imports, one after another, the libraries
   and interlock's layers in the order ``interlock run`` needs them, and the RSS each step adds
   is printed with the number of modules it loaded (the heaviest top-level packages named);
2. ``interlock run`` as a child process (a follower: another replica holds the Lease, so no
   status is written) against the embedded API server (another child process) pre-loaded with
   N Services and N HTTPRoutes as ``benchmarks/outbound.py`` makes them: its RSS once
   ``/readyz`` answers 200, for each N. With ``--edge`` it also serves the edge and the mesh
   listener (``--edge-addr`` and ``--mesh-addr`` on free ports; no ModuleSet, so no edge
   module is compiled): what they cost before any route uses them.

With ``--where N`` it shows instead where the memory per Service+route pair goes: the
controller runs in this process under tracemalloc (started after the imports, so what is
traced is what start-up and the N pairs allocated) and what is alive once it is ready is
grouped by the innermost frame of interlock's code that allocated it, per file and per line,
divided by N. (The figures of a traced run are Python allocations, not RSS.)

    .venv/bin/python benchmarks/rest_memory.py [--scales 0 1000 10000] [--edge] [--write-docs]
    .venv/bin/python benchmarks/rest_memory.py --scales 0 48 --tree DIR   # another checkout's

``--tree DIR`` imports and runs interlock from another checkout (a snapshot of main: a before and
after in one sitting, alternating the two); only the figures are printed, never written.
    .venv/bin/python benchmarks/rest_memory.py --where 2000
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_report import command_lines, machine, report, rss_mib

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
    new = collections.Counter(m.split(".")[0] for m in set(sys.modules) - before)
    rows.append((name, rss(), len(sys.modules) - len(before), new.most_common(3)))
print(json.dumps(rows))
"""


def tree_env(tree: str | None) -> dict[str, str] | None:
    """The environment of a child that imports interlock from ``tree`` (None: this checkout's)."""
    return None if tree is None else {**os.environ, "PYTHONPATH": tree}


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


async def at_rest(n: int, *, flags: list[str], tree: str | None = None) -> tuple[float, float]:
    """(seconds to ready, RSS MiB when ready) of ``interlock run`` with N Services + routes."""
    import aiohttp
    from api_servers import EmbeddedServer
    from outbound import objects
    from peer_kopf import child_command, free_port

    with tempfile.TemporaryDirectory(prefix="interlock-bench-rest-") as tmp:
        server = await EmbeddedServer.start(objects(n, real=False), Path(tmp))
        port, admin = free_port(), free_port()
        started = time.perf_counter()
        process = await asyncio.create_subprocess_exec(
            *child_command("interlock", kubeconfig=server.kubeconfig, port=port, admin=admin, n=n),
            *flags,
            env=tree_env(tree),
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
            await asyncio.sleep(1.0)  # let the last responses' buffers go
            return ready, rss_mib(process.pid)
        finally:
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
    rest: dict[int, tuple[float, float]],
    command: str,
    flags: list[str],
) -> str:
    run = " ".join(["interlock run", *flags])
    lines = [
        HEADING,
        "",
        *command_lines(command),
        f"{machine()} (shared; RSS does not depend on the load).",
        "",
        f"`{run}` (a follower) against the embedded API server, RSS once `/readyz` is 200:",
        "",
        "| Services / routes | RSS when ready | start → ready |",
        "|---:|---:|---:|",
    ]
    for n, (ready, rss) in sorted(rest.items()):
        lines.append(f"| {n:,} | {rss:.1f} MiB | {ready:.1f} s |")
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
    rest = {n: asyncio.run(at_rest(n, flags=flags, tree=tree)) for n in args.scales}
    command = (
        f".venv/bin/python benchmarks/rest_memory.py --scales {' '.join(map(str, args.scales))}"
        + (" --edge" if args.edge else "")
        + (f" --tree {args.tree}" if args.tree else "")
    )
    if tree is not None:
        args.write_docs = False  # another checkout's figures are a comparison, not the docs'
    report(section(graph, rest, command, flags), HEADING, write_docs=args.write_docs)
    return 0


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    sys.exit(main())
