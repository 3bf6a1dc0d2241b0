"""The Helm chart renders what ``manifests/`` installs, and its values do what they say.

One source of truth: ``kubectl apply -k manifests/`` and ``helm install`` with the default values
must create the same objects, or the two ways of installing drift apart (a new RBAC rule, a flag,
a port added to one only). The comparison is object by object, field by field; the only
difference allowed is Helm's own labels in each object's metadata. The values a user sets are
checked by rendering them; ``values.schema.json`` is checked by what it refuses, and how it says
so. The chart against a real API server: ``test_chart_real.py``.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
import yaml

from interlock import __version__
from tests.kit.chart_tools import (
    CHART,
    HELM_ONLY_LABELS,
    REPO,
    helm_template,
    key,
    kustomized,
    rendered,
    run,
    tool,
)


def _without_helm_labels(doc: dict[str, Any]) -> dict[str, Any]:
    if doc["kind"] == "CustomResourceDefinition":
        return doc  # the chart's crds/ folder, which Helm installs as it is (no templating)
    doc = copy.deepcopy(doc)
    labels = doc["metadata"].get("labels", {})
    assert labels.keys() >= HELM_ONLY_LABELS, f"{key(doc)} lacks Helm's labels: {labels}"
    for label in HELM_ONLY_LABELS:
        del labels[label]
    return doc


def _by_key(docs: list[dict[str, Any]]) -> dict[tuple[str, str, str, str], dict[str, Any]]:
    found = {key(doc): doc for doc in docs}
    assert len(found) == len(docs), "an object is rendered twice"
    return found


def test_the_default_values_render_the_objects_of_the_kustomization() -> None:
    chart = _by_key([_without_helm_labels(doc) for doc in rendered()])
    manifests = _by_key(kustomized())
    assert sorted(chart) == sorted(manifests)
    for object_key, expected in manifests.items():
        assert chart[object_key] == expected, (
            f"{object_key} differs from manifests/: a change to manifests/ goes into "
            "charts/interlock/templates/ too (or a change to the chart into manifests/)"
        )


def test_a_changed_value_is_a_difference_the_comparison_sees() -> None:
    """The control case: the comparison above sees a difference in one field of one object."""
    chart = _by_key([_without_helm_labels(doc) for doc in rendered("--set", "replicas=3")])
    manifests = _by_key(kustomized())
    deployment = ("apps/v1", "Deployment", "interlock-system", "interlock")
    assert chart[deployment] != manifests[deployment]
    assert chart[deployment]["spec"]["replicas"] == 3


def test_versions_agree() -> None:
    chart = yaml.safe_load((CHART / "Chart.yaml").read_text())
    assert chart["appVersion"] == __version__
    image = next(doc for doc in kustomized() if doc["kind"] == "Deployment")["spec"]["template"][
        "spec"
    ]["containers"][0]["image"]
    assert image.endswith(f":{__version__}")


def test_helm_lint_passes_with_every_option_on() -> None:
    helm = tool("helm")
    run([helm, "lint", "--strict", CHART])
    everything = (
        "mesh.enabled=true,serviceMonitor.enabled=true,prometheusRule.enabled=true,"
        "grafanaDashboard.enabled=true,logFormat=json,ingressClass.default=true,"
        "gatewayClass.create=true"
    )
    run([helm, "lint", "--strict", CHART, "--set", everything])


def _deployment(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return next(doc for doc in docs if doc["kind"] == "Deployment")


def _container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    container: dict[str, Any] = _deployment(docs)["spec"]["template"]["spec"]["containers"][0]
    return container


def test_values_reach_the_deployment() -> None:
    docs = rendered(
        "--set",
        "image.tag=9.9.9,replicas=4,logFormat=json,logLevel=DEBUG,"
        "resources.limits.memory=1Gi,edge.address=0.0.0.0:8443,edge.workers=auto,"
        "publishService.service=edge/lb",
        "--set-json",
        'extraArgs=["--access-log", "--namespace=team-a"]',
    )
    container = _container(docs)
    assert container["image"] == "ghcr.io/interlock-dev/interlock:9.9.9"
    assert _deployment(docs)["spec"]["replicas"] == 4
    args = container["args"]
    assert {"--log-format=json", "--log-level=DEBUG", "--edge-addr=0.0.0.0:8443"} <= set(args)
    assert "--edge-workers=auto" in args
    assert "--publish-service=edge/lb" in args
    assert args[-2:] == ["--access-log", "--namespace=team-a"]
    assert {"name": "edge", "containerPort": 8443} in container["ports"]
    assert container["resources"]["limits"]["memory"] == "1Gi"


def test_the_allowed_hosts_follow_the_namespace() -> None:
    docs = rendered(
        "--set", "namespace.name=edge,clusterDomain=corp.internal,extraAllowedHosts[0]=policy.corp"
    )
    allowed = [a.partition("=")[2] for a in _container(docs)["args"] if "--allowed-host=" in a]
    assert allowed == [
        "interlock-policy",
        "interlock-metrics",
        "*.edge",
        "*.edge.svc",
        "*.edge.svc.corp.internal",
        "policy.corp",
    ]


def test_the_mesh_listener_gets_its_flag_port_service_and_network_policy_rule() -> None:
    docs = rendered("--set", "mesh.enabled=true,mesh.clientNamespace=apps")
    args = _container(docs)["args"]
    assert {"--mesh-addr=0.0.0.0:8081", "--mesh-client-namespace=apps"} <= set(args)
    assert {"name": "mesh", "containerPort": 8081} in _container(docs)["ports"]
    service = next(
        d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == "interlock-mesh"
    )
    assert service["spec"]["ports"] == [{"name": "mesh", "port": 80, "targetPort": "mesh"}]
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    cluster_ports = policy["spec"]["ingress"][-1]["ports"]
    assert {"port": "mesh", "protocol": "TCP"} in cluster_ports


def test_without_the_edge_there_is_no_edge_service_port_rule_nor_publish_service() -> None:
    docs = rendered("--set", "edge.enabled=false")
    args = _container(docs)["args"]
    assert not [a for a in args if a.startswith(("--edge-addr", "--publish-service"))]
    names = {d["metadata"]["name"] for d in docs if d["kind"] == "Service"}
    assert names == {"interlock-policy", "interlock-metrics"}
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    assert all("from" in rule for rule in policy["spec"]["ingress"])


def test_without_linkerd_s_proxy_api_there_is_no_grpc_flag_port_nor_rule() -> None:
    docs = rendered("--set", "grpc.enabled=false")
    assert not [a for a in _container(docs)["args"] if a.startswith("--grpc-addr")]
    assert "grpc" not in {p["name"] for p in _container(docs)["ports"]}
    policy_service = next(d for d in docs if d["metadata"]["name"] == "interlock-policy")
    assert [p["name"] for p in policy_service["spec"]["ports"]] == ["policy"]
    policy = next(d for d in docs if d["kind"] == "NetworkPolicy")
    assert "grpc" not in {p["port"] for rule in policy["spec"]["ingress"] for p in rule["ports"]}


def test_optional_objects_are_off_by_default_and_on_when_asked() -> None:
    optional = {"ServiceMonitor", "PrometheusRule", "ConfigMap"}
    assert not optional & {d["kind"] for d in rendered()}
    docs = rendered(
        "--set",
        "serviceMonitor.enabled=true,prometheusRule.enabled=true,grafanaDashboard.enabled=true,"
        "networkPolicy.enabled=false,podDisruptionBudget.enabled=false",
    )
    kinds = {d["kind"] for d in docs}
    assert optional <= kinds
    assert not {"NetworkPolicy", "PodDisruptionBudget"} & kinds
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")
    assert monitor["spec"]["endpoints"][0]["port"] == "admin"
    rule = next(d for d in docs if d["kind"] == "PrometheusRule")
    alerts = yaml.safe_load((CHART / "files" / "alerts.yaml").read_text())
    assert rule["spec"] == alerts
    dashboard = next(d for d in docs if d["kind"] == "ConfigMap")
    assert dashboard["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = json.loads((CHART / "files" / "dashboards" / "interlock.json").read_text())
    assert json.loads(dashboard["data"]["interlock.json"]) == shipped


def test_the_gateway_class_is_asked_for() -> None:
    assert "GatewayClass" not in {d["kind"] for d in rendered()}
    docs = rendered("--set", "gatewayClass.create=true,gatewayClass.name=edge")
    gateway_class = next(d for d in docs if d["kind"] == "GatewayClass")
    assert gateway_class["metadata"]["name"] == "edge"
    assert gateway_class["spec"] == {"controllerName": "interlock.dev/gateway-controller"}


def test_the_dashboard_in_docs_is_the_chart_s() -> None:
    docs = REPO / "docs" / "dashboards" / "interlock.json"
    assert docs.read_bytes() == (CHART / "files" / "dashboards" / "interlock.json").read_bytes()


@pytest.mark.parametrize(
    ("flags", "named"),
    [
        (("--set", "replicas=two"), "replicas"),
        (("--set", "logFormat=yaml"), "logFormat"),
        (("--set", "logLevel=verbose"), "logLevel"),
        (("--set", "edge.address=8080"), "edge.address"),
        (("--set", "policy.address=0.0.0.0:0"), "policy.address"),
        (("--set", "image.pullPolicy=Sometimes"), "image.pullPolicy"),
        (("--set", "publishService.service=just-a-name"), "publishService.service"),
        (("--set", "serviceMonitor.enabled=yes"), "serviceMonitor.enabled"),
        (("--set-json", 'extraArgs=["access-log"]'), "extraArgs"),
        (("--set", "edge.service.type=Ingress"), "edge.service.type"),
        (("--set", "edge.workers=0"), "edge.workers"),
        (("--set", "replica=3"), "replica"),
    ],
)
def test_the_schema_refuses_a_wrong_value_and_names_it(flags: tuple[str, str], named: str) -> None:
    result = helm_template(*flags, check=False)
    assert result.returncode != 0, result.stdout[:500]
    assert "values don't meet the specifications of the schema" in result.stderr, result.stderr
    assert named.split(".")[-1] in result.stderr, result.stderr
