"""A test module takes its helpers from ``tests/kit/`` (docs/testing.md), never from another test
module.

Importing a test module for a helper runs that module's imports and fixtures again under a
second name (pytest imports ``tests/e2e/test_x.py`` as ``test_x``, with ``tests/e2e`` put first
on ``sys.path``), ties one file's tests to another's internals, and hides what is shared: the
next person changing the helper in its test file breaks a test elsewhere. Every import statement
counts, in a function too.
"""

from __future__ import annotations

from pathlib import Path

from tests.kit.import_graph import imported_modules

TESTS = Path(__file__).parent


def imported_test_modules(path: Path) -> list[str]:
    """The test modules of this tree (files ``test_*.py`` under ``tests/``) that ``path``
    imports, by any of the names they are importable as: ``tests.security.test_x``,
    ``security.test_x`` (pytest puts ``tests/`` on ``sys.path`` for a package's tests) or a bare
    ``test_x`` (``tests/e2e/`` is put there for its modules)."""
    package = ".".join(("tests", *path.relative_to(TESTS).parent.parts))
    roots = (TESTS.parent, TESTS, path.parent)
    found = set()
    for name in imported_modules(path.read_text(), package=package):
        parts = name.split(".")
        ends = [i for i, part in enumerate(parts) if part.startswith("test_")]
        if not ends:
            continue
        module = parts[: ends[0] + 1]
        if any(root.joinpath(*module).with_suffix(".py").is_file() for root in roots):
            found.add(".".join(module))
    return sorted(found)


def test_no_test_module_imports_another() -> None:
    found = {
        str(path.relative_to(TESTS)): imported
        for path in sorted(TESTS.rglob("*.py"))
        if (imported := imported_test_modules(path))
    }
    assert found == {}
