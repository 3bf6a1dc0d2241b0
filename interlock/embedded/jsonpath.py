"""The subset of kubectl JSONPath that CRD ``additionalPrinterColumns`` use.

CRD printer columns name their cell with a JSONPath such as ``.spec.hostnames``,
``.spec.rules[0].host``, ``.status.conditions[?(@.type=="Ready")].status`` or
``.spec.items[*].name``. Supporting exactly these forms keeps ``kubectl get <crd>`` columns
correct without a general JSONPath engine.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_TOKEN = re.compile(
    r"""\.(?P<field>[A-Za-z0-9_$\-]+)
      | \[(?P<index>-?\d+|\*)\]
      | \[\?\(@\.(?P<filter_field>[A-Za-z0-9_\-]+)\s*==\s*
            (?P<quote>["'])(?P<filter_value>.*?)(?P=quote)\)\]
      | \[(?P<quote2>["'])(?P<bracket_field>.+?)(?P=quote2)\]""",
    re.VERBOSE,
)


class JsonPathError(ValueError):
    """The expression is outside the supported subset."""


def evaluate_jsonpath(path: str, obj: Any) -> list[Any]:
    """Every value the path selects in ``obj``, in document order."""
    expression = path.strip()
    if expression.startswith("{") and expression.endswith("}"):
        expression = expression[1:-1]
    if expression.startswith("$"):
        expression = expression[1:]
    current: list[Any] = [obj]
    position = 0
    while position < len(expression):
        match = _TOKEN.match(expression, position)
        if match is None:
            raise JsonPathError(f"unsupported JSONPath {path!r} at offset {position}")
        position = match.end()
        current = _step(current, match)
    return current


def _step(values: list[Any], match: re.Match[str]) -> list[Any]:
    selected: list[Any] = []
    field = match.group("field") or match.group("bracket_field")
    for value in values:
        if field is not None:
            if isinstance(value, Mapping) and field in value:
                selected.append(value[field])
        elif match.group("index") is not None:
            if not isinstance(value, list):
                continue
            index = match.group("index")
            if index == "*":
                selected.extend(value)
            elif -len(value) <= int(index) < len(value):
                selected.append(value[int(index)])
        else:
            if not isinstance(value, list):
                continue
            key, wanted = match.group("filter_field"), match.group("filter_value")
            selected.extend(
                item for item in value if isinstance(item, Mapping) and str(item.get(key)) == wanted
            )
    return selected
