"""kubernetes-asyncio's client, configuration and kubeconfig loading, without its generated models.

interlock uses four things from kubernetes-asyncio: ``Configuration``, ``ApiClient.call_api``
with ``_preload_content=False`` (raw bytes; ``model/`` parses the JSON), and the kubeconfig and
in-cluster loaders. But importing any of them runs the package ``__init__`` files, which import
every generated API class and all ~900 model classes: about 40 MiB of RSS and a thousand modules
a controller never touches (``benchmarks/rest_memory.py`` shows the import graph).

This module installs ``kubernetes_asyncio``, ``kubernetes_asyncio.client`` and
``kubernetes_asyncio.client.models`` (and ``kubernetes_asyncio.config``, whose ``__init__`` imports
the kubeconfig loader and PyYAML) as *deferred* packages before anything imports them: the
package objects exist (so their submodules import as usual, by file), and a package's own
``__init__`` runs only when someone asks it for a name it does not have yet (``client.CoreV1Api``,
``client.V1Pod``, ``models.V1ObjectMeta`` when a typed API deserializes a response). Code that
uses the typed API therefore keeps working, and pays for the models only then. If a package was
already imported in full (a test that imported ``kubernetes_asyncio`` first), nothing changes.

Every other module of interlock imports kubernetes-asyncio through here (or after
``interlock.kube`` has, which imports this first).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from types import ModuleType

_DEFERRED = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.models",
    "kubernetes_asyncio.config",
)
_PUBLIC_DUNDERS = frozenset({"__all__", "__version__"})


def _defer_package(name: str) -> None:
    """Put package ``name`` in ``sys.modules`` with its ``__init__`` not yet run (see above)."""
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None or spec.submodule_search_locations is None:
        importlib.import_module(name)  # not a package we know how to defer: import it normally
        return
    package = importlib.util.module_from_spec(spec)
    loader = spec.loader
    loaded = False

    def __getattr__(attribute: str) -> object:
        nonlocal loaded
        if attribute.startswith("__") and attribute not in _PUBLIC_DUNDERS:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        if importlib.util.find_spec(f"{name}.{attribute}") is not None:
            return importlib.import_module(f"{name}.{attribute}")
        if not loaded:
            loaded = True
            loader.exec_module(package)  # the real __init__, into the same module object
        try:
            return package.__dict__[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    package.__getattr__ = __getattr__  # type: ignore[method-assign]
    sys.modules[name] = package
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, package)


def _install() -> None:
    for name in _DEFERRED:
        _defer_package(name)
    client = sys.modules["kubernetes_asyncio.client"]
    # What kubernetes_asyncio.config imports from the client package, by name.
    for attribute, module in (("Configuration", "configuration"), ("ApiClient", "api_client")):
        if attribute not in client.__dict__:
            setattr(client, attribute, getattr(_submodule(client, module), attribute))


def _submodule(package: ModuleType, name: str) -> ModuleType:
    return importlib.import_module(f"{package.__name__}.{name}")


_install()

from kubernetes_asyncio.client.api_client import ApiClient  # noqa: E402
from kubernetes_asyncio.client.configuration import Configuration  # noqa: E402
from kubernetes_asyncio.client.exceptions import ApiException  # noqa: E402
from kubernetes_asyncio.config.config_exception import ConfigException  # noqa: E402
from kubernetes_asyncio.config.incluster_config import load_incluster_config  # noqa: E402


async def load_kube_config(
    *, config_file: str, client_configuration: Configuration, persist_config: bool
) -> None:
    """kubernetes-asyncio's ``load_kube_config``, its module imported on the first call.

    That module brings PyYAML and the exec, Google and OpenID credential plugins (about 1 MiB
    of RSS at start-up, ``benchmarks/rest_memory.py``), which a controller in a pod (the
    in-cluster service account) never uses; ``kubernetes_asyncio.config`` is deferred above
    for the same reason.
    """
    from kubernetes_asyncio.config.kube_config import load_kube_config as load

    await load(
        config_file=config_file,
        client_configuration=client_configuration,
        persist_config=persist_config,
    )


__all__ = [
    "ApiClient",
    "ApiException",
    "ConfigException",
    "Configuration",
    "load_incluster_config",
    "load_kube_config",
]
