"""Building and closing the one ``ApiClient`` that all of interlock's Kubernetes I/O shares.

kubernetes-asyncio can load its configuration into a process-wide default, which would make two
controllers in one process (the tests start several) talk to whichever cluster was loaded last.
We always build a private ``Configuration`` and a client from it, and close it explicitly: an
unclosed client leaks its aiohttp session and the open watch connections with it.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

from interlock.kube.client_metrics import instrument
from interlock.kube.library import (
    ApiClient,
    ConfigException,
    Configuration,
    load_incluster_config,
    load_kube_config,
)

DEFAULT_KUBECONFIG = "~/.kube/config"
DEFAULT_MAX_CONNECTIONS = 256
"""Each informer holds a watch connection open; the pool must leave room for writes beside them."""


class KubeConfigError(RuntimeError):
    """No usable cluster configuration: says which source was tried and how to fix it."""


async def make_api_client(
    *,
    kubeconfig: str | None,
    in_cluster: bool,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> ApiClient:
    """A client for the kubeconfig file, the in-cluster service account, or the default kubeconfig.

    With neither ``kubeconfig`` nor ``in_cluster``: ``$KUBECONFIG`` or ``~/.kube/config`` if it
    exists, else the in-cluster configuration when running in a pod.
    """
    configuration = Configuration()
    try:
        if kubeconfig is not None:
            await load_kube_config(
                config_file=kubeconfig, client_configuration=configuration, persist_config=False
            )
        elif in_cluster:
            load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            await _load_default(configuration)
    except (ConfigException, OSError) as error:
        source = kubeconfig or ("in-cluster service account" if in_cluster else "default")
        raise KubeConfigError(
            f"cannot load Kubernetes configuration ({source}): {error}; pass --kubeconfig PATH, "
            "run inside a pod, or use --embedded"
        ) from error
    configuration.connection_pool_maxsize = max_connections
    api = ApiClient(configuration=configuration)
    # Every request counted once, here, whoever sends it (``/metrics``: rest_client_*).
    instrument(api)
    return api


async def _load_default(configuration: Configuration) -> None:
    kubeconfig = _default_kubeconfig()
    if kubeconfig is None:
        load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
    else:
        await load_kube_config(
            config_file=kubeconfig, client_configuration=configuration, persist_config=False
        )


def _default_kubeconfig() -> str | None:
    """``$KUBECONFIG`` (or ``~/.kube/config``), or None when absent and running in a pod."""
    # Read at call time (kubernetes-asyncio reads it once, at import). $KUBECONFIG may list
    # several files separated like $PATH; the loader merges them.
    location = os.environ.get("KUBECONFIG") or DEFAULT_KUBECONFIG
    paths = [os.path.expanduser(p) for p in location.split(os.pathsep) if p]
    if any(os.path.exists(p) for p in paths) or not os.environ.get("KUBERNETES_SERVICE_HOST"):
        return os.pathsep.join(paths)
    return None


async def close_api_client(api: ApiClient) -> None:
    """Close the client's HTTP session (and with it every connection it still holds)."""
    await api.close()


@asynccontextmanager
async def api_client(
    *,
    kubeconfig: str | None,
    in_cluster: bool,
    max_connections: int = DEFAULT_MAX_CONNECTIONS,
) -> AsyncIterator[ApiClient]:
    """:func:`make_api_client` as an ``async with`` block that always closes the client."""
    api = await make_api_client(
        kubeconfig=kubeconfig, in_cluster=in_cluster, max_connections=max_connections
    )
    try:
        yield api
    finally:
        await close_api_client(api)
