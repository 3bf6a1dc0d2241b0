"""Loading manifest files into a running embedded server, as ``kubectl apply -f`` would.

``interlock run --embedded --manifests DIR`` and the demo start from YAML files. Documents are
applied in dependency order — Namespaces, then CustomResourceDefinitions (so their kinds
exist), then everything else in file order — and a bad document is reported with its file and
index without stopping the others, so one typo does not hide every other mistake.

YAML aliases are references: a few lines nesting ``*laughs`` ten deep ("billion laughs") make a
graph of a few dozen nodes that becomes 10⁹ values once written out as JSON (for the store and
the last-applied annotation), exhausting memory. So each document's node graph is measured as
it would be expanded before it is constructed, and refused if its aliases add too much.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from interlock.embedded.errors import ApiError
from interlock.embedded.store import ObjectStore

_SUFFIXES = (".yaml", ".yml", ".json")
_MAX_ALIAS_EXPANSION = 100_000
"""Nodes that aliases may add to a document once expanded. Real manifests reuse a few blocks
(a label set, a container template): far below; an alias bomb: far above."""
_DOCUMENTS_PER_TURN = 200
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


class _Loader(getattr(yaml, "CSafeLoader", yaml.SafeLoader)):  # type: ignore[misc]
    """libyaml's safe loader, reading unquoted dates as strings as kubectl does.

    libyaml parses a 20,000-document manifest about ten times faster than pure Python; and
    ``2024-01-01`` in a manifest is text for Kubernetes, not a date that JSON cannot hold.
    """


_Loader.yaml_implicit_resolvers = {
    first: [(tag, pattern) for tag, pattern in resolvers if tag != "tag:yaml.org,2002:timestamp"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_FIRST_KINDS = {"Namespace": 0, "CustomResourceDefinition": 1}


@dataclass(frozen=True, slots=True)
class DocumentResult:
    """What happened to one document of one manifest file."""

    source: str
    index: int
    """Position of the document in its file, from 0."""
    kind: str | None
    name: str | None
    namespace: str | None
    action: str
    """``created``, ``updated``, ``unchanged`` or ``error``."""
    error: str | None = None

    def __str__(self) -> str:
        where = f"{self.source}[{self.index}]"
        what = f"{self.kind or '<no kind>'} {self.namespace + '/' if self.namespace else ''}"
        what += self.name or "<no name>"
        return f"{where}: {what}: {self.error}" if self.error else f"{where}: {what}: {self.action}"


@dataclass(slots=True)
class ManifestReport:
    """Per-document results of :func:`apply_manifests`, in the order they were applied."""

    results: list[DocumentResult] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.errors

    @property
    def errors(self) -> list[DocumentResult]:
        return [r for r in self.results if r.action == "error"]


@dataclass(frozen=True, slots=True)
class _Document:
    source: str
    index: int
    body: Any


def _manifest_files(paths: Iterable[str | os.PathLike[str]]) -> list[Path]:
    files: list[Path] = []
    for entry in paths:
        path = Path(entry)
        if path.is_dir():
            files.extend(
                sorted(p for p in path.rglob("*") if p.suffix in _SUFFIXES and p.is_file())
            )
        else:
            files.append(path)
    return files


def _read_documents(path: Path, report: ManifestReport) -> list[_Document]:
    source = str(path)
    try:
        text = path.read_text()
    except OSError as error:
        report.results.append(
            DocumentResult(source, 0, None, None, None, "error", f"cannot read: {error.strerror}")
        )
        return []
    documents: list[_Document] = []
    index = 0
    loader = _Loader(text)
    try:
        while loader.check_node():
            node = loader.get_node()
            problem = _alias_problem(node)
            if problem is not None:
                report.results.append(
                    DocumentResult(source, index, None, None, None, "error", problem)
                )
                index += 1
                continue
            body = loader.construct_document(node)
            if body is None:
                index += 1
                continue
            if isinstance(body, dict) and body.get("kind") == "List":
                for item in body.get("items") or []:
                    documents.append(_Document(source, index, item))
            else:
                documents.append(_Document(source, index, body))
            index += 1
    except yaml.YAMLError as error:
        report.results.append(
            DocumentResult(source, index, None, None, None, "error", _yaml_problem(error))
        )
    finally:
        loader.dispose()
    return documents


def _alias_problem(node: yaml.Node) -> str | None:
    """Why a composed document is refused before it is built, or None."""
    try:
        added = _alias_expansion(node)
    except _RecursiveAlias:
        return "refused: an alias refers to a node that contains it (recursive YAML)"
    if added > _MAX_ALIAS_EXPANSION:
        return (
            f"refused: its aliases would expand it by more than {_MAX_ALIAS_EXPANSION} "
            "nodes (an alias bomb?)"
        )
    return None


def _children(node: yaml.Node) -> list[yaml.Node]:
    if isinstance(node, yaml.SequenceNode):
        return list(node.value)
    if isinstance(node, yaml.MappingNode):
        return [part for pair in node.value for part in pair]
    return []


class _RecursiveAlias(Exception):
    """A document that contains itself through an alias: no JSON object can represent it."""


def _alias_expansion(root: yaml.Node) -> int:
    """How many nodes the aliases of ``root``'s document add once every alias is expanded.

    The composed graph shares an aliased node wherever it is referenced; its expanded size is
    computed once per node (iteratively: a document may nest deeper than Python's stack), so a
    bomb is measured in time proportional to its text, never to its expansion. A node reached
    again inside its own subtree is a recursive alias: :class:`_RecursiveAlias` is raised (PyYAML
    would build a self-containing object, and its C loader fails on some with a non-YAML error).
    """
    sizes: dict[int, int] = {}
    visiting: set[int] = set()
    stack: list[tuple[yaml.Node, bool]] = [(root, False)]
    while stack:
        node, children_done = stack.pop()
        key = id(node)
        if children_done:
            visiting.discard(key)
            sizes[key] = 1 + sum(sizes.get(id(child), 1) for child in _children(node))
            continue
        if key in sizes:
            continue
        if key in visiting:
            raise _RecursiveAlias
        visiting.add(key)
        stack.append((node, True))
        stack.extend((child, False) for child in _children(node))
    return sizes[id(root)] - len(sizes)


def _yaml_problem(error: yaml.YAMLError) -> str:
    """Where and what, without PyYAML's excerpt of the text (which may be a Secret's data)."""
    if isinstance(error, yaml.MarkedYAMLError) and error.problem_mark is not None:
        mark = error.problem_mark
        return f"invalid YAML at line {mark.line + 1}, column {mark.column + 1}: {error.problem}"
    return "invalid YAML"


def _describe(body: Any) -> tuple[str | None, str | None, str | None]:
    if not isinstance(body, dict):
        return None, None, None
    metadata = body.get("metadata")
    if not isinstance(metadata, dict):
        return body.get("kind"), None, None
    return body.get("kind"), metadata.get("name"), metadata.get("namespace")


def _apply_one(store: ObjectStore, document: _Document) -> DocumentResult:
    kind, name, namespace = _describe(document.body)

    def result(action: str, error: str | None = None) -> DocumentResult:
        return DocumentResult(document.source, document.index, kind, name, namespace, action, error)

    if not isinstance(document.body, dict):
        return result("error", "the document is not a YAML mapping")
    if not document.body.get("apiVersion") or not kind:
        return result("error", "apiVersion and kind are required")
    body = dict(document.body)
    rtype = store.registry.by_kind(api_version=body["apiVersion"], kind=str(kind))
    if rtype is None:
        return result("error", f'no kind "{kind}" is registered for version "{body["apiVersion"]}"')
    if rtype.namespaced:
        metadata = dict(body.get("metadata") or {})
        metadata.setdefault("namespace", "default")
        body["metadata"] = metadata
        namespace = metadata["namespace"]
    version = body["apiVersion"].rpartition("/")[2]
    try:
        body = _with_last_applied(body)
    except (TypeError, ValueError) as error:
        return result("error", f"the document cannot be represented as JSON: {error}")
    try:
        try:
            store.create_object(rtype, version=version, namespace=namespace, body=body)
            return result("created")
        except ApiError as error:
            if error.reason != "AlreadyExists":
                raise
        before = store.read(rtype, namespace=namespace, name=str(name)).rv
        metadata = dict(body.get("metadata") or {})
        metadata.pop("resourceVersion", None)
        body["metadata"] = metadata
        after = store.update_object(
            rtype, version=version, namespace=namespace, name=str(name), body=body
        ).rv
        return result("unchanged" if after == before else "updated")
    except ApiError as error:
        return result("error", error.message)


def _with_last_applied(body: dict[str, Any]) -> dict[str, Any]:
    """The document with the annotation ``kubectl apply`` records.

    A later ``kubectl apply`` of an edited file then computes its three-way patch from it,
    exactly as if the file had been applied with kubectl in the first place.
    """
    metadata = dict(body.get("metadata") or {})
    annotations = {
        k: v for k, v in (metadata.get("annotations") or {}).items() if k != LAST_APPLIED
    }
    recorded = {**body, "metadata": {**metadata, "annotations": annotations}}
    text = json.dumps(recorded, sort_keys=True, separators=(",", ":")) + "\n"
    return {**body, "metadata": {**metadata, "annotations": {**annotations, LAST_APPLIED: text}}}


async def apply_manifests(
    store: ObjectStore, paths: Sequence[str | os.PathLike[str]]
) -> ManifestReport:
    report = ManifestReport()
    documents: list[_Document] = []
    for path in _manifest_files(paths):
        documents.extend(_read_documents(path, report))
    documents.sort(key=lambda d: _FIRST_KINDS.get(str(_describe(d.body)[0]), 2))
    for number, document in enumerate(documents, start=1):
        report.results.append(_apply_one(store, document))
        if number % _DOCUMENTS_PER_TURN == 0:
            # Let the server answer requests while a large manifest is applied.
            await asyncio.sleep(0)
    return report
