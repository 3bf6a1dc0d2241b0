"""Committed objects and their JSON encodings.

A stored object is encoded once when it is committed; lists join these encodings and watch
events reuse them, so serving 10,000 objects to many clients costs no re-serialization. The
dict inside is never mutated after commit; :meth:`StoredObject.copy` gives callers their own.
"""

from __future__ import annotations

import json
from typing import Any

JsonObject = dict[str, Any]


def encode(obj: Any) -> bytes:
    return json.dumps(obj, separators=(",", ":"), ensure_ascii=False).encode()


class StoredObject:
    """One committed object state and its JSON encodings (per apiVersion, made on demand)."""

    __slots__ = ("_encoded", "obj", "rv")

    def __init__(self, obj: JsonObject, *, encoded_without: tuple[str, ...] = ()) -> None:
        self.obj = obj
        self.rv = int(obj["metadata"]["resourceVersion"])
        shown = obj
        if encoded_without:
            metadata = {k: v for k, v in obj["metadata"].items() if k not in encoded_without}
            shown = {**obj, "metadata": metadata}
        self._encoded: dict[str, bytes] = {obj["apiVersion"]: encode(shown)}

    def encoded_list_item(self) -> bytes:
        """The object as a built-in kind's list holds it: without apiVersion and kind."""
        data = self._encoded.get("")
        if data is None:
            data = encode({k: v for k, v in self.obj.items() if k not in ("apiVersion", "kind")})
            self._encoded[""] = data
        return data

    def encoded(self, api_version: str) -> bytes:
        data = self._encoded.get(api_version)
        if data is None:
            data = encode({**self.obj, "apiVersion": api_version})
            self._encoded[api_version] = data
        return data

    def copy(self, api_version: str | None = None) -> JsonObject:
        """A private deep copy for callers outside the store."""
        result: JsonObject = json.loads(self.encoded(api_version or self.obj["apiVersion"]))
        return result

    @property
    def namespace(self) -> str:
        return str(self.obj["metadata"].get("namespace") or "")

    @property
    def name(self) -> str:
        return str(self.obj["metadata"]["name"])
