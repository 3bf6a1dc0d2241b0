"""OpenAPI v3 schemas applied to objects: validation and pruning of unknown fields.

A CRD's ``openAPIV3Schema`` is what makes ``kubectl apply`` of a ModuleSet with
``requests: "many"`` fail with ``spec.modules.rateLimit.requests: Invalid value: "string":
... must be of type integer``, and what makes a misspelt field disappear (or, with kubectl's
``fieldValidation=Strict``, fail). This module implements the structural subset of OpenAPI v3
that CRDs use; the built-in kinds' field lists in :mod:`~interlock.embedded.builtin_schemas` go
through the same pruning.
"""

from __future__ import annotations

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
        if "minLength" in schema and len(value) < schema["minLength"]:
            errors.append(
                invalid_value(
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
                invalid_value(where, value, f"{where} in body should match '{schema['pattern']}'")
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
