"""frozenlist's pure-Python class for interlock's own processes, not its C++ extension.

aiohttp imports ``frozenlist`` (through ``aiosignal``) in every process that imports aiohttp.
frozenlist's compiled extension (``frozenlist/_frozenlist…so``, Cython built as C++) links
``libstdc++``, and loading it maps and initialises that library: 0.9 to 1.1 MiB of RSS in each
process (``benchmarks/rest_memory.py``, the in-cluster row at 48 Services + 48 HTTPRoutes, two
rounds: 53.8 to 53.9 MiB with the extension, 52.8 without), for a class interlock never touches on
a request's path: aiohttp uses ``FrozenList`` only for a web ``Application``'s middleware list
and for signals (``aiosignal.Signal``: an application's start-up and shutdown hooks, a client
session's trace configs), each built once.

:func:`prefer` (run by the program's entry point, ``interlock/__main__.py``, before anything
imports aiohttp) sets ``FROZENLIST_NO_EXTENSIONS=1`` unless the operator set the variable:
frozenlist's own switch to its pure-Python ``FrozenList``, the same class with the same
behaviour (frozenlist tests both). Child processes (the edge's workers) inherit it.
"""

from __future__ import annotations

import os
import sys

ENV = "FROZENLIST_NO_EXTENSIONS"


def prefer() -> bool:
    """Ask frozenlist for its pure-Python class; whether that is what it will give (False when
    the operator's setting says otherwise or frozenlist is imported already)."""
    os.environ.setdefault(ENV, "1")
    return bool(os.environ[ENV]) and "frozenlist" not in sys.modules
