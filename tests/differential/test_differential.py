"""The embedded API server answers as kube-apiserver does: every corpus request, both servers.

Each case of ``cases/*.yaml`` (see :mod:`tests.differential.corpus`) is sent to a real
kube-apiserver and to the embedded server in the same run, step by step; the normalized
responses (:mod:`tests.differential.normalize`) must be equal. A case whose difference is
known and documented in docs/embedded.md ("Differences from kube-apiserver") carries
``known_difference`` and is a strict xfail: it fails the day the difference goes away, so
the table is kept true.
"""

from __future__ import annotations

import difflib
import json
from dataclasses import replace
from typing import Any

import pytest

from tests.differential.client import Target
from tests.differential.corpus import Case, compared_view, load_cases, namespace_step, run_step

CASES = load_cases()


def _params() -> list[Any]:
    params = []
    for case in CASES:
        marks = []
        if case.known_difference:
            marks.append(pytest.mark.xfail(strict=True, reason=case.known_difference))
        params.append(pytest.param(case, id=case.name, marks=marks))
    return params


def test_corpus_has_at_least_150_compared_requests() -> None:
    assert sum(case.compared for case in CASES) >= 150


def _pretty(value: Any) -> list[str]:
    return json.dumps(value, indent=1, sort_keys=True, default=str).splitlines()


@pytest.mark.parametrize("case", _params())
def test_case(case: Case, servers: tuple[Target, Target]) -> None:
    _compare(case, *servers)


@pytest.mark.parametrize(
    "case",
    [pytest.param(replace(c, name=f"{c.name}-builtin"), id=c.name) for c in CASES if c.builtin],
)
def test_builtin_schemas(case: Case, real_server: Target, builtin_server: Target) -> None:
    """The Gateway API schemas the embedded server installs by itself answer as the v1.6.1
    CRDs on a real server do (each ``builtin: true`` case, in a namespace of its own)."""
    _compare(case, real_server, builtin_server)


def _compare(case: Case, real: Target, embedded: Target) -> None:
    servers = (real, embedded)
    variables: dict[str, dict[str, Any]] = {t.name: {"ns": case.namespace} for t in servers}
    for step in [namespace_step(case.namespace), *case.setup]:
        for target in servers:
            response = run_step(target, step, variables[target.name])
            assert response.status < 300, (
                f"{case.source}: {case.name}: setup {step.get('method', 'GET')} {step['path']} "
                f"on the {target.name} server: {response.status} {response.body}"
            )
    differences = []
    for index, step in enumerate(case.steps):
        views = {}
        for target in servers:
            response = run_step(target, step, variables[target.name])
            views[target.name] = compared_view(step, response)
        if step.get("compare", True) and views[real.name] != views[embedded.name]:
            diff = "\n".join(
                difflib.unified_diff(
                    _pretty(views[real.name]),
                    _pretty(views[embedded.name]),
                    real.name,
                    embedded.name,
                    lineterm="",
                    n=2,
                )
            )
            differences.append(f"step {index}: {step.get('method', 'GET')} {step['path']}\n{diff}")
    assert not differences, f"{case.source}: {case.name}\n" + "\n\n".join(differences)
