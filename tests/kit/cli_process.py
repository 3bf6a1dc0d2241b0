"""Run ``interlock`` as a user does, in a subprocess, and read what it prints as it prints it."""

from __future__ import annotations

import base64
import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def interlock_argv(*args: str) -> list[str]:
    """``interlock ARGS`` with the interpreter running the tests (the project's venv)."""
    return [sys.executable, "-m", "interlock", *args]


def child_env(**extra: str) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("INTERLOCK_")}
    env["PYTHONUNBUFFERED"] = "1"
    env.update(extra)
    return env


def finished(argv: Sequence[str], *, timeout: float = 90.0, stdin: str | None = None) -> str:
    """Run ``argv`` to its end; it must exit 0 (else the failure shows its stderr): its stdout."""
    command = list(argv)
    result = subprocess.run(
        command, input=stdin, capture_output=True, text=True, timeout=timeout, env=child_env()
    )
    assert result.returncode == 0, f"{' '.join(command)}: exit {result.returncode}: {result.stderr}"
    return result.stdout


WEB_SERVICE = """
apiVersion: v1
kind: Service
metadata: {name: web, namespace: default}
spec:
  ports: [{name: http, port: 80}]
"""


class Running:
    """A subprocess whose stdout lines are collected by a thread; stderr goes to a file."""

    def __init__(self, argv: Sequence[str], *, log: Path, env: dict[str, str] | None = None):
        self.lines: list[str] = []
        self._new: queue.Queue[str] = queue.Queue()
        self._stderr = open(log, "w", encoding="utf-8")  # noqa: SIM115 - closed in stop()
        self.log = log
        self.process = subprocess.Popen(
            list(argv),
            cwd=ROOT,
            env=env if env is not None else child_env(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self._new.put(line.rstrip("\n"))

    def _collect(self, block_for: float) -> None:
        try:
            self.lines.append(self._new.get(timeout=block_for))
            while True:
                self.lines.append(self._new.get_nowait())
        except queue.Empty:
            pass

    def wait_for(self, pattern: str, *, within: float = 90.0) -> re.Match[str]:
        """The first printed line matching ``pattern`` (waiting for it up to ``within`` s)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + within
        seen = 0
        while True:
            for line in self.lines[seen:]:
                match = regex.search(line)
                if match:
                    return match
            seen = len(self.lines)
            if time.monotonic() > deadline or (
                self.process.poll() is not None and self._new.empty()
            ):
                raise AssertionError(
                    f"no line matching {pattern!r} within {within}s; printed:\n"
                    + "\n".join(self.lines)
                    + f"\nstderr:\n{self.log.read_text()[-3000:]}"
                )
            self._collect(0.05)

    def wait_for_log(self, pattern: str, *, within: float = 90.0) -> re.Match[str]:
        """The first line of stderr matching ``pattern`` (waiting for it up to ``within`` s)."""
        regex = re.compile(pattern)
        deadline = time.monotonic() + within
        while True:
            for line in self.log.read_text().splitlines():
                match = regex.search(line)
                if match:
                    return match
            if time.monotonic() > deadline or self.process.poll() is not None:
                raise AssertionError(
                    f"no stderr line matching {pattern!r} within {within}s; stderr:\n"
                    + self.log.read_text()[-3000:]
                )
            time.sleep(0.05)

    def output(self) -> str:
        """Everything printed so far and the end of stderr, for assertion messages."""
        self._collect(0.0)
        return "\n".join(self.lines) + f"\nstderr:\n{self.log.read_text()[-3000:]}"

    def count(self, predicate: Callable[[str], bool]) -> int:
        self._collect(0.0)
        return sum(1 for line in self.lines if predicate(line))

    def signal(self, signum: signal.Signals) -> None:
        self.process.send_signal(signum)

    def wait(self, *, within: float = 20.0) -> int:
        try:
            code = self.process.wait(timeout=within)
        finally:
            self._reader.join(timeout=5)
            self._collect(0.0)
        return code

    def stop(self) -> None:
        """Kill it if it is still running (a failed test), and release the log file."""
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)
        self._stderr.close()


def http_get(
    url: str, *, headers: dict[str, str] | None = None, auth: tuple[str, str] | None = None
) -> tuple[int, dict[str, str], bytes]:
    """GET ``url``; the status, headers and body (also for 4xx/5xx answers)."""
    request = urllib.request.Request(url, headers=headers or {})
    if auth is not None:
        token = base64.b64encode(f"{auth[0]}:{auth[1]}".encode()).decode()
        request.add_header("Authorization", f"Basic {token}")
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, dict(response.headers), response.read()
    except urllib.error.HTTPError as error:
        return error.code, dict(error.headers), error.read()


def wait_http(url: str, *, status: int = 200, within: float = 90.0) -> None:
    deadline = time.monotonic() + within
    last: object = None
    while time.monotonic() < deadline:
        try:
            last = http_get(url)[0]
            if last == status:
                return
        except OSError as error:
            last = error
        time.sleep(0.05)
    raise AssertionError(f"{url} did not answer {status} within {within}s (last: {last})")
