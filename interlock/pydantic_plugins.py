"""pydantic's plugins off for interlock's own processes, and its plugin loader not imported.

pydantic looks for plugins (the ``pydantic`` entry-point group) when the first validator is built
— at import, by interlock's model classes — and the module that looks, ``pydantic.plugin._loader``,
imports ``importlib.metadata`` (with ``zipfile``, ``csv`` and more of ``email``: 17 to 31
modules, about 1 MiB of RSS, ``benchmarks/rest_memory.py``) to read every installed distribution's
entry points. interlock runs no pydantic plugin: its models are its own, and a plugin found by
chance in the environment would only add work to every parse.

:func:`disable` (run by the program's entry point, ``interlock/__main__.py``, before anything
builds a model) sets ``PYDANTIC_DISABLE_PLUGINS=__all__`` unless the operator set the variable,
and, when it says "all plugins off" (pydantic's own test: ``__all__``, ``1`` or ``true``), puts a
stand-in for the loader in ``sys.modules``. Setting the variable alone does not spare the import:
pydantic (2.14) imports ``importlib.metadata`` at the top of the loader and consults the variable
only inside ``get_plugins()``. The stand-in's ``get_plugins()`` answers what pydantic's would with
the variable set — no plugins — and hands over to the real loader (imported then) for anything
else, or if the variable changed. An operator who sets the variable to anything else (a list of
plugins to disable, or an empty value) gets pydantic's own loader, unchanged.
"""

from __future__ import annotations

import importlib
import os
import sys
from collections.abc import Iterable
from types import ModuleType

ENV = "PYDANTIC_DISABLE_PLUGINS"
ALL_OFF = ("__all__", "1", "true")
"""The values pydantic reads as "every plugin off" (``pydantic/plugin/_loader.py``)."""
LOADER = "pydantic.plugin._loader"


def disable() -> bool:
    """Turn pydantic's plugins off unless the operator chose otherwise; whether the loader's
    stand-in was installed (False when the variable keeps some plugins or the loader is
    imported already)."""
    os.environ.setdefault(ENV, "__all__")
    if os.environ[ENV] not in ALL_OFF or LOADER in sys.modules:
        return False
    sys.modules[LOADER] = _stand_in()
    return True


def _stand_in() -> ModuleType:
    module = ModuleType(LOADER, "No pydantic plugins, without importing importlib.metadata.")

    def real() -> ModuleType:
        if sys.modules.get(LOADER) is module:
            del sys.modules[LOADER]
        return importlib.import_module(LOADER)

    def get_plugins() -> Iterable[object]:
        if os.environ.get(ENV) in ALL_OFF:
            return ()
        plugins: Iterable[object] = real().get_plugins()
        return plugins

    def getattr_(name: str) -> object:
        if name.startswith("__"):  # the import system's questions (``__path__``: a package?)
            raise AttributeError(name)
        return getattr(real(), name)

    module.get_plugins = get_plugins  # type: ignore[attr-defined]
    module.__getattr__ = getattr_  # type: ignore[method-assign]
    return module
