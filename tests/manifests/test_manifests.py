"""The shipped manifests parse, render with kustomize, and validate against Kubernetes schemas."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import kubernetes_validate
import pytest
import yaml

from interlock.cli import build_parser
from interlock.cli.run import config_from_args

MANIFESTS = Path(__file__).resolve().parents[2] / "manifests"
KUBE_VERSION = "1.32"


def _documents(path: Path) -> list[dict]:
    with path.open() as f:
        return [doc for doc in yaml.safe_load_all(f) if doc]


def _shipped_files() -> list[Path]:
    return sorted(p for p in MANIFESTS.glob("*.yaml") if p.name != "kustomization.yaml")


@pytest.mark.parametrize("path", _shipped_files(), ids=lambda p: p.name)
def test_manifest_validates_against_kubernetes_schema(path: Path) -> None:
    for doc in _documents(path):
        kubernetes_validate.validate(doc, KUBE_VERSION, strict=True)


def test_kustomization_lists_every_shipped_file() -> None:
    kustomization = yaml.safe_load((MANIFESTS / "kustomization.yaml").read_text())
    listed = set(kustomization["resources"])
    assert {p.name for p in _shipped_files()} <= listed
    assert all((MANIFESTS / entry).exists() for entry in listed), listed


@pytest.mark.skipif(shutil.which("kubectl") is None, reason="kubectl is not installed")
def test_kustomize_renders_all_resources() -> None:
    out = subprocess.run(
        ["kubectl", "kustomize", str(MANIFESTS)], capture_output=True, text=True, check=True
    ).stdout
    kinds = {doc["kind"] for doc in yaml.safe_load_all(out) if doc}
    assert {
        "CustomResourceDefinition",
        "Namespace",
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Role",
        "RoleBinding",
        "Deployment",
        "Service",
        "PodDisruptionBudget",
        "IngressClass",
    } <= kinds


def test_deployment_is_restricted_and_highly_available() -> None:
    (deployment,) = _documents(MANIFESTS / "deployment.yaml")
    spec = deployment["spec"]
    assert spec["replicas"] >= 2
    pod = spec["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    (container,) = pod["containers"]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"]["drop"] == ["ALL"]
    assert container["readinessProbe"]["httpGet"]["path"] == "/readyz"
    assert "limits" in container["resources"]


def test_deployment_publishes_the_edge_service_it_ships() -> None:
    (deployment,) = _documents(MANIFESTS / "deployment.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    (flag,) = [arg for arg in container["args"] if arg.startswith("--publish-service=")]
    namespace, name = flag.partition("=")[2].split("/")
    services = {
        (doc["metadata"]["namespace"], doc["metadata"]["name"]): doc
        for doc in _documents(MANIFESTS / "services.yaml")
    }
    edge = services[(namespace, name)]
    # It is the Service whose pods serve the edge port.
    assert edge["spec"]["selector"] == deployment["spec"]["selector"]["matchLabels"]
    assert {port["targetPort"] for port in edge["spec"]["ports"]} == {"edge"}


def test_rbac_never_grants_write_on_secrets_or_wildcards() -> None:
    for doc in _documents(MANIFESTS / "rbac.yaml"):
        for rule in doc.get("rules", []):
            assert "*" not in rule["verbs"] and "*" not in rule["resources"], rule
            if "secrets" in rule["resources"]:
                assert set(rule["verbs"]) <= {"get", "list", "watch"}, rule


def test_network_policy_opens_the_edge_to_all_and_the_rest_to_the_cluster_only() -> None:
    (deployment,) = _documents(MANIFESTS / "deployment.yaml")
    (policy,) = _documents(MANIFESTS / "networkpolicy.yaml")
    assert policy["metadata"]["namespace"] == deployment["metadata"]["namespace"]
    pod = deployment["spec"]["template"]
    selector = policy["spec"]["podSelector"]["matchLabels"]
    assert selector.items() <= pod["metadata"]["labels"].items()
    assert "Ingress" in policy["spec"]["policyTypes"]
    (container,) = pod["spec"]["containers"]
    named_ports = {port["name"] for port in container["ports"]}
    opened: dict[str, list[dict]] = {}
    for rule in policy["spec"]["ingress"]:
        for port in rule["ports"]:
            assert port["port"] in named_ports, port
            opened.setdefault(port["port"], []).extend(rule.get("from") or [{"anyone": True}])
    assert opened.keys() == named_ports == {"edge", "policy", "grpc", "admin"}
    assert opened["edge"] == [{"anyone": True}]
    for name in ("policy", "grpc", "admin"):
        # Pods of the cluster, never an ipBlock (the outside world) nor "anyone".
        assert opened[name] and all(
            peer.keys() <= {"namespaceSelector", "podSelector"} for peer in opened[name]
        ), opened[name]
    # /debug/ stays loopback-only in the shipped Deployment.
    assert not any(arg.startswith("--debug-from") for arg in container["args"])


def test_the_deployment_answers_its_services_dns_names() -> None:
    """Every DNS name of the policy and metrics Services passes the Deployment's Host guard (a
    Host naming none of them is refused, against DNS rebinding); the edge is not guarded."""
    (deployment,) = _documents(MANIFESTS / "deployment.yaml")
    (container,) = deployment["spec"]["template"]["spec"]["containers"]
    config = config_from_args(build_parser().parse_args(container["args"]))
    namespace = deployment["metadata"]["namespace"]
    services = [
        doc
        for doc in _documents(MANIFESTS / "services.yaml")
        if {port["targetPort"] for port in doc["spec"]["ports"]} & {"policy", "admin"}
    ]
    assert {service["metadata"]["name"] for service in services} == {
        "interlock-policy",
        "interlock-metrics",
    }
    for service in services:
        name = service["metadata"]["name"]
        for dns in (name, f"{name}.{namespace}", f"{name}.{namespace}.svc"):
            for host in (dns, f"{dns}.cluster.local" if dns.endswith(".svc") else dns):
                for port in service["spec"]["ports"]:
                    assert config.allowed_hosts.allows(f"{host}:{port['port']}"), host
    assert config.allowed_hosts.allows("10.244.1.7:9090")  # kubelet probes by Pod IP
    assert not config.allowed_hosts.allows("evil.example")
