"""What an Ingress's ``status.loadBalancer`` says, from the published Service or the listen
address."""

from __future__ import annotations

from typing import Any

import pytest

from interlock.model.load_balancer import (
    listen_address_status,
    parse_publish_service,
    published_service_status,
)
from interlock.model.meta import ObjectKey
from interlock.model.service import parse_service


def service(spec: dict[str, Any], status: dict[str, Any] | None = None) -> Any:
    raw: dict[str, Any] = {"metadata": {"name": "edge", "namespace": "ingress"}, "spec": spec}
    if status is not None:
        raw["status"] = status
    return parse_service(raw)


def test_the_load_balancer_ingress_wins_over_the_cluster_ip() -> None:
    svc = service(
        {"type": "LoadBalancer", "clusterIP": "10.96.0.9", "clusterIPs": ["10.96.0.9"]},
        {
            "loadBalancer": {
                "ingress": [
                    {
                        "ip": "192.0.2.1",
                        "ipMode": "VIP",
                        "ports": [{"port": 80, "protocol": "TCP"}],
                    },
                    {"hostname": "lb.example.net"},
                ]
            }
        },
    )
    assert published_service_status(svc) == {
        "ingress": [
            {"ip": "192.0.2.1", "ports": [{"port": 80, "protocol": "TCP"}]},
            {"hostname": "lb.example.net"},
        ]
    }


def test_external_ips_are_added_once() -> None:
    svc = service(
        {
            "type": "LoadBalancer",
            "clusterIP": "10.96.0.9",
            "externalIPs": ["192.0.2.1", "198.51.100.7"],
        },
        {"loadBalancer": {"ingress": [{"ip": "192.0.2.1"}]}},
    )
    assert published_service_status(svc) == {
        "ingress": [{"ip": "192.0.2.1"}, {"ip": "198.51.100.7"}]
    }


def test_a_pending_load_balancer_publishes_the_cluster_ips() -> None:
    svc = service(
        {
            "type": "LoadBalancer",
            "clusterIP": "10.96.0.9",
            "clusterIPs": ["10.96.0.9", "fd00::9"],
        },
        {"loadBalancer": {}},
    )
    assert published_service_status(svc) == {"ingress": [{"ip": "10.96.0.9"}, {"ip": "fd00::9"}]}
    only_cluster_ip = service({"clusterIP": "10.96.0.9"})
    assert published_service_status(only_cluster_ip) == {"ingress": [{"ip": "10.96.0.9"}]}


def test_external_name_and_headless_services() -> None:
    external = service({"type": "ExternalName", "externalName": "edge.example.net"})
    assert published_service_status(external) == {"ingress": [{"hostname": "edge.example.net"}]}
    headless = service({"clusterIP": "None", "clusterIPs": ["None"]})
    # Cleared rather than left stale.
    assert published_service_status(headless) == {"ingress": []}


def test_null_lists_from_a_client_do_not_fail_the_service() -> None:
    svc = service(
        {"clusterIP": "10.96.0.9", "externalIPs": None, "clusterIPs": None, "ports": None},
        {"loadBalancer": {"ingress": None}},
    )
    assert published_service_status(svc) == {"ingress": [{"ip": "10.96.0.9"}]}


def test_the_listen_address_is_written_unless_it_is_a_wildcard() -> None:
    assert listen_address_status("127.0.0.1", ports=[8080, 8443]) == {
        "ingress": [
            {
                "ip": "127.0.0.1",
                "ports": [{"port": 8080, "protocol": "TCP"}, {"port": 8443, "protocol": "TCP"}],
            }
        ]
    }
    assert listen_address_status("edge.internal", ports=()) == {
        "ingress": [{"hostname": "edge.internal"}]
    }
    for wildcard in ("0.0.0.0", "::", ""):
        assert listen_address_status(wildcard, ports=[8080]) is None


def test_parse_publish_service() -> None:
    assert parse_publish_service("ingress/edge") == ObjectKey(namespace="ingress", name="edge")
    for bad in ("edge", "/edge", "ingress/", "a/b/c"):
        with pytest.raises(ValueError, match="--publish-service"):
            parse_publish_service(bad)
