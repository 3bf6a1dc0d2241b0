"""Ingress and EndpointSlice validation, as kube-apiserver's networking and discovery checks.

interlock reads hosts and paths from Ingresses and upstream addresses from EndpointSlices. On a
cluster, ``kubectl apply`` of an Ingress whose host is ``shop.example:8080`` or ``bücher.example``
or of a slice whose address is ``999.1.1.1`` is refused with a 422 naming the field; if the
embedded server accepted them, the demo and the tests would exercise inputs the controller never
meets in a cluster, and miss the refusal a user sees. The rules and messages follow Kubernetes'
``pkg/apis/networking/validation`` (``ValidateIngressCreate``/``Update``) and
``pkg/apis/discovery/validation`` (``ValidateEndpointSlice``); where this module departs from
them, a comment says why.
"""

from __future__ import annotations

import ipaddress
from typing import Any

from interlock.embedded.errors import FieldError, invalid_value, required_value
from interlock.embedded.name_formats import (
    PORT_NUMBER_ERROR,
    dns1035_label_error,
    dns1123_label_error,
    dns1123_subdomain_error,
    path_segment_name_errors,
    port_name_errors,
    qualified_name_error,
    wildcard_dns1123_subdomain_error,
)

JsonObject = dict[str, Any]

_PATH_TYPES = ("Exact", "ImplementationSpecific", "Prefix")
_INVALID_PATH_SEQUENCES = ("//", "/./", "/../", "%2f", "%2F")
_INVALID_PATH_SUFFIXES = ("/..", "/.")
_CLASS_ANNOTATION = "kubernetes.io/ingress.class"

_ADDRESS_TYPES = ("FQDN", "IPv4", "IPv6")
_PROTOCOLS = ("SCTP", "TCP", "UDP")
_MAX_ENDPOINTS = 1000
_MAX_ADDRESSES = 100
_MAX_PORTS = 20000


def _required(field: str, detail: str = "") -> FieldError:
    if not detail:
        return required_value(field)
    return FieldError(field, f"Required value: {detail}", reason="FieldValueRequired")


def _not_supported(field: str, value: object, supported: tuple[str, ...]) -> FieldError:
    listed = ", ".join(f'"{s}"' for s in supported)
    return FieldError(
        field,
        f'Unsupported value: "{value}": supported values: {listed}',
        reason="FieldValueNotSupported",
    )


def _too_many(field: str, count: int, maximum: int) -> FieldError:
    return FieldError(
        field, f"Too many: {count}: must have at most {maximum} items", reason="FieldValueTooMany"
    )


# ---------------------------------------------------------------------------------------------
# Ingress


def _host_errors(field: str, host: object) -> list[FieldError]:
    """A rule's or a TLS entry's host: a lowercase DNS name, optionally ``*.``-prefixed."""
    if not isinstance(host, str):
        return [invalid_value(field, host, "must be a string")]
    why = wildcard_dns1123_subdomain_error(host) if "*" in host else dns1123_subdomain_error(host)
    return [] if why is None else [invalid_value(field, host, why)]


def _is_ip(value: str) -> bool:
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _backend_errors(field: str, backend: object) -> list[FieldError]:
    if not isinstance(backend, dict):
        if backend is None:
            return [invalid_value(field, "", "resource or service backend is required")]
        return [invalid_value(field, backend, "must be an object")]
    service, resource = backend.get("service"), backend.get("resource")
    if service is not None and resource is not None:
        return [invalid_value(field, "", "cannot set both resource and service backends")]
    if resource is not None:
        return _resource_backend_errors(f"{field}.resource", resource)
    if service is None:
        return [invalid_value(field, "", "resource or service backend is required")]
    if not isinstance(service, dict):
        return [invalid_value(f"{field}.service", service, "must be an object")]
    errors: list[FieldError] = []
    name = service.get("name")
    if not name:
        errors.append(required_value(f"{field}.service.name"))
    elif not isinstance(name, str):
        errors.append(invalid_value(f"{field}.service.name", name, "must be a string"))
    elif (why := dns1035_label_error(name)) is not None:
        errors.append(invalid_value(f"{field}.service.name", name, why))
    return errors + _service_port_errors(f"{field}.service.port", service.get("port"))


def _service_port_errors(field: str, port: object) -> list[FieldError]:
    # Kubernetes reports "both" and "neither" on the backend itself (two levels up).
    backend = field.removesuffix(".service.port")
    if port is not None and not isinstance(port, dict):
        return [invalid_value(field, port, "must be an object")]
    name = (port or {}).get("name")
    number = (port or {}).get("number")
    has_name, has_number = bool(name), number not in (None, 0)
    if has_name and has_number:
        return [invalid_value(backend, "", "cannot set both port name & port number")]
    if has_name:
        if not isinstance(name, str):
            return [invalid_value(f"{field}.name", name, "must be a string")]
        return [invalid_value(f"{field}.name", name, why) for why in port_name_errors(name)]
    if has_number:
        if not isinstance(number, int) or isinstance(number, bool):
            return [invalid_value(f"{field}.number", number, "must be an integer")]
        if not 1 <= number <= 65535:
            return [invalid_value(f"{field}.number", number, PORT_NUMBER_ERROR)]
        return []
    return [_required(backend, "port name or number is required")]


def _resource_backend_errors(field: str, resource: object) -> list[FieldError]:
    if not isinstance(resource, dict):
        return [invalid_value(field, resource, "must be an object")]
    errors: list[FieldError] = []
    group = resource.get("apiGroup")
    if group is not None:
        why = dns1123_subdomain_error(str(group))
        if why is not None:
            errors.append(invalid_value(f"{field}.apiGroup", group, why))
    for key in ("kind", "name"):
        value = resource.get(key)
        if not value:
            errors.append(_required(f"{field}.{key}", f"{key} is required"))
        else:
            errors.extend(
                invalid_value(f"{field}.{key}", value, why)
                for why in path_segment_name_errors(str(value))
            )
    return errors


def _http_path_errors(field: str, path: object) -> list[FieldError]:
    if not isinstance(path, dict):
        return [invalid_value(field, path, "must be an object")]
    path_type = path.get("pathType")
    if not path_type:
        return [_required(f"{field}.pathType", "pathType must be specified")]
    value = path.get("path") or ""
    if not isinstance(value, str):
        return [invalid_value(f"{field}.path", value, "must be a string")]
    errors: list[FieldError] = []
    if path_type in ("Exact", "Prefix"):
        if not value.startswith("/"):
            errors.append(invalid_value(f"{field}.path", value, "must be an absolute path"))
        errors.extend(
            invalid_value(f"{field}.path", value, f"must not contain '{sequence}'")
            for sequence in _INVALID_PATH_SEQUENCES
            if sequence in value
        )
        errors.extend(
            invalid_value(f"{field}.path", value, f"cannot end with '{suffix}'")
            for suffix in _INVALID_PATH_SUFFIXES
            if value.endswith(suffix)
        )
    elif path_type == "ImplementationSpecific":
        if value and not value.startswith("/"):
            errors.append(invalid_value(f"{field}.path", value, "must be an absolute path"))
    else:
        errors.append(_not_supported(f"{field}.pathType", path_type, _PATH_TYPES))
    return errors + _backend_errors(f"{field}.backend", path.get("backend"))


def _rule_errors(field: str, rule: object) -> list[FieldError]:
    if not isinstance(rule, dict):
        return [invalid_value(field, rule, "must be an object")]
    errors: list[FieldError] = []
    host = rule.get("host")
    if host:
        if isinstance(host, str) and _is_ip(host):
            errors.append(
                invalid_value(f"{field}.host", host, "must be a DNS name, not an IP address")
            )
        errors.extend(_host_errors(f"{field}.host", host))
    http = rule.get("http")
    if http is None:
        return errors  # a rule without http is allowed (it matches the host, serves nothing)
    if not isinstance(http, dict):
        return [*errors, invalid_value(f"{field}.http", http, "must be an object")]
    paths = http.get("paths")
    if not paths:
        errors.append(required_value(f"{field}.http.paths"))
    elif not isinstance(paths, list):
        errors.append(invalid_value(f"{field}.http.paths", paths, "must be a list"))
    else:
        for index, path in enumerate(paths):
            errors.extend(_http_path_errors(f"{field}.http.paths[{index}]", path))
    return errors


def _tls_errors(tls: object) -> list[FieldError]:
    if not isinstance(tls, list):
        return [invalid_value("spec.tls", tls, "must be a list")]
    errors: list[FieldError] = []
    for index, entry in enumerate(tls):
        field = f"spec.tls[{index}]"
        if not isinstance(entry, dict):
            errors.append(invalid_value(field, entry, "must be an object"))
            continue
        for host_index, host in enumerate(entry.get("hosts") or []):
            errors.extend(_host_errors(f"{field}.hosts[{host_index}]", host))
        secret = entry.get("secretName")
        if secret and (why := dns1123_subdomain_error(str(secret))) is not None:
            errors.append(invalid_value(f"{field}.secretName", secret, why))
    return errors


def validate_ingress(obj: JsonObject, *, old: JsonObject | None) -> list[FieldError]:
    """Everything kube-apiserver would refuse in an Ingress's spec (``old``: None on create)."""
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return [invalid_value("spec", spec, "must be an object")]
    errors: list[FieldError] = []
    rules = spec.get("rules")
    default_backend = spec.get("defaultBackend")
    if not rules and default_backend is None:
        errors.append(
            FieldError(
                "spec", "Invalid value: either `defaultBackend` or `rules` must be specified"
            )
        )
    if default_backend is not None:
        errors.extend(_backend_errors("spec.defaultBackend", default_backend))
    if rules and not isinstance(rules, list):
        errors.append(invalid_value("spec.rules", rules, "must be a list"))
    elif rules:
        for index, rule in enumerate(rules):
            errors.extend(_rule_errors(f"spec.rules[{index}]", rule))
    if spec.get("tls"):
        errors.extend(_tls_errors(spec["tls"]))
    class_name = spec.get("ingressClassName")
    if class_name is not None and (why := dns1123_subdomain_error(str(class_name))) is not None:
        errors.append(invalid_value("spec.ingressClassName", class_name, why))
    annotations = (obj.get("metadata") or {}).get("annotations") or {}
    if old is None and class_name is not None and _CLASS_ANNOTATION in annotations:
        errors.append(
            invalid_value(
                f"annotations.{_CLASS_ANNOTATION}",
                annotations[_CLASS_ANNOTATION],
                "can not be set when the class field is also set",
            )
        )
    return errors


# ---------------------------------------------------------------------------------------------
# EndpointSlice


def _ip_errors(field: str, address: str, *, version: int) -> list[FieldError]:
    parsed: ipaddress.IPv4Address | ipaddress.IPv6Address | None
    try:
        parsed = ipaddress.IPv4Address(address) if version == 4 else ipaddress.IPv6Address(address)
    except ValueError:
        parsed = None
    # As Go's parser: no zone (``%eth0``), and an IPv4-mapped address is IPv4, not IPv6.
    if parsed is None or "%" in address or getattr(parsed, "ipv4_mapped", None) is not None:
        try:
            ipaddress.ip_address(address)
        except ValueError:
            return [invalid_value(field, address, f"must be a valid IPv{version} address")]
        # An address of the other family: kube-apiserver names the list, not the item.
        return [
            invalid_value(field.rpartition("[")[0], address, f"must be an IPv{version} address")
        ]
    # Kubernetes also refuses loopback addresses here. Embedded mode exists to run the demo and
    # the tests on one machine, where EndpointSlices point at local processes on 127.0.0.1, so
    # loopback is accepted; the other special ranges are refused as a cluster does.
    if parsed.is_unspecified:
        return [invalid_value(field, address, f"may not be unspecified ({address})")]
    if parsed.is_link_local:
        return [
            invalid_value(
                field, address, "may not be in the link-local range (169.254.0.0/16, fe80::/10)"
            )
        ]
    link_local_multicast = (
        parsed in ipaddress.IPv4Network("224.0.0.0/24")
        if version == 4
        else parsed.is_multicast and (int(parsed) >> 112) & 0xF == 2
    )
    if link_local_multicast:
        return [
            invalid_value(
                field,
                address,
                "may not be in the link-local multicast range (224.0.0.0/24, ff02::/10)",
            )
        ]
    return []


def _fqdn_errors(field: str, address: str) -> list[FieldError]:
    name = address.removesuffix(".")
    if (why := dns1123_subdomain_error(name)) is not None:
        return [invalid_value(field, name, why)]
    if len(name.split(".")) < 2:
        return [
            invalid_value(
                field, name, "should be a domain with at least two segments separated by dots"
            )
        ]
    for label in name.split("."):
        if (why := dns1123_label_error(label)) is not None:
            return [invalid_value(field, label, why)]
    return []


def _address_errors(field: str, address: object, address_type: object) -> list[FieldError]:
    if not isinstance(address, str):
        return [invalid_value(field, address, "must be a string")]
    if address_type == "IPv4":
        return _ip_errors(field, address, version=4)
    if address_type == "IPv6":
        return _ip_errors(field, address, version=6)
    if address_type == "FQDN":
        if not address:
            return [required_value(field)]
        return _fqdn_errors(field, address)
    return []  # an unknown address type is reported once, on addressType


def _endpoint_errors(field: str, endpoint: object, address_type: object) -> list[FieldError]:
    if not isinstance(endpoint, dict):
        return [invalid_value(field, endpoint, "must be an object")]
    errors: list[FieldError] = []
    addresses = endpoint.get("addresses")
    if not addresses:
        return [_required(f"{field}.addresses", "must contain at least 1 address")]
    if not isinstance(addresses, list):
        return [invalid_value(f"{field}.addresses", addresses, "must be a list")]
    if len(addresses) > _MAX_ADDRESSES:
        errors.append(_too_many(f"{field}.addresses", len(addresses), _MAX_ADDRESSES))
    for index, address in enumerate(addresses):
        errors.extend(_address_errors(f"{field}.addresses[{index}]", address, address_type))
    node_name = endpoint.get("nodeName")
    if node_name is not None and (why := dns1123_subdomain_error(str(node_name))) is not None:
        errors.append(invalid_value(f"{field}.nodeName", node_name, why))
    hostname = endpoint.get("hostname")
    if hostname is not None and (why := dns1123_label_error(str(hostname))) is not None:
        errors.append(invalid_value(f"{field}.hostname", hostname, why))
    return errors


def _endpoint_port_errors(ports: object) -> list[FieldError]:
    if not isinstance(ports, list):
        return [invalid_value("ports", ports, "must be a list")]
    if len(ports) > _MAX_PORTS:
        return [_too_many("ports", len(ports), _MAX_PORTS)]
    errors: list[FieldError] = []
    names: set[str] = set()
    for index, port in enumerate(ports):
        field = f"ports[{index}]"
        if not isinstance(port, dict):
            errors.append(invalid_value(field, port, "must be an object"))
            continue
        name = str(port.get("name") or "")
        if name and (why := dns1123_label_error(name)) is not None:
            errors.append(invalid_value(f"{field}.name", name, why))
        if name in names:
            errors.append(
                FieldError(
                    f"{field}.name", f'Duplicate value: "{name}"', reason="FieldValueDuplicate"
                )
            )
        names.add(name)
        protocol = port.setdefault("protocol", "TCP")
        if protocol not in _PROTOCOLS:
            errors.append(_not_supported(f"{field}.protocol", protocol, _PROTOCOLS))
        # Kubernetes only bounds the number by its int32 type (measured: 70000 is admitted).
        number = port.get("port")
        if number is not None and (not isinstance(number, int) or isinstance(number, bool)):
            errors.append(invalid_value(f"{field}.port", number, "must be an integer"))
        app_protocol = port.get("appProtocol")
        if app_protocol is not None and (why := qualified_name_error(str(app_protocol))):
            errors.append(invalid_value(f"{field}.appProtocol", app_protocol, why))
    return errors


def validate_endpoint_slice(obj: JsonObject, *, old: JsonObject | None) -> list[FieldError]:
    """Everything kube-apiserver would refuse in an EndpointSlice (``old``: None on create)."""
    errors: list[FieldError] = []
    address_type = obj.get("addressType")
    if not address_type:
        errors.append(required_value("addressType"))
    elif address_type not in _ADDRESS_TYPES:
        errors.append(_not_supported("addressType", address_type, _ADDRESS_TYPES))
    elif old is not None and old.get("addressType") not in (None, address_type):
        # Only the immutability is reported, as by kube-apiserver: the addresses were checked
        # against the type they were written for.
        return [invalid_value("addressType", address_type, "field is immutable")]
    if not obj.get("endpoints"):
        obj["endpoints"] = None  # stored as protobuf, an empty list reads back as null
    endpoints = obj["endpoints"] or []
    if not isinstance(endpoints, list):
        errors.append(invalid_value("endpoints", endpoints, "must be a list"))
    elif len(endpoints) > _MAX_ENDPOINTS:
        errors.append(_too_many("endpoints", len(endpoints), _MAX_ENDPOINTS))
    else:
        for index, endpoint in enumerate(endpoints):
            errors.extend(_endpoint_errors(f"endpoints[{index}]", endpoint, address_type))
    if obj.get("ports") is not None:
        errors.extend(_endpoint_port_errors(obj["ports"]))
    return errors
