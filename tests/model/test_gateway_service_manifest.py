"""The Service interlock keeps for a Gateway, decided as a pure function."""

from __future__ import annotations

from typing import Any

from interlock.model.gateway_infrastructure import gateway_service, service_name
from interlock.model.gateway_listeners import AddressProblem, parse_gateway


def gateway(name: str = "web", **spec: Any) -> Any:
    listeners = spec.pop(
        "listeners",
        [
            {"name": "a", "port": 80, "protocol": "HTTP"},
            {"name": "b", "port": 443, "protocol": "HTTPS"},
            {"name": "c", "port": 80, "protocol": "HTTPS"},
            {"name": "d", "port": 9000, "protocol": "example.com/custom"},
        ],
    )
    return parse_gateway(
        {
            "metadata": {"name": name, "namespace": "infra", "uid": "u-1"},
            "spec": {"gatewayClassName": "interlock", "listeners": listeners, **spec},
        }
    )


def test_the_service_names_the_gateway_its_ports_and_its_address() -> None:
    infrastructure = {
        "labels": {"team": "blue", "gateway.networking.k8s.io/gateway-name": "forged"},
        "annotations": {"cost": "1"},
    }
    service = gateway_service(gateway(infrastructure=infrastructure), "10.0.0.7")
    meta = service["metadata"]
    assert meta["name"] == "web-interlock-gateway" and meta["namespace"] == "infra"
    # Ours win: the Service stays findable by its Gateway's name.
    assert meta["labels"] == {
        "team": "blue",
        "gateway.networking.k8s.io/gateway-name": "web",
        "app.kubernetes.io/managed-by": "interlock",
    }
    assert meta["annotations"] == {"cost": "1", "interlock.dev/gateway-address": "10.0.0.7"}
    assert meta["ownerReferences"] == [
        {
            "apiVersion": "gateway.networking.k8s.io/v1",
            "kind": "Gateway",
            "name": "web",
            "uid": "u-1",
            "controller": True,
        }
    ]
    assert service["spec"]["clusterIP"] == "None"
    # One port per number, named by its first listener's protocol (or "port").
    assert service["spec"]["ports"] == [
        {"name": "http-80", "port": 80, "protocol": "TCP"},
        {"name": "https-443", "port": 443, "protocol": "TCP"},
        {"name": "port-9000", "port": 9000, "protocol": "TCP"},
    ]


def test_without_an_address_the_annotation_is_absent() -> None:
    problem = AddressProblem("Programmed", "AddressNotAssigned", "pool empty")
    service = gateway_service(gateway(), problem)
    assert "interlock.dev/gateway-address" not in service["metadata"]["annotations"]


def test_names_that_cannot_be_service_names_are_hashed() -> None:
    assert service_name("web") == "web-interlock-gateway"
    for name in ("1st", "a.b", "x" * 60):
        hashed = service_name(name)
        assert hashed.startswith("interlock-gateway-") and len(hashed) == 34
    assert service_name("a.b") != service_name("a.c")
