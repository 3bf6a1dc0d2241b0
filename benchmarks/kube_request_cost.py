"""What one Kubernetes API request costs interlock's client process: CPU per GET and per PATCH.

Every list, watch, status write and Lease renewal goes through one kubernetes-asyncio
``ApiClient`` (``interlock/kube/client.py``). This sends ``--requests`` GETs of one Service and
as many merge PATCHes of its annotations, one after another, to the embedded API server (in its
own process, over TLS with the kubeconfig's bearer token, as a controller reaches it), and
reports for each: the client process's CPU time per request (``getrusage(RUSAGE_SELF)``: every
thread of the process, so work handed to executor threads counts), the wall time per request,
and the threads the process had at the end. ``--warmup`` requests of each kind go first.

``--tree DIR`` also runs it from another checkout, rounds alternating (a before/after in one
sitting); each round is a fresh interpreter (``--child``). Figures: per round, then the median
and the spread over ``--rounds``. CPU time moves with the machine's load; compare the two trees
within one run.

    .venv/bin/python benchmarks/kube_request_cost.py [--requests 1000] [--warmup 50]
        [--rounds 3] [--tree DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import resource
import statistics
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench_report import child_json

KINDS = ("GET", "PATCH")
PATH = "/api/v1/namespaces/default/services/cost"
SERVICE = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "cost", "namespace": "default"},
    "spec": {"ports": [{"name": "http", "port": 80}]},
}


async def _child(kubeconfig: str, requests: int, warmup: int) -> dict[str, Any]:
    import interlock
    from interlock.kube.client import api_client
    from interlock.kube.transport import request_json

    figures: dict[str, Any] = {"interlock": os.path.dirname(interlock.__file__)}
    async with api_client(kubeconfig=kubeconfig, in_cluster=False) as api:
        for kind in KINDS:

            async def send(i: int, kind: str = kind) -> None:
                if kind == "GET":
                    await request_json(api, method="GET", path=PATH, what="get")
                else:
                    patch = {"metadata": {"annotations": {"bench": str(i)}}}
                    await request_json(
                        api,
                        method="PATCH",
                        path=PATH,
                        what="patch",
                        body=patch,
                        content_type="application/merge-patch+json",
                    )

            for i in range(warmup):
                await send(i)
            before, started = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            for i in range(requests):
                await send(i)
            after, ended = resource.getrusage(resource.RUSAGE_SELF), time.perf_counter()
            cpu = after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime
            figures[kind] = {
                "cpu_us": cpu / requests * 1e6,
                "wall_us": (ended - started) / requests * 1e6,
            }
    figures["threads"] = threading.active_count()
    figures["os_threads"] = len(os.listdir("/proc/self/task")) if os.path.isdir("/proc") else 0
    return figures


def _run_child(tree: str | None, kubeconfig: str, args: argparse.Namespace) -> dict[str, Any]:
    argv = ["--child", kubeconfig, "--requests", str(args.requests), "--warmup", str(args.warmup)]
    return child_json(__file__, argv, tree)


async def _main(args: argparse.Namespace) -> int:
    from api_servers import EmbeddedServer

    trees: list[tuple[str, str | None]] = [("this checkout", None)]
    if args.tree:
        trees.append((args.tree, args.tree))
    results: dict[str, list[dict[str, Any]]] = {name: [] for name, _ in trees}
    with tempfile.TemporaryDirectory(prefix="interlock-bench-kube-") as tmp:
        server = await EmbeddedServer.start([SERVICE], Path(tmp))
        try:
            for round_ in range(args.rounds):
                order = trees if round_ % 2 == 0 else list(reversed(trees))
                for name, tree in order:
                    figures = await asyncio.to_thread(
                        _run_child, tree, str(server.kubeconfig), args
                    )
                    results[name].append(figures)
                    print(
                        f"round {round_ + 1} {name} ({figures['interlock']}): "
                        + ", ".join(
                            f"{kind} {figures[kind]['cpu_us']:.0f} µs CPU "
                            f"{figures[kind]['wall_us']:.0f} µs wall"
                            for kind in KINDS
                        )
                        + f"; threads {figures['threads']} ({figures['os_threads']} in all)",
                        flush=True,
                    )
        finally:
            await server.stop()
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    print(
        f"\n{args.requests} requests of each kind per round, {args.rounds} rounds, load {load:.1f}"
    )
    print("| tree | request | CPU µs per request, median (spread) | wall µs, median (spread) |")
    print("|---|---|---:|---:|")
    for name, rounds in results.items():
        for kind in KINDS:
            cpu = [r[kind]["cpu_us"] for r in rounds]
            wall = [r[kind]["wall_us"] for r in rounds]
            print(
                f"| {name} | {kind} | {statistics.median(cpu):.0f} ({min(cpu):.0f} to "
                f"{max(cpu):.0f}) | {statistics.median(wall):.0f} ({min(wall):.0f} to "
                f"{max(wall):.0f}) |"
            )
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--requests", type=int, default=1000)
    parser.add_argument("--warmup", type=int, default=50)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", help="also run from this checkout, rounds alternating")
    parser.add_argument("--child", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        import uvloop

        figures = uvloop.run(_child(args.child, args.requests, args.warmup))
        print(json.dumps(figures))
        return 0
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    return asyncio.run(_main(args))


if __name__ == "__main__":
    raise SystemExit(main())
