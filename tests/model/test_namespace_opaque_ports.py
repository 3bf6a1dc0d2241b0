"""``config.linkerd.io/opaque-ports`` on the Namespace (Linkerd's rule): it applies to every Service
of the namespace that has no such annotation of its own."""

from __future__ import annotations

import pytest

from interlock.model.outbound_policy import service_annotation_problems, service_port_settings
from interlock.model.service import Service, parse_service


def db(annotations: dict[str, str] | None = None, app_protocol: str | None = None) -> Service:
    port: dict[str, object] = {"port": 5432}
    if app_protocol is not None:
        port["appProtocol"] = app_protocol
    return parse_service(
        {
            "metadata": {"name": "db", "namespace": "shop", "annotations": annotations or {}},
            "spec": {"ports": [port]},
        }
    )


OPAQUE = "config.linkerd.io/opaque-ports"


@pytest.mark.parametrize(
    ("service_value", "namespace_value", "protocol"),
    [
        (None, None, "detect"),
        (None, "5432", "opaque"),
        (None, "1-6000", "opaque"),
        (None, "80", "detect"),
        ("80", "5432", "detect"),  # the Service's own annotation overrides the Namespace's
        ("5432", None, "opaque"),
        ("", "5432", "detect"),  # an empty annotation is the Service's own: no opaque port
    ],
)
def test_namespace_annotation_unless_the_service_has_its_own(
    service_value: str | None, namespace_value: str | None, protocol: str
) -> None:
    annotations = {} if service_value is None else {OPAQUE: service_value}
    service = db(annotations).in_namespace(namespace_value)
    assert service_port_settings(service, 5432)[0] == protocol


def test_a_malformed_namespace_value_is_reported_as_the_namespace_s() -> None:
    service = db().in_namespace("lots")
    assert service_port_settings(service, 5432)[0] == "detect"
    (problem,) = service_annotation_problems(service)
    assert problem.message.startswith("Namespace shop: annotation config.linkerd.io/opaque-ports")


def test_in_namespace_keeps_the_same_object_when_nothing_changes() -> None:
    service = db().in_namespace("5432")
    assert service.in_namespace("5432") is service
    assert service.in_namespace(None) == db()
