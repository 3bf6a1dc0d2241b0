"""``interlock.dataplane`` names the plan's re-exports twice, and the two must agree.

The ``TYPE_CHECKING`` import (what mypy and readers see) and ``_PLAN`` (what ``__getattr__``
loads from :mod:`interlock.dataplane.plan` on first use) are written separately so that the
plan is imported only when used (issue 29 item 5). A name in one and not the other is either
an attribute mypy accepts that fails at run time, or one loaded at run time that mypy rejects:
this test reads the package's source and fails on any difference.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import interlock.dataplane as dataplane


def _type_checking_imports(module_source: str) -> dict[str, set[str]]:
    """The names each ``from X import ...`` under ``if TYPE_CHECKING:`` imports, by module."""
    imports: dict[str, set[str]] = {}
    for node in ast.parse(module_source).body:
        if (
            isinstance(node, ast.If)
            and isinstance(node.test, ast.Name)
            and node.test.id == "TYPE_CHECKING"
        ):
            for statement in node.body:
                assert isinstance(statement, ast.ImportFrom) and statement.module is not None
                names = imports.setdefault(statement.module, set())
                names.update(alias.asname or alias.name for alias in statement.names)
    return imports


def test_the_lazy_names_are_the_type_checking_imports_and_all_resolve() -> None:
    source = Path(dataplane.__file__).read_text()
    imports = _type_checking_imports(source)
    assert imports == {"interlock.dataplane.plan": set(dataplane._PLAN)}
    plan = importlib.import_module("interlock.dataplane.plan")
    for name in sorted(dataplane._PLAN):
        assert getattr(dataplane, name) is getattr(plan, name)
        assert name in dataplane.__all__


def test_a_name_in_one_list_only_is_found() -> None:
    source = Path(dataplane.__file__).read_text()
    one_less = source.replace("        decide,\n", "", 1)
    assert one_less != source
    assert _type_checking_imports(one_less)["interlock.dataplane.plan"] != set(dataplane._PLAN)
