"""Label and field selectors of list and watch requests.

Informers filter by label (``app=web,tier in (front,back),!canary``) and kubectl's ``delete
--wait`` and ``get NAME -w`` watch with ``fieldSelector=metadata.name=NAME``. A selector is
parsed once per request into a predicate over the raw object, so a watch applies it to every
event without re-parsing.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from typing import Any

from interlock.embedded.errors import bad_request

Predicate = Callable[[Mapping[str, Any]], bool]

_LABEL_VALUE = re.compile(r"(([A-Za-z0-9][-A-Za-z0-9_.]{0,61})?[A-Za-z0-9])?")
_SET_REQUIREMENT = re.compile(r"^\s*(\S+?)\s+(in|notin)\s+\((.*)\)\s*$")


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside ``( )``."""
    parts, depth, current = [], 0, ""
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append(current)
            current = ""
        else:
            current += char
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


def _labels(obj: Mapping[str, Any]) -> Mapping[str, str]:
    metadata = obj.get("metadata") or {}
    labels = metadata.get("labels")
    return labels if isinstance(labels, Mapping) else {}


def _label_requirement(text: str) -> Predicate:
    match = _SET_REQUIREMENT.match(text)
    if match:
        key, operator, raw_values = match.groups()
        values = {v.strip() for v in raw_values.split(",") if v.strip()}
        if operator == "in":
            return lambda obj: _labels(obj).get(key) in values
        return lambda obj: _labels(obj).get(key) not in values
    for operator in ("!=", "==", "="):
        if operator in text:
            key, _, value = (p.strip() for p in text.partition(operator))
            if not key:
                break
            if not _LABEL_VALUE.fullmatch(value):
                raise bad_request(
                    f"unable to parse requirement: values[0][{key}]: Invalid value: "
                    f'"{value}": a valid label must be an empty string or consist of '
                    "alphanumeric characters, '-', '_' or '.'"
                )
            if operator == "!=":
                return lambda obj: _labels(obj).get(key) != value
            return lambda obj: _labels(obj).get(key) == value
    if text.startswith("!"):
        key = text[1:].strip()
        return lambda obj: key not in _labels(obj)
    if re.fullmatch(r"[A-Za-z0-9./_\-]+", text):
        return lambda obj: text in _labels(obj)
    raise bad_request(f'unable to parse requirement: found "{text}", expected a label selector')


def parse_label_selector(text: str | None) -> Predicate | None:
    if not text or not text.strip():
        return None
    requirements = [_label_requirement(part) for part in _split_top_level(text)]
    return lambda obj: all(requirement(obj) for requirement in requirements)


def _field_value(obj: Mapping[str, Any], path: str) -> str:
    current: Any = obj
    for part in path.split("."):
        if not isinstance(current, Mapping):
            return ""
        current = current.get(part)
    if current is None:
        return ""
    if isinstance(current, bool):
        return "true" if current else "false"
    return str(current)


_OBJECT_FIELDS = frozenset({"metadata.name", "metadata.namespace"})
FIELD_LABELS: dict[tuple[str, str], frozenset[str]] = {
    ("", "secrets"): frozenset({"type"}),
    ("", "namespaces"): frozenset({"status.phase"}),
    ("", "events"): frozenset(
        {
            *(
                f"involvedObject.{field}"
                for field in (
                    "kind",
                    "namespace",
                    "name",
                    "uid",
                    "apiVersion",
                    "resourceVersion",
                    "fieldPath",
                )
            ),
            "reason",
            "reportingComponent",
            "source",
            "type",
        }
    ),
}
"""The fields each kind may be selected by, beside metadata.name and metadata.namespace; a
selector on any other field is refused with 400, as kube-apiserver refuses it."""


def _field_requirement(text: str, allowed: frozenset[str] | None) -> Predicate:
    for operator in ("!=", "==", "="):
        if operator in text:
            path, _, value = (p.strip() for p in text.partition(operator))
            if not path:
                break
            if allowed is not None and path not in allowed and path not in _OBJECT_FIELDS:
                raise bad_request(f'field label not supported: "{path}"')
            if operator == "!=":
                return lambda obj: _field_value(obj, path) != value
            return lambda obj: _field_value(obj, path) == value
    raise bad_request(f'invalid selector: "{text}"; can\'t understand "{text}"')


def parse_field_selector(
    text: str | None, *, allowed: frozenset[str] | None = None
) -> Predicate | None:
    """Field paths with ``=``, ``==`` or ``!=`` (metadata.name, involvedObject.uid …).

    ``allowed``: the kind's selectable fields beside metadata.name and metadata.namespace
    (see :data:`FIELD_LABELS`); None allows any dotted path.
    """
    if not text or not text.strip():
        return None
    requirements = [_field_requirement(part, allowed) for part in _split_top_level(text)]
    return lambda obj: all(requirement(obj) for requirement in requirements)
