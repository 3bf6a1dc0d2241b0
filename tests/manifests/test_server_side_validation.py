"""The shipped manifests and the examples are accepted by a real kube-apiserver.

``kubectl apply --dry-run=server`` sends every object through the real server's whole write
path — its OpenAPI schemas (the Gateway API CRDs' own, with their CEL rules), defaulting,
admission and the namespace lifecycle — without storing anything, so what a user applies to a
cluster is checked here the way a cluster would check it. The offline schema test in
``test_manifests.py`` knows only the built-in kinds; only a real server knows the CRDs.

Real lane only: the embedded server does not serve workloads (apps/v1) and its schemas are what
this test checks against, so passing there would prove nothing.
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
import yaml

from tests.kit.lanes import ControlPlane

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"

pytestmark = pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")


@pytest.fixture
def real(control_plane: ControlPlane | None) -> ControlPlane:
    if control_plane is None:
        pytest.skip(
            "server-side validation needs the real API server (INTERLOCK_TEST_CLUSTER=real)"
        )
    return control_plane


def dry_run(plane: ControlPlane, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["kubectl", "--kubeconfig", plane.admin_kubeconfig, "apply", "--dry-run=server", *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _objects(paths: list[Path]) -> set[tuple[str, str]]:
    found = set()
    for path in paths:
        for doc in yaml.safe_load_all(path.read_text()):
            if doc:
                found.add((doc["kind"].lower(), doc["metadata"]["name"]))
    return found


def _accepted(stdout: str) -> set[tuple[str, str]]:
    """``kind.group/name configured (server dry run)`` lines → ``(kind, name)``."""
    accepted = set()
    for line in stdout.splitlines():
        if line.endswith("(server dry run)"):
            reference = line.split()[0]
            kind_group, _, name = reference.partition("/")
            accepted.add((kind_group.partition(".")[0], name))
    return accepted


def test_the_kustomization_is_accepted_by_the_real_server(real: ControlPlane) -> None:
    result = dry_run(real, "-k", str(MANIFESTS))
    assert result.returncode == 0, result.stderr
    shipped = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())["resources"]
    expected = _objects([p for entry in shipped for p in _files(MANIFESTS / entry)])
    assert expected <= _accepted(result.stdout), result.stdout


def test_the_examples_are_accepted_by_the_real_server(real: ControlPlane) -> None:
    result = dry_run(real, "-f", str(MANIFESTS / "examples"))
    assert result.returncode == 0, result.stderr
    expected = _objects(sorted((MANIFESTS / "examples").glob("*.yaml")))
    # Every example, the Deployments behind the echo Services included.
    assert ("deployment", "echo-v1") in expected
    assert expected <= _accepted(result.stdout), result.stdout


def test_the_dry_run_does_validate(real: ControlPlane, tmp_path: Path) -> None:
    """The control case: what the Gateway API CRDs refuse is refused here too, so the two tests
    above would fail on a manifest a cluster refuses."""
    route = yaml.safe_load((MANIFESTS / "examples" / "httproute.yaml").read_text())
    route["spec"]["rules"][0]["backendRefs"][0]["weight"] = -5
    bad = tmp_path / "bad-route.yaml"
    bad.write_text(yaml.safe_dump(route))
    result = dry_run(real, "-f", str(bad))
    assert result.returncode != 0
    assert "weight" in result.stderr, result.stderr


def _files(path: Path) -> list[Path]:
    return sorted(path.glob("*.yaml")) if path.is_dir() else [path]
