"""The kubeconfig that points kubectl and kubernetes-asyncio at an embedded server.

One cluster, one context (current, namespace ``default``) and a user holding the server's bearer
token: the embedded server refuses requests without it (401), as a real API server refuses
unauthenticated ones, so only who can read this file can read the Secrets the server holds. The
cluster carries the server's certificate authority (kubectl sends credentials to ``https://``
servers only; see :mod:`interlock.embedded.tls`). The file is written readable by its owner only.
"""

from __future__ import annotations

import base64
import os
from pathlib import Path

import yaml

CONTEXT = "interlock-embedded"


def kubeconfig(
    server_url: str, *, token: str, ca_pem: bytes | None = None, context: str = CONTEXT
) -> dict[str, object]:
    """A kubeconfig for ``server_url`` with ``token``; ``ca_pem``: the authority that signed the
    server's certificate (an ``https://`` server)."""
    cluster: dict[str, str] = {"server": server_url}
    if ca_pem is not None:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem).decode()
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": context, "cluster": cluster}],
        "users": [{"name": context, "user": {"token": token}}],
        "contexts": [
            {
                "name": context,
                "context": {"cluster": context, "user": context, "namespace": "default"},
            }
        ],
        "current-context": context,
        "preferences": {},
    }


def write_kubeconfig(
    path: str | os.PathLike[str], server_url: str, *, token: str, ca_pem: bytes | None = None
) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    text = yaml.safe_dump(kubeconfig(server_url, token=token, ca_pem=ca_pem), sort_keys=False)
    # Created (or narrowed) to 0600 before the token is written into it.
    descriptor = os.open(target, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    os.fchmod(descriptor, 0o600)
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(text)
    return target
