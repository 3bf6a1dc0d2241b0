"""What `interlock demo` tells a person, and how it refuses to start without its manifests."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from interlock.config import Address
from interlock.demo.runner import DemoError, DemoOptions, banner, run_demo


def _banner_text(**overrides: Any) -> str:
    """The demo's banner for a demo on the usual loopback ports, with ``overrides`` applied."""
    arguments: dict[str, Any] = {
        "edge": Address("127.0.0.1", 8080),
        "policy_url": "http://127.0.0.1:8090",
        "admin_url": "http://127.0.0.1:9090",
        "admin_paths": ["/readyz"],
        "kubeconfig": "/tmp/d/kubeconfig",
        "examples": Path("/src/manifests/examples"),
        "trace_file": Path("/tmp/d/trace.jsonl"),
        "backends": [],
    }
    return "\n".join(banner(**(arguments | overrides)))


def test_banner_gives_the_curl_policy_and_kubectl_lines() -> None:
    text = _banner_text(
        admin_paths=["/readyz", "/debug/"], backends=[("echo-v1", 4001), ("echo-v2", 4002)]
    )
    assert "curl -u demo:demo -H 'Host: demo.localhost' http://127.0.0.1:8080/hello" in text
    assert "http://127.0.0.1:8090/v1/outbound/default/echo/80" in text
    assert "kubectl --kubeconfig /tmp/d/kubeconfig delete service echo-v2" in text
    assert "apply -f /src/manifests/examples/services.yaml" in text
    assert "http://127.0.0.1:9090/readyz  http://127.0.0.1:9090/debug/" in text
    assert "interlock trace /tmp/d/trace.jsonl" in text
    assert "echo-v2 on 127.0.0.1:4002" in text
    assert "mesh listener" not in text  # none asked for


def test_banner_shows_how_to_call_a_service_through_the_mesh_listener() -> None:
    text = _banner_text(mesh=Address("127.0.0.1", 4140))
    assert "mesh listener  http://127.0.0.1:4140" in text
    assert "curl --proxy http://127.0.0.1:4140 http://echo.default/hello" in text


async def test_demo_without_its_manifests_says_where_it_looked(tmp_path: Path) -> None:
    options = DemoOptions(
        edge_addr=Address("127.0.0.1", 0),
        policy_addr=Address("127.0.0.1", 0),
        admin_addr=Address("127.0.0.1", 0),
        duration=1,
        manifests=tmp_path,
    )
    with pytest.raises(DemoError, match=r"examples.*--manifests"):
        await run_demo(options, out=lambda _line: None)


def test_banner_commands_name_the_interlock_that_runs(monkeypatch, tmp_path: Path) -> None:
    from interlock.demo import runner

    text = _banner_text(interlock="/src/.venv/bin/interlock", kubectl_found=False)
    assert "  /src/.venv/bin/interlock policy watch default/echo:80 --server http" in text
    assert "/src/.venv/bin/interlock trace /tmp/d/trace.jsonl" in text
    assert "kubectl is not on PATH" in text

    venv_interlock = tmp_path / "bin" / "interlock"
    monkeypatch.setattr(runner.sys, "argv", [str(venv_interlock), "demo"])
    monkeypatch.setattr(runner.shutil, "which", lambda name: None)
    assert runner.interlock_command() == str(venv_interlock.resolve()), "not on PATH: full path"
    monkeypatch.setattr(runner.shutil, "which", lambda name: str(venv_interlock))
    assert runner.interlock_command() == "interlock", "on PATH: the short name works"
    monkeypatch.setattr(runner.sys, "argv", ["/src/interlock/__main__.py", "demo"])
    assert runner.interlock_command() == f"{runner.sys.executable} -m interlock"
