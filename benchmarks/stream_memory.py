"""Where the memory of an open policy watch stream goes.

The figures and the RSS target they meet: ``docs/benchmarks.md``, "Outbound".

``benchmarks/outbound.py`` measures the controller with N open ``?watch=true`` streams; this
script isolates the streams. One controller (the same cluster as ``outbound.py``: N Services,
N HTTPRoutes, the embedded API server in a child process) first opens the N watches in process,
so their state (actors, policies) is already counted; then a child process opens N HTTP watch
streams on the same targets and holds them. The difference is the cost of the streams alone:

- RSS per stream (``/proc/self/status``), after a full collection;
- with ``--tracemalloc``, the Python allocations per stream grouped by where they were made
  (the figures of a run with tracemalloc on are not RSS figures: tracing costs memory too),
  and the objects per stream by type.

    .venv/bin/python benchmarks/stream_memory.py [--streams 10000] [--tracemalloc]
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import gc
import sys
import tempfile
import tracemalloc
from pathlib import Path

import aiohttp
from api_servers import EmbeddedServer
from bench_report import quiet_logs
from outbound import follower, idle, objects, rss_mib

from interlock.model.policy_watch import WatchTarget
from interlock.model.service import ServicePortKey


async def hold_streams(url: str, n: int) -> None:
    """Open ``n`` watch streams, read the first policy of each, say ``ready``, hold until EOF."""
    connector = aiohttp.TCPConnector(limit=0)
    timeout = aiohttp.ClientTimeout(total=None, sock_connect=60)
    first: asyncio.Queue[int] = asyncio.Queue()

    async def follow(session: aiohttp.ClientSession, i: int) -> None:
        target = f"{url}/v1/outbound/default/svc-{i}/80?watch=true"
        async with session.get(target) as response:
            assert response.status == 200, await response.text()
            async for _line in response.content:
                first.put_nowait(i)

    async with aiohttp.ClientSession(connector=connector, timeout=timeout) as session:
        tasks = [asyncio.create_task(follow(session, i)) for i in range(n)]
        seen: set[int] = set()
        while len(seen) < n:
            seen.add(await first.get())
        print("ready", flush=True)
        await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
        for task in tasks:
            task.cancel()


def type_counts() -> collections.Counter[str]:
    return collections.Counter(type(o).__qualname__ for o in gc.get_objects())


async def measure(n: int, *, trace: bool) -> None:
    with tempfile.TemporaryDirectory(prefix="interlock-streams-") as tmp:
        server = await EmbeddedServer.start(objects(n, real=False), Path(tmp))
        try:
            controller = follower(server)
            await controller.start()
            await controller.wait_ready(within=900)
            slots = [
                controller.watches.open_watch(
                    WatchTarget(ServicePortKey("default", f"svc-{i}", 80), "default")
                )
                for i in range(n)
            ]
            await idle(controller)
            assert all(slot.version >= 1 for slot in slots)
            gc.collect()
            rss_before = rss_mib()
            counts_before = collections.Counter[str]() if trace else type_counts()
            if trace:
                tracemalloc.start(12)
            before = tracemalloc.take_snapshot() if trace else None

            assert controller.policy_site is not None
            client = await asyncio.create_subprocess_exec(
                sys.executable,
                __file__,
                "--hold",
                controller.policy_site.url,
                str(n),
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
            )
            assert client.stdout is not None and client.stdin is not None
            line = await asyncio.wait_for(client.stdout.readline(), 900)
            if line.strip() != b"ready":
                raise RuntimeError(f"stream holder: expected 'ready', got {line!r}")
            await idle(controller)
            gc.collect()
            rss_after = rss_mib()
            print(f"streams: {n:,}")
            print(
                f"RSS with the watches: {rss_before:.0f} MiB; with the streams: {rss_after:.0f} MiB"
            )
            print(f"RSS per stream: {(rss_after - rss_before) * 1024 * 1024 / n:,.0f} B")
            if before is not None:
                report(before, tracemalloc.take_snapshot(), n)
            else:
                # Counted without tracemalloc: a snapshot's own traces are objects too.
                print_type_counts(counts_before, n)
            client.stdin.close()
            await client.wait()
            await controller.stop()
        finally:
            await server.stop()


def report(before: tracemalloc.Snapshot, after: tracemalloc.Snapshot, n: int) -> None:
    traced = sum(s.size_diff for s in after.compare_to(before, "filename"))
    overhead = tracemalloc.get_tracemalloc_memory()
    print(f"traced Python allocations per stream: {traced / n:,.0f} B")
    print(f"(tracemalloc's own memory: {overhead / 1024 / 1024:.0f} MiB, not counted above)")
    print("\nper stream, by file:")
    for stat in after.compare_to(before, "filename")[:12]:
        print(f"{stat.size_diff / n:8,.0f} B {stat.count_diff / n:6.2f} blk  {stat.traceback[0]}")
    ours = [tracemalloc.Filter(True, "*/interlock/*", all_frames=True)]
    print("\nper stream, allocated with interlock code on the stack:")
    for stat in after.filter_traces(ours).compare_to(before.filter_traces(ours), "lineno")[:10]:
        print(f"{stat.size_diff / n:8,.0f} B {stat.count_diff / n:6.2f} blk  {stat.traceback[0]}")
    print("\nper stream, by the line that allocated it (top 25):")
    for stat in after.compare_to(before, "lineno")[:25]:
        frame = stat.traceback[0]
        print(f"{stat.size_diff / n:8,.0f} B {stat.count_diff / n:6.2f} blk  {frame}")
    print("\nper stream, by traceback (top 8, innermost last):")
    for stat in after.compare_to(before, "traceback")[:8]:
        print(f"{stat.size_diff / n:8,.0f} B {stat.count_diff / n:6.2f} blk")
        for line in stat.traceback.format()[-8:]:
            print(f"    {line}")


def print_type_counts(counts_before: collections.Counter[str], n: int) -> None:
    counts = type_counts()
    counts.subtract(counts_before)
    print("\nobjects per stream, by type (gc-tracked, top 20):")
    for name, count in counts.most_common(20):
        print(f"{count / n:6.2f}  {name}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--tracemalloc", action="store_true")
    parser.add_argument("--hold", nargs=2, metavar=("URL", "N"), help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.hold:
        asyncio.run(hold_streams(args.hold[0], int(args.hold[1])))
        return
    quiet_logs()
    asyncio.run(measure(args.streams, trace=args.tracemalloc))


if __name__ == "__main__":
    main()
