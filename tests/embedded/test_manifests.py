"""Starting from manifest files: dependency order, per-document errors, re-apply."""

from __future__ import annotations

from pathlib import Path

import yaml

from interlock.embedded import EmbeddedApiServer
from tests.kit.embedded_helpers import MODULESET_CRD


def _write(path: Path, *documents: object) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(yaml.safe_dump_all(documents))
    return path


async def test_namespaces_and_crds_are_applied_before_what_needs_them(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    # The objects come first in the files; the Namespace and the CRD come last.
    _write(
        tmp_path / "m" / "a-app.yaml",
        {
            "apiVersion": "interlock.dev/v1alpha1",
            "kind": "ModuleSet",
            "metadata": {"name": "gzip", "namespace": "shop"},
            "spec": {"modules": {"compression": {"enabled": True}}},
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "web", "namespace": "shop"},
            "spec": {"ports": [{"port": 80}]},
        },
    )
    _write(
        tmp_path / "m" / "z-base.yaml",
        {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "shop"}},
    )
    _write(tmp_path / "crds.yaml", MODULESET_CRD)
    report = await api_server.apply_manifests([tmp_path / "m", tmp_path / "crds.yaml"])
    assert report.ok, [str(e) for e in report.errors]
    assert [(r.kind, r.action) for r in report.results] == [
        ("Namespace", "created"),
        ("CustomResourceDefinition", "created"),
        ("ModuleSet", "created"),
        ("Service", "created"),
    ]
    assert api_server.store.get(
        api_version="interlock.dev/v1alpha1", kind="ModuleSet", namespace="shop", name="gzip"
    )


async def test_bad_documents_are_reported_with_file_and_index_and_others_still_apply(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    path = _write(
        tmp_path / "app.yaml",
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "Bad_Name"},
            "spec": {"ports": [{"port": 80}]},
        },
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}},
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": "good"},
            "spec": {"ports": [{"port": 80}]},
        },
    )
    broken = tmp_path / "broken.yaml"
    broken.write_text("apiVersion: v1\nkind: Service\nmetadata: {name: [unclosed\n")
    report = await api_server.apply_manifests([path, broken])
    errors = {(Path(e.source).name, e.index): e.error or "" for e in report.errors}
    assert set(errors) == {("app.yaml", 0), ("app.yaml", 1), ("broken.yaml", 0)}
    assert "metadata.name" in errors[("app.yaml", 0)]
    assert 'no kind "Widget"' in errors[("app.yaml", 1)]
    assert "invalid YAML" in errors[("broken.yaml", 0)]
    assert any(
        'app.yaml[0]: Service default/Bad_Name: Service "Bad_Name" is invalid' in str(e)
        for e in report.errors
    )
    names = [s["metadata"]["name"] for s in api_server.store.list(api_version="v1", kind="Service")]
    assert names == ["good"]


async def test_reapplying_updates_changed_documents_only(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    service = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web"},
        "spec": {"ports": [{"port": 80}]},
    }
    path = _write(tmp_path / "svc.yaml", service)
    await api_server.apply_manifests([path])
    again = await api_server.apply_manifests([path])
    assert [r.action for r in again.results] == ["unchanged"]
    service["spec"] = {"ports": [{"port": 8080}]}
    _write(tmp_path / "svc.yaml", service)
    changed = await api_server.apply_manifests([path])
    assert [r.action for r in changed.results] == ["updated"]
    stored = api_server.store.get(api_version="v1", kind="Service", namespace="default", name="web")
    assert stored["spec"]["ports"][0]["port"] == 8080


async def test_errors_about_secrets_never_show_their_data(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    broken = tmp_path / "secret.yaml"
    broken.write_text(
        "apiVersion: v1\nkind: Secret\nmetadata: {name: s}\nstringData: {password: [hunter2\n"
    )
    bad_base64 = _write(
        tmp_path / "bad.yaml",
        {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": "t"},
            "data": {"token": "hunter2!"},
        },
    )
    report = await api_server.apply_manifests([broken, bad_base64])
    messages = [str(e) for e in report.errors]
    assert len(messages) == 2
    assert "invalid YAML at line" in messages[0] or "invalid YAML at line" in messages[1]
    assert any("data[token]" in m for m in messages)
    assert not any("hunter2" in m for m in messages)


async def test_unquoted_dates_stay_text_as_kubectl_reads_them(
    api_server: EmbeddedApiServer, tmp_path: Path
) -> None:
    path = tmp_path / "svc.yaml"
    path.write_text(
        "apiVersion: v1\nkind: Service\nmetadata:\n  name: web\n  labels: {release: 2024-01-01}\n"
        "spec: {ports: [{port: 80}]}\n"
    )
    report = await api_server.apply_manifests([path])
    assert report.ok, [str(e) for e in report.errors]
    stored = api_server.store.get(api_version="v1", kind="Service", namespace="default", name="web")
    assert stored["metadata"]["labels"] == {"release": "2024-01-01"}
