"""What a module imports, read from its source: the layer checks
(``tests/dataplane/test_layers.py``, ``tests/model/test_layers.py``) compare these names with the
arrows of docs/design.md."""

from __future__ import annotations

import ast


def imported_modules(source: str, *, package: str) -> set[str]:
    """Every module an import statement of ``source`` (a module of ``package``) names; for
    ``from x import y``, ``x`` and ``x.y``, since ``y`` may be a module. Every statement counts,
    at the top of the module or inside a function or an ``if TYPE_CHECKING:`` block, relative
    ones resolved."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                parts = package.split(".")
                base = parts[: len(parts) - node.level + 1]
                module = ".".join([*base, module] if module else base)
            names.add(module)
            names.update(f"{module}.{alias.name}" for alias in node.names)
    return names
