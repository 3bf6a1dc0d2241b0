"""The data plane and the mesh listener import nothing of the edge (issue 27).

``dataplane/`` owns the wire (forwarder, limits, HTTP/1.1 and HTTP/2 servers, request-target
parsing) for both front doors; ``edge/`` adds Ingress routes and modules on top. An import from
``dataplane/`` or ``mesh/`` into ``edge/`` is an arrow running back up: the mesh listener would
load the edge's modules, and a change to the edge could break the mesh. Every import statement
counts, at the top of a module or inside a function or an ``if TYPE_CHECKING:`` block, relative
ones resolved.
"""

from __future__ import annotations

from pathlib import Path

import interlock
from tests.kit.import_graph import imported_modules

PACKAGE = Path(interlock.__file__).parent
LOWER = ("dataplane", "mesh")
"""The packages that must not import ``interlock.edge``."""


def is_edge(module: str) -> bool:
    return module == "interlock.edge" or module.startswith("interlock.edge.")


def edge_imports(package: str) -> dict[str, list[str]]:
    """``{module file: [the interlock.edge modules it imports]}`` for one package."""
    found: dict[str, list[str]] = {}
    for path in sorted((PACKAGE / package).rglob("*.py")):
        package_of = ".".join(("interlock", *path.relative_to(PACKAGE).parent.parts))
        imported = imported_modules(path.read_text(), package=package_of)
        edge = sorted(name for name in imported if is_edge(name))
        if edge:
            found[str(path.relative_to(PACKAGE))] = edge
    return found


def test_dataplane_and_mesh_import_nothing_of_the_edge() -> None:
    assert {package: edge_imports(package) for package in LOWER} == {p: {} for p in LOWER}


def test_the_walk_sees_every_kind_of_import() -> None:
    """The check above can fail: the walker finds an edge import however it is written."""
    assert edge_imports("edge")  # the edge imports itself: the walk reads the real modules
    for source in (
        "import interlock.edge.server\n",
        "from interlock.edge import server\n",
        "from ..edge import server\n",
        "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from interlock.edge.x import Y\n",
        "def f() -> None:\n    from interlock import edge\n",
    ):
        imported = imported_modules(source, package="interlock.mesh")
        assert any(is_edge(name) for name in imported), source
    assert not any(
        is_edge(name)
        for name in imported_modules("from . import edges\n", package="interlock.mesh")
    )
