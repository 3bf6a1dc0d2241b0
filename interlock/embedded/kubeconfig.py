"""The kubeconfig that points kubectl and kubernetes-asyncio at an embedded server.

One cluster, one context (current, namespace ``default``) and a user with no credentials: the
embedded server has no authentication, and an empty user keeps clients from sending any.
"""

from __future__ import annotations

import os
from pathlib import Path

import yaml

CONTEXT = "interlock-embedded"


def kubeconfig(server_url: str, *, context: str = CONTEXT) -> dict[str, object]:
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": {"server": server_url}}],
        "users": [{"name": context, "user": {}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": "default"},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(path: str | os.PathLike[str], server_url: str) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(yaml.safe_dump(kubeconfig(server_url), sort_keys=False))
    return target
