"""The embedded API server refuses the Ingresses and EndpointSlices a real one refuses.

A test or demo that passes here with an Ingress host ``shop.example:8080`` would fail against a
cluster, and the controller would be exercised with inputs it never meets there. Each refusal is
a 422 naming the object and the field, as kube-apiserver's; each valid form still goes in.
"""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest
from kubernetes_asyncio import client

from interlock.embedded import ApiError, EmbeddedApiServer


def ingress(**rule_changes: Any) -> dict[str, Any]:
    path: dict[str, Any] = {
        "path": "/",
        "pathType": "Prefix",
        "backend": {"service": {"name": "web", "port": {"number": 80}}},
    }
    rule: dict[str, Any] = {"host": "shop.example", "http": {"paths": [path]}}
    for key, value in rule_changes.items():
        if key in path:
            path[key] = value
        else:
            rule[key] = value
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {"name": "shop", "namespace": "default"},
        "spec": {"ingressClassName": "interlock", "rules": [rule]},
    }


def slice_of(address_type: str | None, *addresses: str, **port: Any) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "discovery.k8s.io/v1",
        "kind": "EndpointSlice",
        "metadata": {"name": "web-abc", "namespace": "default"},
        "endpoints": [{"addresses": list(addresses), "conditions": {"ready": True}}],
        "ports": [{"name": "http", "port": 8080, **port}],
    }
    if address_type is not None:
        obj["addressType"] = address_type
    return obj


def refusal(server: EmbeddedApiServer, obj: dict[str, Any]) -> str:
    with pytest.raises(ApiError) as refused:
        server.store.create(obj)
    assert refused.value.code == 422
    return str(refused.value)


SERVICE_BACKEND = "spec.rules[0].http.paths[0].backend"


@pytest.mark.parametrize(
    ("changes", "field", "why"),
    [
        ({"host": "bücher.example"}, "spec.rules[0].host", "RFC 1123 subdomain"),
        ({"host": "shop.example:8080"}, "spec.rules[0].host", "RFC 1123 subdomain"),
        ({"host": "Shop.Example"}, "spec.rules[0].host", "lower case"),
        ({"host": "10.0.0.1"}, "spec.rules[0].host", "not an IP address"),
        ({"host": "shop.*.example"}, "spec.rules[0].host", "wildcard DNS-1123 subdomain"),
        ({"host": "*"}, "spec.rules[0].host", "must start with '*.'"),
        ({"path": "api"}, "spec.rules[0].http.paths[0].path", "must be an absolute path"),
        ({"path": "/a//b"}, "spec.rules[0].http.paths[0].path", "must not contain '//'"),
        ({"path": "/a/.."}, "spec.rules[0].http.paths[0].path", "cannot end with '/..'"),
        (
            {"pathType": "Exact", "path": ""},
            "spec.rules[0].http.paths[0].path",
            "must be an absolute path",
        ),
        (
            {"pathType": "Regex"},
            "spec.rules[0].http.paths[0].pathType",
            'Unsupported value: "Regex": supported values: "Exact", "ImplementationSpecific", '
            '"Prefix"',
        ),
        (
            {"pathType": None},
            "spec.rules[0].http.paths[0].pathType",
            "Required value: pathType must be specified",
        ),
        (
            {"backend": {"service": {"name": "web", "port": {}}}},
            SERVICE_BACKEND,
            "Required value: port name or number is required",
        ),
        (
            {"backend": {"service": {"name": "web", "port": {"number": 80, "name": "http"}}}},
            SERVICE_BACKEND,
            "cannot set both port name & port number",
        ),
        (
            {"backend": {"service": {"name": "web", "port": {"number": 70000}}}},
            f"{SERVICE_BACKEND}.service.port.number",
            "Invalid value: 70000: must be between 1 and 65535, inclusive",
        ),
        (
            {"backend": {"service": {"name": "web", "port": {"number": -1}}}},
            f"{SERVICE_BACKEND}.service.port.number",
            "must be between 1 and 65535, inclusive",
        ),
        (
            {"backend": {"service": {"name": "web", "port": {"name": "HTTP_1"}}}},
            f"{SERVICE_BACKEND}.service.port.name",
            "must contain only alpha-numeric characters",
        ),
        (
            {"backend": {"service": {"name": "Web", "port": {"number": 80}}}},
            f"{SERVICE_BACKEND}.service.name",
            "DNS-1035 label",
        ),
        (
            {
                "backend": {
                    "service": {"name": "web", "port": {"number": 80}},
                    "resource": {"kind": "Bucket", "name": "b"},
                }
            },
            SERVICE_BACKEND,
            "cannot set both resource and service backends",
        ),
        ({"backend": {}}, SERVICE_BACKEND, "resource or service backend is required"),
        (
            {"backend": {"resource": {"name": "b"}}},
            f"{SERVICE_BACKEND}.resource.kind",
            "kind is required",
        ),
        ({"http": {"paths": []}}, "spec.rules[0].http.paths", "Required value"),
    ],
)
async def test_an_ingress_a_real_server_refuses_is_refused_naming_the_field(
    api_server: EmbeddedApiServer, changes: dict[str, Any], field: str, why: str
) -> None:
    obj = ingress(**changes)
    if "pathType" in changes and changes["pathType"] is None:
        del obj["spec"]["rules"][0]["http"]["paths"][0]["pathType"]
    message = refusal(api_server, obj)
    assert message.startswith('Ingress "shop" is invalid: ')
    assert f"{field}: " in message and why in message


@pytest.mark.parametrize(
    "changes",
    [
        {"host": "*.shop.example"},
        {"host": "a-b.c1.example"},
        {"host": None},
        {"pathType": "ImplementationSpecific", "path": ""},
        {"pathType": "Exact", "path": "/exact"},
        {"backend": {"service": {"name": "web", "port": {"name": "http"}}}},
        {
            "backend": {
                "resource": {"apiGroup": "storage.example.com", "kind": "Bucket", "name": "b"}
            }
        },
        {"http": None},
    ],
)
async def test_an_ingress_a_real_server_accepts_is_accepted(
    api_server: EmbeddedApiServer, changes: dict[str, Any]
) -> None:
    obj = ingress(**changes)
    if changes.get("http", {}) is None:
        del obj["spec"]["rules"][0]["http"]
    created = api_server.store.create(obj)
    assert created["metadata"]["name"] == "shop"


async def test_every_bad_field_of_an_ingress_is_listed_at_once(
    api_server: EmbeddedApiServer,
) -> None:
    obj = ingress(host="shop.example:8080", path="api")
    obj["spec"]["tls"] = [{"hosts": ["Bad.Example"], "secretName": "tls"}]
    obj["spec"]["defaultBackend"] = {"service": {"name": "web", "port": {"number": 0}}}
    message = refusal(api_server, obj)
    for field in (
        "spec.rules[0].host",
        "spec.rules[0].http.paths[0].path",
        "spec.tls[0].hosts[0]",
        "spec.defaultBackend",  # port 0: "port name or number is required", on the backend
    ):
        assert f"{field}: " in message


async def test_an_update_is_validated_too(api_server: EmbeddedApiServer) -> None:
    created = api_server.store.create(ingress())
    changed = copy.deepcopy(created)
    changed["spec"]["rules"][0]["host"] = "shop.example:8443"
    with pytest.raises(ApiError) as refused:
        api_server.store.update(changed)
    assert refused.value.code == 422 and "spec.rules[0].host" in str(refused.value)


async def test_the_legacy_class_annotation_and_the_class_field_together_are_refused(
    api_server: EmbeddedApiServer,
) -> None:
    obj = ingress()
    obj["metadata"]["annotations"] = {"kubernetes.io/ingress.class": "interlock"}
    assert "annotations.kubernetes.io/ingress.class: " in refusal(api_server, obj)


async def test_a_client_reads_the_field_from_the_422_status(
    api_server: EmbeddedApiServer, api_client: client.ApiClient
) -> None:
    """kubectl and client-go read ``details.causes``: each names its field."""
    networking = client.NetworkingV1Api(api_client)
    with pytest.raises(client.ApiException) as refused:
        await networking.create_namespaced_ingress("default", ingress(host="bücher.example"))
    assert refused.value.status == 422
    status = json.loads(refused.value.body)
    assert status["reason"] == "Invalid"
    assert [cause["field"] for cause in status["details"]["causes"]] == ["spec.rules[0].host"]


@pytest.mark.parametrize(
    ("address_type", "address", "why"),
    [
        ("IPv4", "999.1.1.1", "must be a valid IPv4 address"),
        ("IPv4", "10.0.0", "must be a valid IPv4 address"),
        ("IPv4", "0.0.0.0", "may not be unspecified"),
        ("IPv4", "169.254.1.2", "link-local range"),
        ("IPv4", "224.0.0.5", "link-local multicast range"),
        ("IPv6", "fd00::zz", "must be a valid IPv6 address"),
        ("IPv6", "fe80::1", "link-local range"),
        ("FQDN", "web_1.example", "RFC 1123 subdomain"),
        ("FQDN", "localhost", "at least two segments"),
    ],
)
async def test_an_endpoint_address_of_the_wrong_form_is_refused(
    api_server: EmbeddedApiServer, address_type: str, address: str, why: str
) -> None:
    valid = {"IPv4": "10.0.0.9", "IPv6": "fd00::9", "FQDN": "web.example.com"}[address_type]
    message = refusal(api_server, slice_of(address_type, valid, address))
    assert "endpoints[0].addresses[1]: " in message and why in message
    assert "endpoints[0].addresses[0]" not in message


@pytest.mark.parametrize(
    ("address_type", "address"),
    [("IPv4", "fd00::1"), ("IPv6", "10.0.0.1"), ("IPv6", "::ffff:10.0.0.1")],
)
async def test_an_address_of_the_other_family_is_refused_naming_the_list(
    api_server: EmbeddedApiServer, address_type: str, address: str
) -> None:
    """Measured on kube-apiserver 1.37: the cause names ``addresses``, not the item."""
    valid = {"IPv4": "10.0.0.9", "IPv6": "fd00::9"}[address_type]
    message = refusal(api_server, slice_of(address_type, valid, address))
    assert f'endpoints[0].addresses: Invalid value: "{address}": must be an {address_type}' in (
        message
    )


@pytest.mark.parametrize(
    ("address_type", "address"),
    [
        ("IPv4", "10.2.0.1"),
        # Embedded mode's demo points EndpointSlices at local processes (see the module).
        ("IPv4", "127.0.0.1"),
        ("IPv6", "fd00::1"),
        ("FQDN", "web.example.com."),
    ],
)
async def test_an_endpoint_address_of_the_right_form_is_accepted(
    api_server: EmbeddedApiServer, address_type: str, address: str
) -> None:
    created = api_server.store.create(slice_of(address_type, address))
    assert created["endpoints"][0]["addresses"] == [address]
    assert created["ports"][0]["protocol"] == "TCP"


@pytest.mark.parametrize(
    ("address_type", "field", "why"),
    [
        (None, "addressType", "Required value"),
        ("IP", "addressType", 'Unsupported value: "IP": supported values: "FQDN", "IPv4", "IPv6"'),
    ],
)
async def test_the_address_type_is_required_and_known(
    api_server: EmbeddedApiServer, address_type: str | None, field: str, why: str
) -> None:
    message = refusal(api_server, slice_of(address_type, "10.0.0.1"))
    assert f"{field}: {why}" in message


@pytest.mark.parametrize(
    ("port", "field", "why"),
    [
        ({"protocol": "HTTP"}, "ports[0].protocol", 'Unsupported value: "HTTP"'),
        ({"name": "Web"}, "ports[0].name", "RFC 1123 label"),
    ],
)
async def test_a_malformed_endpoint_port_is_refused(
    api_server: EmbeddedApiServer, port: dict[str, Any], field: str, why: str
) -> None:
    message = refusal(api_server, slice_of("IPv4", "10.0.0.1", **port))
    assert f"{field}: " in message and why in message


@pytest.mark.parametrize("number", [0, -1, 65536, 70000])
async def test_an_endpoint_port_number_is_not_bounded(
    api_server: EmbeddedApiServer, number: int
) -> None:
    """As kube-apiserver 1.37 (measured): an EndpointSlice port is bounded only by int32."""
    created = api_server.store.create(slice_of("IPv4", "10.0.0.1", port=number))
    assert created["ports"][0]["port"] == number


async def test_an_endpoint_port_without_a_number_means_all_ports(
    api_server: EmbeddedApiServer,
) -> None:
    obj = slice_of("IPv4", "10.0.0.1")
    del obj["ports"][0]["port"]
    assert "port" not in api_server.store.create(obj)["ports"][0]


async def test_the_address_type_cannot_change(api_server: EmbeddedApiServer) -> None:
    created = api_server.store.create(slice_of("IPv4", "10.0.0.1"))
    changed = copy.deepcopy(created)
    changed["addressType"] = "IPv6"
    changed["endpoints"][0]["addresses"] = ["fd00::1"]
    with pytest.raises(ApiError) as refused:
        api_server.store.update(changed)
    assert "addressType: " in str(refused.value) and "field is immutable" in str(refused.value)
