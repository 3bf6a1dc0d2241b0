"""`make binary`: one file that runs interlock with Python 3.11 and nothing else installed.

The zipapp is built once for the module (the build resolves and packs every dependency wheel),
in a copy of the sources so that concurrent test runs and the developer's own dist/ are left
alone, then run from a virtual environment that has nothing installed in it.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

# Building the zipapp (pip wheel + shiv) takes about a minute on a quiet machine and more than
# five at load average 20 (the stress test saw a 300 s bound expire); the suite-wide timeout
# would fail a slow build, not a broken one. The bounds only end a hung build: they cost
# nothing when it succeeds.
pytestmark = pytest.mark.timeout(2400)
BUILD_WITHIN = 1800.0

ROOT = Path(__file__).resolve().parents[1]
SOURCES = ("Makefile", "pyproject.toml", "README.md", "interlock")


@pytest.fixture(scope="module")
def binary(tmp_path_factory: pytest.TempPathFactory) -> Path:
    venv = Path(sys.prefix)
    if not (venv / "bin" / "shiv").exists():
        pytest.fail(f"shiv is not installed in {venv}: pip install -e '.[dev]'")
    tree = tmp_path_factory.mktemp("source")
    for name in SOURCES:
        source = ROOT / name
        if source.is_dir():
            shutil.copytree(source, tree / name, ignore=shutil.ignore_patterns("__pycache__"))
        else:
            shutil.copy2(source, tree / name)
    # -o: the project's venv is already installed; make must not rebuild it from the copy.
    built = subprocess.run(
        ["make", "-C", str(tree), "binary", f"VENV={venv}", "-o", f"{venv}/bin/interlock"],
        capture_output=True,
        text=True,
        timeout=BUILD_WITHIN,
        check=False,
    )
    assert built.returncode == 0, built.stdout[-3000:] + built.stderr[-3000:]
    executable = tree / "dist" / "interlock"
    assert executable.is_file()
    assert os.access(executable, os.X_OK)
    return executable


@pytest.fixture(scope="module")
def clean_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """PATH with a bare venv's python3 first; nothing installed; shiv unpacks under tmp."""
    home = tmp_path_factory.mktemp("clean")
    base_python = Path(sys.base_prefix) / "bin" / "python3"
    subprocess.run(
        [str(base_python), "-m", "venv", "--without-pip", str(home / "venv")],
        check=True,
        timeout=120,
    )
    return {
        "PATH": f"{home / 'venv' / 'bin'}:/usr/bin:/bin",
        "HOME": str(home),
        "SHIV_ROOT": str(home / "shiv"),
        "LANG": "C.UTF-8",
    }


def test_binary_reports_its_version(binary: Path, clean_env: dict[str, str]) -> None:
    shown = subprocess.run(
        [str(binary), "--version"],
        env=clean_env,
        cwd=clean_env["HOME"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert shown.returncode == 0, shown.stderr
    assert re.fullmatch(r"interlock \d+\.\d+\.\d+\S*\n", shown.stdout)
    # The dependencies came out of the zipapp, not from an environment.
    assert list(Path(clean_env["SHIV_ROOT"]).iterdir())


def _status(url: str) -> int | None:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return int(response.status)
    except urllib.error.HTTPError as error:
        return error.code
    except OSError:
        return None


def test_binary_runs_the_embedded_controller_until_ready(
    binary: Path, clean_env: dict[str, str], tmp_path: Path
) -> None:
    log = tmp_path / "stderr.log"
    with open(log, "w") as stderr:
        process = subprocess.Popen(
            [
                str(binary),
                "run",
                "--embedded",
                "--policy-addr",
                "127.0.0.1:0",
                "--admin-addr",
                "127.0.0.1:0",
                "--write-kubeconfig",
                str(tmp_path / "kubeconfig"),
            ],
            env=clean_env,
            cwd=clean_env["HOME"],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
        )
        try:
            assert process.stdout is not None
            admin = None
            for line in process.stdout:
                match = re.search(r"admin listening on (http://\S+)", line)
                if match:
                    admin = match[1]
                    break
            assert admin is not None, log.read_text()[-3000:]
            deadline = time.monotonic() + 180
            while _status(f"{admin}/readyz") != 200:
                assert time.monotonic() < deadline, log.read_text()[-3000:]
                time.sleep(0.1)
            # The CRDs ship inside the binary: embedded mode serves ModuleSets.
            crd = subprocess.run(
                [
                    "kubectl",
                    "--kubeconfig",
                    str(tmp_path / "kubeconfig"),
                    "get",
                    "modulesets",
                    "-A",
                ],
                env={**clean_env, "HOME": str(tmp_path)},
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert crd.returncode == 0, crd.stderr
            process.send_signal(signal.SIGTERM)
            assert process.wait(timeout=120) == 0, log.read_text()[-3000:]
        finally:
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
