"""The Dockerfile: a slim, non-root image whose wheel carries the CRDs and examples.

No container engine runs on the machines this is developed on, so the build is checked the way
it can be: the build stage's COPY lines are replayed into a fresh folder and the same
`pip wheel` runs on it.
"""

from __future__ import annotations

import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DOCKERFILE = (ROOT / "Dockerfile").read_text()


def _instructions() -> list[tuple[str, str]]:
    joined = DOCKERFILE.replace("\\\n", " ")
    lines = [line.strip() for line in joined.splitlines()]
    return [
        (line.split(None, 1)[0].upper(), line.split(None, 1)[1])
        for line in lines
        if line and not line.startswith("#")
    ]


def test_image_is_slim_and_runs_as_a_non_root_user() -> None:
    steps = _instructions()
    bases = [arg for op, arg in steps if op == "FROM"]
    assert bases and all(base.startswith("python:3.11-slim") for base in bases)
    (user,) = [arg for op, arg in steps if op == "USER"]
    uid = user.split(":")[0]
    assert uid.isdigit() and int(uid) != 0
    assert any(op == "ENTRYPOINT" and "interlock" in arg for op, arg in steps)
    # Read-only root filesystem: no bytecode written at run time.
    assert "PYTHONDONTWRITEBYTECODE=1" in DOCKERFILE


def test_the_build_stage_context_makes_a_wheel_with_the_manifests(tmp_path: Path) -> None:
    build_stage = DOCKERFILE.split("\nFROM ", 2)[1]
    copies = [
        line.split()[1:]
        for line in build_stage.splitlines()
        if line.startswith("COPY ") and "--from" not in line
    ]
    assert copies
    for *sources, _destination in copies:
        for source in sources:
            path = ROOT / source
            target = tmp_path / source
            if path.is_dir():
                shutil.copytree(path, target, symlinks=True)
            else:
                shutil.copy2(path, target)
    built = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(tmp_path / "w"), "."],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp_path / "w").glob("interlock-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert "interlock/manifests/crds/moduleset.yaml" in names
    assert "interlock/manifests/ingressclass.yaml" in names
    assert any(name.startswith("interlock/manifests/examples/") for name in names)
