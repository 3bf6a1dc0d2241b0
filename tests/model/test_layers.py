"""``model/`` imports nothing of interlock but ``model/`` (the layers of docs/design.md).

The model is the pure core every other layer calls: the outbound policy's types, resolution and
build live here, while the policy's JSON is ``api/``'s and request-time matching the data
plane's (issue 27, part 5). An import from ``model/`` into ``api/``, ``dataplane/``, ``actors/``
or any other layer would run an arrow back up and pull I/O into pure functions. Every import
statement counts, in a function or an ``if TYPE_CHECKING:`` block too.
"""

from __future__ import annotations

from pathlib import Path

import interlock
from tests.kit.import_graph import imported_modules

MODEL = Path(interlock.__file__).parent / "model"


def outside_imports(path: Path) -> list[str]:
    """The interlock modules outside ``interlock.model`` that ``path`` imports."""
    names = imported_modules(path.read_text(), package="interlock.model")
    return sorted(
        name
        for name in names
        if (name == "interlock" or name.startswith("interlock."))
        and name != "interlock.model"
        and not name.startswith("interlock.model.")
    )


def test_the_model_imports_only_the_model() -> None:
    found = {
        path.name: imported
        for path in sorted(MODEL.rglob("*.py"))
        if (imported := outside_imports(path))
    }
    assert found == {}


def test_the_check_sees_an_import_of_another_layer(tmp_path: Path) -> None:
    """The check above can fail: an import of api/ or dataplane/ however written is seen."""
    for source in (
        "from interlock.api.policy_json import policy_json\n",
        "if TYPE_CHECKING:\n    import interlock.dataplane.plan\n",
        "def f() -> None:\n    from ..dataplane import matching\n",
    ):
        module = tmp_path / "module.py"
        module.write_text(source)
        assert outside_imports(module), source
    module.write_text("from interlock.model.outbound import OutboundPolicy\n")
    assert outside_imports(module) == []
