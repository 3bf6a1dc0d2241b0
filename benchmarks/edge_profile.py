"""Where one plain proxied request through the edge spends its time: instructions per request.

A wall-clock benchmark on a shared, loaded machine moves by tens of percent between runs; the
instructions the edge process executes per request do not. This runs the backend (plain aiohttp)
and the edge (empty module chain, as ``benchmarks/edge.py``'s "edge" row) in their own processes,
the edge under ``valgrind --tool=callgrind --instr-atstart=no``: once it listens, it is warmed up
with ``--warmup`` requests, callgrind's instrumentation is switched on (``callgrind_control -i
on``), N sequential keep-alive requests are sent, and it is switched off before the edge stops,
so start-up and shutdown are not counted and the figure is ``I(N) / N``. (Before issue 29 this
ran the edge twice, N and 3N requests, every instruction counted, and reported
``(I(3N) - I(N)) / 2N``: the same quantity, but two instrumented start-ups of a few billion
instructions each took over half an hour on this machine under load.)
``--profile`` instead runs the edge under cProfile and prints its top functions.
``--tree DIR`` runs the edge from another checkout (a before/after in the same run). The edge
runs on uvloop, as ``interlock edge`` does, unless ``INTERLOCK_NO_UVLOOP=true``. ``--modules``
profiles ``edge.py``'s "edge + modules" row instead (ipRestriction + basicAuth, cached + headers);
``--mesh`` its "mesh listener" row (an embedded controller's mesh listener, ``Host:
echo.default``: counted once the listener answers 200, after it learned the Service).
``--keep DIR`` keeps the callgrind file (DIR is created if missing); ``callgrind_annotate
--inclusive=no`` on it gives the instructions by function.

The backend is ``benchmarks/edge.py``'s own (nginx answering the same 92 bytes: ``--backend
nginx``, the default since 2026-12-04), so the figure is the request ``edge.py`` times. nginx
says ``Connection: keep-alive`` in every answer; the plain aiohttp backend used before
(``--backend aiohttp``) does not, and its answers took the edge's cheaper path (the head relayed
as received) where nginx's were rendered again: the figures before 2026-12-04 in
``docs/benchmarks.md`` are aiohttp's, and the request ``edge.py`` timed then cost 2.6 times as
many instructions (80,843 against 31,037 compiled, main at 695fa52).

    .venv/bin/python benchmarks/edge_profile.py [--requests 2000] [--warmup 200] [--tree DIR]
        [--keep DIR] [--profile] [--modules | --mesh] [--backend nginx|aiohttp]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import pstats
import re
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from edge import (
    AUTHORIZATION,
    HOST,
    MESH_HOST,
    free_port,
    run_edge_child,
    serve_backend,
    serve_edge,
    serve_mesh,
    start_backend,
)


def wait_port(port: int, deadline: float) -> None:
    while time.monotonic() < deadline:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"nothing listens on port {port}")


def receive(conn: socket.socket) -> bytes:
    """What the edge sent next; an error when it closed the connection instead (else the
    loop waiting for an answer would spin on empty reads for ever)."""
    data = conn.recv(65536)
    if not data:
        raise RuntimeError("the edge closed the connection before its answer was whole")
    return data


def drive(port: int, count: int, host: str = HOST) -> None:
    """``count`` GETs, one after another, on one keep-alive connection."""
    request = (
        f"GET /hello HTTP/1.1\r\nHost: {host}\r\nUser-Agent: bench\r\n"
        f"Authorization: {AUTHORIZATION}\r\n\r\n"
    ).encode()
    with socket.create_connection(("127.0.0.1", port)) as conn:
        buffered = b""
        for _ in range(count):
            conn.sendall(request)
            while b"\r\n\r\n" not in buffered:
                buffered += receive(conn)
            head, _, buffered = buffered.partition(b"\r\n\r\n")
            if not head.startswith(b"HTTP/1.1 200"):
                raise RuntimeError(f"unexpected answer: {head[:200]!r}")
            found = re.search(rb"(?i)\r\ncontent-length: *(\d+)", head)
            assert found is not None, head
            length = int(found.group(1))
            while len(buffered) < length:
                buffered += receive(conn)
            buffered = buffered[length:]


def wait_routed(port: int, deadline: float) -> None:
    """Until the mesh listener answers :data:`MESH_HOST` (it learns the Service after it
    listens)."""
    while True:
        try:
            drive(port, 1, MESH_HOST)
            return
        except (RuntimeError, OSError):
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)


def run_edge(
    backend_port: int,
    count: int,
    *,
    tree: str | None,
    wrapper: list[str],
    pyargs: list[str],
    modules: bool,
    warmup: int = 0,
    instrument: bool = False,
    mesh: bool = False,
) -> None:
    port = free_port()
    env = dict(os.environ)
    if tree:
        env["PYTHONPATH"] = tree
    edge = subprocess.Popen(
        [
            *wrapper,
            sys.executable,
            *pyargs,
            os.path.abspath(__file__),
            "--edge",
            str(port),
            str(backend_port),
            *(["--modules"] if modules else []),
            *(["--mesh"] if mesh else []),
        ],
        env=env,
        # From the tree's folder: ``-m cProfile`` (--profile) puts the working directory first
        # on sys.path, so from this checkout's it profiled this checkout's edge, not the tree's.
        cwd=tree,
    )
    try:
        wait_port(port, time.monotonic() + 900)
        host = HOST
        if mesh:
            host = MESH_HOST
            wait_routed(port, time.monotonic() + 900)
        if warmup:
            drive(port, warmup, host)
        if instrument:
            callgrind_control(edge.pid, "on")
        drive(port, count, host)
        if instrument:
            callgrind_control(edge.pid, "off")
    finally:
        edge.send_signal(signal.SIGTERM)
        edge.wait(timeout=900)


AREAS = (
    ("aiohttp", "/aiohttp/"),
    ("the HTTP/1.1 server", "interlock/dataplane/http1_server"),
    ("the upstream client", "interlock/dataplane/http1"),
    ("the edge's steps", "interlock/edge/"),
    ("the engine and the rest of the data plane", "interlock/dataplane/"),
    ("interlock, other", "interlock/"),
    ("multidict/yarl", "multidict"),
    ("asyncio", "/asyncio/"),
    ("loguru", "loguru"),
)


def area_of(filename: str) -> str:
    for name, marker in AREAS:
        if marker in filename or (name == "multidict/yarl" and "/yarl/" in filename):
            return name
    return "builtins and C calls (uvloop, httptools, str/bytes)" if filename == "~" else "other"


def print_split(stats: pstats.Stats) -> None:
    """Own time (tottime) by area: where a request's Python time goes."""
    totals: dict[str, float] = {}
    for (filename, _, _), row in stats.stats.items():  # type: ignore[attr-defined]
        totals[area_of(filename)] = totals.get(area_of(filename), 0.0) + row[2]
    whole = sum(totals.values()) or 1.0
    print("own time by area (cProfile; start-up included, so run with --requests 5000+):")
    for name, seconds in sorted(totals.items(), key=lambda item: -item[1]):
        print(f"  {100 * seconds / whole:5.1f}%  {name}")


def callgrind_control(pid: int, instrumentation: str) -> None:
    """Switch callgrind's instrumentation of process ``pid`` on or off (and wait for it)."""
    subprocess.run(
        ["callgrind_control", "-i", instrumentation, str(pid)],
        check=True,
        stdout=subprocess.DEVNULL,
        timeout=300,
    )


def callgrind_total(path: Path) -> int:
    # "totals": what was counted; "summary" is 0 when instrumentation started off.
    for line in path.read_text().splitlines():
        if line.startswith("totals:"):
            return int(line.split()[1])
    raise RuntimeError(f"{path}: no totals")


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=200, help="requests before counting")
    parser.add_argument("--tree", default=None, help="run the edge from this checkout")
    parser.add_argument("--profile", action="store_true", help="cProfile instead of callgrind")
    parser.add_argument("--keep", default=None, help="keep the callgrind files in this folder")
    parser.add_argument("--modules", action="store_true", help="the edge with modules")
    parser.add_argument("--mesh", action="store_true", help="the mesh listener instead")
    parser.add_argument(
        "--backend",
        choices=["nginx", "aiohttp"],
        default="nginx",
        help="edge.py's backend (nginx, the default) or a plain aiohttp server",
    )
    parser.add_argument("--edge", nargs=2, type=int, help=argparse.SUPPRESS)
    parser.add_argument("--serve", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve:
        asyncio.run(serve_backend(args.serve))
        return
    if args.edge:
        if args.mesh:
            run_edge_child(serve_mesh(*args.edge))
        else:
            run_edge_child(serve_edge(*args.edge, with_modules=args.modules))
        return
    backend_port = free_port()
    backend_files = tempfile.TemporaryDirectory(prefix="interlock-profile-backend-")
    if args.backend == "nginx":
        backend = start_backend(backend_files.name, backend_port, [])
    else:
        backend = subprocess.Popen([sys.executable, __file__, "--serve", str(backend_port)])
    try:
        wait_port(backend_port, time.monotonic() + 60)
        with tempfile.TemporaryDirectory() as tmp:
            folder = Path(args.keep or tmp).resolve()
            folder.mkdir(parents=True, exist_ok=True)
            if args.profile:
                out = folder / "edge.prof"
                pyargs = ["-m", "cProfile", "-o", str(out)]
                run_edge(
                    backend_port,
                    args.requests,
                    tree=args.tree,
                    wrapper=[],
                    pyargs=pyargs,
                    modules=args.modules,
                    mesh=args.mesh,
                )
                stats = pstats.Stats(str(out))
                stats.sort_stats("tottime").print_stats(
                    r"interlock|aiohttp|multidict|yarl|asyncio", 40
                )
                print_split(stats)
                return
            out = folder / f"callgrind.{args.requests}"
            wrapper = [
                "valgrind",
                "--tool=callgrind",
                "--instr-atstart=no",
                f"--callgrind-out-file={out}",
                "-q",
            ]
            run_edge(
                backend_port,
                args.requests,
                tree=args.tree,
                wrapper=wrapper,
                pyargs=[],
                modules=args.modules,
                warmup=args.warmup,
                instrument=True,
                mesh=args.mesh,
            )
            total = callgrind_total(out)
            print(
                f"edge instructions: {total:,} for {args.requests} requests (after "
                f"{args.warmup} not counted); {total / args.requests:,.0f} instructions per request"
            )
    finally:
        backend.terminate()
        backend.wait()
        backend_files.cleanup()


if __name__ == "__main__":
    main()
