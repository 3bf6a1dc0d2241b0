"""``hack/real-cluster.sh``'s owner watch: a killed test run leaves no control plane behind.

The tests start their real etcd and kube-apiserver with ``INTERLOCK_CLUSTER_OWNER`` set to their
own pid. When pytest is killed (its ``atexit`` and fixture teardowns never run), the script's
watcher sees the owner gone and runs ``down``. Here the owner is a ``sleep`` killed on purpose.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from tests.differential.conftest import (
    BUILD_COMMAND,
    REPO,
    _required,
    gateway_api_dir,
    real_binaries,
)

SCRIPT = str(REPO / "hack" / "real-cluster.sh")


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie is gone for our purpose (its parent, the watcher's shell, has not reaped it yet).
    with open(f"/proc/{pid}/stat") as stat:
        return stat.read().rpartition(")")[2].split()[0] != "Z"


def test_the_control_plane_stops_when_its_owner_is_killed() -> None:
    binaries = real_binaries()
    if not (binaries / "kube-apiserver").is_file() or not (binaries / "etcd").is_file():
        message = f"needs the real binaries in {binaries}; build them with: {BUILD_COMMAND}"
        if _required():
            pytest.fail(message)
        pytest.skip(message)
    owner = subprocess.Popen(["sleep", "600"])
    directory = Path(tempfile.mkdtemp(prefix="interlock-owner-"))
    env = {
        **os.environ,
        "INTERLOCK_REAL_BIN": str(binaries),
        "INTERLOCK_GATEWAY_API_DIR": str(gateway_api_dir()),
        "INTERLOCK_CONTROLLER_MANAGER": "false",
        "INTERLOCK_CLUSTER_OWNER": str(owner.pid),
    }
    try:
        started = subprocess.run(
            ["bash", SCRIPT, "up", str(directory)],
            env=env, capture_output=True, text=True, timeout=600, check=False,
        )  # fmt: skip
        assert started.returncode == 0, started.stderr[-3000:]
        pids = {name: int((directory / "pids" / name).read_text()) for name in
                ("etcd", "kube-apiserver", "owner-watch")}  # fmt: skip
        assert all(_alive(pid) for pid in pids.values())
        time.sleep(3)  # the watcher has looked at least once: the plane stays while the owner lives
        assert all(_alive(pid) for pid in pids.values())
        owner.kill()
        owner.wait()
        deadline = time.monotonic() + 60
        while any(_alive(pid) for pid in pids.values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert {name: _alive(pid) for name, pid in pids.items()} == dict.fromkeys(pids, False)
        assert not (directory / "pids" / "etcd").exists()  # `down` ran, not a crash
    finally:
        if owner.poll() is None:
            owner.kill()
        subprocess.run(["bash", SCRIPT, "down", str(directory)], env=env, check=False, timeout=120)
        shutil.rmtree(directory, ignore_errors=True)
