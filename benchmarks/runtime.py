"""Figures for the actor runtime, measured in one run on one machine.

Why ratios: the machine is shared and timings drift, so each figure that has a baseline is
measured next to it in the same run, as medians over repeats. The script prints the figures;
with ``--write-docs`` it rewrites only the ``## Runtime`` section of ``docs/benchmarks.md``
(other sections belong to other benchmarks), so a plain run leaves the working tree clean.

    .venv/bin/python benchmarks/runtime.py [--quick] [--instructions] [--write-docs]

``--instructions`` also counts the instructions each hand-off costs under
``valgrind --tool=callgrind``: CPU time on a machine shared by several engineers drifts from one
repeat to the next, instruction counts do not (the same program, the same hash seed, the same
count). Each contestant runs in a child process under callgrind twice, with N and with 3N
messages; the difference divided by 2N is its cost per message, with interpreter start-up,
imports and the actor system's set-up and shutdown cancelled out.
"""

from __future__ import annotations

import argparse
import asyncio
import gc
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Awaitable, Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from bench_report import write_section

from interlock.mailbox import Actor, ActorSystem, MailboxConfig, Published, Tracer

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"
COMMAND = ".venv/bin/python benchmarks/runtime.py"
# CPU time of this process, not wall time: other engineers' load on the shared machine would
# otherwise be counted against whichever contestant it happened to hit.
_clock = time.process_time
CHUNK = 100  # producers yield to the loop after every CHUNK sends, for both contestants


class Counter(Actor):
    """Counts messages and resolves ``done`` at ``expected``."""

    __slots__ = ("count", "done", "expected")

    def __init__(self, expected: int, done: asyncio.Future[None]) -> None:
        self.count = 0
        self.expected = expected
        self.done = done

    async def receive(self, message: object) -> None:
        self.count += 1
        if self.count == self.expected:
            self.done.set_result(None)


class Echo(Actor):
    __slots__ = ()

    async def receive(self, message: object) -> object:
        return message


class Idle(Actor):
    """An actor with no state of its own: what remains is the runtime's cost."""

    __slots__ = ()

    async def receive(self, message: object) -> None:
        return None


class FanOutCounter(Actor):
    """Counts notifications in a list shared by all subscribers; the last one resolves done."""

    __slots__ = ("done", "expected", "shared")

    def __init__(self, shared: list[int], expected: int, done: asyncio.Future[None]) -> None:
        self.shared = shared
        self.expected = expected
        self.done = done

    async def receive(self, message: object) -> None:
        if isinstance(message, Published):
            self.shared[0] += 1
            if self.shared[0] == self.expected:
                self.done.set_result(None)


async def bare_queue(n: int) -> float:
    queue: asyncio.Queue[int] = asyncio.Queue()
    count = 0

    async def consume() -> None:
        nonlocal count
        for _ in range(n):
            await queue.get()
            count += 1

    consumer = asyncio.get_running_loop().create_task(consume())
    start = _clock()
    for i in range(n):
        queue.put_nowait(i)
        if i % CHUNK == CHUNK - 1:
            await asyncio.sleep(0)
    await consumer
    return _clock() - start


class Producer(Actor):
    """Sends ``n`` messages to ``sink`` from its handler, yielding like the bare producer."""

    __slots__ = ()

    async def receive(self, message: object) -> None:
        assert isinstance(message, int)
        tell = self.system.tell
        for i in range(message):
            tell("sink", i)
            if i % CHUNK == CHUNK - 1:
                await asyncio.sleep(0)


async def _until_done(
    system: ActorSystem, send: Callable[[], None], done: asyncio.Future[None]
) -> float:
    """Seconds from ``send()`` until ``done`` is resolved; ``system`` is shut down after."""
    start = _clock()
    send()
    await done
    elapsed = _clock() - start
    await system.shutdown()
    return elapsed


async def runtime_tell(n: int, tracer: Tracer | None = None) -> float:
    system = ActorSystem(tracer=tracer)
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    system.spawn("sink", lambda: Counter(n, done), mailbox=MailboxConfig(capacity=n))
    system.spawn("producer", Producer)
    return await _until_done(system, lambda: system.tell("producer", n), done)


async def fan_out(subscribers: int) -> float:
    system = ActorSystem()
    shared = [0]
    done: asyncio.Future[None] = asyncio.get_running_loop().create_future()
    for n in range(subscribers):
        address = system.spawn(f"sub/{n}", lambda: FanOutCounter(shared, subscribers, done))
        system.subscribe("topic", address)
    await asyncio.sleep(0)
    return await _until_done(system, lambda: system.publish("topic", "key", "value"), done)


async def ask_round_trip(n: int) -> float:
    system = ActorSystem()
    system.spawn("echo", Echo)
    ask = system.ask
    start = _clock()
    for i in range(n):
        await ask("echo", i)
    elapsed = _clock() - start
    await system.shutdown()
    return elapsed / n


async def spawn_many(n: int) -> float:
    system = ActorSystem()
    addresses = [f"route/default/r{i}" for i in range(n)]
    gc.collect()
    start = _clock()
    for address in addresses:
        system.spawn(address, Idle)
    elapsed = _clock() - start
    await system.shutdown()
    return elapsed


async def idle_memory(n: int) -> tuple[float, float]:
    """Bytes per idle actor: (runtime only, including the address string)."""
    addresses = [f"route/default/r{i}" for i in range(n)]
    address_bytes = sum(sys.getsizeof(a) for a in addresses)
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    system = ActorSystem()
    for address in addresses:
        system.spawn(address, Idle)
    gc.collect()
    after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    per_actor = (after - before) / n
    await system.shutdown()
    return per_actor, per_actor + address_bytes / n


def rss_bytes() -> int:
    with open("/proc/self/statm") as statm:
        return int(statm.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


async def idle_rss(n: int) -> float:
    addresses = [f"route/default/r{i}" for i in range(n)]
    gc.collect()
    before = rss_bytes()
    system = ActorSystem()
    for address in addresses:
        system.spawn(address, Idle)
    after = rss_bytes()
    await system.shutdown()
    return (after - before) / n


def median_of(repeats: int, run: Callable[[], Awaitable[float]]) -> float:
    return statistics.median(asyncio.run(run_repeats(repeats, run)))


async def run_repeats(repeats: int, run: Callable[[], Awaitable[float]]) -> list[float]:
    return [await run() for _ in range(repeats)]


def machine() -> str:
    cpu = platform.processor() or "unknown CPU"
    try:
        with open("/proc/cpuinfo") as info:
            for line in info:
                if line.startswith("model name"):
                    cpu = line.split(":", 1)[1].strip()
                    break
    except OSError:
        pass
    return (
        f"{cpu}, {os.cpu_count()} logical CPUs, {platform.system()} {platform.release()}, "
        f"CPython {platform.python_version()}"
    )


CONTESTS: dict[str, Callable[[int, Path], Awaitable[float]]] = {
    "bare": lambda n, tmp: bare_queue(n),
    "tell": lambda n, tmp: runtime_tell(n),
    "traced": lambda n, tmp: traced_tell(n, tmp),
}


async def traced_tell(n: int, tmp: Path) -> float:
    tracer = Tracer.to_file(tmp / "trace.jsonl")
    try:
        return await runtime_tell(n, tracer)
    finally:
        tracer.close()


def run_contest(name: str, n: int) -> None:
    """The ``--contest`` child: one run of one contestant (what callgrind counts)."""
    with tempfile.TemporaryDirectory() as tmp:
        asyncio.run(CONTESTS[name](n, Path(tmp)))


def count_instructions(name: str, n: int) -> int:
    """Instructions callgrind counts for a child process running contestant ``name`` once."""
    with tempfile.TemporaryDirectory() as tmp:
        out = subprocess.run(
            [
                "valgrind",
                "--tool=callgrind",
                f"--callgrind-out-file={tmp}/callgrind.out",
                sys.executable,
                __file__,
                "--contest",
                name,
                "--messages",
                str(n),
            ],
            capture_output=True,
            text=True,
            check=True,
            env={**os.environ, "PYTHONHASHSEED": "0"},
        )
    found = re.search(r"Collected : (\d+)", out.stderr)
    if found is None:
        raise RuntimeError(f"callgrind gave no instruction count for {name}: {out.stderr[-500:]}")
    return int(found.group(1))


@dataclass(frozen=True)
class InstructionFigures:
    n: int
    repeats: int
    bare: list[float]
    tell: list[float]
    traced: list[float]

    @property
    def ratios(self) -> list[float]:
        """Bare-queue instructions over ``tell`` instructions, per repeat (higher is better)."""
        return [b / t for b, t in zip(self.bare, self.tell, strict=True)]

    @property
    def tracing(self) -> list[float]:
        """Instructions tracing adds per message, per repeat."""
        return [t - u for t, u in zip(self.traced, self.tell, strict=True)]


def measure_instructions(n: int, repeats: int) -> InstructionFigures:
    # Two children at a time: callgrind runs a program some 50 times slower, and the counts do
    # not depend on what else runs.
    runs = [(name, size) for _ in range(repeats) for name in CONTESTS for size in (n, 3 * n)]
    with ThreadPoolExecutor(max_workers=2) as pool:
        counts = list(pool.map(lambda run: count_instructions(*run), runs))
    figures: dict[str, list[float]] = {name: [] for name in CONTESTS}
    for (name, size), count, larger in zip(runs[::2], counts[::2], counts[1::2], strict=True):
        figures[name].append((larger - count) / (2 * size))
    for name, values in figures.items():
        print(f"  callgrind {name}: {', '.join(f'{v:,.0f}' for v in values)} instr/message")
    return InstructionFigures(n, repeats, figures["bare"], figures["tell"], figures["traced"])


def spread(values: list[float], fmt: str) -> str:
    return f"{format(min(values), fmt)} to {format(max(values), fmt)}"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer messages and repeats")
    parser.add_argument(
        "--instructions",
        action="store_true",
        help="also count instructions per message under valgrind --tool=callgrind",
    )
    parser.add_argument("--contest", choices=sorted(CONTESTS), help=argparse.SUPPRESS)
    parser.add_argument(
        "--instruction-messages",
        type=int,
        default=5_000,
        help="N of the callgrind runs (each contestant runs with N and 3N messages)",
    )
    parser.add_argument("--instruction-repeats", type=int, default=2)
    parser.add_argument("--messages", type=int, default=20_000, help=argparse.SUPPRESS)
    parser.add_argument(
        "--write-docs",
        action="store_true",
        help="rewrite the Runtime section of docs/benchmarks.md",
    )
    args = parser.parse_args()
    if args.contest:
        run_contest(args.contest, args.messages)
        return
    if args.instructions and not shutil.which("valgrind"):
        parser.error("--instructions needs valgrind (apt-get install valgrind)")
    repeats = 3 if args.quick else 7
    n = 50_000 if args.quick else 200_000
    actors = 20_000 if args.quick else 100_000

    # First, while the heap is fresh: later runs leave freed arenas that hide RSS growth.
    rss_per_actor = asyncio.run(idle_rss(actors))

    # Interleave the contestants so drift on a shared machine hits both alike, and compare
    # within each repeat (paired), taking the median of the per-repeat figures.
    bare_times: list[float] = []
    ours_times: list[float] = []
    traced_times: list[float] = []
    with tempfile.TemporaryDirectory() as tmp:
        for repeat in range(repeats):
            bare_times.append(asyncio.run(bare_queue(n)))
            ours_times.append(asyncio.run(runtime_tell(n)))
            tracer = Tracer.to_file(Path(tmp) / f"trace-{repeat}.jsonl")
            traced_times.append(asyncio.run(runtime_tell(n, tracer)))
            tracer.close()
    bare = statistics.median(bare_times)
    ours = statistics.median(ours_times)
    traced = statistics.median(traced_times)
    ratios = [b / o for b, o in zip(bare_times, ours_times, strict=True)]
    ratio = statistics.median(ratios)
    tracing = [(t - o) / n * 1e6 for t, o in zip(traced_times, ours_times, strict=True)]
    tracing_us = statistics.median(tracing)

    fan_out_s = median_of(repeats, lambda: fan_out(10_000))
    ask_us = median_of(repeats, lambda: ask_round_trip(n // 10)) * 1e6
    spawn_s = median_of(repeats, lambda: spawn_many(actors))
    runtime_bytes, with_address_bytes = asyncio.run(idle_memory(actors))
    counted = (
        measure_instructions(args.instruction_messages, args.instruction_repeats)
        if args.instructions
        else None
    )

    rows = [
        ("bare asyncio.Queue, one producer to one consumer", f"{n / bare:,.0f} msg/s", ""),
        (
            "runtime `tell`, one actor to one actor, tracing off",
            f"{n / ours:,.0f} msg/s",
            f"{ratio:.0%} of the bare queue (target ≥ 60%; repeats "
            f"{min(ratios):.0%} to {max(ratios):.0%})",
        ),
        (
            "runtime `tell` with tracing to a file",
            f"{n / traced:,.0f} msg/s",
            f"{tracing_us:.2f} µs more per message (target ≤ 5 µs; repeats "
            f"{min(tracing):.2f} to {max(tracing):.2f})",
        ),
        (
            "one `publish` fanned out to 10,000 subscribers, all handled",
            f"{fan_out_s * 1e3:.1f} ms",
            f"{fan_out_s / 10_000 * 1e6:.2f} µs per subscriber",
        ),
        ("`ask` round trip (sequential)", f"{ask_us:.1f} µs", ""),
        (
            f"spawn {actors:,} actors",
            f"{spawn_s:.3f} s",
            f"{spawn_s / actors * 1e6:.2f} µs each (target ≤ 1 s for 100k)",
        ),
        (
            "memory per idle actor (tracemalloc)",
            f"{runtime_bytes:.0f} B",
            f"{with_address_bytes:.0f} B with its address string (target ≤ 1 KiB)",
        ),
        ("RSS growth per idle actor", f"{rss_per_actor:.0f} B", ""),
    ]
    if counted is not None:
        # Tracing in µs from its instructions, at the rate the untraced run executed them.
        seconds_per_instruction = ours / n / statistics.median(counted.tell)
        rows[1:3] = [
            rows[1],
            (
                "… by instruction count (callgrind)",
                f"{statistics.median(counted.tell):,.0f} instr/msg",
                f"{statistics.median(counted.ratios):.0%} of the bare queue's "
                f"{statistics.median(counted.bare):,.0f} (target ≥ 60%; repeats "
                f"{spread(counted.ratios, '.0%')})",
            ),
            rows[2],
            (
                "… tracing by instruction count (callgrind)",
                f"{statistics.median(counted.tracing):,.0f} instr/msg",
                f"≈ {statistics.median(counted.tracing) * seconds_per_instruction * 1e6:.2f} µs "
                f"at the untraced run's instructions per second (repeats "
                f"{spread(counted.tracing, ',.0f')})",
            ),
        ]
    width = max(len(r[0]) for r in rows)
    for name, value, note in rows:
        print(f"{name:<{width}}  {value:>16}  {note}")

    if not args.write_docs:
        return
    table = "\n".join(
        ["| measurement | result | note |", "|---|---|---|"]
        + [f"| {name} | {value} | {note} |" for name, value, note in rows]
    )
    section = f"""## Runtime

Command: `{COMMAND}{" --quick" if args.quick else ""}{" --instructions" if counted else ""}`
(medians of {repeats} repeats, all in one run; {n:,} messages per throughput run; producers
yield to the event loop every {CHUNK:,} sends). Times are CPU time of the benchmark process
(`time.process_time`), so load from other processes on the shared machine does not count.
{instructions_note(counted)}

Machine: {machine()}. Measured {time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime())}.

{table}

How to read it: the bare queue is the floor of any asyncio hand-off (no envelope, no
routing, no statistics). The runtime pays for an envelope (ids, correlation, causation,
enqueue time), the address lookup, per-actor and per-kind counters, and the hand-over to a
shared worker task (an actor owns no task; see `interlock/mailbox/workers.py`). Tracing cost
is the difference between the traced and the untraced run of the same workload, paired per
repeat (two JSON records per message: `deliver` and `handled`). Idle-actor memory is what
100k spawns add to the heap divided by 100k, for an actor class with no state of its own
(`__slots__ = ()`).

Where the rest goes (callgrind, CPython 3.11): of `tell`'s instructions per message, the
bare queue's own work (a put, a get, the consumer's wake-up) is about 60%; the rest is the
envelope (about 1,400 instructions: an object with nine fields, no Python `__init__`), setting
the handled envelope in a contextvar (about 800: it allocates a token and a new context map),
two clock reads (statistics' `last_message_at` and the handling-time histogram, about 400
each) and the counters. Tracing is two JSON records per message (`deliver` and `handled`):
formatting them (timestamp, the envelope's fields escaped once per envelope, the summary) and
the buffered text write are what it costs. Of its ~28,500 instructions per message
(callgrind, each C function's own cost), the interpreter's loop running the tracer's bytecode
is about 8,400, the f-strings' joins about 2,900, allocating and freeing about 2,500, JSON
string escaping about 1,500, the handled record's `duration_ms` (a float with a `.3f` spec)
about 1,400, integers to decimal text (ids, depths, the timestamp's microseconds) about 1,300
and `time.time_ns` with its `divmod` about 850; the rest is spread over many small functions.
`deliver` renders the envelope's fields without first asking the envelope for them: that
lookup raised an AttributeError on every new envelope, whose message CPython formats — about
5,300 instructions per message. The estimate in µs converts instructions at the rate the
untraced run executed them (the table says whether that meets 5 µs).
"""
    write_section(section, "## Runtime")
    print(f"wrote the Runtime section of {DOC}")


def instructions_note(counted: InstructionFigures | None) -> str:
    if counted is None:
        return ""
    return f"""Instruction counts (rows "by instruction count"): `valgrind --tool=callgrind`, each
contestant in a child process run with {counted.n:,} and with {3 * counted.n:,} messages, the
difference divided by {2 * counted.n:,} (start-up, imports, set-up and shutdown cancel out),
`PYTHONHASHSEED=0`, {counted.repeats} repeats. They do not move with the machine's load; a
ratio of instruction counts is not a ratio of times (cache misses and branch mispredictions
are not counted), which is why both are shown.
"""


if __name__ == "__main__":
    main()
