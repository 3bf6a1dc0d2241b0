"""``--edge-workers auto``: the CPUs this process may use, its cgroup v2 quota included."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from interlock.cli.cpus import cgroup_cpus, cgroup_path, quota_cpus, usable_cpus


@pytest.mark.parametrize(
    ("line", "cpus"),
    [
        ("200000 100000\n", 2),
        ("150000 100000\n", 2),  # 1.5 CPUs: rounded up
        ("50000 100000\n", 1),  # half a CPU: still one worker
        ("max 100000\n", None),
        ("max\n", None),
        ("", None),
        ("lots 100000", None),
        ("0 100000", None),
    ],
)
def test_a_cpu_max_line(line: str, cpus: int | None) -> None:
    assert quota_cpus(line) == cpus


def test_the_cgroup_v2_line_of_proc_self_cgroup() -> None:
    assert cgroup_path("0::/kubepods/burstable/pod1/c1\n") == "/kubepods/burstable/pod1/c1"
    assert cgroup_path("12:cpu,cpuacct:/x\n0::/\n") == "/"
    assert cgroup_path("12:cpu,cpuacct:/x\n") is None  # cgroup v1 only


def cgroups(tmp_path: Path, path: str, quotas: dict[str, str]) -> tuple[Path, Path]:
    """A cgroup tree under ``tmp_path`` with ``cpu.max`` files, and a /proc/self/cgroup."""
    root = tmp_path / "cgroup"
    for where, line in quotas.items():
        folder = root / where.strip("/")
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "cpu.max").write_text(line)
    (root / path.strip("/")).mkdir(parents=True, exist_ok=True)
    self_cgroup = tmp_path / "self-cgroup"
    self_cgroup.write_text(f"0::{path}\n")
    return root, self_cgroup


def test_a_pod_limited_to_2_cpus_gets_2_however_many_the_node_has(tmp_path: Path) -> None:
    # A container's namespaced view: its own cgroup is the root.
    root, self_cgroup = cgroups(tmp_path, "/", {"/": "200000 100000\n"})
    assert cgroup_cpus(root=root, self_cgroup=self_cgroup) == 2


def test_the_smallest_quota_on_the_way_to_the_root_wins(tmp_path: Path) -> None:
    root, self_cgroup = cgroups(
        tmp_path,
        "/kubepods/pod1/c1",
        {
            "/kubepods": "max 100000\n",
            "/kubepods/pod1": "300000 100000\n",
            "/kubepods/pod1/c1": "max 100000\n",
        },
    )
    assert cgroup_cpus(root=root, self_cgroup=self_cgroup) == 3


def test_no_quota_or_no_cgroup_v2_means_no_limit(tmp_path: Path) -> None:
    root, self_cgroup = cgroups(tmp_path, "/user.slice", {"/user.slice": "max 100000\n"})
    assert cgroup_cpus(root=root, self_cgroup=self_cgroup) is None
    assert cgroup_cpus(root=root, self_cgroup=tmp_path / "missing") is None


def test_usable_cpus_is_the_affinity_bounded_by_the_quota(tmp_path: Path) -> None:
    affinity = len(os.sched_getaffinity(0))
    root, self_cgroup = cgroups(tmp_path, "/", {"/": "100000 100000\n"})
    assert usable_cpus(root=root, self_cgroup=self_cgroup) == 1
    root, self_cgroup = cgroups(tmp_path / "big", "/", {"/": f"{64 * 100000} 100000\n"})
    assert usable_cpus(root=root, self_cgroup=self_cgroup) == affinity
