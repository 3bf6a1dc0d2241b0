"""What the benchmark scripts share: a process's resident memory (and its slope over a soak),
and their own section of ``docs/benchmarks.md``.

Each script measures something different, but all of them read RSS the same way (the kernel's
``VmRSS``, the figure ``ps`` and the kubelet show) and each owns one ``## `` section of the
benchmarks page, which ``--write-docs`` replaces without touching the others' sections. One
copy of each here, so a fix to either (a process that exited, a section at the end of the
page) is made once.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

DOC = Path(__file__).resolve().parent.parent / "docs" / "benchmarks.md"


def rss_mib(pid: int | str = "self") -> float:
    """The resident set size of process ``pid`` (this one by default) in MiB; NaN if the kernel
    reports none (a zombie)."""
    with open(f"/proc/{pid}/status") as status:
        for line in status:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def slope_mib_per_hour(samples: list[dict[str, Any]], since: float) -> float | None:
    """The least-squares slope of ``rss_mib`` over ``t`` (seconds) in MiB per hour, from the
    samples taken at ``since`` or later (None with fewer than three)."""
    points = [(s["t"], s["rss_mib"]) for s in samples if s["t"] >= since]
    if len(points) < 3:
        return None
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_r = sum(r for _, r in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    cov = sum((t - mean_t) * (r - mean_r) for t, r in points)
    return round(cov / var * 3600, 2) if var else None


def command_lines(command: str) -> list[str]:
    """The command that made a section's figures, as a Markdown code block and a blank line."""
    return ["```", command, "```", ""]


def machine() -> str:
    """``Machine: <platform>, Python <version>, <n> CPUs``, the start of a section's note on
    where its figures come from."""
    return (
        f"Machine: {platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs"
    )


def write_section(text: str, heading: str, doc: Path = DOC) -> None:
    """Replace the section under ``heading`` (up to the next ``## `` heading) with ``text``, or
    append it if the page has no such section yet."""
    page = doc.read_text() if doc.exists() else "# Benchmarks\n"
    pattern = re.compile(rf"^{re.escape(heading)}\n.*?(?=^## |\Z)", re.S | re.M)
    section = text.rstrip("\n") + "\n"
    if pattern.search(page):
        page = pattern.sub(lambda _: section + "\n", page, count=1)
    else:
        page = page.rstrip("\n") + "\n\n" + section
    doc.write_text(page.rstrip("\n") + "\n")


def report(text: str, heading: str, *, write_docs: bool, doc: Path = DOC) -> None:
    """Print a section's ``text``; with ``write_docs`` (the scripts' ``--write-docs``), also put
    it in the page under ``heading``."""
    print(text)
    if write_docs:
        write_section(text, heading, doc)


def quiet_logs() -> None:
    """Only warnings and errors from interlock's logs: a benchmark's output is its figures."""
    from loguru import logger

    logger.remove()
    logger.add(sys.stderr, level="WARNING")


def tree_env(tree: str | None) -> dict[str, str] | None:
    """The environment of a child that imports interlock from ``tree`` (None: this checkout's,
    the environment inherited as it is)."""
    return None if tree is None else {**os.environ, "PYTHONPATH": tree}


def child_json(script: str, args: list[str], tree: str | None) -> dict[str, Any]:
    """Run ``script`` with ``args`` in a fresh interpreter importing interlock from ``tree``
    (and working there), and return the JSON object its last line of output holds (a
    benchmark's ``--child`` run: the before/after of ``--tree`` in one sitting)."""
    out = subprocess.run(
        [sys.executable, script, *args],
        env=tree_env(tree),
        cwd=tree or None,
        capture_output=True,
        text=True,
        check=True,
    )
    result: dict[str, Any] = json.loads(out.stdout.strip().splitlines()[-1])
    return result
