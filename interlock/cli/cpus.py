"""How many CPUs this process may use: ``--edge-workers auto``.

``os.cpu_count()`` and even ``os.sched_getaffinity`` count the node's CPUs; a container limited
to 2 CPUs on a 64-core node still sees 64 there, and 64 edge workers would each get a thirtieth
of a CPU (and together hold gigabytes). The limit is the cgroup v2 ``cpu.max`` quota of the
process's cgroup and of every cgroup above it (``QUOTA PERIOD`` in microseconds, or ``max``):
the CPUs are the smallest quota / period, rounded up, and never more than the affinity allows,
nor fewer than 1. A machine without cgroup v2 (or a file that cannot be read) counts the
affinity alone.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

CGROUP_ROOT = Path("/sys/fs/cgroup")
SELF_CGROUP = Path("/proc/self/cgroup")


def quota_cpus(cpu_max: str) -> int | None:
    """The CPUs a ``cpu.max`` line allows (``"200000 100000"`` → 2, ``"150000 100000"`` → 2);
    None for no limit (``"max 100000"``) or a line that cannot be read."""
    parts = cpu_max.split()
    if not parts or parts[0] == "max":
        return None
    try:
        quota = int(parts[0])
        period = int(parts[1]) if len(parts) > 1 else 100_000
    except ValueError:
        return None
    if quota <= 0 or period <= 0:
        return None
    return max(1, math.ceil(quota / period))


def cgroup_path(self_cgroup: str) -> str | None:
    """The cgroup v2 path of ``/proc/self/cgroup``'s text (its ``0::PATH`` line); None without."""
    for line in self_cgroup.splitlines():
        if line.startswith("0::"):
            return line[3:].strip() or "/"
    return None


def cgroup_cpus(*, root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int | None:
    """The smallest ``cpu.max`` quota from this process's cgroup up to the root; None when no
    cgroup on the way limits it (or cgroup v2 is not there)."""
    try:
        path = cgroup_path(self_cgroup.read_text())
    except OSError:
        return None
    if path is None:
        return None
    limits = []
    here = root / path.strip("/")
    while True:
        try:
            cpus = quota_cpus((here / "cpu.max").read_text())
        except OSError:
            cpus = None
        if cpus is not None:
            limits.append(cpus)
        if here == root or root not in here.parents:
            break
        here = here.parent
    return min(limits) if limits else None


def usable_cpus(*, root: Path = CGROUP_ROOT, self_cgroup: Path = SELF_CGROUP) -> int:
    """The CPUs this process may use: its affinity, bounded by its cgroups' quotas; at least 1."""
    cpus = len(os.sched_getaffinity(0))
    quota = cgroup_cpus(root=root, self_cgroup=self_cgroup)
    if quota is not None:
        cpus = min(cpus, quota)
    return max(1, cpus)
