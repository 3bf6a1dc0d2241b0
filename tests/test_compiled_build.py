"""The compiled build (``INTERLOCK_MYPYC=1``, setup.py): whether the modules it lists were
loaded compiled. CI's compiled lane sets ``INTERLOCK_MYPYC=1`` for its tests, so a build that
fell back to pure Python fails there; elsewhere the modules must be the pure-Python source (a
checkout compiled in place and tested as pure would test the wrong thing)."""

from __future__ import annotations

import ast
import contextlib
import dataclasses
import importlib
import inspect
import os
from collections.abc import Iterator
from dataclasses import MISSING
from pathlib import Path
from types import FunctionType
from typing import TYPE_CHECKING

from loguru import logger

from interlock.dataplane.answers import UPSTREAM_FAILED, answer
from interlock.dataplane.engine import upstream_failure
from interlock.edge.steps import log_answer

if TYPE_CHECKING:
    from loguru import Record

ROOT = Path(__file__).resolve().parents[1]


def compiled_list() -> list[str]:
    """setup.py's ``COMPILED``, read without running setup.py."""
    tree = ast.parse((ROOT / "setup.py").read_text())
    for node in tree.body:
        if (
            isinstance(node, ast.Assign)
            and isinstance(node.targets[0], ast.Name)
            and node.targets[0].id == "COMPILED"
        ):
            value = ast.literal_eval(node.value)
            assert isinstance(value, list)
            return [str(path) for path in value]
    raise AssertionError("setup.py has no COMPILED list")


def test_the_listed_modules_are_compiled_exactly_when_asked_for() -> None:
    listed = compiled_list()
    assert "interlock/dataplane/http1_server.py" in listed
    wanted = os.environ.get("INTERLOCK_MYPYC", "") == "1"
    for path in listed:
        assert (ROOT / path).is_file(), path
        module = importlib.import_module(path.removesuffix(".py").replace("/", "."))
        loaded = str(module.__file__)
        if wanted:
            assert loaded.endswith(".so"), f"{path}: not compiled ({loaded})"
        else:
            assert loaded.endswith(".py"), f"{path}: compiled, INTERLOCK_MYPYC is not 1 ({loaded})"


# The classes made for every request that are dataclasses: in the compiled build a dataclass's
# generated methods stay interpreted, so each writes its __init__ out (the decorator keeps it),
# which mypyc compiles. A generated one would be a Python function again.
PER_REQUEST = [
    ("interlock.dataplane.access_log", "Exchange"),
    ("interlock.dataplane.plan", "Forward"),
    ("interlock.dataplane.plan", "RequestInfo"),
    ("interlock.dataplane.request_stream", "H2Request"),
    ("interlock.edge.steps", "Admitted"),
]


def test_the_per_request_classes_are_made_without_an_interpreted_init() -> None:
    compiled = os.environ.get("INTERLOCK_MYPYC", "") == "1"
    for module_name, name in PER_REQUEST:
        cls = getattr(importlib.import_module(module_name), name)
        init = cls.__dict__["__init__"]
        assert isinstance(init, FunctionType) != compiled, f"{module_name}.{name}: {init!r}"
        if not compiled:  # (a compiled method has no signature to read)
            # Written out, it still takes what the dataclass's fields say, in their order,
            # with their defaults.
            parameters = list(inspect.signature(init).parameters.values())[1:]
            assert [(each.name, each.default) for each in parameters] == [
                (each.name, inspect.Parameter.empty if each.default is MISSING else each.default)
                for each in dataclasses.fields(cls)
            ], name


def test_every_listed_module_that_logs_names_its_lines_after_itself() -> None:
    # loguru's own logger names a compiled function's lines after its caller's module (it has
    # no Python frame): a listed module logs through interlock.logs.module_logger.
    for path in compiled_list():
        tree = ast.parse((ROOT / path).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module == "loguru":
                names = [alias.name for alias in node.names]
                assert "logger" not in names, f"{path}: logs through loguru's logger itself"


@contextlib.contextmanager
def records() -> Iterator[list[Record]]:
    seen: list[Record] = []
    sink = logger.add(lambda message: seen.append(message.record), level="DEBUG")
    try:
        yield seen
    finally:
        logger.remove(sink)


def test_a_compiled_modules_lines_carry_its_name_in_either_build() -> None:
    # Fails with loguru's logger itself in the compiled build: the lines were named after this
    # test module, the nearest Python frame.
    with records() as seen:
        upstream_failure(RuntimeError("x"), where="edge a.example", address=("10.0.0.1", 80))
        log_answer(answer(UPSTREAM_FAILED, "Service default/web: 10.0.0.1:80 failed"), "edge")
    assert [(r["name"], r["module"], r["file"].name) for r in seen] == [
        ("interlock.dataplane.engine", "engine", "engine.py"),
        ("interlock.edge.steps", "steps", "steps.py"),
    ]
    assert Path(seen[0]["file"].path) == ROOT / "interlock/dataplane/engine.py"
    if os.environ.get("INTERLOCK_MYPYC", "") == "1":
        # A compiled function's name and line are not known at run time.
        assert [(r["function"], r["line"]) for r in seen] == [("", 0), ("", 0)]
    else:  # the module's own frame
        assert [r["function"] for r in seen] == ["upstream_failure", "log_answer"]
        assert all(r["line"] > 0 for r in seen)
