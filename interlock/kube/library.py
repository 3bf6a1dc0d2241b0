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
Three of the modules ``Configuration`` and ``ApiClient`` import for code the controller never runs
(urllib3, dateutil's parser, ``multiprocessing.pool``) are deferred the same way.

Every other module of interlock imports kubernetes-asyncio through here (or after
``interlock.kube`` has, which imports this first).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
from collections.abc import Callable
from types import ModuleType
from typing import cast

_DEFERRED = (
    "kubernetes_asyncio",
    "kubernetes_asyncio.client",
    "kubernetes_asyncio.client.models",
    "kubernetes_asyncio.config",
)
_DEFERRED_DEPENDENCIES: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("urllib3", ()),
    ("dateutil.parser", ("parse",)),
    ("multiprocessing.pool", ("ThreadPool",)),
)
"""What kubernetes-asyncio's ``Configuration`` and ``ApiClient`` import at module level and use
only in code the controller never runs, with the names they import from it eagerly: urllib3 (for
``make_headers`` with basic auth; its ``__init__`` loads every pool, importlib.metadata and
zipfile: 2.3 MiB), dateutil's parser (``parse``, for a typed model's date; with dateutil.tz,
zoneinfo and ctypes: 1.1 MiB) and ``multiprocessing.pool`` (``ThreadPool``, for ``async_req``
calls: 0.35 MiB). Each is deferred like the packages above; a name imported from it eagerly is a
stand-in that loads the module and calls the real one (``benchmarks/rest_memory.py``)."""
_PUBLIC_DUNDERS = frozenset({"__all__", "__version__"})


def _defer(name: str, *, called: tuple[str, ...] = (), submodules_first: bool = False) -> None:
    """Put module ``name`` in ``sys.modules`` with its code not yet run (see above).

    Its code runs when something asks it for a name it does not have yet (with
    ``submodules_first``, a name that is a submodule imports that submodule alone), or calls one
    of the stand-ins for ``called``, the names importers take from it with ``from ... import``.
    """
    if name in sys.modules:
        return
    spec = importlib.util.find_spec(name)
    if spec is None or spec.loader is None:
        importlib.import_module(name)  # not a module we know how to defer: import it normally
        return
    module = importlib.util.module_from_spec(spec)
    loader = spec.loader
    loaded = False

    def load() -> dict[str, object]:
        nonlocal loaded
        if not loaded:
            loaded = True
            loader.exec_module(module)  # the real code, into the same module object
        return module.__dict__

    def __getattr__(attribute: str) -> object:
        if attribute.startswith("__") and attribute not in _PUBLIC_DUNDERS:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}")
        if submodules_first and importlib.util.find_spec(f"{name}.{attribute}") is not None:
            return importlib.import_module(f"{name}.{attribute}")
        try:
            return load()[attribute]
        except KeyError:
            raise AttributeError(f"module {name!r} has no attribute {attribute!r}") from None

    module.__getattr__ = __getattr__  # type: ignore[method-assign]
    for attribute in called:
        setattr(module, attribute, _stand_in(name, attribute, load))
    sys.modules[name] = module
    parent, _, child = name.rpartition(".")
    if parent:
        setattr(sys.modules[parent], child, module)


def _stand_in(
    name: str, attribute: str, load: Callable[[], dict[str, object]]
) -> Callable[..., object]:
    """Calls ``name.attribute`` once loading ``name`` has replaced this stand-in with it."""

    def stand_in(*args: object, **kwargs: object) -> object:
        real = load()[attribute]
        if real is stand_in:
            raise ImportError(f"module {name!r} defines no {attribute!r}")
        return cast(Callable[..., object], real)(*args, **kwargs)

    stand_in.__name__ = stand_in.__qualname__ = attribute
    return stand_in


def _install() -> None:
    for name in _DEFERRED:
        _defer(name, submodules_first=True)
    for name, called in _DEFERRED_DEPENDENCIES:
        _defer(name, called=called)
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
