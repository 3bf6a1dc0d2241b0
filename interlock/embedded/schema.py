"""OpenAPI v3 schemas applied to objects: validation and pruning of unknown fields.

A CRD's ``openAPIV3Schema`` is what makes ``kubectl apply`` of a ModuleSet with
``requests: "many"`` fail with ``spec.modules.rateLimit.requests: Invalid value: "string":
... must be of type integer``, and what makes a misspelt field disappear (or, with kubectl's
``fieldValidation=Strict``, fail). This module implements the structural subset of OpenAPI v3
that CRDs use; the built-in kinds' field lists in :mod:`~interlock.embedded.builtin_schemas` go
through the same pruning.
"""

from __future__ import annotations

import copy
import ipaddress
import json
import re
from collections.abc import Mapping
from typing import Any

from interlock.embedded.builtin_schemas import OBJECT_META
from interlock.embedded.errors import FieldError, invalid_value, required_value

JsonObject = dict[str, Any]

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
            [invalid_value(where, None, f"must be of type {schema.get('type', 'object')}")]
            if schema.get("type")
            else []
        )
    if schema.get("x-kubernetes-int-or-string"):
        if not (isinstance(value, str) or _type_matches("integer", value)):
            errors.append(invalid_value(where, value, "must be an integer or a string"))
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
                invalid_value(
                    where,
                    value,
                    f"{where} in body should be greater than or equal to {schema['minimum']}",
                )
            )
        if "maximum" in schema and value > schema["maximum"]:
            errors.append(
                invalid_value(
                    where,
                    value,
                    f"{where} in body should be less than or equal to {schema['maximum']}",
                )
            )
    if isinstance(value, str):
        # As kube-openapi's string validator: the first failing check only, in this order.
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errors.append(
                FieldError(
                    where,
                    f"Too long: may not be more than {schema['maxLength']} bytes",
                    reason="FieldValueTooLong",
                )
            )
        elif "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                invalid_value(
                    where,
                    value,
                    f"{where} in body should be at least {schema['minLength']} chars long",
                )
            )
        elif "pattern" in schema and not _pattern_matches(schema["pattern"], value):
            errors.append(
                invalid_value(where, value, f"{where} in body should match '{schema['pattern']}'")
            )
        if "format" in schema and not _format_matches(str(schema["format"]), value):
            errors.append(
                FieldError(
                    where,
                    f"Invalid value: {json.dumps(value)}: {where} in body must be of type "
                    f"{schema['format']}: {json.dumps(value)}",
                    reason="FieldValueTypeInvalid",
                )
            )
    if isinstance(value, list):
        if "minItems" in schema and len(value) < schema["minItems"]:
            errors.append(
                invalid_value(
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
                errors.append(required_value(_join(path, required)))
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in sorted(value.items()):  # kube-openapi reports fields in key order
            if key in properties:
                errors.extend(validate_schema(properties[key], item, path=_join(path, key)))
            elif isinstance(additional, Mapping):
                errors.extend(validate_schema(additional, item, path=_join(path, key)))
    return errors


_DATE_TIME = re.compile(
    r"^\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}(:\d{2}(\.\d+)?)?([Zz]|[+-]\d{2}:?\d{2})?$"
)


def _format_matches(format_name: str, value: str) -> bool:
    """The string formats kube-apiserver checks in the CRDs it serves (others pass)."""
    if format_name == "date-time":
        return _DATE_TIME.match(value) is not None
    if format_name in ("ipv4", "ipv6"):
        try:
            address = ipaddress.ip_address(value)
        except ValueError:
            return False
        return address.version == (4 if format_name == "ipv4" else 6)
    return True


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


def apply_defaults(schema: Mapping[str, Any], obj: JsonObject) -> None:
    """Fill in the schema's ``default`` values (in place), as kube-apiserver does on decoding.

    A property with a default is set when absent (or null while not nullable), and the
    defaulted value is itself defaulted; ``metadata`` at the root is never touched.
    """
    properties = schema.get("properties") or {}
    for key, child in properties.items():
        if key in ("metadata", "apiVersion", "kind") or not isinstance(child, Mapping):
            continue
        _default_property(child, key, obj)


def _default_property(schema: Mapping[str, Any], key: str, parent: dict[str, Any]) -> None:
    if "default" in schema and (
        key not in parent or (parent[key] is None and not schema.get("nullable"))
    ):
        parent[key] = copy.deepcopy(schema["default"])
    if key in parent:
        _default_value(schema, parent[key])


def _default_value(schema: Mapping[str, Any], value: Any) -> None:
    if isinstance(value, dict):
        for key, child in (schema.get("properties") or {}).items():
            if isinstance(child, Mapping):
                _default_property(child, key, value)
        additional = schema.get("additionalProperties")
        if isinstance(additional, Mapping):
            for item in value.values():
                _default_value(additional, item)
    elif isinstance(value, list) and isinstance(schema.get("items"), Mapping):
        for item in value:
            _default_value(schema["items"], item)


def list_type_errors(schema: Mapping[str, Any], value: Any, *, path: str) -> list[FieldError]:
    """Duplicates in lists of ``x-kubernetes-list-type`` ``set`` or ``map`` (by their keys)."""
    errors: list[FieldError] = []
    _list_types(schema, value, path, errors)
    return errors


def _list_types(schema: Mapping[str, Any], value: Any, path: str, out: list[FieldError]) -> None:
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        for key, item in value.items():
            if path == "" and key == "metadata":
                continue
            child = properties.get(key, additional)
            if isinstance(child, Mapping):
                _list_types(child, item, _join(path, key), out)
    elif isinstance(value, list):
        list_type = schema.get("x-kubernetes-list-type")
        keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())
        seen: list[Any] = []
        for index, item in enumerate(value):
            if list_type == "set" or (list_type == "map" and isinstance(item, dict)):
                key = item if list_type == "set" else {k: item.get(k) for k in keys if k in item}
                if key in seen:
                    out.append(
                        FieldError(
                            f"{path}[{index}]",
                            f"Duplicate value: {json.dumps(key)}",
                            reason="FieldValueDuplicate",
                        )
                    )
                else:
                    seen.append(key)
        items = schema.get("items")
        if isinstance(items, Mapping):
            for index, item in enumerate(value):
                _list_types(items, item, f"{path}[{index}]", out)
