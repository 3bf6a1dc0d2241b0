"""Defaults and validation that users of a real cluster would notice.

A real API server rejects ``Bad_Name``, a Service port of 70000 or a ModuleSet whose field has
the wrong type with a 422 whose message names the object and field; it fills in
``protocol: TCP``, ``targetPort``, a cluster IP and the Secret ``data`` from ``stringData``.
Tests and the demo written against the embedded server must see the same, or they pass here and
fail on a cluster. This module holds those rules, per kind, and a validator for the
OpenAPI v3 schema of a CustomResourceDefinition.
"""

from __future__ import annotations

import base64
import binascii
import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any

from interlock.embedded.builtin_schemas import OBJECT_META
from interlock.embedded.errors import FieldError

__all__ = [
    "FieldError",
    "ServiceAllocator",
    "prepare",
    "prune_unknown_fields",
    "validate_schema",
]
from interlock.embedded.registry import ResourceType

JsonObject = dict[str, Any]

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(
    r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
_DNS1035_LABEL = re.compile(r"^[a-z]([-a-z0-9]*[a-z0-9])?$")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_QUALIFIED_NAME = re.compile(r"^([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]$")
_IANA_SERVICE_NAME = re.compile(r"^[a-z0-9]([a-z0-9-]*[a-z0-9])?$")


def _dns1123_label_error(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS1123_LABEL.match(value):
        return (
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or "
            "'-', and must start and end with an alphanumeric character (e.g. 'my-name',  or "
            "'123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
        )
    return None


def _dns1123_subdomain_error(value: str) -> str | None:
    if len(value) > 253:
        return "must be no more than 253 characters"
    if not _DNS1123_SUBDOMAIN.match(value):
        return (
            "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, "
            "'-' or '.', and must start and end with an alphanumeric character (e.g. "
            "'example.com', regex used for validation is "
            "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
        )
    return None


def _dns1035_label_error(value: str) -> str | None:
    if len(value) > 63:
        return "must be no more than 63 characters"
    if not _DNS1035_LABEL.match(value):
        return (
            "a DNS-1035 label must consist of lower case alphanumeric characters or '-', start "
            "with an alphabetic character, and end with an alphanumeric character (e.g. "
            "'my-name',  or 'abc-123', regex used for validation is '[a-z]([-a-z0-9]*[a-z0-9])?')"
        )
    return None


def _invalid(field: str, value: Any, why: str) -> FieldError:
    shown = f'"{value}"' if isinstance(value, str) else repr(value)
    return FieldError(field, f"Invalid value: {shown}: {why}")


def _required(field: str) -> FieldError:
    return FieldError(field, "Required value", reason="FieldValueRequired")


def name_error(rtype: ResourceType, name: str) -> str | None:
    if rtype.group == "" and rtype.plural == "namespaces":
        return _dns1123_label_error(name)
    if rtype.group == "" and rtype.plural == "services":
        return _dns1035_label_error(name)
    return _dns1123_subdomain_error(name)


def validate_metadata(rtype: ResourceType, obj: JsonObject) -> list[FieldError]:
    errors: list[FieldError] = []
    metadata = obj.get("metadata")
    if not isinstance(metadata, dict):
        return [_required("metadata")]
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
        errors.append(_invalid("metadata.name", name, "must be a string"))
    else:
        why = name_error(rtype, name)
        if why is not None:
            errors.append(_invalid("metadata.name", name, why))
    if rtype.namespaced:
        namespace = metadata.get("namespace")
        if not namespace:
            errors.append(_required("metadata.namespace"))
        elif (why_ns := _dns1123_label_error(str(namespace))) is not None:
            errors.append(_invalid("metadata.namespace", namespace, why_ns))
    for section in ("labels", "annotations"):
        values = metadata.get(section)
        if values is None:
            continue
        if not isinstance(values, Mapping):
            errors.append(_invalid(f"metadata.{section}", values, "must be a map of strings"))
            continue
        for key, value in values.items():
            key_error = _qualified_name_error(str(key))
            if key_error:
                errors.append(_invalid(f"metadata.{section}", key, key_error))
            if not isinstance(value, str):
                errors.append(_invalid(f"metadata.{section}.{key}", value, "must be a string"))
            elif section == "labels" and (len(value) > 63 or not _LABEL_VALUE.match(value)):
                errors.append(
                    _invalid(
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
        errors.append(_invalid("metadata.finalizers", finalizers, "must be a list of strings"))
    return errors


def _qualified_name_error(key: str) -> str | None:
    prefix, _, name = key.rpartition("/")
    if prefix and _dns1123_subdomain_error(prefix):
        return "prefix part " + str(_dns1123_subdomain_error(prefix))
    if not name or len(name) > 63 or not _QUALIFIED_NAME.match(name):
        return (
            "name part must consist of alphanumeric characters, '-', '_' or '.', and must start "
            "and end with an alphanumeric character, at most 63 characters"
        )
    return None


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


def _prepare_service(
    obj: JsonObject, old: JsonObject | None, allocator: ServiceAllocator
) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = obj.setdefault("spec", {})
    if not isinstance(spec, dict):
        return [_invalid("spec", spec, "must be an object")]
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
            errors.append(_required("spec.externalName"))
    elif not ports and not headless:
        errors.append(_required("spec.ports"))
    if ports is not None and not isinstance(ports, list):
        return [*errors, _invalid("spec.ports", ports, "must be a list")]
    names: set[str] = set()
    for index, port in enumerate(ports or []):
        where = f"spec.ports[{index}]"
        if not isinstance(port, dict):
            errors.append(_invalid(where, port, "must be an object"))
            continue
        number = port.get("port")
        if not isinstance(number, int) or isinstance(number, bool):
            errors.append(
                _required(f"{where}.port")
                if number is None
                else _invalid(f"{where}.port", number, "must be an integer")
            )
        elif not 1 <= number <= 65535:
            errors.append(
                _invalid(f"{where}.port", number, "must be between 1 and 65535, inclusive")
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
            errors.append(_required(f"{where}.name"))
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
                _invalid(f"{where}.targetPort", target, "must be between 1 and 65535, inclusive")
            )
        elif isinstance(target, str) and not (
            _IANA_SERVICE_NAME.match(target) and len(target) <= 15
        ):
            errors.append(
                _invalid(
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
            errors.append(_invalid("spec.clusterIP", spec["clusterIP"], "field is immutable"))
        spec["clusterIPs"] = [spec["clusterIP"]]
        spec.setdefault("ipFamilies", ["IPv4"])
        spec.setdefault("ipFamilyPolicy", "SingleStack")
        spec.setdefault("internalTrafficPolicy", "Cluster")
    spec.setdefault("sessionAffinity", "None")
    obj.setdefault("status", {}).setdefault("loadBalancer", {})
    return errors


_SECRET_REQUIRED_KEYS = {
    "kubernetes.io/tls": ("tls.crt", "tls.key"),
    "kubernetes.io/dockerconfigjson": (".dockerconfigjson",),
}


def _prepare_secret(obj: JsonObject, old: JsonObject | None) -> list[FieldError]:
    errors: list[FieldError] = []
    obj.setdefault("type", "Opaque")
    if old is not None and obj["type"] != old.get("type", "Opaque"):
        errors.append(_invalid("type", obj["type"], "field is immutable"))
    data = obj.get("data") or {}
    string_data = obj.pop("stringData", None) or {}
    if not isinstance(data, dict) or not isinstance(string_data, dict):
        return [_invalid("data", "<redacted>", "must be a map of strings")]
    for key, value in data.items():
        # The value is a secret: the error names the key, never the value.
        try:
            base64.b64decode(str(value), validate=True)
        except (binascii.Error, ValueError):
            errors.append(
                FieldError(f"data[{key}]", "Invalid value: <redacted>: illegal base64 data")
            )
    for key, value in string_data.items():
        data[key] = base64.b64encode(str(value).encode()).decode()
    if data:
        obj["data"] = data
    for key in _SECRET_REQUIRED_KEYS.get(obj["type"], ()):
        if key not in data:
            errors.append(_required(f"data[{key}]"))
    return errors


def _prepare_namespace(obj: JsonObject) -> list[FieldError]:
    name = obj["metadata"].get("name", "")
    obj["metadata"].setdefault("labels", {})["kubernetes.io/metadata.name"] = name
    obj.setdefault("spec", {}).setdefault("finalizers", ["kubernetes"])
    status = obj.setdefault("status", {})
    if not obj["metadata"].get("deletionTimestamp"):
        status["phase"] = "Active"
    return []


def _prepare_endpoint_slice(obj: JsonObject) -> list[FieldError]:
    errors: list[FieldError] = []
    address_type = obj.get("addressType")
    if not address_type:
        errors.append(_required("addressType"))
    elif address_type not in ("IPv4", "IPv6", "FQDN"):
        errors.append(
            FieldError(
                "addressType",
                f'Unsupported value: "{address_type}": supported values: "FQDN", "IPv4", "IPv6"',
                reason="FieldValueNotSupported",
            )
        )
    if "endpoints" not in obj or obj["endpoints"] is None:
        obj["endpoints"] = []
    for index, endpoint in enumerate(obj["endpoints"]):
        if not isinstance(endpoint, dict) or not endpoint.get("addresses"):
            errors.append(_required(f"endpoints[{index}].addresses"))
    return errors


def _prepare_ingress_class(obj: JsonObject) -> list[FieldError]:
    if not (obj.get("spec") or {}).get("controller"):
        return [_required("spec.controller")]
    return []


def _prepare_ingress(obj: JsonObject) -> list[FieldError]:
    errors: list[FieldError] = []
    spec = obj.setdefault("spec", {})
    for index, rule in enumerate(spec.get("rules") or []):
        for path_index, path in enumerate((rule.get("http") or {}).get("paths") or []):
            where = f"spec.rules[{index}].http.paths[{path_index}]"
            if not path.get("pathType"):
                errors.append(_required(f"{where}.pathType"))
            if not path.get("backend"):
                errors.append(_required(f"{where}.backend"))
    if not spec.get("rules") and not spec.get("defaultBackend"):
        errors.append(
            FieldError(
                "spec", "Invalid value: either `defaultBackend` or `rules` must be specified"
            )
        )
    return errors


def _prepare_lease(obj: JsonObject) -> list[FieldError]:
    spec = obj.setdefault("spec", {})
    duration = spec.get("leaseDurationSeconds")
    if duration is not None and (not isinstance(duration, int) or duration <= 0):
        return [_invalid("spec.leaseDurationSeconds", duration, "must be greater than 0")]
    return []


def _prepare_event(obj: JsonObject) -> list[FieldError]:
    involved = obj.get("involvedObject")
    if not isinstance(involved, dict):
        return [_required("involvedObject")]
    namespace = involved.get("namespace")
    if namespace and namespace != obj["metadata"].get("namespace"):
        return [_invalid("involvedObject.namespace", namespace, "does not match event.namespace")]
    return []


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
            errors.extend(validate_schema(schema, obj, path=""))
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
        errors.extend(_prepare_endpoint_slice(obj))
    elif kind == ("networking.k8s.io", "ingressclasses"):
        errors.extend(_prepare_ingress_class(obj))
    elif kind == ("networking.k8s.io", "ingresses"):
        errors.extend(_prepare_ingress(obj))
    elif kind == ("coordination.k8s.io", "leases"):
        errors.extend(_prepare_lease(obj))
    return errors


# ---------------------------------------------------------------------------------------------
# OpenAPI v3 schema validation for custom resources (the structural subset CRDs use).

_JSON_TYPES: dict[str, tuple[type, ...]] = {
    "object": (dict,),
    "array": (list,),
    "string": (str,),
    "boolean": (bool,),
    "integer": (int,),
    "number": (int, float),
}


def _type_matches(expected: str, value: Any) -> bool:
    if expected in ("integer", "number") and isinstance(value, bool):
        return False
    if expected == "integer" and isinstance(value, float):
        return value.is_integer()
    return isinstance(value, _JSON_TYPES.get(expected, (object,)))


def _join(path: str, part: str) -> str:
    return f"{path}.{part}" if path else part


def validate_schema(schema: Mapping[str, Any], value: Any, *, path: str) -> list[FieldError]:
    """Type, required, enum, bounds, length and pattern checks; unknown fields are kept."""
    if path == "":
        schema = {
            **schema,
            "properties": {
                k: v
                for k, v in (schema.get("properties") or {}).items()
                if k not in ("metadata", "apiVersion", "kind")
            },
        }
    errors: list[FieldError] = []
    where = path or "<root>"
    if value is None:
        if schema.get("nullable"):
            return []
        return (
            [_invalid(where, None, f"must be of type {schema.get('type', 'object')}")]
            if schema.get("type")
            else []
        )
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _type_matches("integer", value)):
            errors.append(_invalid(where, value, "must be an integer or a string"))
        return errors
    expected = schema.get("type")
    if expected and not _type_matches(expected, value):
        return [
            FieldError(
                where,
                f'Invalid value: "{_type_name(value)}": {where} in body must be of type '
                f'{expected}: "{_type_name(value)}"',
                reason="FieldValueTypeInvalid",
            )
        ]
    if "enum" in schema and value not in schema["enum"]:
        allowed = ", ".join(f'"{v}"' if isinstance(v, str) else str(v) for v in schema["enum"])
        errors.append(
            FieldError(
                where,
                f"Unsupported value: {json.dumps(value)}: supported values: {allowed}",
                reason="FieldValueNotSupported",
            )
        )
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if "minimum" in schema and value < schema["minimum"]:
            errors.append(
                _invalid(
                    where,
                    value,
                    f"{where} in body should be greater than or equal to {schema['minimum']}",
                )
            )
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(
                _invalid(
                    where,
                    value,
                    f"{where} in body should be less than or equal to {schema['maximum']}",
                )
            )
    if isinstance(value, str):
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                _invalid(
                    where,
                    value,
                    f"{where} in body should be at least {schema['minLength']} chars long",
                )
            )
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(
                FieldError(
                    where,
                    f"Too long: may not be more than {schema['maxLength']} bytes",
                    reason="FieldValueTooLong",
                )
            )
        if "pattern" in schema and not _pattern_matches(schema["pattern"], value):
            errors.append(
                _invalid(where, value, f"{where} in body should match '{schema['pattern']}'")
            )
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(
                _invalid(
                    where, value, f"{where} in body should have at least {schema['minItems']} items"
                )
            )
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errors.append(
                FieldError(
                    where,
                    f"Too many: {len(value)}: must have at most {schema['maxItems']} items",
                    reason="FieldValueTooMany",
                )
            )
        item_schema = schema.get("items")
        if isinstance(item_schema, Mapping):
            for index, item in enumerate(value):
                errors.extend(validate_schema(item_schema, item, path=f"{where}[{index}]"))
    if isinstance(value, dict):
        for required in schema.get("required") or []:
            if required not in value:
                errors.append(_required(_join(path, required)))
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if key in properties:
                errors.extend(validate_schema(properties[key], item, path=_join(path, key)))
            elif isinstance(additional, Mapping):
                errors.extend(validate_schema(additional, item, path=_join(path, key)))
    return errors


def _pattern_matches(pattern: str, value: str) -> bool:
    """ECMA/RE2 patterns are nearly all valid Python; one that is not is not enforced."""
    try:
        return re.search(pattern, value) is not None
    except re.error:
        return True


def _type_name(value: Any) -> str:
    for name in _JSON_TYPES:
        if _type_matches(name, value):
            return name
    return type(value).__name__


def prune_unknown_fields(schema: Mapping[str, Any], obj: JsonObject) -> list[str]:
    """Drop fields the schema does not know (in place); return their paths, sorted.

    This is structural-schema pruning: ``apiVersion`` and ``kind`` at the root are kept,
    ``metadata`` is checked against ObjectMeta, ``x-kubernetes-preserve-unknown-fields`` keeps
    a level's unknown fields, and ``additionalProperties`` makes every key known.
    """
    unknown: list[str] = []
    for key, value in list(obj.items()):
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            # Every kind's metadata is an ObjectMeta, whatever a CRD's schema says of it.
            _prune_value(OBJECT_META, value, "metadata", unknown)
            continue
        _prune(schema, key, value, obj, "", unknown)
    return sorted(unknown)


def _prune(
    schema: Mapping[str, Any],
    key: str,
    value: Any,
    parent: dict[str, Any],
    path: str,
    unknown: list[str],
) -> None:
    properties = schema.get("properties") or {}
    additional = schema.get("additionalProperties")
    where = _join(path, key)
    if key in properties:
        child: Mapping[str, Any] | None = properties[key]
    elif isinstance(additional, Mapping):
        child = additional
    elif additional is True or schema.get("x-kubernetes-preserve-unknown-fields"):
        child = None
    else:
        del parent[key]
        unknown.append(where)
        return
    if child is not None:
        _prune_value(child, value, where, unknown)


def _prune_value(schema: Mapping[str, Any], value: Any, path: str, unknown: list[str]) -> None:
    if isinstance(value, dict):
        if schema.get("x-kubernetes-int-or-string"):
            return
        for key, item in list(value.items()):
            _prune(schema, key, item, value, path, unknown)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for index, item in enumerate(value):
            _prune_value(schema["items"], item, f"{path}[{index}]", unknown)
