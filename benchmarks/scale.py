"""How the controller's start and memory grow with the cluster: 10,000 to 50,000 Services+routes.

``benchmarks/outbound.py`` measures everything at one scale (watch streams, changes, status writes);
at 50,000 its 50,000 HTTP watch streams alone need more file descriptors than a process gets here,
and its change and status phases take many minutes. This script keeps only what matters at each
scale, on outbound.py's cluster (the same ``objects``: N Services, N HTTPRoutes with two backends
each, the Lease held by another replica, the embedded API server in a child process):

- start → ready (every informer listed, every actor settled), wall and CPU time;
- RSS after ready, and with N watches open in process (their actors and policies: what N mesh
  proxies' streams would read; no HTTP connections);

each scale in a fresh child process (an RSS figure means nothing in a process that ran a larger
scale before), and the growth exponent between consecutive scales, ``log(b/a) / log(Nb/Na)``
(1.0: linear).

    .venv/bin/python benchmarks/scale.py [--scales 10000 50000] [--write-docs]
"""

from __future__ import annotations

import argparse
import asyncio
import itertools
import json
import math
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from api_servers import EmbeddedServer
from bench_report import command_lines, machine, report
from outbound import follower, objects, open_watches, rss_mib, start_measured

HEADING = "## Scale"


async def measure(n: int) -> dict[str, Any]:
    figures: dict[str, Any] = {"scale": n, "load_avg_start": os.getloadavg()[0]}
    with tempfile.TemporaryDirectory(prefix="interlock-bench-scale-") as tmp:
        loading = time.perf_counter()
        # Loading 100,000 objects takes the embedded server many minutes on a loaded machine.
        server = await EmbeddedServer.start(objects(n, real=False), Path(tmp), start_within=7200)
        figures["server_load_s"] = time.perf_counter() - loading
        try:
            controller = follower(server)
            await start_measured(controller, figures, within=3600)
            opened = time.perf_counter()
            await open_watches(controller, n)
            figures["watches_s"] = time.perf_counter() - opened
            figures["rss_watches_mib"] = rss_mib()
            figures["actors_watches"] = controller.system.statistics().actors
            figures["load_avg_end"] = os.getloadavg()[0]
            await controller.stop()
        finally:
            await server.stop()
    return figures


def exponent(a: float, b: float, na: int, nb: int) -> float:
    return math.log(b / a) / math.log(nb / na)


def section(runs: list[dict[str, Any]], command: str) -> str:
    lines = [
        HEADING,
        "",
        "outbound.py's cluster (N Services, N HTTPRoutes with two backends each) on the embedded",
        "API server (a child process), the controller a follower, each scale in a fresh process;",
        "N watches opened in process after ready (actors and policies, no HTTP streams).",
        "",
        *command_lines(command),
        f"{machine()}, shared with other engineers' work: load average "
        + ", ".join(f"{r['load_avg_start']:.1f} to {r['load_avg_end']:.1f}" for r in runs)
        + " (start to end of each scale). Wall times move with that load; CPU time and RSS "
        "less so.",
        "",
        "| Services / routes | start → ready (CPU) | RSS ready | + N watches (time) "
        "| RSS with watches | actors |",
        "|---:|---:|---:|---:|---:|---:|",
    ]
    for r in runs:
        lines.append(
            f"| {r['scale']:,} | {r['ready_s']:.1f} s ({r['ready_cpu_s']:.1f} s) "
            f"| {r['rss_ready_mib']:.0f} MiB | {r['watches_s']:.1f} s "
            f"| {r['rss_watches_mib']:.0f} MiB | {r['actors_watches']:,} |"
        )
    for a, b in itertools.pairwise(runs):
        na, nb = a["scale"], b["scale"]
        lines += [
            "",
            f"Growth from {na:,} to {nb:,} (exponent k in figure ∝ N^k; 1.0 is linear): "
            f"ready {exponent(a['ready_s'], b['ready_s'], na, nb):.2f} "
            f"(CPU {exponent(a['ready_cpu_s'], b['ready_cpu_s'], na, nb):.2f}), "
            f"RSS ready {exponent(a['rss_ready_mib'], b['rss_ready_mib'], na, nb):.2f}, "
            "RSS above the empty process's "
            f"{exponent(a['rss_ready_mib'] - a['rss_before_mib'], b['rss_ready_mib'] - b['rss_before_mib'], na, nb):.2f}, "  # noqa: E501
            f"RSS with watches {exponent(a['rss_watches_mib'], b['rss_watches_mib'], na, nb):.2f}.",
        ]
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--scales", type=int, nargs="+", default=[10_000, 50_000])
    parser.add_argument("--write-docs", action="store_true")
    parser.add_argument(
        "--include",
        type=Path,
        help="a file of JSON lines this script printed before (one per scale), added to the "
        "table: for a scale measured in an earlier run",
    )
    parser.add_argument("--child", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")
    if args.child is not None:
        print(json.dumps(asyncio.run(measure(args.child))))
        return
    runs = []
    if args.include is not None:
        runs = [json.loads(line) for line in args.include.read_text().splitlines() if line]
    for n in args.scales:
        out = subprocess.run(
            [sys.executable, __file__, "--child", str(n)],
            check=True,
            stdout=subprocess.PIPE,
            text=True,
        )
        runs.append(json.loads(out.stdout.strip().splitlines()[-1]))
        print(json.dumps(runs[-1]), flush=True)
    runs.sort(key=lambda run: int(run["scale"]))
    command = f".venv/bin/python benchmarks/scale.py --scales {' '.join(map(str, args.scales))}"
    if args.include is not None:
        command += f"  # with --include {args.include.name}: " + ", ".join(
            f"{run['scale']:,}" for run in runs if run["scale"] not in args.scales
        )
    report(section(runs, command), HEADING, write_docs=args.write_docs)


if __name__ == "__main__":
    main()
