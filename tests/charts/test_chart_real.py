"""The chart against a real kube-apiserver: accepted, installed, upgraded and uninstalled.

``helm template`` proves only that the templates render; the real server checks every object
through its whole write path (schemas, defaulting, admission, the namespace lifecycle). And
``helm install`` / ``upgrade`` / ``uninstall`` are what operators run: the release must create
every object the chart renders, an upgrade must change what changed and delete what is gone,
and an uninstall must leave nothing behind but the CRD (Helm never deletes a chart's CRDs: that
would delete every ModuleSet). No Pod runs on this server (no kubelet): the objects are the test.

Real lane only (``INTERLOCK_TEST_CLUSTER=real``): the embedded server serves neither workloads
nor RBAC objects, so passing there would prove nothing. The release gets a cluster of its own
(``hack/real-cluster.sh up``), from which what that script pre-installs for the other tests
(the namespace, the RBAC, the CRD) is deleted first, so the chart installs into a cluster that
has never seen interlock.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.kit.chart_tools import (
    CHART,
    documents,
    helm_template,
    key,
    monitoring_crds,
    rendered,
    run,
    tool,
)
from tests.kit.lanes import REAL, ControlPlane, start_control_plane

pytestmark = pytest.mark.skipif(
    not REAL, reason="the chart needs the real API server (INTERLOCK_TEST_CLUSTER=real)"
)

NAMESPACE = "interlock-system"


def _dry_run(kubeconfig: str, manifest: str) -> subprocess.CompletedProcess[str]:
    """``kubectl apply --dry-run=server`` of ``manifest``: what the API server would accept."""
    return subprocess.run(
        ["kubectl", "--kubeconfig", kubeconfig, "apply", "--dry-run=server", "-f", "-"],
        input=manifest,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def _kubectl(kubeconfig: str, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    return run(["kubectl", "--kubeconfig", kubeconfig, *args], check=check)


def test_the_rendered_chart_is_accepted_by_the_real_server(
    control_plane: ControlPlane | None,
) -> None:
    """``helm template … | kubectl apply --dry-run=server -f -``, every object accepted."""
    assert control_plane is not None
    everything = (
        "mesh.enabled=true,ingressClass.default=true,logFormat=json,gatewayClass.create=true"
    )
    for flags in ((), ("--set", everything)):
        manifest = helm_template(*flags).stdout
        result = _dry_run(control_plane.admin_kubeconfig, manifest)
        assert result.returncode == 0, result.stderr
        accepted = {line.split()[0].lower() for line in result.stdout.splitlines()}
        for doc in documents(manifest):
            kind = doc["kind"].lower()
            name = doc["metadata"]["name"]
            assert any(
                a.partition("/")[0].partition(".")[0] == kind and a.endswith(f"/{name}")
                for a in accepted
            ), (kind, name, result.stdout)


@pytest.fixture(scope="module")
def fresh_cluster() -> Iterator[str]:
    """A cluster of its own without what real-cluster.sh pre-installs; its admin kubeconfig."""
    plane = start_control_plane(watch_cache=True)
    try:
        admin = plane.admin_kubeconfig
        _kubectl(admin, "delete", "clusterrolebinding,clusterrole", "interlock")
        _kubectl(admin, "delete", "crd", "modulesets.interlock.dev")
        _kubectl(admin, "delete", "namespace", NAMESPACE, "--wait=false")
        _until_gone(admin, [("v1", "Namespace", "", NAMESPACE)])
        yield admin
    finally:
        plane.down()


def _exists(kubeconfig: str, object_key: tuple[str, str, str, str]) -> bool:
    api_version, kind, namespace, name = object_key
    group = api_version.rpartition("/")[0]
    resource = kind.lower() + (f".{group}" if group else "")
    args = ["get", resource, name, "--ignore-not-found", "-o", "name"]
    if namespace:
        args += ["-n", namespace]
    return bool(_kubectl(kubeconfig, *args).stdout.strip())


def _until_gone(kubeconfig: str, keys: list[tuple[str, str, str, str]]) -> None:
    """Wait (up to two minutes: a namespace is finalized by kube-controller-manager) until
    none of ``keys`` exists."""
    deadline = time.monotonic() + 120
    while left := [k for k in keys if _exists(kubeconfig, k)]:
        assert time.monotonic() < deadline, f"still there after 120 s: {left}"
        time.sleep(0.5)


class Helm:
    def __init__(self, kubeconfig: str, home: Path) -> None:
        self.kubeconfig = kubeconfig
        self.env = {
            **os.environ,
            "HELM_CACHE_HOME": str(home / "cache"),
            "HELM_CONFIG_HOME": str(home / "config"),
            "HELM_DATA_HOME": str(home / "data"),
        }

    def __call__(self, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
        argv = [str(tool("helm")), "--kubeconfig", self.kubeconfig, *args]
        result = subprocess.run(
            argv, capture_output=True, text=True, timeout=300, env=self.env, check=False
        )
        if check:
            assert result.returncode == 0, f"{' '.join(argv)}:\n{result.stderr}"
        return result


def _deployment(kubeconfig: str) -> dict[str, Any]:
    got = _kubectl(kubeconfig, "-n", NAMESPACE, "get", "deployment", "interlock", "-o", "yaml")
    return documents(got.stdout)[0]


def test_install_upgrade_and_uninstall(fresh_cluster: str, tmp_path: Path) -> None:
    helm = Helm(fresh_cluster, tmp_path)
    installed = helm("install", "interlock", str(CHART))
    # NOTES.txt tells how to reach the edge and the policy API.
    assert "kubectl -n interlock-system get service interlock-edge" in installed.stdout
    assert "/v1/outbound/NAMESPACE/SERVICE/PORT" in installed.stdout
    objects = [key(doc) for doc in rendered()]
    missing = [k for k in objects if not _exists(fresh_cluster, k)]
    assert not missing, missing
    established = _kubectl(
        fresh_cluster, "wait", "--for", "condition=established", "crd/modulesets.interlock.dev"
    )
    assert "condition met" in established.stdout

    mesh = ("v1", "Service", NAMESPACE, "interlock-mesh")
    gateway_class = ("gateway.networking.k8s.io/v1", "GatewayClass", "", "interlock")
    more = "replicas=3,mesh.enabled=true,gatewayClass.create=true"
    helm("upgrade", "interlock", str(CHART), "--set", more)
    deployment = _deployment(fresh_cluster)
    assert deployment["spec"]["replicas"] == 3
    assert (
        "--mesh-addr=0.0.0.0:8081"
        in deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    )
    assert _exists(fresh_cluster, mesh) and _exists(fresh_cluster, gateway_class)
    # An upgrade deletes what the new values no longer render. (--reset-values: without values
    # given, helm upgrade would reuse the last release's.)
    helm("upgrade", "interlock", str(CHART), "--reset-values")
    assert _deployment(fresh_cluster)["spec"]["replicas"] == 2
    _until_gone(fresh_cluster, [mesh, gateway_class])
    history = helm("history", "interlock", "-o", "json").stdout
    assert history.count('"revision"') == 3, history

    # A wrong value is refused before anything is sent: the release stays at revision 3.
    refused = helm("upgrade", "interlock", str(CHART), "--set", "logFormat=yaml", check=False)
    assert refused.returncode != 0 and "logFormat" in refused.stderr, refused.stderr
    assert helm("history", "interlock", "-o", "json").stdout.count('"revision"') == 3

    helm("uninstall", "interlock")
    crd = ("apiextensions.k8s.io/v1", "CustomResourceDefinition", "", "modulesets.interlock.dev")
    _until_gone(fresh_cluster, [k for k in objects if k != crd])
    assert _exists(fresh_cluster, crd), "Helm keeps a chart's CRDs"
    assert helm("status", "interlock", check=False).returncode != 0


def test_the_service_monitor_and_the_prometheus_rule_fit_prometheus_operator_s_crds(
    fresh_cluster: str,
) -> None:
    """With prometheus-operator's own CRDs installed, the server checks the chart's
    ServiceMonitor and PrometheusRule (the alerts) against their schemas."""
    _kubectl(fresh_cluster, "apply", "--server-side", "-f", str(monitoring_crds()))
    _kubectl(fresh_cluster, "wait", "--for", "condition=established", "crd", "--all")
    # The namespaced objects' dry run needs their namespace to exist (the Namespace's own is
    # not stored): create it unless the install test left it.
    if not _exists(fresh_cluster, ("v1", "Namespace", "", NAMESPACE)):
        _kubectl(fresh_cluster, "create", "namespace", NAMESPACE)
    flags = "serviceMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true"
    manifest = helm_template("--set", flags).stdout
    result = _dry_run(fresh_cluster, manifest)
    assert result.returncode == 0, result.stderr
    for accepted in (
        "servicemonitor.monitoring.coreos.com/interlock",
        "prometheusrule.monitoring.coreos.com/interlock",
        "configmap/interlock-dashboard",
    ):
        assert accepted in result.stdout, result.stdout
    # The control case: a rule the CRD's schema refuses is refused.
    broken = manifest.replace("for: 10m", "for: ten minutes", 1)
    assert broken != manifest
    refused = _dry_run(fresh_cluster, broken)
    assert refused.returncode != 0 and "for" in refused.stderr, refused.stderr
