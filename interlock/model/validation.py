"""Validation errors in the words an operator reads in an Event or a status condition.

pydantic words its errors for Python programmers ("Input should be greater than or equal to 0",
"Field required"); a person fixing a manifest wants a sentence about the field ("must be at
least 0", "is required"). Every place that turns a ``ValidationError`` into a message for a
user (``meta.parse_object`` for every kind, ModuleSet validation) goes through :func:`describe`,
so the same mistake reads the same everywhere. Error types
not listed keep pydantic's message, without its "Value error, " prefix.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any


def _number(value: object) -> str:
    """``100.0`` → ``100``: a bound reads as the manifest would write it."""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


def describe(error: Mapping[str, Any]) -> str:
    """The reason of one pydantic error (an item of ``ValidationError.errors()``)."""
    kind = str(error.get("type", ""))
    ctx: Mapping[str, Any] = error.get("ctx") or {}
    message = str(error.get("msg", ""))
    simple = {
        "missing": "is required",
        "extra_forbidden": "unknown field",
        "int_type": "must be a whole number",
        "int_parsing": "must be a whole number",
        "int_from_float": "must be a whole number",
        "float_type": "must be a number",
        "float_parsing": "must be a number",
        "string_type": "must be a string",
        "bool_type": "must be true or false",
        "bool_parsing": "must be true or false",
        "list_type": "must be a list",
        "dict_type": "must be an object",
        "model_type": "must be an object",
        "model_attributes_type": "must be an object",
    }
    if kind in simple:
        return simple[kind]
    bounds = {
        "greater_than_equal": ("must be at least", "ge"),
        "greater_than": ("must be more than", "gt"),
        "less_than_equal": ("must be at most", "le"),
        "less_than": ("must be less than", "lt"),
    }
    if kind in bounds and bounds[kind][1] in ctx:
        words, key = bounds[kind]
        return f"{words} {_number(ctx[key])}"
    sizes = {
        "string_too_short": ("must be at least", "min_length", "character"),
        "string_too_long": ("must be at most", "max_length", "character"),
        "too_short": ("must have at least", "min_length", "item"),
        "too_long": ("must have at most", "max_length", "item"),
    }
    if kind in sizes and sizes[kind][1] in ctx:
        words, key, unit = sizes[kind]
        count = ctx[key]
        return f"{words} {count} {unit}{'' if count == 1 else 's'}"
    if kind in ("literal_error", "enum") and "expected" in ctx:
        # pydantic's ``expected`` is already worded "'a', 'b' or 'c'".
        return f"must be {ctx['expected']}"
    if kind == "string_pattern_mismatch" and "pattern" in ctx:
        return f"must match the pattern {ctx['pattern']}"
    return message.removeprefix("Value error, ")
