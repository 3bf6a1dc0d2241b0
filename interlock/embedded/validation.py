"""Defaults and validation that users of a real cluster would notice.

A real API server rejects ``Bad_Name``, a Service port of 70000 or a ModuleSet whose field has
the wrong type with a 422 whose message names the object and field; it fills in
``protocol: TCP``, ``targetPort``, a cluster IP and the Secret ``data`` from ``stringData``.
Tests and the demo written against the embedded server must see the same, or they pass here and
fail on a cluster. This module holds those rules, per kind; custom resources are checked
against their CRD's schema by :mod:`~interlock.embedded.schema`.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any

from interlock.embedded.cel import has_rules, validate_rules
from interlock.embedded.errors import FieldError, bad_request, invalid_value, required_value
from interlock.embedded.name_formats import (
    dns1035_label_error,
    dns1123_label_error,
    dns1123_subdomain_error,
    qualified_name_error,
)
from interlock.embedded.network_validation import validate_endpoint_slice, validate_ingress
from interlock.embedded.registry import ResourceType
from interlock.embedded.schema import list_type_errors, validate_schema

JsonObject = dict[str, Any]

_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_IANA_SERVICE_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def name_error(rtype: ResourceType, name: str) -> str | None:
    if rtype.group == "" and rtype.plural == "namespaces":
        return dns1123_label_error(name)
    if rtype.group == "" and rtype.plural == "services":
        return dns1035_label_error(name)
    return dns1123_subdomain_error(name)


def validate_metadata(rtype: ResourceType, obj: JsonObject) -> list[FieldError]:
    errors: list[FieldError] = []
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return [required_value("metadata")]
    name = metadata.get("name")
    if not name:
        errors.append(
            FieldError(
                "metadata.name",
                "Required value: name or generateName is required",
                reason="FieldValueRequired",
            )
        )
    elif not isinstance(name, str):
        errors.append(invalid_value("metadata.name", name, "must be a string"))
    else:
        why = name_error(rtype, name)
        if why is not None:
            errors.append(invalid_value("metadata.name", name, why))
    if rtype.namespaced:
        namespace = metadata.get("namespace")
        if not namespace:
            errors.append(required_value("metadata.namespace"))
        elif (why_ns := dns1123_label_error(str(namespace))) is not None:
            errors.append(invalid_value("metadata.namespace", namespace, why_ns))
    for section in ("labels", "annotations"):
        values = metadata.get(section)
        if values is None:
            continue
        if not isinstance(values, Mapping):
            errors.append(invalid_value(f"metadata.{section}", values, "must be a map of strings"))
            continue
        for key, value in values.items():
            key_error = qualified_name_error(str(key))
            if key_error:
                errors.append(invalid_value(f"metadata.{section}", key, key_error))
            if not isinstance(value, str):
                errors.append(invalid_value(f"metadata.{section}.{key}", value, "must be a string"))
            elif section == "labels" and (len(value) > 63 or not _LABEL_VALUE.match(value)):
                errors.append(
                    invalid_value(
                        f"metadata.labels.{key}",
                        value,
                        "a valid label must be an empty string or consist of alphanumeric "
                        "characters, '-', '_' or '.', and must start and end with an "
                        "alphanumeric character, at most 63 characters",
                    )
                )
    finalizers = metadata.get("finalizers")
    if finalizers is not None and (
        not isinstance(finalizers, list) or not all(isinstance(f, str) for f in finalizers)
    ):
        errors.append(invalid_value("metadata.finalizers", finalizers, "must be a list of strings"))
    return errors


# ---------------------------------------------------------------------------------------------
# Per-kind defaults and validation.


class ServiceAllocator:
    """Hands out cluster IPs (10.96.0.0/12) and node ports (30000-32767) like a cluster would."""

    def __init__(self) -> None:
        self._next_ip = int(ipaddress.IPv4Address("10.96.0.10"))
        self._next_node_port = 30000

    def cluster_ip(self) -> str:
        address = str(ipaddress.IPv4Address(self._next_ip))
        self._next_ip += 1
        return address

    def node_port(self) -> int:
        port = self._next_node_port
        self._next_node_port = 30000 + (self._next_node_port - 30000 + 1) % 2768
        return port

    def preview(self) -> ServiceAllocator:
        """An independent copy, for a dry run: what it hands out is not taken."""
        copy = ServiceAllocator()
        copy._next_ip, copy._next_node_port = self._next_ip, self._next_node_port
        return copy


def _prepare_service(
    obj: JsonObject, old: JsonObject | None, allocator: ServiceAllocator
) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return [invalid_value("spec", spec, "must be an object")]
    old_spec = (old or {}).get("spec") or {}
    service_type = spec.setdefault("type", "ClusterIP")
    if service_type not in ("ClusterIP", "NodePort", "LoadBalancer", "ExternalName"):
        errors.append(
            FieldError(
                "spec.type",
                f'Unsupported value: "{service_type}": supported values: "ClusterIP", '
                '"ExternalName", "LoadBalancer", "NodePort"',
                reason="FieldValueNotSupported",
            )
        )
    ports = spec.get("ports")
    headless = spec.get("clusterIP") == "None"
    if service_type == "ExternalName":
        if not spec.get("externalName"):
            errors.append(required_value("spec.externalName"))
    elif not ports and not headless:
        errors.append(required_value("spec.ports"))
    if ports is not None and not isinstance(ports, list):
        return [*errors, invalid_value("spec.ports", ports, "must be a list")]
    names: set[str] = set()
    for index, port in enumerate(ports or []):
        where = f"spec.ports[{index}]"
        if not isinstance(port, dict):
            errors.append(invalid_value(where, port, "must be an object"))
            continue
        number = port.get("port")
        if not isinstance(number, int) or isinstance(number, bool):
            errors.append(
                required_value(f"{where}.port")
                if number is None
                else invalid_value(f"{where}.port", number, "must be an integer")
            )
        elif not 1 <= number <= 65535:
            errors.append(
                invalid_value(f"{where}.port", number, "must be between 1 and 65535, inclusive")
            )
        protocol = port.setdefault("protocol", "TCP")
        if protocol not in ("TCP", "UDP", "SCTP"):
            errors.append(
                FieldError(
                    f"{where}.protocol",
                    f'Unsupported value: "{protocol}": supported values: "SCTP", "TCP", "UDP"',
                    reason="FieldValueNotSupported",
                )
            )
        name = port.get("name")
        if len(ports or []) > 1 and not name:
            errors.append(required_value(f"{where}.name"))
        if name:
            if name in names:
                errors.append(
                    FieldError(
                        f"{where}.name", f'Duplicate value: "{name}"', reason="FieldValueDuplicate"
                    )
                )
            names.add(name)
        if "targetPort" not in port and isinstance(number, int):
            port["targetPort"] = number
        target = port.get("targetPort")
        if isinstance(target, int) and not 1 <= target <= 65535:
            errors.append(
                invalid_value(
                    f"{where}.targetPort", target, "must be between 1 and 65535, inclusive"
                )
            )
        elif isinstance(target, str) and not (
            _IANA_SERVICE_NAME.match(target) and len(target) <= 15
        ):
            errors.append(
                invalid_value(
                    f"{where}.targetPort",
                    target,
                    "must contain only alpha-numeric characters (a-z, 0-9), and hyphens (-)",
                )
            )
        if service_type in ("NodePort", "LoadBalancer") and not port.get("nodePort"):
            previous = next(
                (
                    p
                    for p in old_spec.get("ports") or []
                    if p.get("port") == number and p.get("nodePort")
                ),
                None,
            )
            port["nodePort"] = previous["nodePort"] if previous else allocator.node_port()
    if service_type != "ExternalName":
        if not spec.get("clusterIP"):
            spec["clusterIP"] = old_spec.get("clusterIP") or allocator.cluster_ip()
        elif old_spec.get("clusterIP") and spec["clusterIP"] != old_spec["clusterIP"]:
            errors.append(invalid_value("spec.clusterIP", spec["clusterIP"], "field is immutable"))
        spec["clusterIPs"] = [spec["clusterIP"]]
        if headless and not spec.get("selector"):
            # kube-apiserver makes a selector-less headless Service dual-stack: its endpoints
            # are written by hand and may be of either family.
            spec.setdefault("ipFamilies", ["IPv4", "IPv6"])
            spec.setdefault("ipFamilyPolicy", "RequireDualStack")
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    if service_type in ("NodePort", "LoadBalancer"):
        spec.setdefault("externalTrafficPolicy", "Cluster")
    if service_type == "LoadBalancer":
        spec.setdefault("allocateLoadBalancerNodePorts", True)
    spec.setdefault("sessionAffinity", "None")
    status = obj.setdefault("status", {})
    load_balancer = status.setdefault("loadBalancer", {})
    for ingress in load_balancer.get("ingress") or []:
        if isinstance(ingress, dict) and ingress.get("ip"):
            ingress.setdefault("ipMode", "VIP")
    return errors


_MICRO_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}T\d{2}:\d{2}:\d{2}(\.\d+)?(Z|[+-]\d{2}:\d{2})$")
_SECRET_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
_SECRET_REQUIRED_KEYS = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
}


def _prepare_secret(obj: JsonObject, old: JsonObject | None) -> list[FieldError]:
    errors: list[FieldError] = []
    obj.setdefault("type", "Opaque")
    if old is not None and obj["type"] != old.get("type", "Opaque"):
        errors.append(invalid_value("type", obj["type"], "field is immutable"))
    data = obj.get("data") or {}
    string_data = obj.pop("stringData", None) or {}
    if not isinstance(data, dict) or not isinstance(string_data, dict):
        return [invalid_value("data", "<redacted>", "must be a map of strings")]
    for key, value in data.items():
        # The value is a secret: the error names the key, never the value.
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            # kube-apiserver fails to decode the body: 400, naming the key, never the value.
            raise bad_request(
                f'Secret in version "v1" cannot be handled as a Secret: data[{key}]: '
                "illegal base64 data"
            ) from None
    for key in [*data, *string_data]:
        if not _SECRET_KEY.match(key) or len(key) > 253:
            errors.append(
                invalid_value(
                    f"data[{key}]",
                    key,
                    "a valid config key must consist of alphanumeric characters, '-', '_' or '.'",
                )
            )
    for key, value in string_data.items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    if data:
        obj["data"] = data
    for key in _SECRET_REQUIRED_KEYS.get(obj["type"], ()):
        if key not in data:
            errors.append(required_value(f"data[{key}]"))
    return errors


def _prepare_namespace(obj: JsonObject) -> list[FieldError]:
    name = obj["metadata"].get("name", "")
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    status = obj.setdefault("status", {})
    if not obj["metadata"].get("deletionTimestamp"):
        status["phase"] = "Active"
    return []


def _prepare_ingress_class(obj: JsonObject) -> list[FieldError]:
    if not (obj.get("spec") or {}).get("controller"):
        return [required_value("spec.controller")]
    return []


def _prepare_lease(obj: JsonObject) -> list[FieldError]:
    spec = obj.setdefault("spec", {})
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        return [invalid_value("spec.leaseDurationSeconds", duration, "must be greater than 0")]
    for field in ("acquireTime", "renewTime"):
        value = spec.get(field)
        if value is not None and not (isinstance(value, str) and _MICRO_TIME.match(value)):
            raise bad_request(
                f'Lease in version "v1" cannot be handled as a Lease: spec.{field}: '
                f"parsing time {json.dumps(value)} as RFC 3339"
            )
    transitions = spec.get("leaseTransitions")
    if isinstance(transitions, int) and transitions < 0:
        return [
            invalid_value(
                "spec.leaseTransitions", transitions, "must be greater than or equal to 0"
            )
        ]
    return []


def _prepare_event(obj: JsonObject) -> list[FieldError]:
    # The fields a core/v1 Event always carries, null or empty when not given.
    for field in ("eventTime", "firstTimestamp", "lastTimestamp"):
        obj.setdefault(field, None)
    obj.setdefault("reportingComponent", "")
    obj.setdefault("reportingInstance", "")
    obj.setdefault("source", {})
    involved = obj.setdefault("involvedObject", {})
    if not isinstance(involved, dict):
        return [required_value("involvedObject")]
    namespace = involved.get("namespace")
    event_namespace = obj["metadata"].get("namespace")
    # A cluster-scoped object's Events live in "default" (kube-apiserver's legacy rule).
    if (namespace or event_namespace not in (None, "", "default")) and (
        namespace != event_namespace
    ):
        return [
            invalid_value("involvedObject.namespace", namespace, "does not match event.namespace")
        ]
    return []


_BLOCKING = frozenset(
    {
        "FieldValueNotSupported",
        "FieldValueRequired",
        "FieldValueTooLong",
        "FieldValueTooMany",
        "FieldValueTypeInvalid",
    }
)
"""Schema errors after which kube-apiserver does not run a CRD's CEL rules (their input would
not have the shape the rules were written for)."""


def custom_resource_errors(
    schema: Mapping[str, Any], obj: JsonObject, *, old: JsonObject | None
) -> list[FieldError]:
    """A custom resource against its CRD's schema: OpenAPI keywords, list types, CEL rules."""
    errors = validate_schema(schema, obj, path="")
    errors.extend(list_type_errors(schema, obj, path=""))
    if not has_rules(schema):
        return errors
    if any(error.reason in _BLOCKING for error in errors):
        errors.append(
            FieldError(
                "<nil>",
                'Invalid value: "null": some validation rules were not checked because the '
                "object was invalid; correct the existing errors to complete validation",
            )
        )
        return errors
    if old is None:
        errors.extend(validate_rules(schema, obj))
    else:
        errors.extend(validate_rules(schema, obj, old=old))
    return errors


def prepare(
    rtype: ResourceType,
    obj: JsonObject,
    *,
    old: JsonObject | None,
    allocator: ServiceAllocator,
    schema: Mapping[str, Any] | None,
) -> list[FieldError]:
    """Fill defaults into ``obj`` in place and return everything wrong with it."""
    errors = validate_metadata(rtype, obj)
    if errors:
        return errors
    if rtype.from_crd:
        if schema:
            errors.extend(custom_resource_errors(schema, obj, old=old))
        return errors
    kind = (rtype.group, rtype.plural)
    if kind == ("", "services"):
        errors.extend(_prepare_service(obj, old, allocator))
    elif kind == ("", "secrets"):
        errors.extend(_prepare_secret(obj, old))
    elif kind == ("", "events"):
        errors.extend(_prepare_event(obj))
    elif kind == ("", "namespaces"):
        errors.extend(_prepare_namespace(obj))
    elif kind == ("discovery.k8s.io", "endpointslices"):
        errors.extend(validate_endpoint_slice(obj, old=old))
    elif kind == ("networking.k8s.io", "ingressclasses"):
        errors.extend(_prepare_ingress_class(obj))
    elif kind == ("networking.k8s.io", "ingresses"):
        obj.setdefault("status", {}).setdefault("loadBalancer", {})
        errors.extend(validate_ingress(obj, old=old))
    elif kind == ("coordination.k8s.io", "leases"):
        errors.extend(_prepare_lease(obj))
    return errors
