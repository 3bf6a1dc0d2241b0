"""One-line, redacted summaries of messages for the trace and for error logs.

Messages carry Kubernetes objects, and some of those hold Secret data; a trace or a log line
must show enough to follow a change and nothing that could leak. So the summary is
*allow-listed*: it renders strings, numbers, enums and the fields of dataclasses and pydantic
models, and renders anything else (bytes, arbitrary objects) by type name only. A field is
never rendered when its class lists it in ``__trace_redact__`` or declares it ``repr=False``.
A message may supply its own ``trace_summary()``.
"""

from __future__ import annotations

import dataclasses
import datetime
import enum
from typing import Any

SUMMARY_LIMIT = 200
"""Characters a summary is cut to (an ellipsis marks the cut)."""

_STRING_LIMIT = 60
_ITEMS_SHOWN = 3
_MAX_DEPTH = 3
_REDACTED = "<redacted>"

# Per type: the names of the fields to render (in order) and the redacted ones, or None when the
# type is not a dataclass / pydantic model. Computed once per type: introspection is slow.
_FIELDS: dict[type, tuple[tuple[str, ...], frozenset[str]] | None] = {}
_CUSTOM: dict[type, bool] = {}


def summarize(message: object) -> str:
    """The summary of ``message``: its ``trace_summary()`` or the type name and fields."""
    cls = type(message)
    if cls is int or cls is float or cls is bool:
        return repr(message)
    custom = _CUSTOM.get(cls)
    if custom is None:
        custom = _CUSTOM[cls] = callable(getattr(cls, "trace_summary", None))
    text = str(message.trace_summary()) if custom else _render(message, 0)  # type: ignore[attr-defined]
    if len(text) > SUMMARY_LIMIT:
        return text[: SUMMARY_LIMIT - 1] + "…"
    return text


def _fields_of(cls: type) -> tuple[tuple[str, ...], frozenset[str]] | None:
    try:
        return _FIELDS[cls]
    except KeyError:
        pass
    redact: frozenset[str] = frozenset(getattr(cls, "__trace_redact__", frozenset()))
    result: tuple[tuple[str, ...], frozenset[str]] | None = None
    if dataclasses.is_dataclass(cls):
        hidden = {f.name for f in dataclasses.fields(cls) if not f.repr} | redact
        shown = tuple(f.name for f in dataclasses.fields(cls))
        result = (shown, frozenset(hidden))
    else:
        model_fields: dict[str, Any] | None = getattr(cls, "model_fields", None)
        if isinstance(model_fields, dict):
            hidden = {name for name, info in model_fields.items() if not info.repr} | redact
            result = (tuple(model_fields), frozenset(hidden))
    _FIELDS[cls] = result
    return result


def _render(value: object, depth: int) -> str:
    if value is None or isinstance(value, bool | int | float):
        return repr(value)
    if isinstance(value, enum.Enum):
        return f"{type(value).__name__}.{value.name}"
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if isinstance(value, str):
        if len(value) > _STRING_LIMIT:
            return repr(value[:_STRING_LIMIT]) + "…"
        return repr(value)
    cls = type(value)
    fields = _fields_of(cls)
    if fields is not None:
        if depth >= _MAX_DEPTH:
            return f"{cls.__name__}(…)"
        names, hidden = fields
        parts = []
        for name in names:
            if name in hidden:
                parts.append(f"{name}={_REDACTED}")
                continue
            field = getattr(value, name, None)
            if depth > 0 and _is_empty(field):
                continue  # nested objects: skip unset fields, keep the summary readable
            parts.append(f"{name}={_render(field, depth + 1)}")
        return f"{cls.__name__}({', '.join(parts)})"
    if isinstance(value, list | tuple | set | frozenset):
        if depth >= _MAX_DEPTH:
            return f"<{len(value)} items>"
        items = [_render(item, depth + 1) for item in list(value)[:_ITEMS_SHOWN]]
        if len(value) > _ITEMS_SHOWN:
            items.append(f"… {len(value)} items")
        open_, close = ("[", "]") if isinstance(value, list) else ("(", ")")
        return open_ + ", ".join(items) + close
    if isinstance(value, dict):
        if depth >= _MAX_DEPTH:
            return f"<{len(value)} keys>"
        entries = [
            f"{_render(k, depth + 1)}: {_render(v, depth + 1)}"
            for k, v in list(value.items())[:_ITEMS_SHOWN]
        ]
        if len(value) > _ITEMS_SHOWN:
            entries.append(f"… {len(value)} keys")
        return "{" + ", ".join(entries) + "}"
    # Unknown objects (bytes, SecretValue, clients…) are shown by type only: safe by default.
    return f"<{cls.__name__}>"


def _is_empty(value: object) -> bool:
    if value is None or value == "":
        return True
    return isinstance(value, list | tuple | set | frozenset | dict) and not value
