"""Service and EndpointSlice parsing, and the ready addresses the edge sends traffic to."""

from typing import Any

import pytest

from interlock.model.meta import InvalidObject, ObjectKey
from interlock.model.service import (
    EndpointSlice,
    parse_endpoint_slice,
    parse_service,
    ready_addresses,
)


def _service(**spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {
            "name": "web",
            "namespace": "shop",
            "uid": "u-1",
            "creationTimestamp": "2024-05-01T10:00:00Z",
            "annotations": {"team": "blue"},
            "managedFields": [{"manager": "kubectl"}],
        },
        "spec": spec,
    }


def test_service_reads_ports_type_and_metadata() -> None:
    service = parse_service(
        _service(
            clusterIP="10.0.0.7",
            ports=[
                {"name": "http", "port": 80, "targetPort": "web", "appProtocol": "http"},
                {"name": "admin", "port": 9000, "targetPort": 9001, "protocol": "TCP"},
            ],
            sessionAffinity="None",
        )
    )
    assert service.key == ObjectKey(namespace="shop", name="web")
    assert service.metadata.annotations == {"team": "blue"}
    # Of its metadata a Service keeps what is read: no uid, resourceVersion, labels, timestamps.
    assert service.metadata.model_fields_set == {"name", "namespace", "annotations"}
    http = service.port_by_number(80)
    assert http is not None
    assert (http.name, http.target_port, http.app_protocol) == ("http", "web", "http")
    assert service.port_by_name("admin") == service.port_by_number(9000)
    assert service.port_by_number(9000).target_port == 9001  # type: ignore[union-attr]
    assert service.port_by_number(81) is None
    assert not service.is_headless
    assert not service.is_external_name


@pytest.mark.parametrize(
    ("spec", "headless", "external_name"),
    [
        ({"clusterIP": "None", "ports": [{"port": 80}]}, True, False),
        ({"type": "ExternalName", "externalName": "example.com"}, False, True),
        ({"type": "LoadBalancer", "ports": [{"port": 80}]}, False, False),
    ],
)
def test_service_kinds_that_cannot_be_a_route_parent(
    spec: dict[str, Any], headless: bool, external_name: bool
) -> None:
    service = parse_service(_service(**spec))
    assert service.is_headless is headless
    assert service.is_external_name is external_name


@pytest.mark.parametrize(
    ("raw", "field"),
    [
        (_service(ports=[{"port": 80}, {"port": 70000}]), "spec.ports[1].port"),
        (_service(ports=[{"port": 0}]), "spec.ports[0].port"),
        (_service(ports=[{"name": "x"}]), "spec.ports[0].port"),
        (_service(ports=[{"port": 80, "protocol": "HTTP"}]), "spec.ports[0].protocol"),
        (_service(type="Mesh"), "spec.type"),
        ({"metadata": {"name": "web"}, "spec": {}}, "metadata.namespace"),
    ],
)
def test_bad_service_is_reported_with_field_path(raw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidObject) as err:
        parse_service(raw)
    assert err.value.field == field
    assert str(err.value).startswith("Service ")
    assert "web" in str(err.value)


def _slice(name: str, ports: Any, endpoints: Any, service: str = "web") -> dict[str, Any]:
    return {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {
            "name": name,
            "namespace": "shop",
            "labels": {"kubernetes.io/service-name": service},
        },
        "addressType": "IPv4",
        "ports": ports,
        "endpoints": endpoints,
    }


def _parse_all(*raws: dict[str, Any]) -> list[EndpointSlice]:
    return [parse_endpoint_slice(raw) for raw in raws]


def test_endpoint_slice_belongs_to_its_service_by_label() -> None:
    endpoint_slice = parse_endpoint_slice(_slice("web-abc", [], []))
    assert endpoint_slice.service_key == ObjectKey(namespace="shop", name="web")
    unlabeled = _slice("x", [], [])
    unlabeled["metadata"]["labels"] = {}
    assert parse_endpoint_slice(unlabeled).service_key is None


def test_ready_addresses_use_the_named_port_and_only_ready_endpoints() -> None:
    slices = _parse_all(
        _slice(
            "web-a",
            [{"name": "http", "port": 8080}, {"name": "admin", "port": 9001}],
            [
                {"addresses": ["10.0.0.2"], "conditions": {"ready": True}},
                {"addresses": ["10.0.0.1"], "conditions": {"ready": False}},
                # Kubernetes: an unknown ready state is to be read as ready.
                {"addresses": ["10.0.0.3"]},
            ],
        ),
        # During a rollout another slice may carry a different target port under the same name.
        _slice(
            "web-b",
            [{"name": "http", "port": 8081}],
            [{"addresses": ["10.0.1.1", "10.0.1.2"], "conditions": {"ready": True}}],
        ),
        _slice("web-c", [{"name": "metrics", "port": 9100}], [{"addresses": ["10.0.2.1"]}]),
    )
    assert ready_addresses(slices, "http") == [
        ("10.0.0.2", 8080),
        ("10.0.0.3", 8080),
        ("10.0.1.1", 8081),
        ("10.0.1.2", 8081),
    ]
    assert ready_addresses(slices, "admin") == [("10.0.0.2", 9001), ("10.0.0.3", 9001)]
    assert ready_addresses(reversed(slices), "http") == ready_addresses(slices, "http")


def test_unnamed_port_and_null_lists() -> None:
    slices = _parse_all(
        _slice("web-a", [{"name": None, "port": 80}], [{"addresses": ["10.0.0.1"]}]),
        _slice("web-b", None, None),
    )
    assert ready_addresses(slices, "") == [("10.0.0.1", 80)]
    assert ready_addresses(slices, "http") == []


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"addressType": "IPv5"}, "addressType"),
        ({"ports": [{"name": "http", "port": 0}]}, "ports[0].port"),
        ({"endpoints": [{"addresses": []}]}, "endpoints[0].addresses"),
        (
            {"endpoints": [{"addresses": ["a"], "conditions": {"ready": "maybe"}}]},
            "endpoints[0].conditions.ready",
        ),
    ],
)
def test_bad_endpoint_slice_is_reported_with_field_path(change: dict[str, Any], field: str) -> None:
    raw = {**_slice("web-a", [], []), **change}
    with pytest.raises(InvalidObject) as err:
        parse_endpoint_slice(raw)
    assert err.value.field == field
    assert str(err.value).startswith("EndpointSlice shop/web-a: ")
