"""Which side of a throughput measurement ran out of CPU, and how much of it other processes took.

Why this exists: a ratio between two proxies' requests/s is the ratio of their costs only when
each proxy was the bottleneck of its own measurement. ``benchmarks/edge.py`` used to infer that
from two proxies of it — the backend called directly had to carry three times the fastest proxy,
and the load average had to stay at or under the CPU count — and both misjudged a 2-CPU machine:
the load generator and the backend share one CPU there and carry about twice what a C proxy on
the other CPU carries, so 3x can never be met against nginx, however proxy-bound the edge is;
and the load average counts the benchmark's own processes (a saturated proxy and ``wrk`` alone
make it 2), so it flagged every run. This module measures the bottleneck directly instead.

Each measurement is bracketed by two snapshots: ``/proc/stat`` per CPU (busy and total ticks) and
``/proc/PID/stat`` of every process the benchmark started (its CPU ticks), plus the load
generator's CPU time (``wrk`` is a reaped child by the second snapshot: ``RUSAGE_CHILDREN``).
From their difference, for the proxy's CPUs and for the load side's (``wrk`` + the backend):

- *own*: the CPU the proxy's processes (or ``wrk`` + the backend) used, as a share of the cores
  they can keep busy (a one-worker proxy one CPU, however many it may run on);
- *busy*: how busy those CPUs were, whoever used them (idle = 1 - busy is the headroom);
- *foreign*: busy minus what the benchmark's own processes pinned there used — other processes
  on the machine, and the hypervisor's steal time.

A side is saturated when its own processes used :data:`SATURATED` of the cores they can use (the
load side: ``wrk``'s one thread, the backend's one worker, or the two on the CPUs they share) —
their use, not how busy the CPUs were, since other processes (a ``nice``d build) fill whatever
the benchmark leaves idle. A row is proxy-bound when the proxy is saturated and the load side is
not; load-bound the other way round (the proxy could carry more than the row says); and a row
whose proxy CPUs had more than :data:`FOREIGN_LIMIT` foreign use is marked. Everything
here but :func:`snapshot` is pure, so the verdicts are tested from numbers
(``tests/benchmarks/test_bottleneck.py``).
"""

from __future__ import annotations

import os
import resource
import statistics
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

SATURATED = 0.90
"""CPUs busy this share of a measurement or more had no headroom: the side they carry is the
bottleneck (the rest is scheduling slack and the measurement's start and end)."""
FOREIGN_LIMIT = 0.05
"""More than this share of the proxy's CPUs used by processes other than the benchmark's marks
the row: the proxy did not have its CPU to itself."""

TICKS_PER_SECOND = os.sysconf("SC_CLK_TCK")


# ---- /proc parsing -----------------------------------------------------------------------------


@dataclass(frozen=True)
class CpuTicks:
    """One CPU's line of ``/proc/stat``: ticks spent busy (user, nice, system, irq, softirq and
    steal: time this guest could not use) and in all (busy + idle + iowait)."""

    busy: int
    total: int

    def __sub__(self, before: CpuTicks) -> CpuTicks:
        return CpuTicks(self.busy - before.busy, self.total - before.total)


def parse_proc_stat(text: str) -> dict[int, CpuTicks]:
    """Per-CPU ticks from the text of ``/proc/stat`` (the ``cpuN`` lines; ``guest`` time is
    already inside ``user``, so it is not added again)."""
    cpus: dict[int, CpuTicks] = {}
    for line in text.splitlines():
        name, _, rest = line.partition(" ")
        if not name.startswith("cpu") or name == "cpu":
            continue
        fields = [int(f) for f in rest.split()]
        user, nice, system, idle, iowait, irq, softirq = fields[:7]
        steal = fields[7] if len(fields) > 7 else 0
        busy = user + nice + system + irq + softirq + steal
        cpus[int(name[3:])] = CpuTicks(busy=busy, total=busy + idle + iowait)
    return cpus


@dataclass(frozen=True)
class ProcessTicks:
    """From ``/proc/PID/stat``: the process, its parent, and the CPU ticks all its threads used
    (``utime`` + ``stime``)."""

    pid: int
    ppid: int
    ticks: int


def parse_pid_stat(text: str) -> ProcessTicks:
    """Parse ``/proc/PID/stat``. The command name (field 2) is in parentheses and may hold spaces
    and parentheses itself, so the fields are counted from the last ``)``."""
    head, _, tail = text.rpartition(")")
    pid = int(head.split("(", 1)[0])
    fields = tail.split()
    # tail starts at field 3 (state): ppid is field 4, utime 14, stime 15.
    return ProcessTicks(pid=pid, ppid=int(fields[1]), ticks=int(fields[11]) + int(fields[12]))


def descendants(parents: Mapping[int, int], roots: Iterable[int]) -> set[int]:
    """``roots`` and every process below them, from a map of pid to parent pid."""
    children: dict[int, list[int]] = {}
    for pid, ppid in parents.items():
        children.setdefault(ppid, []).append(pid)
    found: set[int] = set()
    pending = list(roots)
    while pending:
        pid = pending.pop()
        if pid in found:
            continue
        found.add(pid)
        pending.extend(children.get(pid, ()))
    return found


# ---- one measurement's window ------------------------------------------------------------------


@dataclass(frozen=True)
class Snapshot:
    """The counters at one instant: per CPU, per benchmark process, and the load generator's
    CPU seconds (this process's own and its reaped children's)."""

    cpus: Mapping[int, CpuTicks]
    processes: Mapping[int, int]
    parents: Mapping[int, int]
    affinity: Mapping[int, frozenset[int]]
    generator_seconds: float

    def tree(self, root: int) -> frozenset[int]:
        """``root`` and the processes below it (none if it is not one of the benchmark's)."""
        return frozenset(descendants(self.parents, [root])) if root in self.parents else frozenset()


def snapshot(root: int) -> Snapshot:
    """Read the counters for ``root`` (the benchmark's driver) and every process below it."""
    with open("/proc/stat") as stat:
        cpus = parse_proc_stat(stat.read())
    table: dict[int, ProcessTicks] = {}
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            try:
                with open(f"/proc/{entry}/stat") as stat:
                    process = parse_pid_stat(stat.read())
            except (FileNotFoundError, ProcessLookupError):
                continue  # exited while listing
            table[process.pid] = process
    mine = descendants({pid: p.ppid for pid, p in table.items()}, [root])
    affinity: dict[int, frozenset[int]] = {}
    for pid in mine:
        try:
            affinity[pid] = frozenset(os.sched_getaffinity(pid))
        except (ProcessLookupError, PermissionError):
            continue
    usage = [resource.getrusage(who) for who in (resource.RUSAGE_SELF, resource.RUSAGE_CHILDREN)]
    return Snapshot(
        cpus=cpus,
        processes={pid: table[pid].ticks for pid in affinity},
        parents={pid: table[pid].ppid for pid in affinity},
        affinity=affinity,
        generator_seconds=sum(u.ru_utime + u.ru_stime for u in usage),
    )


@dataclass(frozen=True)
class Roles:
    """Who is who in one measurement: the proxy's processes and the CPUs it may use (``cores``:
    how many of them it can keep busy at once, one per worker), the backend's processes, and
    the load generator's CPUs. An empty ``proxy`` is the backend called directly."""

    proxy: frozenset[int]
    proxy_cpus: frozenset[int]
    proxy_cores: int
    backend: frozenset[int]
    generator_cpus: frozenset[int]


@dataclass(frozen=True)
class Side:
    """One side of a measurement, as shares of its CPUs' time (0 to 1): ``own`` what its
    processes used of the cores they can use, ``busy`` how busy its CPUs were, ``foreign`` what
    processes other than the benchmark's used of them; and ``seconds``, the CPU seconds its
    processes used (divided by the requests, the side's cost per request)."""

    own: float
    busy: float
    foreign: float
    seconds: float


@dataclass(frozen=True)
class Usage:
    """One measurement's CPU: the proxy's side (None for the backend called directly), the load
    side's (the generator and the backend), whether the two shared CPUs, and then ``combined``:
    what the benchmark's processes used of all the CPUs they shared."""

    proxy: Side | None
    load: Side
    shared: bool
    combined: float = 0.0


def usage(before: Snapshot, after: Snapshot, roles: Roles, *, root: int) -> Usage:
    """The CPU of a measurement from its two snapshots. ``root`` is the driver, whose own time
    (with ``wrk``'s) is the load generator's."""
    cpus = {cpu: after.cpus[cpu] - before.cpus[cpu] for cpu in after.cpus if cpu in before.cpus}
    used = {
        pid: ticks - before.processes.get(pid, 0)
        for pid, ticks in after.processes.items()
        if pid != root
    }
    affinity = {**before.affinity, **after.affinity}
    generator = (after.generator_seconds - before.generator_seconds) * TICKS_PER_SECOND
    return measure_usage(cpus, used, affinity, generator, roles)


def measure_usage(
    cpus: Mapping[int, CpuTicks],
    used: Mapping[int, int],
    affinity: Mapping[int, frozenset[int]],
    generator: float,
    roles: Roles,
) -> Usage:
    """:func:`usage` from the differences: ticks per CPU, ticks per benchmark process (the
    driver left out), each process's CPUs, and the load generator's ticks."""
    mean_total = statistics.fmean(c.total for c in cpus.values()) or 1.0
    every = frozenset(cpus)
    generator_seats = roles.generator_cpus or every
    load_seats = generator_seats | (backend_cpus(roles, affinity) or every)
    proxy_seats = roles.proxy_cpus or every
    shared = bool(roles.proxy) and bool(proxy_seats & load_seats)
    if shared:  # which of the shared CPUs each side used is not known: both read all of them
        proxy_seats = load_seats = proxy_seats | load_seats

    def share(ticks: float, cores: int) -> float:
        return ticks / (mean_total * max(cores, 1))

    def side(own: float, ticks: float, seats: frozenset[int]) -> Side:
        capacity = sum(cpus[c].total for c in seats) or 1.0
        busy = sum(cpus[c].busy for c in seats)
        # The benchmark's processes that could only run on these CPUs: their time is not
        # foreign. (The generator's is here when its CPUs are among them.)
        ours: float = sum(t for pid, t in used.items() if affinity.get(pid, every) <= seats)
        if generator_seats <= seats:
            ours += generator
        return Side(
            own=own,
            busy=busy / capacity,
            foreign=max(busy - ours, 0) / capacity,
            seconds=ticks / TICKS_PER_SECOND,
        )

    backend = sum(used.get(pid, 0) for pid in roles.backend)
    # The load side is saturated when wrk's one thread is, or the backend's one worker, or the
    # CPUs the two share: its share is the highest of the three.
    together = generator_seats | (backend_cpus(roles, affinity) or every)
    load_own = max(
        share(generator, 1),
        share(backend, 1),
        share(generator + backend, min(len(together), 2)),
    )
    load = side(load_own, generator + backend, load_seats)
    if not roles.proxy:
        return Usage(proxy=None, load=load, shared=False)
    proxy = sum(used.get(pid, 0) for pid in roles.proxy)
    cores = min(roles.proxy_cores, len(roles.proxy_cpus or every))
    return Usage(
        proxy=side(share(proxy, cores), proxy, proxy_seats),
        load=load,
        shared=shared,
        combined=share(proxy + generator + backend, len(proxy_seats)) if shared else 0.0,
    )


def backend_cpus(roles: Roles, affinity: Mapping[int, frozenset[int]]) -> frozenset[int]:
    """The CPUs the backend's processes may run on."""
    cpus: frozenset[int] = frozenset()
    for pid in roles.backend:
        cpus |= affinity.get(pid, frozenset())
    return cpus


# ---- verdicts ----------------------------------------------------------------------------------

PROXY_BOUND = "proxy-bound"
LOAD_BOUND = "load-bound"
BOTH = "both saturated"
NEITHER = "neither saturated"
SHARED_BOUND = "CPUs saturated, shared with the load"
SHARED_FREE = "CPUs not saturated, shared with the load"
CEILING = "load side saturated (the ceiling)"
CEILING_FREE = "load side not saturated"


@dataclass(frozen=True)
class Verdict:
    """What limited a row (one of the names above) and whether it is marked for foreign load."""

    limit: str
    marked: bool

    @property
    def proxy_bound(self) -> bool:
        return self.limit == PROXY_BOUND

    def describe(self) -> str:
        return self.limit + (" (marked: foreign load)" if self.marked else "")


def verdict(cpu: Usage) -> Verdict:
    """What limited one measurement, from its CPU. A side is saturated when its own processes
    used :data:`SATURATED` of the cores they can use — not when its CPUs were busy, since other
    processes (``nice``d builds, say) fill whatever the benchmark leaves idle; what they took
    from the proxy is its foreign share, which marks the row."""
    load_full = cpu.load.own >= SATURATED
    if cpu.proxy is None:
        return Verdict(CEILING if load_full else CEILING_FREE, marked=False)
    proxy_full = cpu.proxy.own >= SATURATED
    marked = cpu.proxy.foreign > FOREIGN_LIMIT
    if cpu.shared:
        full = proxy_full or load_full or cpu.combined >= SATURATED
        return Verdict(SHARED_BOUND if full else SHARED_FREE, marked)
    if proxy_full and not load_full:
        return Verdict(PROXY_BOUND, marked)
    if load_full and not proxy_full:
        return Verdict(LOAD_BOUND, marked)
    return Verdict(BOTH if proxy_full else NEITHER, marked)


def median_usage(rounds: list[Usage]) -> Usage:
    """The per-field median over a row's rounds (the row's verdict is taken from it)."""

    def mid(sides: list[Side]) -> Side:
        return Side(
            own=statistics.median(s.own for s in sides),
            busy=statistics.median(s.busy for s in sides),
            foreign=statistics.median(s.foreign for s in sides),
            seconds=statistics.median(s.seconds for s in sides),
        )

    proxies = [r.proxy for r in rounds if r.proxy is not None]
    return Usage(
        proxy=mid(proxies) if proxies else None,
        load=mid([r.load for r in rounds]),
        shared=any(r.shared for r in rounds),
        combined=statistics.median(r.combined for r in rounds),
    )


def ratio_reading(mine: Verdict, other: Verdict) -> str:
    """How to read ``mine``'s requests/s over ``other``'s: a ratio of the two proxies'
    capacities only when both were proxy-bound and neither was marked; a load-bound row carried
    less than its proxy could, so a ratio over it is an upper bound (and of it, a lower one)."""
    if mine.proxy_bound and other.proxy_bound:
        if mine.marked or other.marked:
            return "both proxy-bound, but foreign load on a proxy's CPU"
        return "both proxy-bound: the ratio of their capacities"
    if mine.proxy_bound and other.limit == LOAD_BOUND:
        return "an upper bound: the second was load-bound, its capacity is above its figure"
    if mine.limit == LOAD_BOUND and other.proxy_bound:
        return "a lower bound: the first was load-bound, its capacity is above its figure"
    return f"not a ratio of capacities ({mine.limit} vs {other.limit})"


def headroom_rule(backend_rps: float, proxies: Mapping[str, float], factor: float) -> str:
    """The issue's rule, stated: the backend called directly against the fastest proxy."""
    fastest = max(proxies, key=proxies.__getitem__)
    headroom = backend_rps / proxies[fastest]
    met = "met" if headroom >= factor else "not met"
    return (
        f"the backend called directly carried {backend_rps:,.0f} req/s, {headroom:.1f}x the "
        f"fastest proxy ({fastest}, {proxies[fastest]:,.0f} req/s): issue 29's {factor:g}x rule "
        f"{met}"
    )
