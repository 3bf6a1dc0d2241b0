"""The differential corpus: cases read from ``cases/*.yaml`` and run against one server.

A case is a list of requests (``steps``) in a namespace of its own, optionally after
``setup`` requests that are not compared but must succeed. Each step names a method, a path
and an optional body; ``${ns}`` and the variables a step ``save``s from its response body
(``save: {rv: metadata.resourceVersion}``) are substituted in paths and in string values of
bodies, per server, so a case can send the resourceVersion that server gave it. ``patch:
merge|strategic|json`` sets the patch content type, ``accept: table`` asks for a server-side
Table, ``watch: N`` reads N events (``watch: initial-events-end`` reads until that bookmark),
``resources`` keeps only the named resources of a discovery APIResourceList (the real server
serves many kinds the embedded one does not), ``token`` sends that bearer token instead of the
server's own (authentication cases), ``ignore`` drops dotted paths of the normalized
response before comparing (only for what cannot match between two servers).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from tests.differential.client import Response, Target, send
from tests.differential.normalize import drop_paths, normalize_response

CASES = Path(__file__).parent / "cases"
_CONTENT_TYPES = {
    "merge": "application/merge-patch+json",
    "strategic": "application/strategic-merge-patch+json",
    "json": "application/json-patch+json",
}
_ACCEPT = {
    "table": "application/json;as=Table;v=v1;g=meta.k8s.io",
    "metadata": "application/json;as=PartialObjectMetadataList;v=v1;g=meta.k8s.io",
    "metadata-object": "application/json;as=PartialObjectMetadata;v=v1;g=meta.k8s.io",
}
_VARIABLE = re.compile(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}")


@dataclass
class Case:
    name: str
    source: str
    steps: list[dict[str, Any]]
    setup: list[dict[str, Any]] = field(default_factory=list)
    known_difference: str | None = None
    builtin: bool = False
    """Also compared against an embedded server given no Gateway API CRDs (its built-in
    schemas, :mod:`interlock.embedded.gateway_schemas`): for cases on the fields they cover."""

    @property
    def namespace(self) -> str:
        slug = re.sub(r"[^a-z0-9-]+", "-", self.name.lower()).strip("-")
        return f"d-{slug}"[:63].rstrip("-")

    @property
    def compared(self) -> int:
        return sum(1 for step in self.steps if step.get("compare", True))


def load_cases() -> list[Case]:
    cases: list[Case] = []
    for path in sorted(CASES.glob("*.yaml")):
        for raw in yaml.safe_load(path.read_text()) or []:
            cases.append(
                Case(
                    name=raw["name"],
                    source=path.name,
                    steps=raw["steps"],
                    setup=raw.get("setup") or [],
                    known_difference=raw.get("known_difference"),
                    builtin=bool(raw.get("builtin", False)),
                )
            )
    names = [case.name for case in cases]
    duplicates = {name for name in names if names.count(name) > 1}
    assert not duplicates, f"case names must be unique: {sorted(duplicates)}"
    return cases


def _substitute(value: Any, variables: dict[str, str]) -> Any:
    if isinstance(value, str):
        whole = _VARIABLE.fullmatch(value)
        if whole:
            return variables[whole.group(1)]
        return _VARIABLE.sub(lambda m: str(variables[m.group(1)]), value)
    if isinstance(value, list):
        return [_substitute(item, variables) for item in value]
    if isinstance(value, dict):
        return {key: _substitute(item, variables) for key, item in value.items()}
    return value


def _dig(body: Any, path: str) -> Any:
    value = body
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def run_step(target: Target, step: dict[str, Any], variables: dict[str, Any]) -> Response:
    watch = step.get("watch")
    if "token" in step:
        target = dataclasses.replace(target, token=step["token"])
    response = send(
        target,
        method=step.get("method", "GET"),
        path=_substitute(step["path"], variables),
        body=_substitute(step.get("body"), variables),
        content_type=_CONTENT_TYPES.get(step.get("patch", ""), "application/json"),
        accept=_ACCEPT.get(step.get("accept", ""), step.get("accept", "application/json")),
        watch_events=watch if isinstance(watch, int) else None,
        watch_until_bookmark=watch == "initial-events-end",
    )
    for name, path in (step.get("save") or {}).items():
        try:
            variables[name] = _dig(response.body, path)
        except (KeyError, IndexError, TypeError, ValueError):
            variables[name] = f"<{target.name}: {path} not in the response>"
    return response


def compared_view(step: dict[str, Any], response: Response) -> Any:
    body = response.body
    keep = step.get("resources")
    if keep is not None and isinstance(body, dict) and isinstance(body.get("resources"), list):
        # Discovery lists resources in no order a client may rely on: compared sorted.
        kept = [r for r in body["resources"] if r.get("name") in keep]
        body = {**body, "resources": sorted(kept, key=lambda r: str(r.get("name")))}
    view = normalize_response(response.status, response.warnings, body, response.events)
    return drop_paths(view, list(step.get("ignore") or []))


def namespace_step(namespace: str) -> dict[str, Any]:
    return {
        "method": "POST",
        "path": "/api/v1/namespaces",
        "body": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}},
    }
