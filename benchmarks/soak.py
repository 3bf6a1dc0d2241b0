"""Soak: the controller for an hour under steady churn, watched for leaks.

What it found and the figures: ``docs/reliability.md``, "Soak".

A test or a benchmark of minutes cannot see what grows by a few KiB per change: a dict keyed by
an object that is never deleted, a task per watch that outlives it, a served-configuration log.
Over an hour of steady churn those become a slope. So this runs:

* the embedded API server in this process (``tests/kit/lanes.py``'s embedded lane), populated with
  the convergence harness's universe (``tests/kit/reliability_objects.py``), 500
  Services with two ports each, and a *rotating* population: HTTPRoutes, Services,
  Ingresses, ModuleSets, Secrets and EndpointSlices under fresh names, each created, updated
  and deleted (a name is never reused, so anything kept per name shows as growth);
* the controller in a **child process** (``--controller``), so its RSS, file descriptors and
  asyncio tasks are its own; it answers ``sample`` / ``outputs`` / ``stop`` on stdin;
* 1,000 open policy watches over HTTP (``?watch=true``) on those 500 Services' ports, each
  keeping the last policy it was sent;
* edge traffic at a steady request rate to a host whose ModuleSet changes every few seconds
  (always valid, always adding a guard header): the backend counts requests that arrive
  without the guard — served without its modules, the fail-closed property on the wire.

Writes happen at a fixed rate (``--rate`` per second, kinds weighted). The child is sampled
every ``--sample`` seconds; the report gives RSS over time and its least-squares slope in MiB
per hour after the warm-up, and actors, open watches, fds, tasks and gc objects at the start
(after the rotating population is at its steady size) and at the end (churn stopped,
converged). At the end the convergence harness's comparison runs (``reliability_kit.py``):
the child's outputs (watched policies, every one of the 1,000 streams' last policy, what its
edge serves, every status in the API server) against the model computed from the final
objects, then a fresh controller started on the final state against the child, and once the
child stops and the fresh one leads, it must find no status to change.

    nice .venv/bin/python benchmarks/soak.py --minutes 60     # make soak (SOAK_MINUTES=60)
    .venv/bin/python benchmarks/soak.py --minutes 3           # to try it

It prints progress every minute and the figures at the end (JSON, also written to ``--out``,
with the RSS samples); docs/reliability.md holds the hour's figures.
"""

from __future__ import annotations

import argparse
import asyncio
import base64
import collections
import contextlib
import ctypes
import ctypes.util
import gc
import json
import os
import platform
import random
import sys
import tempfile
import time
import tracemalloc
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

import aiohttp  # noqa: E402
from aiohttp import web  # noqa: E402
from bench_report import rss_mib, slope_mib_per_hour  # noqa: E402

from interlock.api.policy_json import policy_json  # noqa: E402
from interlock.cli.malloc import malloc_statistics, pin_mmap_threshold  # noqa: E402
from interlock.controller.app import Controller  # noqa: E402
from interlock.mailbox.slot import LatestValueSlot  # noqa: E402
from interlock.model.policy_watch import WatchTarget  # noqa: E402
from interlock.model.service import ServicePortKey  # noqa: E402
from tests.kit.lanes import lane_cluster  # noqa: E402
from tests.kit.reliability_kit import (  # noqa: E402
    WATCHED,
    dict_differences,
    expected_policies,
    expected_route_and_module_statuses,
    expected_served,
    populate,
    read_state,
    remove,
    replica_config,
    served_differences,
    start_replica,
    stop_replica,
    write,
    written_statuses,
)
from tests.kit.reliability_objects import UNIVERSE, build  # noqa: E402

Obj = dict[str, Any]
WEB_HOST = "web.soak.example"
GUARD = "X-Soak-Guard"
PORTS = (80, 8080)


# --- the child: the controller under soak ---------------------------------------------------------


def served_now(controller: Controller) -> dict[str, dict[str, Any]]:
    """What the data plane serves, by host and route id (as ``Replica.served``)."""
    assert controller.edge is not None and controller.edge.data_plane is not None
    hosts: dict[str, dict[str, Any]] = {}
    for host in controller.edge.data_plane.snapshot_now().to_json()["hosts"]:
        routes = {route["routeId"]: route for route in host["routes"]}
        if routes:
            hosts[host["host"]] = routes
    return hosts


SMAPS_FIELDS = ("Rss", "Pss", "Anonymous", "Private_Dirty", "Swap")


def smaps_rollup() -> dict[str, float]:
    """This process's ``/proc/self/smaps_rollup`` fields in MiB: RSS split into what is anonymous
    (heap, arenas) and what maps files, so a slope says which of the two grows."""
    fields: dict[str, float] = {}
    with open("/proc/self/smaps_rollup") as rollup:
        for line in rollup:
            name, _, rest = line.partition(":")
            if name in SMAPS_FIELDS:
                fields["smaps_" + name.lower() + "_mib"] = round(int(rest.split()[0]) / 1024, 2)
    return fields


def smaps_by_mapping(top: int = 12) -> list[dict[str, Any]]:
    """``/proc/self/smaps`` summed by mapping name (``[heap]``, ``[anon]`` for unnamed anonymous
    mappings, a file's path), largest Rss first, in MiB; ``count`` is how many mappings."""
    totals: dict[str, list[float]] = {}
    name = ""
    with open("/proc/self/smaps") as smaps:
        for line in smaps:
            head = line.split(None, 5)
            if head and "-" in head[0] and not head[0].endswith(":"):
                name = head[5].strip() if len(head) > 5 else "[anon]"
                totals.setdefault(name, [0.0, 0.0, 0])[2] += 1
            elif head and head[0] in ("Rss:", "Private_Dirty:"):
                totals[name][0 if head[0] == "Rss:" else 1] += int(head[1]) / 1024
    rows = sorted(totals.items(), key=lambda kv: -kv[1][0])[:top]
    return [
        {"mapping": n, "rss_mib": round(r, 2), "private_dirty_mib": round(d, 2), "count": int(c)}
        for n, (r, d, c) in rows
    ]


_LIBC = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")


def malloc_stats() -> dict[str, float]:
    """glibc's ``mallinfo2()`` (:func:`interlock.cli.malloc.malloc_statistics`) in MiB."""
    return {
        f"malloc_{'top_pad' if name == 'top' else name}_mib": round(value / 2**20, 2)
        for name, value in malloc_statistics().items()
    }


PYMALLOC_LINES = {
    "# arenas allocated current": "pymalloc_arenas",
    "# arenas highwater mark": "pymalloc_arenas_highwater",
    "# bytes in allocated blocks": "pymalloc_allocated_mib",
    "# bytes in available blocks": "pymalloc_available_mib",
}


def pymalloc_stats() -> dict[str, float]:
    """pymalloc's arenas (1 MiB each) and how full they are, from ``sys._debugmallocstats()``
    (which writes to the C stderr, so it is read back through a temporary file): allocated
    against available bytes and unused pools say whether the arenas are fragmented."""
    with tempfile.TemporaryFile("w+") as out:
        sys.stderr.flush()
        saved = os.dup(2)
        try:
            os.dup2(out.fileno(), 2)
            sys._debugmallocstats()
        finally:
            os.dup2(saved, 2)
            os.close(saved)
        out.seek(0)
        text = out.read()
    stats: dict[str, float] = {}
    for line in text.splitlines():
        name, _, value = line.partition("=")
        name = name.strip()
        if name in PYMALLOC_LINES:
            number = int(value.strip().replace(",", ""))
            key = PYMALLOC_LINES[name]
            stats[key] = round(number / 2**20, 2) if key.endswith("_mib") else number
        elif name.endswith("unused pools * 16384 bytes") and "pymalloc_unused_pools" not in stats:
            stats["pymalloc_unused_pools"] = int(name.split()[0])
    return stats


def threads() -> int:
    with open("/proc/self/status") as status:
        for line in status:
            if line.startswith("Threads:"):
                return int(line.split()[1])
    return 0


def controller_sample(controller: Controller, *, objects: bool) -> dict[str, Any]:
    stats = controller.system.statistics()
    watches = controller.watches
    informers = controller.informers.statistics().values() if controller.informers else []
    return {
        "t": time.time(),
        "rss_mib": round(rss_mib(), 2),
        **smaps_rollup(),
        **malloc_stats(),
        **pymalloc_stats(),
        "allocated_blocks": sys.getallocatedblocks(),
        "threads": threads(),
        "gc_counts": list(gc.get_count()),
        "fds": len(os.listdir("/proc/self/fd")),
        "tasks": len(asyncio.all_tasks()),
        "actors": stats.actors,
        "busy": stats.busy,
        "depth": stats.depth,
        "processed": stats.processed,
        "failed": stats.failed,
        "dead_letters": stats.dead_letters,
        "restarts": stats.restarts,
        "watches": len(watches.targets()),
        "watch_readers": sum(watches.readers(t) for t in watches.targets()),
        "relists": sum(s.relists for s in informers),
        "reconnects": sum(s.reconnects for s in informers),
        "gc_objects": len(gc.get_objects()) if objects else None,
        "mappings": smaps_by_mapping(),
    }


def census() -> dict[str, int]:
    """The gc-tracked objects by type (module-qualified name): two of them, at the end of the
    warm-up and at the end of the churn, say which kind of object accumulates, at a fraction of
    tracemalloc's cost (under which the edge's traffic times out)."""
    counts: collections.Counter[str] = collections.Counter()
    for obj in gc.get_objects():
        kind = type(obj)
        counts[f"{kind.__module__}.{kind.__qualname__}"] += 1
    return dict(counts)


def census_growth(before: dict[str, int], after: dict[str, int], top: int = 25) -> list[Any]:
    """The types whose count grew most from ``before`` to ``after``: ``[type, before, after]``."""
    grown = sorted(after, key=lambda k: before.get(k, 0) - after[k])[:top]
    return [[k, before.get(k, 0), after[k]] for k in grown if after[k] > before.get(k, 0)]


TRACEMALLOC_ENV = "INTERLOCK_SOAK_TRACEMALLOC"
TRIM_ENV = "INTERLOCK_SOAK_MALLOC_TRIM"
"""Seconds between two ``malloc_trim(0)`` calls in the child (unset: none)."""


def _trim_periodically(every: float) -> None:
    _LIBC.malloc_trim(0)
    asyncio.get_running_loop().call_later(every, _trim_periodically, every)


def take_snapshot(path: str) -> dict[str, Any]:
    """The child's ``snapshot PATH`` command: its traced allocations, dumped for the driver."""
    snapshot = tracemalloc.take_snapshot().filter_traces(
        [tracemalloc.Filter(False, tracemalloc.__file__)]
    )
    snapshot.dump(path)
    current, _peak = tracemalloc.get_traced_memory()
    return {"path": path, "traced_mib": round(current / 2**20, 2)}


def snapshot_growth(before: str, after: str, *, top: int = 25) -> list[dict[str, Any]]:
    """What grew from snapshot ``before`` to ``after``, by allocation traceback, largest first
    (the frames innermost first, the standard library's and site-packages' left out when an
    interlock frame says more)."""
    old = tracemalloc.Snapshot.load(before)
    new = tracemalloc.Snapshot.load(after)
    rows: list[dict[str, Any]] = []
    for stat in new.compare_to(old, "traceback")[:top]:
        frames = [f"{f.filename.removeprefix(str(ROOT) + '/')}:{f.lineno}" for f in stat.traceback]
        ours = [f for f in reversed(frames) if f.startswith(("interlock/", "benchmarks/"))]
        rows.append(
            {
                "kib": round(stat.size_diff / 1024, 1),
                "blocks": stat.count_diff,
                "where": ours[:6] or list(reversed(frames))[:6],
                "allocated_at": frames[-1] if frames else "",
            }
        )
    return rows


async def controller_main(kubeconfig: str) -> None:
    frames = int(os.environ.get(TRACEMALLOC_ENV, "0"))
    if frames:
        tracemalloc.start(frames)
    config = replica_config(kubeconfig, "soak")
    config = replace(
        config,
        # A loaded shared machine must not cost the only replica its Lease.
        leadership=replace(config.leadership, duration=30.0, renew_deadline=20.0, retry_period=1.0),
    )
    controller = Controller(config)
    await controller.start()
    trim_every = float(os.environ.get(TRIM_ENV, "0"))
    if trim_every:  # an experiment: does giving glibc's free pages back flatten the RSS?
        asyncio.get_running_loop().call_later(trim_every, _trim_periodically, trim_every)
    slots: dict[WatchTarget, LatestValueSlot[Any]] = {
        t: controller.watches.open_watch(t) for t in WATCHED
    }
    await controller.wait_ready(within=300)
    assert controller.policy_site is not None and controller.edge is not None
    assert controller.admin_site is not None
    print(
        "READY "
        + json.dumps(
            {
                "policy": controller.policy_site.url,
                "edge": controller.edge.url,
                "admin": controller.admin_site.url,
            }
        ),
        flush=True,
    )
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), sys.stdin)
    try:
        while line := (await reader.readline()).decode().strip():
            if line.startswith("sample"):
                answer = controller_sample(controller, objects=line == "sample objects")
            elif line == "census":
                answer = census()
            elif line == "malloc_trim":
                # How much of the RSS glibc holds free and can give back (what it returns).
                _LIBC.malloc_trim(0)
                answer = controller_sample(controller, objects=False)
            elif line.startswith("snapshot "):
                answer = take_snapshot(line.removeprefix("snapshot "))
            elif line == "outputs":
                answer = {
                    "policies": {
                        str(t): None if s.latest is None else policy_json(s.latest.policy)
                        for t, s in slots.items()
                    },
                    "served": served_now(controller),
                    "idle": controller.system.statistics().busy == 0,
                }
            else:
                break
            print("ANSWER " + json.dumps(answer), flush=True)
    finally:
        for target, slot in slots.items():
            controller.watches.close_watch(target, slot)
        await controller.stop()


class Child:
    """The controller child process and its line protocol."""

    def __init__(self, process: asyncio.subprocess.Process) -> None:
        self.process = process
        self._lock = asyncio.Lock()

    @classmethod
    async def start(
        cls, kubeconfig: str, log: Path, *, tracemalloc_frames: int = 0
    ) -> tuple[Child, dict[str, str]]:
        env = dict(os.environ)
        if tracemalloc_frames:
            env[TRACEMALLOC_ENV] = str(tracemalloc_frames)
        process = await asyncio.create_subprocess_exec(
            sys.executable,
            __file__,
            "--controller",
            kubeconfig,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=open(log, "w"),  # noqa: SIM115 - the child owns it
            limit=64 * 1024 * 1024,
            env=env,
        )
        child = cls(process)
        assert process.stdout is not None
        while True:
            line = (await asyncio.wait_for(process.stdout.readline(), 600)).decode()
            if not line:
                raise RuntimeError(f"the controller child exited; see {log}")
            if line.startswith("READY "):
                return child, json.loads(line[6:])

    async def ask(self, command: str) -> dict[str, Any]:
        assert self.process.stdin is not None and self.process.stdout is not None
        async with self._lock:
            self.process.stdin.write(command.encode() + b"\n")
            await self.process.stdin.drain()
            while True:
                line = (await asyncio.wait_for(self.process.stdout.readline(), 300)).decode()
                if not line:
                    raise RuntimeError("the controller child exited")
                if line.startswith("ANSWER "):
                    answer: dict[str, Any] = json.loads(line[7:])
                    return answer

    async def stop(self) -> int:
        if self.process.returncode is None:
            assert self.process.stdin is not None
            with contextlib.suppress(ConnectionError):
                self.process.stdin.write(b"stop\n")
                await self.process.stdin.drain()
            try:
                await asyncio.wait_for(self.process.wait(), 120)
            except TimeoutError:
                self.process.kill()
                await self.process.wait()
        return self.process.returncode or 0


# --- the objects ----------------------------------------------------------------------------------


def parent_service(i: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"p-{i}", "namespace": "default"},
        "spec": {
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP"},
                {"name": "admin", "port": 8080, "protocol": "TCP"},
            ]
        },
    }


def web_objects(backend_port: int, version: int) -> list[Obj]:
    return [
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "default"},
            "spec": {"ports": [{"name": "http", "port": 80, "protocol": "TCP"}]},
        },
        {
            "apiVersion": "discovery.k8s.io/v1",
            "kind": "EndpointSlice",
            "metadata": {
                "name": "web-slice",
                "namespace": "default",
                "labels": {"kubernetes.io/service-name": "web"},
            },
            "addressType": "IPv4",
            "endpoints": [{"addresses": ["127.0.0.1"], "conditions": {"ready": True}}],
            "ports": [{"name": "http", "port": backend_port, "protocol": "TCP"}],
        },
        web_guard(version),
        {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "Ingress",
            "metadata": {
                "name": "web",
                "namespace": "default",
                "annotations": {"interlock.dev/modules": "web-guard"},
            },
            "spec": {
                "ingressClassName": "interlock",
                "rules": [
                    {
                        "host": WEB_HOST,
                        "http": {
                            "paths": [
                                {
                                    "path": "/",
                                    "pathType": "Prefix",
                                    "backend": {"service": {"name": "web", "port": {"number": 80}}},
                                }
                            ]
                        },
                    }
                ],
            },
        },
    ]


def web_guard(version: int) -> Obj:
    """The web host's ModuleSet: always valid, always adding the guard header (its value and
    the other modules change with ``version``)."""
    modules: dict[str, Any] = {"headers": {"request": {"add": {GUARD: f"v{version}"}}}}
    if version % 3 == 1:
        modules["compression"] = {"enabled": True}
    if version % 3 == 2:
        modules["ipRestriction"] = {"allow": ["127.0.0.0/8"]}
    return {
        "apiVersion": "interlock.dev/v1alpha1",
        "kind": "ModuleSet",
        "metadata": {"name": "web-guard", "namespace": "default"},
        "spec": {"modules": modules},
    }


@dataclass
class Rotation:
    """One kind's rotating population: objects under fresh names, at most ``size`` alive."""

    kind: str
    size: int
    make: Any  # (serial, rng, variant) -> Obj
    alive: collections.deque[tuple[int, Obj]] = field(default_factory=collections.deque)
    serial: int = 0


def _rot_route(n: int, rng: random.Random, variant: int) -> Obj:
    backends = [
        {"name": f"p-{rng.randrange(500)}", "port": 80, "weight": rng.randrange(1, 50)},
        {"name": f"rs-{rng.randrange(max(1, n - 5), n + 5)}", "port": 80, "weight": 1},
    ]
    return {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": f"rr-{n}", "namespace": "default"},
        "spec": {
            "parentRefs": [
                {"group": "core", "kind": "Service", "name": f"p-{n % 500}", "port": PORTS[n % 2]}
            ],
            "rules": [
                {
                    "matches": [{"path": {"type": "PathPrefix", "value": f"/v{variant % 4}"}}],
                    "backendRefs": backends,
                }
            ],
        },
    }


def _rot_service(n: int, rng: random.Random, variant: int) -> Obj:
    ports = [{"name": "http", "port": 80, "protocol": "TCP"}]
    if variant % 2:
        ports.append({"name": "admin", "port": 8080, "protocol": "TCP"})
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": f"rs-{n}", "namespace": "default", "labels": {"v": str(variant)}},
        "spec": {"ports": ports},
    }


def _rot_slice(n: int, rng: random.Random, variant: int) -> Obj:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": f"rs-{n}-slice",
            "namespace": "default",
            "labels": {"kubernetes.io/service-name": f"rs-{n}"},
        },
        "addressType": "IPv4",
        "endpoints": [
            {"addresses": [f"10.2.{n % 250}.{variant % 250 + 1}"], "conditions": {"ready": True}}
        ],
        "ports": [{"name": "http", "port": 8000 + variant % 100, "protocol": "TCP"}],
    }


def _rot_module_set(n: int, rng: random.Random, variant: int) -> Obj:
    modules = (
        {"headers": {"response": {"add": {"X-Rot": str(variant)}}}},
        {"ipRestriction": {"allow": ["10.0.0.0/8"]}},
        {"rateLimit": {"requests": 10 + variant, "period": "1m"}},
        {"ipRestriction": {"allow": ["10.0.0.0/33"]}},  # invalid: a status naming the field
    )[variant % 4]
    return {
        "apiVersion": "interlock.dev/v1alpha1",
        "kind": "ModuleSet",
        "metadata": {"name": f"rm-{n}", "namespace": "default"},
        "spec": {"modules": modules},
    }


def _rot_secret(n: int, rng: random.Random, variant: int) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": f"rsec-{n}", "namespace": "default"},
        "type": "Opaque",
        "data": {"key": base64.b64encode(f"soak-{n}-{variant}".encode()).decode()},
    }


def _rot_ingress(n: int, rng: random.Random, variant: int) -> Obj:
    # Only valid, never-deleted ModuleSets (or none), so that the final state has nothing
    # unsettled; the universe's Ingresses meet invalid and missing sets.
    modules = ("", "web-guard")[variant % 2]
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": f"ri-{n}",
            "namespace": "default",
            "annotations": {"interlock.dev/modules": modules} if modules else {},
        },
        "spec": {
            "ingressClassName": "interlock",
            "rules": [
                {
                    "host": f"i{n}.soak.example",
                    "http": {
                        "paths": [
                            {
                                "path": f"/p{variant % 3}",
                                "pathType": "Prefix",
                                "backend": {
                                    "service": {
                                        "name": f"rs-{rng.randrange(max(1, n - 5), n + 5)}",
                                        "port": {"number": 80},
                                    }
                                },
                            }
                        ]
                    },
                }
            ],
        },
    }


ROTATIONS: tuple[tuple[str, int, Any, float], ...] = (
    ("HTTPRoute", 60, _rot_route, 0.30),
    ("Service", 30, _rot_service, 0.15),
    ("EndpointSlice", 30, _rot_slice, 0.10),
    ("Ingress", 20, _rot_ingress, 0.10),
    ("ModuleSet", 10, _rot_module_set, 0.05),
    ("Secret", 10, _rot_secret, 0.05),
)
"""kind, population size, builder, share of the writes (the universe takes the rest: 25%)."""


# --- the soak -------------------------------------------------------------------------------------


@dataclass
class Settings:
    minutes: float
    rate: float
    rps: float
    watches: int
    module_interval: float
    sample: float
    warmup_minutes: float
    seed: int
    out: Path
    converge_within: float
    tracemalloc: int = 0
    """Frames per traceback traced in the child (0: off): with it the report lists what grew
    between the end of the warm-up and the end of the churn, grouped by traceback."""


@dataclass
class Traffic:
    statuses: collections.Counter[int] = field(default_factory=collections.Counter)
    errors: collections.Counter[str] = field(default_factory=collections.Counter)
    backend_requests: int = 0
    backend_unguarded: int = 0
    first_problems: list[str] = field(default_factory=list)


class Soak:
    def __init__(self, settings: Settings, cluster: Any, child: Child, urls: dict[str, str]):
        self.s = settings
        self.cluster = cluster
        self.child = child
        self.urls = urls
        self.rng = random.Random(settings.seed)
        self.rotations = [Rotation(kind, size, make) for kind, size, make, _ in ROTATIONS]
        self.writes: collections.Counter[str] = collections.Counter()
        self.write_errors: collections.Counter[str] = collections.Counter()
        self.samples: list[dict[str, Any]] = []
        self.traffic = Traffic()
        self.guard_version = 0
        self.streams: dict[WatchTarget, Any] = {}
        self.stream_lines = 0
        self.stream_restarts = 0
        self.running = True

    # writes

    async def _write(self, label: str, obj: Obj, *, delete: bool = False) -> None:
        try:
            if delete:
                await remove(self.cluster, obj)
            else:
                await write(self.cluster, obj)
            self.writes[label] += 1
        except Exception as error:
            self.write_errors[f"{label}: {type(error).__name__}"] += 1

    async def rotate(self, rotation: Rotation, *, fill: bool = False) -> None:
        roll = self.rng.random()
        if fill or not rotation.alive or (roll < 0.4 and len(rotation.alive) < rotation.size):
            rotation.serial += 1
            obj = rotation.make(rotation.serial, self.rng, 0)
            rotation.alive.append((rotation.serial, obj))
            await self._write(f"{rotation.kind} create", obj)
            if len(rotation.alive) > rotation.size:
                _, old = rotation.alive.popleft()
                await self._write(f"{rotation.kind} delete", old, delete=True)
        elif roll < 0.8:
            index = self.rng.randrange(len(rotation.alive))
            serial, _ = rotation.alive[index]
            obj = rotation.make(serial, self.rng, self.rng.randrange(1, 1000))
            rotation.alive[index] = (serial, obj)
            await self._write(f"{rotation.kind} update", obj)
        else:
            _, old = rotation.alive.popleft()
            await self._write(f"{rotation.kind} delete", old, delete=True)

    async def universe_step(self) -> None:
        kind = self.rng.choice(sorted(UNIVERSE))
        names, count, _ = UNIVERSE[kind]
        name = self.rng.choice(names)
        if self.rng.randrange(5) == 0:
            await self._write(f"universe {kind} delete", build(kind, name, 0), delete=True)
        else:
            variant = self.rng.randrange(count)
            await self._write(f"universe {kind} apply", build(kind, name, variant))

    async def churn(self) -> None:
        interval = 1.0 / self.s.rate
        weights = [share for *_, share in ROTATIONS]
        next_at = time.monotonic()
        while self.running:
            next_at += interval
            if self.rng.random() < 0.25:
                await self.universe_step()
            else:
                (rotation,) = self.rng.choices(self.rotations, weights=weights)
                await self.rotate(rotation)
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))

    async def module_changes(self) -> None:
        while self.running:
            await asyncio.sleep(self.s.module_interval)
            self.guard_version += 1
            await self._write("web-guard ModuleSet update", web_guard(self.guard_version))

    # the edge

    async def backend(self) -> web.AppRunner:
        async def handle(request: web.Request) -> web.Response:
            self.traffic.backend_requests += 1
            if GUARD not in request.headers:
                self.traffic.backend_unguarded += 1
                if len(self.traffic.first_problems) < 20:
                    self.traffic.first_problems.append(
                        f"{time.strftime('%H:%M:%S')} backend reached without {GUARD}"
                    )
            return web.Response(text="ok")

        app = web.Application()
        app.router.add_route("*", "/{tail:.*}", handle)
        runner = web.AppRunner(app, access_log=None)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return runner

    async def edge_traffic(self, session: aiohttp.ClientSession) -> None:
        interval = 1.0 / self.s.rps
        url = self.urls["edge"] + "/soak"
        pending: set[asyncio.Task[None]] = set()

        async def one() -> None:
            try:
                async with session.get(
                    url, headers={"Host": WEB_HOST}, timeout=aiohttp.ClientTimeout(total=30)
                ) as response:
                    await response.read()
                    self.traffic.statuses[response.status] += 1
                    if response.status != 200 and len(self.traffic.first_problems) < 20:
                        self.traffic.first_problems.append(
                            f"{time.strftime('%H:%M:%S')} edge answered {response.status}"
                        )
            except Exception as error:
                self.traffic.errors[type(error).__name__] += 1

        next_at = time.monotonic()
        while self.running:
            next_at += interval
            task = asyncio.create_task(one())
            pending.add(task)
            task.add_done_callback(pending.discard)
            await asyncio.sleep(max(0.0, next_at - time.monotonic()))
        if pending:
            await asyncio.wait(pending)

    # the policy watches

    def watch_targets(self) -> list[WatchTarget]:
        return [
            WatchTarget(
                ServicePortKey("default", f"p-{i // 2}", PORTS[i % 2]), client_namespace="default"
            )
            for i in range(self.s.watches)
        ]

    async def watch_stream(self, session: aiohttp.ClientSession, target: WatchTarget) -> None:
        key = target.key
        url = f"{self.urls['policy']}/v1/outbound/{key.namespace}/{key.name}/{key.port}"
        params = {"clientNamespace": target.client_namespace, "watch": "true"}
        while True:
            try:
                async with session.get(
                    url, params=params, timeout=aiohttp.ClientTimeout(total=None)
                ) as response:
                    async for line in response.content:
                        if line.strip():
                            self.streams[target] = json.loads(line)
                            self.stream_lines += 1
            except (TimeoutError, aiohttp.ClientError):
                pass
            if not self.running and self.child.process.returncode is not None:
                return
            self.stream_restarts += 1
            await asyncio.sleep(1.0)

    # sampling

    async def sampler(self, started: float) -> None:
        minute = 0
        while self.running:
            await asyncio.sleep(self.s.sample)
            sample = await self.child.ask("sample")
            self.samples.append(sample)
            # Each sample as it is taken, so a long run can be read (or plotted) while it runs.
            with self.s.out.with_suffix(".samples.jsonl").open("a") as stream:
                stream.write(json.dumps(sample) + "\n")
            elapsed = time.monotonic() - started
            if elapsed >= 60 * (minute + 1):
                minute = int(elapsed // 60)
                print(
                    f"soak {minute:>3} min: rss {sample['rss_mib']:.1f} MiB "
                    f"(anon {sample.get('smaps_anonymous_mib')}, malloc free "
                    f"{sample.get('malloc_free_mib')}, blocks {sample['allocated_blocks']}, "
                    f"pymalloc arenas {sample.get('pymalloc_arenas')}), "
                    f"threads {sample['threads']}, "
                    f"actors {sample['actors']}, tasks {sample['tasks']}, fds {sample['fds']}, "
                    f"watches {sample['watches']}, writes {sum(self.writes.values())}, "
                    f"edge {dict(self.traffic.statuses)}, unguarded "
                    f"{self.traffic.backend_unguarded}",
                    flush=True,
                )


async def compare(soak: Soak, targets: list[WatchTarget], *, within: float) -> list[str]:
    """The child's outputs against the model from the final objects; [] when equal."""
    deadline = time.monotonic() + within
    problems: list[str] = ["not compared yet"]
    next_report = time.monotonic() + 30
    while time.monotonic() < deadline:
        outputs = await soak.child.ask("outputs")
        if outputs["idle"]:
            state = await read_state(soak.cluster)
            problems = dict_differences("policy", outputs["policies"], expected_policies(state))
            want = expected_policies(state, targets)
            have = {str(t): soak.streams.get(t) for t in targets}
            problems += dict_differences("watch stream", have, want)
            problems += served_differences(
                outputs["served"], expected_served(state), history=[], stuck=set()
            )
            expected = expected_route_and_module_statuses(state)
            written = await written_statuses(soak.cluster)
            problems += dict_differences(
                "status", {k: v for k, v in written.items() if k in expected}, expected
            )
            if not problems:
                return []
        else:
            problems = ["the controller is not idle"]
        if time.monotonic() >= next_report:
            next_report = time.monotonic() + 30
            print(f"soak: waiting to converge; {len(problems)} differences, first:", flush=True)
            for problem in problems[:5]:
                print(f"  {problem[:400]}", flush=True)
        await asyncio.sleep(1.0)
    return problems


async def run_soak(settings: Settings) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        async with lane_cluster(Path(tmp), None, bookmark_interval=1.0) as cluster:
            soak_result = await _run(settings, cluster, Path(tmp))
    return soak_result


async def _run(settings: Settings, cluster: Any, tmp: Path) -> dict[str, Any]:
    await populate(cluster)
    for i in range(max(1, (settings.watches + 1) // 2)):
        await write(cluster, parent_service(i))
    placeholder = Soak(settings, cluster, None, {})  # type: ignore[arg-type]
    backend = await placeholder.backend()
    backend_port = backend.addresses[0][1]
    for obj in web_objects(backend_port, 0):
        await write(cluster, obj)

    log = settings.out.with_suffix(".controller.log")
    # Straight to the server (the lane's fault proxy would put every request of the controller
    # through this process too); the embedded server checks no RBAC either way.
    child, urls = await Child.start(
        cluster.admin_kubeconfig, log, tracemalloc_frames=settings.tracemalloc
    )
    soak = placeholder
    soak.child, soak.urls = child, urls
    result: dict[str, Any] = {
        "settings": {k: str(v) for k, v in vars(settings).items()},
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
        f"Python {platform.python_version()}",
        "controller_pid": child.process.pid,
    }
    connector = aiohttp.TCPConnector(limit=0)
    session = aiohttp.ClientSession(connector=connector)
    tasks: list[asyncio.Task[None]] = []
    try:
        targets = soak.watch_targets()
        tasks += [asyncio.create_task(soak.watch_stream(session, t)) for t in targets]
        # The rotating populations at their steady size, so start and end compare like for like.
        for rotation in soak.rotations:
            for _ in range(rotation.size):
                await soak.rotate(rotation, fill=True)
        while len(soak.streams) < len(targets):  # noqa: ASYNC110 - streams have no event
            await asyncio.sleep(0.5)
        problems = await compare(soak, targets, within=600)
        result["differences_before_churn"] = problems[:20]
        result["start"] = await child.ask("sample objects")
        started = time.monotonic()
        print(
            f"soak: start {json.dumps(result['start'])}; churn for {settings.minutes} min",
            flush=True,
        )
        snapshots = (
            settings.out.with_suffix(".warm.tracemalloc"),
            settings.out.with_suffix(".end.tracemalloc"),
        )

        censuses: list[dict[str, int]] = []

        async def snapshot_after_warmup() -> None:
            await asyncio.sleep(settings.warmup_minutes * 60)
            if soak.running:
                censuses.append(await child.ask("census"))
            if soak.running and settings.tracemalloc:
                result["tracemalloc_warm"] = await child.ask(f"snapshot {snapshots[0]}")

        churn = [
            asyncio.create_task(soak.churn()),
            asyncio.create_task(soak.module_changes()),
            asyncio.create_task(soak.edge_traffic(session)),
            asyncio.create_task(soak.sampler(started)),
        ]
        churn.append(asyncio.create_task(snapshot_after_warmup()))
        await asyncio.sleep(settings.minutes * 60)
        soak.running = False
        await asyncio.gather(*churn)
        result["end_under_churn"] = soak.samples[-1] if soak.samples else None
        if censuses:
            result["census_growth"] = census_growth(censuses[0], await child.ask("census"))
            print("soak: gc-tracked objects grown since the warm-up, by type:", flush=True)
            for kind, before, after in result["census_growth"][:15]:
                print(f"  {after - before:>+8} {kind} ({before} -> {after})", flush=True)
        if "tracemalloc_warm" in result:
            # Taken before the end state is written: what the churn itself left behind.
            result["tracemalloc_end"] = await child.ask(f"snapshot {snapshots[1]}")
            result["tracemalloc_growth"] = snapshot_growth(*map(str, snapshots))
            print("soak: grown since the warm-up (tracemalloc, by traceback):", flush=True)
            for row in result["tracemalloc_growth"][:15]:
                print(f"  {row['kib']:>9} KiB {row['blocks']:>7} blocks  {row['where']}")
        churn_seconds = time.monotonic() - started
        # The end state: anything unsettled in the universe made valid (the universe's
        # ModuleSets and Secrets at variant 0), so every route has one right answer.
        for kind, name in (("ModuleSet", "ms-0"), ("ModuleSet", "ms-1")):
            await write(cluster, build(kind, name, 0))
        for name in ("users", "hook"):
            await write(cluster, build("Secret", name, 0))
        converge_started = time.monotonic()
        problems = await compare(soak, targets, within=settings.converge_within)
        result["converge_seconds"] = round(time.monotonic() - converge_started, 1)
        result["differences_model"] = problems[:40]
        result["end"] = await child.ask("sample objects")
        result["end_after_malloc_trim"] = await child.ask("malloc_trim")

        fresh = await start_replica(cluster.admin_kubeconfig, "fresh")
        try:
            deadline = time.monotonic() + 600
            fresh_problems = ["not compared yet"]
            while time.monotonic() < deadline:
                outputs = await child.ask("outputs")
                if fresh.idle() and outputs["idle"]:
                    fresh_problems = dict_differences(
                        "fresh policy", fresh.policies(), outputs["policies"]
                    ) + dict_differences("fresh served", fresh.served(), outputs["served"])
                    if not fresh_problems:
                        break
                await asyncio.sleep(1.0)
            before = await written_statuses(cluster)
            result["child_exit"] = await child.stop()
            deadline = time.monotonic() + 600
            while time.monotonic() < deadline and not (  # noqa: ASYNC110
                fresh.controller.elector is not None and fresh.controller.elector.is_leader
            ):
                await asyncio.sleep(0.2)
            await asyncio.sleep(0)
            while time.monotonic() < deadline and not fresh.idle():  # noqa: ASYNC110
                await asyncio.sleep(0.2)
            if not (fresh.controller.elector and fresh.controller.elector.is_leader):
                fresh_problems.append("the fresh controller did not take the Lease")
            after = await written_statuses(cluster)
            fresh_problems += dict_differences(
                "status rewritten by the fresh leader", after, before
            )
            result["differences_fresh"] = fresh_problems[:40]
        finally:
            await stop_replica(fresh)
        warmup_end = (soak.samples[0]["t"] if soak.samples else 0) + settings.warmup_minutes * 60
        result.update(
            churn_seconds=round(churn_seconds, 1),
            rss_slope_mib_per_hour_after_warmup=slope_mib_per_hour(soak.samples, warmup_end),
            rss_slope_mib_per_hour_all=slope_mib_per_hour(soak.samples, 0),
            rss_min_max_after_warmup=[
                min((s["rss_mib"] for s in soak.samples if s["t"] >= warmup_end), default=None),
                max((s["rss_mib"] for s in soak.samples if s["t"] >= warmup_end), default=None),
            ],
            writes=sum(soak.writes.values()),
            writes_by_kind=dict(sorted(soak.writes.items())),
            write_errors=dict(soak.write_errors),
            module_changes=soak.guard_version,
            edge_statuses={str(k): v for k, v in sorted(soak.traffic.statuses.items())},
            edge_client_errors=dict(soak.traffic.errors),
            backend_requests=soak.traffic.backend_requests,
            backend_reached_without_modules=soak.traffic.backend_unguarded,
            first_problems=soak.traffic.first_problems,
            watch_streams=len(targets),
            watch_stream_lines=soak.stream_lines,
            watch_stream_restarts=soak.stream_restarts,
            differences=len(result["differences_model"]) + len(result["differences_fresh"]),
        )
        result["samples"] = soak.samples
        return result
    finally:
        soak.running = False
        await child.stop()
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await session.close()
        await backend.cleanup()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--minutes", type=float, default=60.0, help="churn duration")
    parser.add_argument("--rate", type=float, default=10.0, help="API writes per second")
    parser.add_argument("--rps", type=float, default=20.0, help="edge requests per second")
    parser.add_argument("--watches", type=int, default=1000, help="open policy watch streams")
    parser.add_argument("--module-interval", type=float, default=3.0, help="seconds")
    parser.add_argument("--sample", type=float, default=None, help="seconds between samples")
    parser.add_argument("--warmup-minutes", type=float, default=None)
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument(
        "--converge-within", type=float, default=300.0, help="seconds allowed to converge"
    )
    parser.add_argument("--out", type=Path, default=ROOT / "build" / "soak.json")
    parser.add_argument(
        "--tracemalloc",
        type=int,
        default=0,
        metavar="FRAMES",
        help="trace the child's allocations (FRAMES per traceback) and report what grew",
    )
    parser.add_argument("--controller", metavar="KUBECONFIG", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.controller:
        pin_mmap_threshold()  # as ``interlock run`` does (interlock/cli/loop.py)
        asyncio.run(controller_main(args.controller))
        return
    settings = Settings(
        minutes=args.minutes,
        rate=args.rate,
        rps=args.rps,
        watches=args.watches,
        module_interval=args.module_interval,
        sample=args.sample or max(2.0, min(10.0, args.minutes * 60 / 100)),
        warmup_minutes=(
            args.warmup_minutes if args.warmup_minutes is not None else min(10.0, args.minutes / 3)
        ),
        seed=args.seed,
        out=args.out,
        converge_within=args.converge_within,
        tracemalloc=args.tracemalloc,
    )
    settings.out.parent.mkdir(parents=True, exist_ok=True)
    result = asyncio.run(run_soak(settings))
    settings.out.write_text(json.dumps(result, indent=2))
    summary = {k: v for k, v in result.items() if k != "samples"}
    print(json.dumps(summary, indent=2))
    print(f"soak: figures and samples in {settings.out}")


if __name__ == "__main__":
    main()
