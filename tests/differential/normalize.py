"""What of a response a client may rely on, with what legitimately differs between servers masked.

Two API servers never agree on uids, timestamps, resourceVersion values, allocated cluster IPs
and node ports, generated name suffixes, continue tokens or managedFields (the embedded server
does not track field managers), nor on the exact wording of some messages. Everything else — the
status code, a Status's reason and details (kind, name, group, each cause's reason and field),
the object body, the Warning headers and the watch events — must be equal.
"""

from __future__ import annotations

import ipaddress
import re
from typing import Any

MASK = "<masked>"
_SERVER_TIMES = {"creationTimestamp", "deletionTimestamp", "lastTransitionTime"}
_AGE = re.compile(r"^(\d+(ms|s|m|h|d|y))+$|^<invalid>$")


def normalize_response(status: int, warnings: list[str], body: Any, events: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"status": status, "warnings": warnings}
    if events is not None:
        out["events"] = [normalize_event(event) for event in events]
    else:
        out["body"] = normalize_body(body)
    return out


def normalize_event(event: Any) -> Any:
    if not isinstance(event, dict):
        return event
    return {**event, "object": normalize_body(event.get("object"))}


def normalize_body(body: Any) -> Any:
    if not isinstance(body, dict):
        return body
    kind = body.get("kind")
    if kind == "Status":
        return _status(body)
    if kind == "Table":
        return _table(body)
    return _object(body)


def _status(body: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in body.items() if k not in ("message", "metadata")}
    details = out.get("details")
    if isinstance(details, dict):
        details = {k: v for k, v in details.items() if k != "uid"}
        if isinstance(details.get("causes"), list):
            # Sorted: kube-apiserver itself lists the causes of one request in varying order
            # (it walks Go maps), so a client cannot rely on their order.
            details["causes"] = sorted(
                (
                    {k: v for k, v in cause.items() if k != "message"}
                    for cause in details["causes"]
                    if isinstance(cause, dict)
                ),
                key=lambda cause: (str(cause.get("field")), str(cause.get("reason"))),
            )
        out["details"] = details
    return out


def _table(body: dict[str, Any]) -> dict[str, Any]:
    columns = body.get("columnDefinitions") or []
    age = {i for i, column in enumerate(columns) if column.get("type") == "date"} | {
        i for i, column in enumerate(columns) if column.get("name") in ("Age", "Last Seen")
    }
    rows = []
    for row in body.get("rows") or []:
        cells = [
            MASK if i in age and isinstance(cell, str) and _AGE.match(cell) else cell
            for i, cell in enumerate(row.get("cells") or [])
        ]
        rows.append({**row, "cells": cells, "object": _object(row.get("object"))})
    # Column descriptions are API documentation, not data.
    definitions = [{k: v for k, v in c.items() if k != "description"} for c in columns]
    return {
        **body,
        "columnDefinitions": definitions,
        "rows": rows,
        "metadata": _list_metadata(body.get("metadata")),
    }


def _list_metadata(metadata: Any) -> Any:
    if not isinstance(metadata, dict):
        return metadata
    out = dict(metadata)
    if "resourceVersion" in out:
        out["resourceVersion"] = MASK
    if out.get("continue"):
        out["continue"] = MASK
    out.pop("selfLink", None)
    return out


def _object(obj: Any) -> Any:
    if not isinstance(obj, dict):
        return obj
    out = dict(obj)
    if isinstance(out.get("items"), list) and str(out.get("kind", "")).endswith("List"):
        out["metadata"] = _list_metadata(out.get("metadata"))
        out["items"] = [_object(item) for item in out["items"]]
        return out
    metadata = out.get("metadata")
    if isinstance(metadata, dict):
        out["metadata"] = _metadata(metadata)
    if isinstance(out.get("spec"), dict) and "clusterIP" in out["spec"]:
        out["spec"] = _service_spec(out["spec"])  # a Service, also as a list item (no kind)
    for key in ("status", "spec"):
        if isinstance(out.get(key), dict):
            out[key] = _mask_times(out[key])
    return out


def _metadata(metadata: dict[str, Any]) -> dict[str, Any]:
    out = {k: v for k, v in metadata.items() if k not in ("managedFields", "selfLink")}
    for key in ("uid", "resourceVersion", "creationTimestamp", "deletionTimestamp"):
        if key in out:
            out[key] = MASK
    prefix = out.get("generateName")
    if isinstance(prefix, str) and str(out.get("name", "")).startswith(prefix):
        out["name"] = prefix + MASK
    return out


def _service_spec(spec: dict[str, Any]) -> dict[str, Any]:
    out = dict(spec)
    if _is_ip(out.get("clusterIP")):
        out["clusterIP"] = MASK
    if isinstance(out.get("clusterIPs"), list):
        out["clusterIPs"] = [MASK if _is_ip(ip) else ip for ip in out["clusterIPs"]]
    if isinstance(out.get("ports"), list):
        out["ports"] = [
            {**port, "nodePort": MASK} if isinstance(port, dict) and "nodePort" in port else port
            for port in out["ports"]
        ]
    if "healthCheckNodePort" in out:
        out["healthCheckNodePort"] = MASK
    return out


def _is_ip(value: Any) -> bool:
    try:
        ipaddress.ip_address(value)
    except (TypeError, ValueError):
        return False
    return True


def _mask_times(value: Any) -> Any:
    if isinstance(value, dict):
        return {
            k: MASK if k in _SERVER_TIMES and isinstance(v, str) else _mask_times(v)
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [_mask_times(v) for v in value]
    return value


def drop_paths(value: Any, paths: list[str]) -> Any:
    """Remove each dotted path (``body.metadata.labels``; ``*`` matches every list item, a
    number one item, which is masked rather than removed so that later indexes stay put)."""
    for path in paths:
        value = _drop(value, path.split("."))
    return value


def _drop(value: Any, parts: list[str]) -> Any:
    if not parts:
        return value
    head, rest = parts[0], parts[1:]
    if isinstance(value, list) and head == "*":
        return [_drop(item, rest) for item in value]
    if isinstance(value, list) and head.isdigit() and int(head) < len(value):
        value = list(value)
        if rest:
            value[int(head)] = _drop(value[int(head)], rest)
        else:
            value[int(head)] = MASK
        return value
    if isinstance(value, dict) and head in value:
        value = dict(value)
        if rest:
            value[head] = _drop(value[head], rest)
        else:
            del value[head]
    return value
