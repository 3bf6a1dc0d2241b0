"""Checks the edge e2e tests of several modules share."""

from __future__ import annotations

from typing import Any

from interlock.kube.transport import KubeApiError
from tests.kit.e2e_clients import eventually
from tests.kit.edge_env import Env
from tests.kit.edge_objects import module_set


async def until_refused_naming(env: Env, modules: dict[str, Any], field: str) -> None:
    """A ModuleSet ``bad`` with ``modules`` is refused naming ``field``: by the API server's
    schema when it can tell (the apply fails), else by the controller (its Valid condition)."""
    try:
        await env.kube.apply(module_set("bad", modules))
    except KubeApiError as exc:
        refused = str(exc)
        assert field in refused, refused
        return

    async def check() -> bool:
        current = await env.kube.get(module_set("bad", modules))
        conditions = current.get("status", {}).get("conditions", [])
        return any(field in c.get("message", "") for c in conditions)

    await eventually(check, message=f"ModuleSet bad is Invalid naming {field}")
