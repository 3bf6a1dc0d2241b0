"""System calls per proxied request: the edge against nginx, counted by ``strace -c``.

Why this exists: under ``benchmarks/edge.py``'s load the edge spent about as much CPU in the
kernel per request as nginx spent in all, and whether that came from more system calls, or
from dearer ones, had not been counted. This starts what ``edge.py`` starts — nginx answering
a fixed body as the backend (``start_backend``), the edge (``edge.py --child edge``, from this
checkout or from each ``--tree``), nginx in front of the same backend (``NGINX_CONF``, one
worker) — drives each with ``wrk -t1 -c N`` for ``--seconds`` while ``strace -c -f -p`` is
attached to the proxy's process (nginx's worker), and prints each system call's count divided
by the requests ``wrk`` completed. strace slows the traced process several times over, so the
requests per second it reports are not the proxy's; the counts per request are what to read.
``--post`` counts a POST with a 15-byte form body too (``wrk -s``). ``--cpu`` also reads,
without strace, rounds taking the targets in turn: the proxy's user and system CPU per request
(``/proc/PID/stat``), its CPU's irq + softirq time (``/proc/stat``) and the inter-processor
interrupts the load's CPU received (``/proc/interrupts``, function-call + rescheduling: a
process asleep there woken from the proxy's CPU). ``--wake`` measures only what waking costs:
the system time of a one-byte loopback ``send`` from the proxy's CPU to a reader on the load's
that sleeps in ``epoll`` between sends, against one that polls without sleeping. Pinned as
``edge.py`` pins: the proxy on CPU 1, ``wrk`` and the backend on CPU 0.

    .venv/bin/python benchmarks/edge_syscalls.py [--seconds 5] [--connections 32] [--post]
        [--cpu] [--rounds 3] [--tree DIR ...]
    .venv/bin/python benchmarks/edge_syscalls.py --wake [--rounds 3]

Needs ``strace``, ``wrk`` and nginx.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from bench_report import tree_env
from edge import (
    AUTHORIZATION,
    HOST,
    NGINX,
    NGINX_CONF,
    ROOT,
    Seats,
    Target,
    free_port,
    plan_seats,
    start_backend,
    stop_processes,
    wait_answering,
)

POST_SCRIPT = """wrk.method = "POST"
wrk.body = "hello=world&x=1"
wrk.headers["Content-Type"] = "application/x-www-form-urlencoded"
"""

_ROW = re.compile(r"^\s*[\d.]+\s+[\d.]+\s+\d+\s+(\d+)\s+(?:\d+\s+)?(\w+)\s*$")


def parse_strace_summary(text: str) -> dict[str, int]:
    """Calls by system call name from ``strace -c``'s table (its ``total`` row left out)."""
    calls: dict[str, int] = {}
    for line in text.splitlines():
        found = _ROW.match(line)
        if found and found.group(2) != "total":
            calls[found.group(2)] = int(found.group(1))
    return calls


def run_wrk(port: int, *, seconds: int, connections: int, seats: Seats, post: Path | None) -> int:
    """``wrk`` against ``port`` (``post``: its Lua script); the requests it completed."""
    done = subprocess.run(
        [
            *seats.prefix(seats.load),
            "wrk",
            "-t1",
            f"-c{connections}",
            f"-d{seconds}s",
            "-H",
            f"Host: {HOST}",
            "-H",
            f"Authorization: {AUTHORIZATION}",
            *(["-s", str(post)] if post is not None else []),
            f"http://127.0.0.1:{port}/",
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    return int(re.search(r"(\d+) requests in", done).group(1))  # type: ignore[union-attr]


def count(
    pid: int,
    port: int,
    *,
    seconds: int,
    connections: int,
    seats: Seats,
    post: Path | None,
    folder: Path,
) -> tuple[int, dict[str, int]]:
    """Requests ``wrk`` completed against ``port``, and the system calls ``pid`` made meanwhile."""
    out = folder / f"strace-{pid}-{port}-{time.monotonic_ns()}.txt"
    tracer = subprocess.Popen(
        ["strace", "-c", "-f", "-p", str(pid), "-o", str(out)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    time.sleep(1.0)  # attached to every thread before the load starts
    try:
        requests = run_wrk(port, seconds=seconds, connections=connections, seats=seats, post=post)
    finally:
        tracer.send_signal(signal.SIGINT)
        tracer.wait(timeout=60)
    return requests, parse_strace_summary(out.read_text())


TICKS = os.sysconf("SC_CLK_TCK")


def _kernel_snapshot(pid: int, proxy_cpu: int, load_cpu: int) -> tuple[int, int, int, int]:
    """The process's user and system ticks, the proxy CPU's irq + softirq ticks, and the
    function-call + rescheduling interrupts (IPIs) the load CPU received."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    irq = 0
    for line in Path("/proc/stat").read_text().splitlines():
        if line.startswith(f"cpu{proxy_cpu} "):
            values = [int(v) for v in line.split()[1:]]
            irq = values[5] + values[6]
    ipis = 0
    for line in Path("/proc/interrupts").read_text().splitlines():
        parts = line.split()
        if parts and parts[0] in ("CAL:", "RES:"):
            ipis += int(parts[1 + load_cpu])
    return int(fields[11]), int(fields[12]), irq, ipis


def cpu_per_request(
    pid: int, port: int, *, seconds: int, connections: int, seats: Seats, post: Path | None
) -> str:
    """Without strace: the process's user and system CPU per request, the proxy CPU's irq and
    softirq time per request, and the IPIs the load CPU received per request."""
    proxy_cpu, load_cpu = (seats.proxy or (0,))[0], (seats.load or (0,))[0]
    before = _kernel_snapshot(pid, proxy_cpu, load_cpu)
    requests = run_wrk(port, seconds=seconds, connections=connections, seats=seats, post=post)
    after = _kernel_snapshot(pid, proxy_cpu, load_cpu)
    user, system, irq, ipis = (b - a for a, b in zip(before, after, strict=True))
    per = 1e6 / TICKS / requests
    return (
        f"{requests / seconds:,.0f} req/s; per request {(user + system) * per:.1f} µs CPU "
        f"({user * per:.1f} user, {system * per:.1f} system), CPU {proxy_cpu} irq + softirq "
        f"{irq * per:.1f} µs, IPIs to CPU {load_cpu} {ipis / requests:.2f}"
    )


def wake_cost(*, sleeping: bool, sends: int = 20_000, gap: float = 60e-6) -> float:
    """The sender's system time per loopback ``send`` of one byte (µs), ``gap`` seconds apart,
    to a reader on the load's CPU that sleeps in ``epoll`` between them (``sleeping``: each
    send wakes it) or polls without sleeping (nothing to wake)."""
    allowed = os.sched_getaffinity(0)
    seats = plan_seats(sorted(allowed), pin=True)
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(1)
    reader = os.fork()
    if reader == 0:  # pragma: no cover - the child
        if seats.load:
            os.sched_setaffinity(0, set(seats.load))
        conn = socket.create_connection(listener.getsockname())
        conn.setblocking(False)
        poll = select.epoll()
        poll.register(conn.fileno(), select.EPOLLIN)
        got = 0
        while got < sends:
            if sleeping:
                poll.poll()
            with contextlib.suppress(BlockingIOError):
                got += len(conn.recv(65536))
        os._exit(0)
    if seats.proxy:
        os.sched_setaffinity(0, set(seats.proxy))
    conn, _ = listener.accept()
    conn.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    time.sleep(0.2)
    before = resource.getrusage(resource.RUSAGE_SELF).ru_stime
    for _ in range(sends):
        conn.send(b"x")
        until = time.perf_counter() + gap
        while time.perf_counter() < until:
            pass
    spent = resource.getrusage(resource.RUSAGE_SELF).ru_stime - before
    os.waitpid(reader, 0)
    conn.close()
    listener.close()
    os.sched_setaffinity(0, allowed)
    return spent / sends * 1e6


def render(rows: dict[str, tuple[int, dict[str, int]]]) -> str:
    """A table: each system call made at least once every hundred requests by some target,
    per request, one column a target; the total of all calls last."""
    names = sorted(
        {
            name
            for requests, calls in rows.values()
            for name, n in calls.items()
            if n >= requests / 100
        },
        key=lambda name: -max(calls.get(name, 0) / requests for requests, calls in rows.values()),
    )
    lines = [
        "| system call | " + " | ".join(rows) + " |",
        "|---|" + "---:|" * len(rows),
    ]
    for name in names:
        cells = [f"{calls.get(name, 0) / requests:.2f}" for requests, calls in rows.values()]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    totals = [f"**{sum(calls.values()) / requests:.2f}**" for requests, calls in rows.values()]
    lines.append("| all | " + " | ".join(totals) + " |")
    lines.append("| requests counted | " + " | ".join(str(r) for r, _ in rows.values()) + " |")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=int, default=5)
    parser.add_argument("--connections", type=int, default=32)
    parser.add_argument("--post", action="store_true", help="count a POST with a body too")
    parser.add_argument(
        "--cpu",
        action="store_true",
        help="also each target's CPU per request without strace, from /proc (--rounds rounds)",
    )
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--wake",
        action="store_true",
        help="only what waking a sleeping reader costs a loopback send (--rounds pairs)",
    )
    parser.add_argument(
        "--tree", action="append", default=[], help="run the edge from this checkout (repeatable)"
    )
    args = parser.parse_args()
    if args.wake:
        for round_ in range(args.rounds):
            asleep, polling = wake_cost(sleeping=True), wake_cost(sleeping=False)
            print(
                f"round {round_ + 1}: a send's system time, reader asleep {asleep:.2f} µs, "
                f"reader polling {polling:.2f} µs",
                flush=True,
            )
        print(f"load average {os.getloadavg()[0]:.2f}")
        return 0
    for tool in ("strace", "wrk"):
        if shutil.which(tool) is None:
            raise SystemExit(f"benchmarks/edge_syscalls.py needs {tool}")
    seats = plan_seats(sorted(os.sched_getaffinity(0)), pin=True)
    print(seats.describe(), flush=True)
    load_before = os.getloadavg()
    prefix = Path(tempfile.mkdtemp(prefix="interlock-bench-syscalls-"))
    post = prefix / "post.lua"
    post.write_text(POST_SCRIPT)
    processes: list[subprocess.Popen[bytes]] = []
    try:
        backend_port = free_port()
        backend = start_backend(str(prefix), backend_port, seats.prefix(seats.backend))
        processes.append(backend)
        wait_answering(Target("backend", backend_port), backend, timeout=30)
        targets: list[tuple[str, int, int]] = []
        for tree in args.tree or [str(ROOT)]:
            port = free_port()
            env = tree_env(tree)
            argv = [sys.executable, str(ROOT / "benchmarks" / "edge.py"), "--child", "edge"]
            argv += ["--port", str(port), "--backend-port", str(backend_port)]
            edge = subprocess.Popen([*seats.prefix(seats.proxy), *argv], env=env, cwd=tree)
            processes.append(edge)
            wait_answering(Target("edge", port), edge, timeout=120)
            label = "edge" if not args.tree else f"edge ({Path(tree).name})"
            targets.append((label, edge.pid, port))
        port = free_port()
        config = prefix / "nginx.conf"
        config.write_text(
            NGINX_CONF.format(
                prefix=prefix,
                workers=1,
                port=port,
                reuseport="",
                host=HOST,
                backend_port=backend_port,
            )
        )
        nginx = subprocess.Popen(
            [
                *seats.prefix(seats.proxy),
                NGINX,
                "-p",
                str(prefix),
                "-c",
                str(config),
                "-g",
                "daemon off;",
            ],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        processes.append(nginx)
        wait_answering(Target("nginx", port), nginx, timeout=30)
        workers = subprocess.run(
            ["pgrep", "-P", str(nginx.pid)], capture_output=True, text=True, check=True
        ).stdout.split()
        targets.append(("nginx", int(workers[0]), port))
        for method, script in [("GET", None), *([("POST", post)] if args.post else [])]:
            rows = {
                label: count(
                    pid,
                    port,
                    seconds=args.seconds,
                    connections=args.connections,
                    seats=seats,
                    post=script,
                    folder=prefix,
                )
                for label, pid, port in targets
            }
            print(f"\n{method}, wrk -t1 -c{args.connections} -d{args.seconds}s, per request:")
            print(render(rows), flush=True)
            if args.cpu:
                print(f"\n{method}, without strace, {args.rounds} rounds in turn:")
                for round_ in range(args.rounds):
                    for label, pid, port in targets:
                        reading = cpu_per_request(
                            pid,
                            port,
                            seconds=args.seconds,
                            connections=args.connections,
                            seats=seats,
                            post=script,
                        )
                        print(f"- round {round_ + 1}, {label}: {reading}", flush=True)
    finally:
        stop_processes(processes, within=30)
        shutil.rmtree(prefix, ignore_errors=True)
    print(f"\nload average before {load_before[0]:.2f}, after {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
