"""What one EndpointSlice change costs the controller with edge workers, by Services followed.

With ``--edge-workers N`` (or ``--edge-push-upstreams``) every EndpointSlice or policy change
goes through the upstream cache (``UpstreamCache._recompute``: the Service's address rows) and
the table pusher (``UpstreamPusher.flush``: what changed, sent to each worker), and tests ask
``UpstreamPusher.in_sync``. Each used to cost O(Services followed): the cache scanned every
address row, the pusher rebuilt the whole table and compared it with the last one sent. This
times the three per change, at each ``--services`` count, in the controller's process with the
real cache and pusher over tables filled directly (each Service one port, two ready addresses,
its default policy) and one worker that takes every push (no HTTP: the controller's part only).

``--tree DIR`` also runs it from another checkout, rounds alternating (the before/after of a
change in one sitting); each run is a fresh interpreter (``--child``), which prints where its
``interlock`` came from. Figures: the median over ``--changes`` changes per round, then the
median over rounds.

    .venv/bin/python benchmarks/upstream_tables.py [--services 100 10000] [--changes 200]
        [--rounds 3] [--tree DIR]
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from bench_report import child_json

STEPS = ("cache", "push", "in_sync")
"""Timed per change: the cache's recompute, the push to the worker, and in_sync after it."""


@dataclass
class _Index:
    """The edge index as the pusher reads it (its tables, filled directly)."""

    tables: Any
    tracked: set[Any] = field(default_factory=set)
    ready_policies: dict[Any, Any] = field(default_factory=dict)
    listeners: list[Any] = field(default_factory=list)


class _Worker:
    """Takes every push, as a worker's admin API would (without the HTTP)."""

    async def push_upstreams(self, changes: Any, *, epoch: str | None = None) -> str:
        return "epoch"


def _slice(name: str, first: int) -> Any:
    from interlock.model.service import parse_endpoint_slice

    return parse_endpoint_slice(
        {
            "metadata": {
                "name": f"{name}-1",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": name},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": [f"10.0.{first}.{i}"]} for i in (1, 2)],
            "ports": [{"name": "http", "port": 8080}],
        }
    )


async def _measure(services: int, changes: int) -> dict[str, float]:
    import interlock
    from interlock.actors.topics import ENDPOINTS
    from interlock.actors.upstream_cache import UpstreamCache, UpstreamTables
    from interlock.controller.worker_upstreams import UpstreamPusher
    from interlock.mailbox import Published
    from interlock.model.meta import ObjectKey
    from interlock.model.outbound_policy import build_outbound_policy
    from interlock.model.service import ServicePortKey, parse_service, ready_addresses

    tables = UpstreamTables()
    index = _Index(tables=tables)
    keys = []
    for i in range(services):
        name = f"svc-{i}"
        key = ObjectKey(namespace="default", name=name)
        service = parse_service(
            {
                "metadata": {"name": name, "namespace": "default"},
                "spec": {"ports": [{"name": "http", "port": 80}]},
            }
        )
        slices = {f"{name}-1": _slice(name, 0)}
        tables.followers[key] = ("edge",)
        tables.known.add(key)
        tables.services[key] = service
        tables.slices[key] = slices
        tables.addresses[ServicePortKey("default", name, 80)] = ready_addresses(
            list(slices.values()), "http"
        )
        index.tracked.add(key)
        index.ready_policies[ServicePortKey("default", name, 80)] = build_outbound_policy(
            service, "default", name, 80, "default", ()
        )
        keys.append(key)
    cache = UpstreamCache(tables=tables)
    worker = _Worker()
    pusher = UpstreamPusher(index=index, clients=lambda: [worker])  # type: ignore[arg-type,list-item]
    await pusher.flush()  # the whole table, once
    timings: dict[str, list[float]] = {step: [] for step in STEPS}
    warmup = 10
    for change in range(changes + warmup):
        key = keys[(change * 7919) % services]
        moved = Published(ENDPOINTS.topic(key), f"{key.name}-1", _slice(key.name, change % 200 + 1))
        started = time.perf_counter()
        cache._take(moved)
        cached = time.perf_counter()
        await pusher.flush()
        pushed = time.perf_counter()
        assert pusher.in_sync()
        checked = time.perf_counter()
        if change >= warmup:
            timings["cache"].append(cached - started)
            timings["push"].append(pushed - cached)
            timings["in_sync"].append(checked - pushed)
    return {
        "interlock": str(Path(interlock.__file__).parent.parent),
        **{step: statistics.median(values) * 1e6 for step, values in timings.items()},
    }


def _run_child(tree: str | None, services: int, changes: int) -> dict[str, Any]:
    argv = ["--child", "--services", str(services), "--changes", str(changes)]
    return child_json(str(Path(__file__).resolve()), argv, tree)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--services", type=int, nargs="+", default=[100, 10_000])
    parser.add_argument("--changes", type=int, default=200)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--tree", default=None, help="also run from this checkout (before)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(asyncio.run(_measure(args.services[0], args.changes))))
        return
    tree = None if args.tree is None else str(Path(args.tree).resolve())
    trees: list[str | None] = [None] if tree is None else [tree, None]
    results: dict[tuple[str | None, int], list[dict[str, Any]]] = {}
    for round_ in range(args.rounds):
        order = trees if round_ % 2 == 0 else trees[::-1]
        for services in args.services:
            for tree in order:
                result = _run_child(tree, services, args.changes)
                results.setdefault((tree, services), []).append(result)
                print(
                    f"round {round_ + 1} {services:>6} Services  {result['interlock']}: "
                    + "  ".join(f"{step} {result[step]:.1f} µs" for step in STEPS),
                    flush=True,
                )
    print(f"\nmedian over {args.rounds} rounds of the median per change (µs):")
    print(f"| tree | Services | {' | '.join(STEPS)} |")
    print(f"|---|---:|{'---:|' * len(STEPS)}")
    for (tree, services), rounds in results.items():
        cells = " | ".join(f"{statistics.median(r[step] for r in rounds):.1f}" for step in STEPS)
        print(f"| {tree or 'this checkout'} | {services:,} | {cells} |")


if __name__ == "__main__":
    main()
