"""Helpers shared by the edge module tests: request views, a hand-driven clock, Secret planting."""

from __future__ import annotations

import base64
from collections.abc import Mapping
from typing import Any

from multidict import CIMultiDict, CIMultiDictProxy

from interlock.edge.modules import RequestView
from interlock.model.moduleset import Modules, SecretValue


class Clock:
    """A clock the test moves by hand."""

    def __init__(self, start: float = 1000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def view(
    *,
    peer_ip: str = "203.0.113.7",
    headers: Mapping[str, str] | list[tuple[str, str]] | None = None,
    body: bytes | None = None,
    method: str = "GET",
    path: str = "/",
) -> RequestView:
    return RequestView(
        method=method,
        path=path,
        query={},
        headers=CIMultiDictProxy(CIMultiDict(headers or {})),
        peer_ip=peer_ip,
        body=body,
    )


def modules(raw: dict[str, Any]) -> Modules:
    """Modules as a user writes them in a ModuleSet (camelCase)."""
    return Modules.model_validate(raw)


def secrets(**values: bytes) -> dict[tuple[str, str], SecretValue]:
    """``secrets(users__htpasswd=b"...")`` → {("users", "htpasswd"): SecretValue(...)}."""
    found: dict[tuple[str, str], SecretValue] = {}
    for name_key, value in values.items():
        name, key = name_key.split("__", 1)
        found[(name.replace("_", "-"), key.replace("_", "."))] = SecretValue(value)
    return found


def basic(user: str, password: str) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}
