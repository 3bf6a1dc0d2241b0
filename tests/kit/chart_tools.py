"""The Go-built tools the chart's tests run (helm and promtool) and the prometheus-operator CRDs
they install, cached by version.

``hack/build-helm.sh`` and ``hack/build-promtool.sh`` build them from their Go modules into
``~/.cache/interlock/bin/<tool>-<version>/`` (CI runs both first); the version is read from the
script, so it is pinned in one place. Without Go the tests skip with the reason (a Python-only
machine), unless ``INTERLOCK_REQUIRE_BINARIES=1`` says the binaries must be there (CI); with Go
and no binary they fail with the build command.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "interlock"
MANIFESTS = REPO / "manifests"

HELM_ONLY_LABELS = frozenset(
    {
        "app.kubernetes.io/instance",
        "app.kubernetes.io/managed-by",
        "app.kubernetes.io/version",
        "helm.sh/chart",
    }
)
"""The labels the chart adds to every object's metadata (never to selectors or Pod templates),
and the only difference from ``manifests/`` its default render may have."""


def _pinned(script: Path, variable: str) -> str:
    found = re.search(rf'{variable}="\$\{{{variable}:-([^}}]+)\}}"', script.read_text())
    assert found is not None, f"{script}: no {variable} default"
    return found.group(1)


def tool(name: str) -> Path:
    """The cached ``helm`` or ``promtool`` binary (see the module docstring)."""
    variable = {"helm": "HELM_VERSION", "promtool": "PROMETHEUS_VERSION"}[name]
    return _cached(f"build-{name}.sh", variable, lambda version: f"bin/{name}-{version}/{name}")


def monitoring_crds() -> Path:
    """prometheus-operator's ServiceMonitor and PrometheusRule CRDs (a folder), fetched from its
    Go module by ``hack/fetch-monitoring-crds.sh``."""
    crds = _cached(
        "fetch-monitoring-crds.sh",
        "PROMETHEUS_OPERATOR_VERSION",
        lambda version: (
            f"crds/prometheus-operator-{version}/monitoring.coreos.com_servicemonitors.yaml"
        ),
    )
    return crds.parent


def _cached(script_name: str, variable: str, where: Callable[[str], str]) -> Path:
    script = REPO / "hack" / script_name
    cache = Path(os.environ.get("INTERLOCK_CACHE", Path.home() / ".cache" / "interlock"))
    found = cache / where(_pinned(script, variable))
    if found.exists():
        return found
    if shutil.which("go") is None:
        message = f"{found} needs Go to fetch or build: {script}"
        if os.environ.get("INTERLOCK_REQUIRE_BINARIES") == "1":
            pytest.fail(message)
        pytest.skip(message)
    pytest.fail(f"{found} is missing: run {script}")


def run(argv: list[str | Path], *, check: bool = True) -> subprocess.CompletedProcess[str]:
    result = subprocess.run(
        [str(part) for part in argv], capture_output=True, text=True, timeout=300, check=False
    )
    if check:
        assert result.returncode == 0, f"{' '.join(map(str, argv))}:\n{result.stderr}"
    return result


def documents(text: str) -> list[dict[str, Any]]:
    return [doc for doc in yaml.safe_load_all(text) if doc]


def helm_template(*flags: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    """``helm template interlock charts/interlock --include-crds FLAGS``."""
    return run(
        [tool("helm"), "template", "interlock", CHART, "--include-crds", *flags], check=check
    )


def rendered(*flags: str) -> list[dict[str, Any]]:
    return documents(helm_template(*flags).stdout)


def kustomized() -> list[dict[str, Any]]:
    """``kubectl kustomize manifests/``: what ``kubectl apply -k manifests/`` installs."""
    return documents(run(["kubectl", "kustomize", MANIFESTS]).stdout)


def key(doc: dict[str, Any]) -> tuple[str, str, str, str]:
    meta = doc["metadata"]
    return (doc["apiVersion"], doc["kind"], meta.get("namespace", ""), meta["name"])
