"""The conformance pod runner's decisions: which program an image stands for, a container's
environment and volumes as the kubelet would build them, and the slice of a log the API server
asks for (tests/conformance/pods.py)."""

from __future__ import annotations

import base64
from datetime import UTC, datetime, timedelta

import pytest

from tests.conformance import pods
from tests.conformance.pods import LogLine, PodConfigError, PodFacts, Sources

FACTS = PodFacts(pod_ip="10.244.0.7", host_ip="127.0.0.1")


def b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def tls_backend_pod() -> pods.Obj:
    """The suite's tls-backend Pod (base/manifests.yaml), as the API server stores it."""
    return {
        "metadata": {"name": "tls-backend-5d8f-x2", "namespace": "gateway-conformance-infra"},
        "spec": {
            "nodeName": "conformance-node",
            "containers": [
                {
                    "name": "tls-backend",
                    "image": "registry.k8s.io/gateway-api/echo-basic:v1.5.1",
                    "volumeMounts": [{"name": "secret-volume", "mountPath": "/etc/secret-volume"}],
                    "env": [
                        {
                            "name": "POD_NAME",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}},
                        },
                        {
                            "name": "NAMESPACE",
                            "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}},
                        },
                        {"name": "TLS_SERVER_CERT", "value": "/etc/secret-volume/crt"},
                        {"name": "TLS_SERVER_PRIVKEY", "value": "/etc/secret-volume/key"},
                    ],
                }
            ],
            "volumes": [
                {
                    "name": "secret-volume",
                    "secret": {
                        "secretName": "tls-checks-certificate",
                        "items": [
                            {"key": "tls.crt", "path": "crt"},
                            {"key": "tls.key", "path": "key"},
                        ],
                    },
                },
                {
                    "name": "kube-api-access-abcde",
                    "projected": {"sources": [{"serviceAccountToken": {}}]},
                },
            ],
        },
    }


SOURCES = Sources(
    secrets={"tls-checks-certificate": {"data": {"tls.crt": b64("CERT"), "tls.key": b64("KEY")}}},
    config_maps={"settings": {"data": {"mode": "fast", "port": "3000"}}},
)


@pytest.mark.parametrize(
    ("image", "runs"),
    [
        ("registry.k8s.io/gateway-api/echo-basic:v1.5.1", pods.ECHO_BASIC),
        ("registry.k8s.io/gateway-api/echo-basic:v1.6.0-dev.3", pods.ECHO_BASIC),
        ("localhost:5000/gateway-api/echo-basic@sha256:abc", pods.ECHO_BASIC),
        ("registry.k8s.io/coredns/coredns:v1.12.2", pods.PLACEHOLDER),
        ("registry.k8s.io/gateway-api/echo-advanced:v1.5.1", None),
        ("nginx:1.27", None),
    ],
)
def test_an_image_runs_echo_basic_a_placeholder_or_nothing(image: str, runs: str | None) -> None:
    assert pods.runnable_for(image) == runs


def test_env_resolves_field_refs_and_values_in_order() -> None:
    pod = tls_backend_pod()
    env = pods.container_env(pod, pod["spec"]["containers"][0], SOURCES, FACTS)
    assert env == {
        "POD_NAME": "tls-backend-5d8f-x2",
        "NAMESPACE": "gateway-conformance-infra",
        "TLS_SERVER_CERT": "/etc/secret-volume/crt",
        "TLS_SERVER_PRIVKEY": "/etc/secret-volume/key",
    }


def test_env_reads_secrets_config_maps_pod_ip_and_expands_earlier_variables() -> None:
    pod = tls_backend_pod()
    container = {
        "name": "c",
        "envFrom": [{"configMapRef": {"name": "settings"}, "prefix": "CFG_"}],
        "env": [
            {
                "name": "KEY",
                "valueFrom": {"secretKeyRef": {"name": "tls-checks-certificate", "key": "tls.key"}},
            },
            {"name": "IP", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}},
            {"name": "URL", "value": "http://$(IP):$(CFG_port)/$(UNDEFINED)$$"},
        ],
    }
    env = pods.container_env(pod, container, SOURCES, FACTS)
    assert env["CFG_mode"] == "fast"
    assert env["KEY"] == "KEY"
    assert env["URL"] == "http://10.244.0.7:3000/$(UNDEFINED)$"


def test_a_missing_secret_key_names_the_pod_container_and_entry() -> None:
    pod = tls_backend_pod()
    container = {
        "name": "c",
        "env": [
            {
                "name": "X",
                "valueFrom": {"secretKeyRef": {"name": "tls-checks-certificate", "key": "nope"}},
            }
        ],
    }
    with pytest.raises(PodConfigError, match=r"tls-backend-5d8f-x2 container c: env X: key 'nope'"):
        pods.container_env(pod, container, SOURCES, FACTS)
    container["env"][0]["valueFrom"]["secretKeyRef"]["optional"] = True
    assert pods.container_env(pod, container, SOURCES, FACTS) == {}


def test_volumes_hold_the_secret_items_and_paths_under_a_mount_are_rewritten() -> None:
    pod = tls_backend_pod()
    volumes = pods.volume_files(pod, SOURCES, FACTS)
    assert volumes == {
        "secret-volume": {"crt": b"CERT", "key": b"KEY"},
        "kube-api-access-abcde": {},
    }
    mounts = pods.mount_map(
        pod["spec"]["containers"][0], {"secret-volume": "/run/p/volumes/secret-volume"}
    )
    assert (
        pods.rewrite_paths("/etc/secret-volume/crt", mounts) == "/run/p/volumes/secret-volume/crt"
    )
    assert (
        pods.rewrite_paths("/etc/secret-volume-other/crt", mounts) == "/etc/secret-volume-other/crt"
    )


def test_a_missing_secret_volume_is_a_config_error_until_it_exists() -> None:
    pod = tls_backend_pod()
    with pytest.raises(
        PodConfigError, match="volume secret-volume: Secret 'tls-checks-certificate' not found"
    ):
        pods.volume_files(pod, Sources(secrets={}, config_maps={}), FACTS)


def test_running_status_is_what_the_endpointslice_controller_reads() -> None:
    pod = tls_backend_pod()
    pod["metadata"]["uid"] = "u1"
    moment = datetime(2026, 12, 2, 6, 0, tzinfo=UTC)
    status = pods.running_status(
        pod,
        pod_ip="10.244.0.7",
        host_ip="127.0.0.1",
        started=moment,
        ready=True,
        restarts=1,
        now=moment,
    )
    assert status["phase"] == "Running"
    assert status["podIP"] == "10.244.0.7"
    assert status["podIPs"] == [{"ip": "10.244.0.7"}]
    conditions = {c["type"]: c["status"] for c in status["conditions"]}
    assert conditions["Ready"] == "True"
    assert conditions["ContainersReady"] == "True"
    assert status["containerStatuses"][0]["restartCount"] == 1
    not_ready = pods.running_status(
        pod,
        pod_ip="10.244.0.7",
        host_ip="127.0.0.1",
        started=moment,
        ready=False,
        restarts=0,
        now=moment,
    )
    assert {c["type"]: c["status"] for c in not_ready["conditions"]}["Ready"] == "False"


def test_failed_status_says_why() -> None:
    status = pods.failed_status(
        tls_backend_pod(),
        reason="ImageNotRunnable",
        message="m",
        host_ip="127.0.0.1",
        now=datetime.now(UTC),
    )
    assert (status["phase"], status["reason"]) == ("Failed", "ImageNotRunnable")


def test_log_selection_since_time_tail_and_timestamps() -> None:
    start = datetime(2026, 12, 2, 6, 0, 0, tzinfo=UTC)
    lines = [LogLine(start + timedelta(seconds=i), f"line {i}") for i in range(5)]
    since = pods.parse_time("2026-12-02T06:00:02Z")
    assert pods.select_log(lines, since=since) == "line 2\nline 3\nline 4\n"
    assert pods.select_log(lines, tail=1, timestamps=True) == "2026-12-02T06:00:04Z line 4\n"
    assert pods.select_log(lines, tail=0) == ""
    assert pods.select_log(lines, limit_bytes=8) == "line 0\nl"
