"""aiohttp's default client TLS contexts, with the system's CA certificates loaded on first use.

Importing aiohttp builds two client contexts at once (``aiohttp.connector``: one that verifies with
the system's CAs and one that does not verify but loads them all the same), so that a request with
aiohttp's default ``ssl`` never reads certificate files on the event loop. Loading the system's CAs
(about 140 on a Debian image) twice costs 1.8 MiB of RSS (``benchmarks/rest_memory.py``), paid by
every process that imports aiohttp; the controller uses neither context (its Kubernetes client
brings its own, with the cluster's CA), only an edge's oidc module and the edge's admin clients
may.

:func:`install` (run by ``interlock/__init__.py``) arranges for ``aiohttp.connector``, when it is
imported after interlock, to be built with the CA loading postponed: both contexts become
:class:`SystemCAContext`, which loads the CAs exactly as aiohttp asked (``load_default_certs`` or
``set_default_verify_paths``) before its first TLS connection. Everything else about them is
aiohttp's own (protocol, options, ALPN, hostname checks). The cost of the first verified request
to a public server is then the file reading aiohttp did at import: a few milliseconds, once. When
aiohttp was imported before interlock, nothing changes.
"""

from __future__ import annotations

import contextlib
import importlib.machinery
import ssl
import sys
from collections.abc import Callable, Iterator, Sequence
from types import ModuleType
from typing import Any

_MODULE = "aiohttp.connector"


class SystemCAContext(ssl.SSLContext):
    """An ``SSLContext`` whose CA loading waits for its first TLS connection."""

    _load_cas: Callable[[], None] | None = None

    def cas_loaded(self) -> bool:
        """Whether the CAs were loaded (or there was nothing to load)."""
        return self._load_cas is None

    def _before_connection(self) -> None:
        load = self._load_cas
        if load is not None:
            self._load_cas = None
            load()

    def wrap_bio(self, *args: Any, **kwargs: Any) -> ssl.SSLObject:
        self._before_connection()
        return super().wrap_bio(*args, **kwargs)

    def wrap_socket(self, *args: Any, **kwargs: Any) -> ssl.SSLSocket:
        self._before_connection()
        return super().wrap_socket(*args, **kwargs)


def _postpone(method: str) -> Callable[..., None]:
    """A stand-in for ``ssl.SSLContext.<method>`` that makes the context a
    :class:`SystemCAContext` which calls the real method before its first connection."""
    real = getattr(ssl.SSLContext, method)

    def postponed(self: ssl.SSLContext, *args: object) -> None:
        self.__class__ = SystemCAContext
        context: SystemCAContext = self  # type: ignore[assignment]
        context._load_cas = lambda: real(context, *args)

    return postponed


@contextlib.contextmanager
def _cas_postponed() -> Iterator[None]:
    """While inside, a context asked to load the system's CAs postpones it (see above)."""
    methods = ("load_default_certs", "set_default_verify_paths")
    # ssl.SSLContext defines the first itself and inherits the second from _ssl._SSLContext.
    own = {method: ssl.SSLContext.__dict__.get(method) for method in methods}
    for method in methods:
        setattr(ssl.SSLContext, method, _postpone(method))
    try:
        yield
    finally:
        for method, defined in own.items():
            if defined is None:
                delattr(ssl.SSLContext, method)
            else:
                setattr(ssl.SSLContext, method, defined)


class _ConnectorFinder:
    """Finds ``aiohttp.connector`` the usual way, once, and runs its code with the CA loading
    postponed."""

    @classmethod
    def find_spec(
        cls, name: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> importlib.machinery.ModuleSpec | None:
        if name != _MODULE:
            return None
        _uninstall()
        spec = importlib.machinery.PathFinder.find_spec(name, path, target)
        loader: Any = None if spec is None else spec.loader
        if loader is None or not hasattr(loader, "exec_module"):
            return spec
        execute = loader.exec_module

        def exec_module(module: ModuleType) -> None:
            with _cas_postponed():
                execute(module)

        loader.exec_module = exec_module  # this spec's own loader, made for this import
        return spec


def install() -> None:
    """Postpone the CA loading of aiohttp's default contexts, unless aiohttp is imported."""
    if _MODULE not in sys.modules and _ConnectorFinder not in sys.meta_path:
        sys.meta_path.insert(0, _ConnectorFinder)


def _uninstall() -> None:
    with contextlib.suppress(ValueError):
        sys.meta_path.remove(_ConnectorFinder)
