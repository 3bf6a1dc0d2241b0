"""Building and closing the one ``ApiClient`` that all of interlock's Kubernetes I/O shares.

kubernetes-asyncio can load its configuration into a process-wide default, which would make two
controllers in one process (the tests start several) talk to whichever cluster was loaded last.
We always build a private ``Configuration`` and a client from it, and close it explicitly: an
unclosed client leaks its aiohttp session and the open watch connections with it.

The environment is read once, when the client is built, not on every request. kubernetes-asyncio
opens its aiohttp session with ``trust_env=True``, and with it aiohttp sends two jobs to a
thread for every request: reading ``~/.netrc`` (``$NETRC``) for credentials and reading the
``$HTTPS_PROXY``/``$NO_PROXY`` variables. Those two thread hops cost about 450 µs of CPU per
request, more than half of a GET's whole cost in the client (``benchmarks/kube_request_cost.py``),
on every list, watch, status write and Lease renewal, and they start six executor threads. The
client's session here has ``trust_env`` off; what the environment says about a proxy for the API
server is applied once instead (:func:`_environment_proxy`: aiohttp's own rule, credentials from
the proxy's URL or ``~/.netrc`` included, a proxy named in the kubeconfig first). netrc
credentials for the API server itself are not used: interlock authenticates with its kubeconfig
or service account, and a netrc entry matching the server (a ``default`` entry matches every
host) made aiohttp refuse every request that carries a bearer token ("Cannot combine
AUTHORIZATION header with AUTH argument").
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import aiohttp
from aiohttp.helpers import get_env_proxy_for_url
from yarl import URL

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


READ_BUFFER = 2**21
"""The session's read buffer, kubernetes-asyncio's: a watch event can be as large as an object
may be (etcd's default request limit is 1.5 MiB)."""


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
    _environment_proxy(configuration)
    api = ApiClient(configuration=configuration)
    _without_environment_lookups(api)
    # Every request counted once, here, whoever sends it (``/metrics``: rest_client_*).
    instrument(api)
    return api


def _environment_proxy(configuration: Configuration) -> None:
    """The proxy ``$HTTPS_PROXY`` (``$HTTP_PROXY`` for http) names for the API server, unless
    ``$NO_PROXY`` exempts it or the kubeconfig named one: set on ``configuration`` once."""
    host = configuration.host
    if configuration.proxy or not host:
        return
    try:
        proxy, credentials = get_env_proxy_for_url(URL(host))
    except LookupError:  # no proxy for this host
        return
    if credentials is not None:  # aiohttp sends them as Proxy-Authorization, http or https
        proxy = proxy.with_user(credentials.login).with_password(credentials.password)
    configuration.proxy = str(proxy)


def _without_environment_lookups(api: ApiClient) -> None:
    """Give ``api`` kubernetes-asyncio's session again, with its connector and read buffer,
    but ``trust_env`` off (the module docstring)."""
    rest: Any = api.rest_client
    session: aiohttp.ClientSession = rest.pool_manager
    connector = session.connector
    session.detach()  # closed without closing the connector, which the new session owns
    rest.pool_manager = aiohttp.ClientSession(
        connector=connector, trust_env=False, read_bufsize=READ_BUFFER
    )


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
