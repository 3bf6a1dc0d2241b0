"""Server-side Table rendering: what ``kubectl get`` prints.

kubectl asks for ``application/json;as=Table;v=v1;g=meta.k8s.io`` and prints the columns the
server sends, so the columns are defined here from each kind's printer columns (the same titles
and cells as kube-apiserver; CRD ``additionalPrinterColumns`` for custom resources). kubectl
adds the NAMESPACE column itself from each row's object metadata, so rows carry a
PartialObjectMetadata (or the full object with ``includeObject=Object``).
"""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime
from typing import Any

from interlock.embedded.registry import ResourceType

JsonObject = dict[str, Any]


def wants_table(accept: str) -> bool:
    return any("as=Table" in part and "g=meta.k8s.io" in part for part in accept.split(","))


def wants_partial_metadata(accept: str) -> bool:
    """True when the client accepts only metadata (the first acceptable media type asks so)."""
    first = accept.split(",")[0]
    return "as=PartialObjectMetadata" in first and "g=meta.k8s.io" in first


def column_definitions(rtype: ResourceType) -> list[JsonObject]:
    return [
        {
            "name": column.name,
            "type": column.type,
            "format": column.format,
            "description": column.description,
            "priority": column.priority,
        }
        for column in rtype.printer_columns
    ]


def partial_metadata(obj: JsonObject) -> JsonObject:
    return {
        "kind": "PartialObjectMetadata",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": obj.get("metadata", {}),
    }


def _row(rtype: ResourceType, obj: JsonObject, now: datetime, include_object: str) -> JsonObject:
    row: JsonObject = {"cells": [column.cell(obj, now) for column in rtype.printer_columns]}
    if include_object == "Object":
        row["object"] = obj
    elif include_object != "None":
        row["object"] = partial_metadata(obj)
    return row


def render_table(
    rtype: ResourceType,
    objects: Iterable[JsonObject],
    *,
    now: datetime,
    include_object: str,
    with_columns: bool = True,
    metadata: JsonObject | None = None,
) -> JsonObject:
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata or {},
        "columnDefinitions": column_definitions(rtype) if with_columns else None,
        "rows": [_row(rtype, obj, now, include_object) for obj in objects],
    }
