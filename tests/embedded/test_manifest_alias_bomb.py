"""A manifest whose YAML aliases expand without bound is refused; ordinary aliases still load."""

from __future__ import annotations

from pathlib import Path

import pytest

from interlock.embedded import EmbeddedApiServer

LEVELS = 7
WIDTH = 9


def _bomb() -> str:
    """A Service of a few hundred bytes whose annotation expands to 9**7 (4.8 million) strings."""
    lines = ["apiVersion: v1", "kind: Service", "metadata: {name: laughs}", "lol0: &l0 lol"]
    for level in range(1, LEVELS + 1):
        refs = ", ".join([f"*l{level - 1}"] * WIDTH)
        lines.append(f"lol{level}: &l{level} [{refs}]")
    lines.append(f"spec: {{ports: [{{port: 80}}], bomb: *l{LEVELS}}}")
    return "\n".join(lines) + "\n"


SHARED_LABELS = """\
apiVersion: v1
kind: Service
metadata:
  name: web
  labels: &labels {app: web, tier: front}
spec:
  selector: *labels
  ports: [{port: 80}]
"""

PLAIN = """\
apiVersion: v1
kind: Service
metadata: {name: api}
spec:
  ports: [{port: 80}]
"""


@pytest.mark.timeout(300)
async def test_an_alias_bomb_is_refused_and_the_other_documents_still_apply(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    path = tmp_path / "app.yaml"
    path.write_text("---\n".join([SHARED_LABELS, _bomb(), PLAIN]))
    report = await api_server.apply_manifests([path])
    assert [(Path(e.source).name, e.index) for e in report.errors] == [("app.yaml", 1)]
    message = str(report.errors[0])
    assert message.startswith(f"{path}[1]: ")
    assert "aliases would expand it" in message
    services = {
        s["metadata"]["name"]: s for s in api_server.store.list(api_version="v1", kind="Service")
    }
    assert sorted(services) == ["api", "web"]  # not "laughs"
    # The ordinary alias was expanded as written.
    assert services["web"]["spec"]["selector"] == {"app": "web", "tier": "front"}
    assert services["web"]["metadata"]["labels"] == {"app": "web", "tier": "front"}


async def test_aliases_reused_within_the_limit_load(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    # One label set and one value reused many times: hundreds of nodes added, within bounds.
    entries = "\n".join(f"  key{i}: *value" for i in range(300))
    path = tmp_path / "secret.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Secret\n"
        "metadata: {name: shared, labels: &labels {app: web}, annotations: *labels}\n"
        f"stringData:\n  first: &value one\n{entries}\n"
    )
    report = await api_server.apply_manifests([path])
    assert report.ok, [str(e) for e in report.errors]
    (secret,) = api_server.store.list(api_version="v1", kind="Secret")
    assert secret["metadata"]["annotations"]["app"] == "web"
    assert len(secret["data"]) == 301


RECURSIVE = """\
apiVersion: v1
kind: ConfigMap
metadata: {name: loop}
data: &loop [1, *loop]
"""


async def test_a_recursive_alias_is_refused_per_document(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    path = tmp_path / "loop.yaml"
    path.write_text("---\n".join([RECURSIVE, PLAIN]))
    report = await api_server.apply_manifests([path])
    assert [(Path(e.source).name, e.index) for e in report.errors] == [("loop.yaml", 0)]
    assert "recursive YAML" in str(report.errors[0])
    names = [s["metadata"]["name"] for s in api_server.store.list(api_version="v1", kind="Service")]
    assert "api" in names
