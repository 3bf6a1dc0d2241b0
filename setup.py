"""The optional compiled build: ``INTERLOCK_MYPYC=1 pip install .`` (or ``-e .``, ``make
compiled``) compiles the edge's hot modules (:data:`COMPILED`) into C extensions with mypyc,
mypy's compiler for type-annotated Python (the one mypy and black ship compiled with): the plain
proxied request runs about two fifths fewer instructions (docs/benchmarks.md, "The compiled
build (mypyc)"). Without ``INTERLOCK_MYPYC=1`` nothing is compiled: the install is pure Python, as
``pyproject.toml`` describes it, and needs nothing but Python. The compiled modules are the same
source, mypy --strict clean; what mypyc cannot compile stays in
``interlock/dataplane/interpreted.py``, the dataclasses made for every request write their
``__init__`` out (a dataclass's generated methods stay interpreted under mypyc), and the module
globals read per request are ``Final`` (a C static then, not a look-up in the module's dict).
"""

from __future__ import annotations

import os
import sys
import tomllib

from setuptools import setup

# The modules one plain proxied request, and one through ipRestriction + basicAuth + headers, run
# through (benchmarks/edge_profile.py [--modules] --profile). Not interlock/edge/inprocess.py:
# InProcessEdge has an interpreted subclass (gateway_ports.GatewayPortEdge), which a compiled
# class cannot have without mypy_extensions.mypyc_attr (not a runtime dependency), and whose
# methods a compiled caller would then call through Python's generic path anyway. What a request
# reads of it is compiled instead: ServedRoute lives in routing.py, and the steps look a host up
# in the table InProcessEdge.hosts_served() hands them (steps.EdgeFront.hosts).
COMPILED = [
    "interlock/dataplane/access_log.py",
    "interlock/dataplane/answers.py",
    "interlock/dataplane/engine.py",
    "interlock/dataplane/filters.py",
    "interlock/dataplane/header_names.py",
    "interlock/dataplane/http1.py",
    "interlock/dataplane/http1_server.py",
    "interlock/dataplane/metrics.py",
    "interlock/dataplane/plan.py",
    "interlock/dataplane/proxy.py",
    "interlock/dataplane/request_stream.py",
    "interlock/dataplane/request_target.py",
    "interlock/dataplane/source.py",
    "interlock/dataplane/streams.py",
    "interlock/dataplane/turn_writes.py",
    "interlock/dataplane/upstreams.py",
    "interlock/edge/modules/addresses.py",
    "interlock/edge/modules/basic_auth.py",
    "interlock/edge/modules/chain.py",
    "interlock/edge/modules/headers.py",
    "interlock/edge/modules/ip_restriction.py",
    "interlock/edge/modules/view.py",
    "interlock/edge/routing.py",
    "interlock/edge/steps.py",
    "interlock/edge/streams.py",
    "interlock/model/address_ranges.py",
    "interlock/model/edge_plan.py",  # BackendTarget: a route's backend, read per request
]
# mypyc as tested (mypy 2.4.1): the build's own requirement, asked for only when compiling.
MYPYC = "mypy>=2.4"
# mypyc type-checks what the compiled modules import (with pyproject.toml's mypy settings and
# plugin), so an isolated build needs the project's dependencies too, and the stubs mypy uses.
STUBS = ["types-PyYAML>=6.0"]


def build_requirements() -> list[str]:
    if os.environ.get("INTERLOCK_MYPYC", "") != "1":
        return []
    with open("pyproject.toml", "rb") as file:
        project = tomllib.load(file)["project"]
    return [MYPYC, *STUBS, *project["dependencies"], *project["optional-dependencies"]["otel"]]


def compiled_modules() -> list[object]:
    if os.environ.get("INTERLOCK_MYPYC", "") != "1":
        return []
    try:
        from mypyc.build import mypycify
    except ImportError:
        if "egg_info" in sys.argv:
            # setuptools asking for the build's requirements (setup_requires below): mypy is
            # installed into the build environment after this and the build runs again.
            return []
        raise SystemExit(f"INTERLOCK_MYPYC=1: the compiled build needs {MYPYC} (mypyc)") from None
    return list(mypycify(COMPILED, opt_level="3", group_name="interlock_compiled"))


extensions = compiled_modules()
setup(
    ext_modules=extensions,
    setup_requires=build_requirements(),
)
