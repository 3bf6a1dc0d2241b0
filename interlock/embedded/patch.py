"""The three PATCH flavours of the Kubernetes API.

- JSON merge patch (RFC 7386): what ``kubectl apply`` sends for kinds it has no Go type for
  (HTTPRoute, ModuleSet) and what controllers use for status.
- Strategic merge patch: what ``kubectl apply``/``patch`` send for core kinds. Lists with a
  merge key (Service ``spec.ports`` by ``port``) are merged item by item instead of replaced,
  and the ``$patch``, ``$setElementOrder/…``, ``$retainKeys`` and
  ``$deleteFromPrimitiveList/…`` directives are honoured. Without this, a second ``kubectl
  apply`` of a Service would drop the ports' defaults.
- JSON patch (RFC 6902): what ``CustomObjectsApi.patch_*`` sends for a list of operations.
"""

from __future__ import annotations

import copy
from collections.abc import Mapping
from typing import Any

from interlock.embedded.errors import ApiError, bad_request

JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
STRATEGIC_MERGE_PATCH = "application/strategic-merge-patch+json"
APPLY_PATCH = "application/apply-patch+yaml"

# Merge strategies of list fields, by (group, plural) and field path (list indices omitted).
# A key of None means "merge primitive values as a set" (finalizers); lists not listed here
# are atomic: the patch replaces them, as for every list without a patchStrategy tag.
_COMMON_LIST_KEYS: dict[tuple[str, ...], str | None] = {
    ("metadata", "finalizers"): None,
    ("metadata", "ownerReferences"): "uid",
    ("status", "conditions"): "type",
}
_LIST_KEYS: dict[tuple[str, str], dict[tuple[str, ...], str | None]] = {
    ("", "services"): {("spec", "ports"): "port"},
}


def json_merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: objects merge recursively, ``null`` deletes, anything else replaces."""
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    result = dict(target) if isinstance(target, Mapping) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = json_merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any, *, kind: tuple[str, str]) -> Any:
    keys = {**_COMMON_LIST_KEYS, **_LIST_KEYS.get(kind, {})}
    return _strategic(target, patch, keys, ())


def _strategic(
    target: Any, patch: Any, keys: dict[tuple[str, ...], str | None], path: tuple[str, ...]
) -> Any:
    if not isinstance(patch, Mapping):
        return copy.deepcopy(patch)
    directive = patch.get("$patch")
    if directive == "replace":
        return {k: copy.deepcopy(v) for k, v in patch.items() if k != "$patch"}
    if directive == "delete":
        return None
    result = dict(target) if isinstance(target, Mapping) else {}
    retain = patch.get("$retainKeys")
    if isinstance(retain, list):
        result = {k: v for k, v in result.items() if k in retain}
    orders: dict[str, list[Any]] = {}
    for key, value in patch.items():
        if key in ("$patch", "$retainKeys"):
            continue
        if key.startswith("$setElementOrder/"):
            orders[key.partition("/")[2]] = list(value or [])
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.partition("/")[2]
            doomed = value or []
            result[field] = [v for v in result.get(field) or [] if v not in doomed]
            continue
        field_path = (*path, key)
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(result.get(key), value, keys, field_path)
        elif isinstance(value, Mapping):
            merged = _strategic(result.get(key), value, keys, field_path)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    for field, order in orders.items():
        if isinstance(result.get(field), list):
            result[field] = _apply_order(result[field], order, keys.get((*path, field)))
    return result


def _merge_list(
    target: Any, patch: list[Any], keys: dict[tuple[str, ...], str | None], path: tuple[str, ...]
) -> list[Any]:
    if any(isinstance(item, Mapping) and item.get("$patch") == "replace" for item in patch):
        return [copy.deepcopy(i) for i in patch if not (isinstance(i, Mapping) and "$patch" in i)]
    if path not in keys or not isinstance(target, list):
        return [
            copy.deepcopy(i)
            for i in patch
            if not (isinstance(i, Mapping) and i.get("$patch") == "delete")
        ]
    merge_key = keys[path]
    if merge_key is None:
        merged = list(target)
        merged.extend(v for v in patch if v not in merged)
        return merged
    server = [dict(item) if isinstance(item, Mapping) else item for item in target]
    patched: list[Any] = []
    for item in patch:
        if not isinstance(item, Mapping):
            raise bad_request(f"{'.'.join(path)}: expected objects with a {merge_key!r} key")
        if item.get("$patch") == "delete":
            server = [r for r in server if not _same_key(r, item, merge_key)]
            continue
        index = next((i for i, r in enumerate(server) if _same_key(r, item, merge_key)), None)
        if index is None:
            patched.append(_strategic({}, item, keys, path))
        else:
            patched.append(_strategic(server.pop(index), item, keys, path))
    return _merge_sorted(patched, server, target, merge_key)


def _merge_sorted(
    patched: list[Any], server_only: list[Any], server_order: list[Any], merge_key: str
) -> list[Any]:
    """The order kube-apiserver gives a merged list (apimachinery's mergeSortedSlice): patch
    items and server-only items interleaved by their place in the old list; an item the old
    list did not have goes before the server-only items still waiting."""

    def place(item: Any) -> int:
        for index, entry in enumerate(server_order):
            if _same_key(entry, item, merge_key):
                return index
        return -1

    merged: list[Any] = []
    i = j = 0
    while i < len(patched) or j < len(server_only):
        if i >= len(patched):
            merged.append(server_only[j])
            j += 1
        elif j >= len(server_only):
            merged.append(patched[i])
            i += 1
        else:
            left, right = place(patched[i]), place(server_only[j])
            if left >= 0 and right >= 0 and right < left:
                merged.append(server_only[j])
                j += 1
            else:
                merged.append(patched[i])
                i += 1
    return merged


def _same_key(current: Any, item: Mapping[str, Any], merge_key: str) -> bool:
    return isinstance(current, Mapping) and current.get(merge_key) == item.get(merge_key)


def _apply_order(items: list[Any], order: list[Any], merge_key: str | None) -> list[Any]:
    def position(item: Any) -> int:
        wanted = item.get(merge_key) if merge_key and isinstance(item, Mapping) else item
        for index, entry in enumerate(order):
            value = entry.get(merge_key) if merge_key and isinstance(entry, Mapping) else entry
            if value == wanted:
                return index
        return len(order)

    return sorted(items, key=position)


# ---------------------------------------------------------------------------------------------
# RFC 6902 JSON patch.


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(f"JSON patch: path {path!r} must start with '/'")
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _resolve_parent(document: Any, parts: list[str], path: str) -> tuple[Any, str]:
    current = document
    for part in parts[:-1]:
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise ApiError(422, f"JSON patch: path {path!r}: missing value at {part!r}", details={})
    return current, parts[-1]


def _list_index(container: list[Any], last: str, path: str, *, for_insert: bool) -> int:
    if last == "-" and for_insert:
        return len(container)
    limit = len(container) + (1 if for_insert else 0)
    if not last.isdigit() or int(last) >= limit:
        raise ApiError(422, f"JSON patch: path {path!r}: index out of range", details={})
    return int(last)


def json_patch(document: Any, operations: Any) -> Any:
    if not isinstance(operations, list):
        raise bad_request("JSON patch: the body must be a list of operations")
    result = copy.deepcopy(document)
    for number, operation in enumerate(operations):
        if not isinstance(operation, Mapping) or "op" not in operation:
            raise bad_request(f"JSON patch: operation {number} has no 'op'")
        result = _apply_operation(result, operation)
    return result


def _get_at(document: Any, path: str) -> Any:
    current = document
    for part in _pointer(path):
        if isinstance(current, dict) and part in current:
            current = current[part]
        elif isinstance(current, list) and part.isdigit() and int(part) < len(current):
            current = current[int(part)]
        else:
            raise ApiError(422, f"JSON patch: path {path!r} does not exist", details={})
    return current


def _apply_operation(document: Any, operation: Mapping[str, Any]) -> Any:
    op = operation["op"]
    path = str(operation.get("path", ""))
    if op == "test":
        if _get_at(document, path) != operation.get("value"):
            raise ApiError(422, f"JSON patch: test failed at {path!r}", details={})
        return document
    if op in ("move", "copy"):
        value = copy.deepcopy(_get_at(document, str(operation.get("from", ""))))
        if op == "move":
            document = _apply_operation(document, {"op": "remove", "path": operation["from"]})
        return _apply_operation(document, {"op": "add", "path": path, "value": value})
    parts = _pointer(path)
    if not parts:
        if op in ("add", "replace"):
            return copy.deepcopy(operation.get("value"))
        raise bad_request("JSON patch: cannot remove the whole document")
    parent, last = _resolve_parent(document, parts, path)
    if op == "add":
        value = copy.deepcopy(operation.get("value"))
        if isinstance(parent, list):
            parent.insert(_list_index(parent, last, path, for_insert=True), value)
        elif isinstance(parent, dict):
            parent[last] = value
        else:
            raise ApiError(422, f"JSON patch: path {path!r}: parent is not a container", details={})
    elif op in ("remove", "replace"):
        if isinstance(parent, list):
            index = _list_index(parent, last, path, for_insert=False)
            if op == "remove":
                del parent[index]
            else:
                parent[index] = copy.deepcopy(operation.get("value"))
        elif isinstance(parent, dict) and last in parent:
            if op == "remove":
                del parent[last]
            else:
                parent[last] = copy.deepcopy(operation.get("value"))
        else:
            raise ApiError(422, f"JSON patch: path {path!r} does not exist", details={})
    else:
        raise bad_request(f"JSON patch: unknown operation {op!r}")
    return document


def apply_patch(
    current: dict[str, Any], patch: Any, *, content_type: str, kind: tuple[str, str], is_core: bool
) -> dict[str, Any]:
    """Apply a patch body of the given content type to ``current`` (which is not modified)."""
    if content_type == JSON_PATCH:
        result = json_patch(current, patch)
    elif content_type == MERGE_PATCH:
        result = json_merge_patch(current, patch)
    elif content_type == STRATEGIC_MERGE_PATCH:
        if not is_core:
            raise ApiError(
                415,
                "strategic merge patch is not supported for custom resources; use "
                f"{MERGE_PATCH} or {JSON_PATCH}",
            )
        result = strategic_merge_patch(current, patch, kind=kind)
    elif content_type == APPLY_PATCH:
        raise ApiError(415, "server-side apply is not supported by the embedded API server")
    else:
        raise ApiError(415, f"the patch content type {content_type!r} is not supported")
    if not isinstance(result, dict):
        raise ApiError(422, "the patched object is not a JSON object")
    return result
