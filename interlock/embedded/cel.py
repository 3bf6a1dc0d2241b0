"""CRD validation rules (``x-kubernetes-validations``): CEL, evaluated as kube-apiserver does.

The Gateway API CRDs carry most of their rules in CEL, not in OpenAPI keywords: a path that
does not start with ``/``, a RequestHeaderModifier filter without its ``requestHeaderModifier``
block, two references to one parent without a ``sectionName``, a backend timeout longer than
the request timeout. Without these rules the embedded server admits routes a real cluster
refuses, and a controller tested against it handles objects that cannot exist.

The expressions are evaluated by the ``common-expression-language`` package (Rust ``cel``
bindings); this module adds what Kubernetes adds to CEL for CRDs: ``self`` and ``oldSelf``
(transition rules run on update only, where the old value exists at the same place), property
names escaped as Kubernetes escapes them (``namespace`` → ``__namespace__``), and the Kubernetes
library functions the rules use (``isIP``, the string extensions). A rule that fails to compile
or to evaluate is reported as the real server reports a rule it cannot run: an invalid value
naming the rule.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Callable, Iterator, Mapping
from functools import lru_cache
from typing import Any

import cel

from interlock.embedded.errors import FieldError

_RESERVED = frozenset(
    {
        *("true", "false", "null", "in", "as", "break", "const", "continue", "else", "for"),
        *("function", "if", "import", "let", "loop", "package", "namespace", "return", "var"),
        *("void", "while"),
    }
)
_IDENTIFIER = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_ESCAPES = {"__": "__underscores__", ".": "__dot__", "-": "__dash__", "/": "__slash__"}
_OLD_SELF = re.compile(r"\boldSelf\b")


def escape_property(name: str) -> str | None:
    """The CEL name of a property (None: not accessible from CEL), as Kubernetes escapes it."""
    if name in _RESERVED:
        return f"__{name}__"
    escaped = re.sub(r"__|[./-]", lambda m: _ESCAPES[m.group(0)], name)
    return escaped if _IDENTIFIER.match(escaped) else None


def _is_ip(value: str) -> bool:
    if "%" in value:
        return False  # zones are refused by Kubernetes' isIP
    try:
        ipaddress.ip_address(value)
    except ValueError:
        return False
    return True


def _substring(value: str, start: int, end: int | None = None) -> str:
    if start < 0 or start > len(value) or (end is not None and (end < start or end > len(value))):
        raise ValueError(f"index out of range: {start}")
    return value[start:end]


def _split(value: str, separator: str, limit: int = -1) -> list[str]:
    if limit == 0:
        return []
    return value.split(separator, limit - 1 if limit > 0 else -1)


def _index_of(value: str, needle: str, start: int = 0) -> int:
    return value.find(needle, start)


def _replace(value: str, old: str, new: str, count: int = -1) -> str:
    return value.replace(old, new, count)


def _join(values: list[str], separator: str = "") -> str:
    return separator.join(values)


_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "isIP": _is_ip,
    "substring": _substring,
    "split": _split,
    "indexOf": _index_of,
    "lastIndexOf": lambda value, needle: value.rfind(needle),
    "lowerAscii": lambda value: value.lower(),
    "upperAscii": lambda value: value.upper(),
    "trim": lambda value: value.strip(),
    "replace": _replace,
    "join": _join,
}


@lru_cache(maxsize=4096)
def _compile(rule: str) -> tuple[Any, bool]:
    """The compiled rule, and whether it calls a Kubernetes library function of ours (only
    then does it need a Context; a plain dict of variables evaluates twice as fast)."""
    program = cel.compile(rule)
    return program, bool(set(program.functions()) & _FUNCTIONS.keys())


def _to_cel(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` as CEL sees it: properties renamed as Kubernetes escapes them."""
    if isinstance(value, dict):
        properties = schema.get("properties")
        additional = schema.get("additionalProperties")
        if isinstance(properties, Mapping) and properties:
            out: dict[str, Any] = {}
            for key, item in value.items():
                name = escape_property(key)
                if name is not None:
                    out[name] = _to_cel(properties.get(key) or {}, item)
            return out
        child = additional if isinstance(additional, Mapping) else {}
        return {key: _to_cel(child, item) for key, item in value.items()}
    if isinstance(value, list):
        items = schema.get("items")
        child = items if isinstance(items, Mapping) else {}
        return [_to_cel(child, item) for item in value]
    return value


def _type_word(schema: Mapping[str, Any], value: Any) -> str:
    if schema.get("type"):
        return str(schema["type"])
    if isinstance(value, dict):
        return "object"
    return "array" if isinstance(value, list) else "string"


def _evaluate(
    rule: Mapping[str, Any],
    schema: Mapping[str, Any],
    value: Any,
    variables: dict[str, Any],
    path: str,
) -> FieldError | None:
    """One rule; ``variables``: ``self`` (and ``oldSelf`` when there is an old value)."""
    source = str(rule.get("rule", ""))
    transition = bool(_OLD_SELF.search(source))
    if transition and "oldSelf" not in variables:
        return None
    where = path or "<nil>"
    if rule.get("fieldPath"):
        where = f"{path}{rule['fieldPath']}"
    try:
        program, uses_functions = _compile(source)
        if uses_functions:
            context = cel.Context()
            for name, function in _FUNCTIONS.items():
                context.add_function(name, function)
            for name, variable in variables.items():
                context.add_variable(name, variable)
            result = program.execute(context)
        else:
            result = program.execute(variables)
    except Exception as error:  # the library raises several types; any is a failed rule
        return FieldError(
            where,
            f'Invalid value: "{_type_word(schema, value)}": {error} evaluating rule: {source}',
        )
    if result is True:
        return None
    message = str(rule.get("message") or f"failed rule: {source}")
    reason = str(rule.get("reason") or "FieldValueInvalid")
    if reason == "FieldValueForbidden":
        return FieldError(where, f"Forbidden: {message}", reason=reason)
    if reason == "FieldValueRequired":
        return FieldError(where, f"Required value: {message}", reason=reason)
    if reason == "FieldValueDuplicate":
        return FieldError(where, f"Duplicate value: {message}", reason=reason)
    return FieldError(where, f'Invalid value: "{_type_word(schema, value)}": {message}')


class _Absent:
    """No old value at this place (a create, or a field that did not exist before)."""


_ABSENT: Any = _Absent()


def validate_rules(
    schema: Mapping[str, Any], value: Any, *, old: Any = _ABSENT, path: str = ""
) -> list[FieldError]:
    """Every ``x-kubernetes-validations`` rule of ``schema`` that ``value`` breaks.

    ``old`` is the previous object on update (the transition rules' ``oldSelf``); omit it on
    create. Values correlate with their old values by property name and, for lists of type
    ``map`` or ``set``, by key or value, as in Kubernetes; items of atomic lists do not.
    """
    return list(_walk(schema, value, old, path))


def _walk(schema: Mapping[str, Any], value: Any, old: Any, path: str) -> Iterator[FieldError]:
    if value is None:
        return
    rules = schema.get("x-kubernetes-validations") or []
    if rules:
        # Converted once for all the rules of this level.
        variables = {"self": _to_cel(schema, value)}
        if old is not _ABSENT:
            variables["oldSelf"] = _to_cel(schema, old)
        for rule in rules:
            if isinstance(rule, Mapping):
                error = _evaluate(rule, schema, value, variables, path)
                if error is not None:
                    yield error
    if isinstance(value, dict):
        properties = schema.get("properties") or {}
        additional = schema.get("additionalProperties")
        old_map = old if isinstance(old, dict) else {}
        for key, item in value.items():
            child = properties.get(key)
            if child is None and isinstance(additional, Mapping):
                child = additional
            if isinstance(child, Mapping):
                where = f"{path}.{key}" if path else key
                if path == "" and key == "metadata":
                    continue
                yield from _walk(child, item, old_map.get(key, _ABSENT), where)
    elif isinstance(value, list):
        items = schema.get("items")
        if not isinstance(items, Mapping):
            return
        correlate = _correlator(schema, old)
        for index, item in enumerate(value):
            yield from _walk(items, item, correlate(item), f"{path}[{index}]")


def _correlator(schema: Mapping[str, Any], old: Any) -> Callable[[Any], Any]:
    list_type = schema.get("x-kubernetes-list-type")
    if not isinstance(old, list) or list_type not in ("map", "set"):
        return lambda _item: _ABSENT
    if list_type == "set":
        return lambda item: item if item in old else _ABSENT
    keys = tuple(schema.get("x-kubernetes-list-map-keys") or ())

    def key_of(item: Any) -> tuple[Any, ...] | None:
        return tuple(item.get(k) for k in keys) if isinstance(item, dict) else None

    by_key = {key_of(item): item for item in old}
    return lambda item: by_key.get(key_of(item), _ABSENT)


def has_rules(schema: Any) -> bool:
    """Whether any level of ``schema`` carries ``x-kubernetes-validations``."""
    if isinstance(schema, Mapping):
        if schema.get("x-kubernetes-validations"):
            return True
        return any(has_rules(v) for v in schema.values())
    if isinstance(schema, list):
        return any(has_rules(v) for v in schema)
    return False
