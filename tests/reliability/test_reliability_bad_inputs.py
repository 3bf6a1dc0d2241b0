"""Malformed and hostile objects get a clear answer and disturb nothing else
(``docs/reliability.md``, "Bad-input corpus").

Every file in ``bad_inputs/`` is applied to a running controller the way ``kubectl apply`` would
(through the embedded API server's manifest loader, which validates like a real API server).
Each file says in a comment what it is and the text its answer must contain (``# expect:``).
The answer is clear when either

* the API server refuses it, and the refusal names the object (or, for a kind it does not
  serve, the apiVersion) and the expected field; or
* the controller accepts it and then writes a status, an Event or a log line that names the
  object and contains the expected text.

Meanwhile a known-good HTTPRoute and Ingress keep their exact outputs, and the controller keeps
working: after the whole corpus, a change to the good route still reaches its policy.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from interlock.api.policy_json import policy_json
from interlock.controller.app import Controller
from interlock.embedded import ApiError, EmbeddedApiServer
from interlock.embedded.store import WriteOptions
from interlock.model.policy_watch import WatchTarget
from interlock.model.service import ServicePortKey
from tests.kit.echo_backends import local_slice
from tests.kit.lanes import EVENT, TestCluster, lane_cluster
from tests.kit.log_capture import captured_logs
from tests.kit.reliability_kit import (
    CRDS,
    KINDS,
    eventually,
    objects,
    remove,
    replica_config,
    write,
)
from tests.kit.reliability_objects import INGRESS_CLASS

CORPUS = Path(__file__).resolve().parent / "bad_inputs"
_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
GOOD_TARGET = WatchTarget(ServicePortKey("default", "good", 80), client_namespace="default")

GOOD_OBJECTS: list[dict[str, Any]] = [
    {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "good", "namespace": "default"},
        "spec": {"ports": [{"name": "http", "port": 80}]},
    },
    local_slice("good", {"http": 8080}, name="good-slice"),
    {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "good-route", "namespace": "default"},
        "spec": {
            "parentRefs": [{"group": "core", "kind": "Service", "name": "good"}],
            "rules": [{"backendRefs": [{"name": "good", "port": 80, "weight": 5}]}],
        },
    },
    {
        "apiVersion": "interlock.dev/v1alpha1",
        "kind": "ModuleSet",
        "metadata": {"name": "good-set", "namespace": "default"},
        "spec": {"modules": {"headers": {"request": {"add": {"X-Team": "blue"}}}}},
    },
    {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "Ingress",
        "metadata": {
            "name": "good-ingress",
            "namespace": "default",
            "annotations": {"interlock.dev/modules": "good-set"},
        },
        "spec": {
            "ingressClassName": "interlock",
            "rules": [
                {
                    "host": "good.example",
                    "http": {
                        "paths": [
                            {
                                "path": "/",
                                "pathType": "Prefix",
                                "backend": {"service": {"name": "good", "port": {"number": 80}}},
                            }
                        ]
                    },
                }
            ],
        },
    },
]


# How long each file may take to be answered. Quietly the slowest file takes about 2 s (a hundred
# ModuleSets on one Ingress) and the huge ModuleSet 0.13 s. The stress runs that found no answer
# for the huge ModuleSet in 64 s and then 240 s met a status held back after a Lease lapse, never
# written (fixed in kube/lease.py; docs/reliability.md, "Stress test"). The bound only ends a
# test that is failing.
ANSWER_WITHIN = 240.0


def apply_strictly(server: EmbeddedApiServer, path: Path) -> str | None:
    """Create the file's objects as ``kubectl apply`` does (server-side field validation
    ``Strict``, kubectl's default); the refusal's text, or None when every object was created."""
    try:
        docs = list(yaml.load_all(path.read_text(), Loader=_LOADER))
    except yaml.YAMLError as error:
        return f"{path.name}: not YAML: {error}"
    for doc in docs:
        if not isinstance(doc, dict):
            return f"{path.name}: a document that is not an object"
        api_version, kind = str(doc.get("apiVersion") or ""), str(doc.get("kind") or "")
        rtype = server.registry.by_kind(api_version=api_version, kind=kind)
        try:
            if rtype is None:
                server.store.create(doc)  # refused, in the server's own words
            else:
                meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
                server.store.create_object(
                    rtype,
                    version=api_version.rpartition("/")[2],
                    namespace=meta.get("namespace"),
                    body=doc,
                    options=WriteOptions(field_validation="Strict"),
                )
        except ApiError as error:
            return f"{kind} {api_version} {error}"
    return None


def corpus() -> list[Path]:
    return sorted(CORPUS.glob("*.yaml"))


def expectation(path: Path) -> str:
    for line in path.read_text().splitlines():
        if line.startswith("# expect:"):
            return line.removeprefix("# expect:").strip()
    raise AssertionError(f"{path.name}: no '# expect:' line")


def names_in(path: Path) -> tuple[str, str]:
    """(kind, name) of the file's object, read leniently (the file may be hostile)."""
    try:
        doc = yaml.safe_load(path.read_text())
    except yaml.YAMLError:
        return ("", "")
    except RecursionError:
        return ("", "")
    if not isinstance(doc, dict):
        return ("", "")
    meta = doc.get("metadata") if isinstance(doc.get("metadata"), dict) else {}
    return (str(doc.get("kind") or ""), str(meta.get("name") or ""))


async def answers_about(cluster: TestCluster, kind: str, name: str, logs: list[str]) -> list[str]:
    """Statuses, Events and log lines that concern ``kind``/``name``."""
    found = [line for line in logs if name in line]
    for event in await cluster.list(EVENT, namespace="default"):
        if event.get("involvedObject", {}).get("name") == name:
            found.append(f"Event {event.get('reason')}: {event.get('message')}")
    if kind in KINDS:
        for raw in await objects(cluster, kind):
            if raw["metadata"]["name"] == name and raw.get("status"):
                found.append(f"{kind} {name} status: {json.dumps(raw['status'])}")
    return found


def good_outputs(controller: Controller, slot: Any) -> tuple[Any, Any]:
    edge = controller.inspect().edge
    assert edge is not None and edge.served is not None
    served = edge.served.to_json()["hosts"]
    good_host = [h for h in served if h["host"] == "good.example"]
    return (None if slot.latest is None else policy_json(slot.latest.policy), good_host)


async def run_corpus(tmp: Path) -> tuple[list[str], dict[str, str]]:
    """Apply the whole corpus; the problems found, and how each file was answered."""
    problems: list[str] = []
    answers: dict[str, str] = {}
    async with lane_cluster(tmp, None, bookmark_interval=0.2) as cluster:
        server = cluster.embedded
        assert server is not None
        await server.apply_manifests([CRDS])
        await write(cluster, INGRESS_CLASS)
        for obj in GOOD_OBJECTS:
            await write(cluster, obj)
        kubeconfig = cluster.controller_kubeconfig
        controller = Controller(replica_config(kubeconfig, "bad-inputs"))
        with captured_logs() as logs:
            await controller.start()
            slot = controller.watches.open_watch(GOOD_TARGET)
            try:
                await controller.wait_ready(within=ANSWER_WITHIN)

                def good_ready() -> bool:
                    policy, host = good_outputs(controller, slot)
                    return (
                        policy is not None
                        and policy["routes"][0]["name"] == "good-route"
                        and bool(host)
                        and host[0]["routes"][0]["backend"] is not None
                    )

                await eventually(
                    good_ready, within=ANSWER_WITHIN, message="the good route and edge"
                )
                baseline = good_outputs(controller, slot)
                for path in corpus():
                    problems += await apply_one(
                        cluster, controller, slot, path, logs, baseline, answers
                    )
                # Still alive: a change to the good route reaches its policy.
                changed = json.loads(json.dumps(GOOD_OBJECTS[2]))
                changed["spec"]["rules"][0]["backendRefs"][0]["weight"] = 7
                await write(cluster, changed)
                await eventually(
                    lambda: (
                        slot.latest is not None
                        and policy_json(slot.latest.policy)["routes"][0]["rules"][0]["backends"][0][
                            "weight"
                        ]
                        == 7
                    ),
                    within=ANSWER_WITHIN,
                    message="the good route's new weight after the corpus",
                )
            finally:
                controller.watches.close_watch(GOOD_TARGET, slot)
                await controller.stop()
    return problems, answers


async def apply_one(
    cluster: TestCluster,
    controller: Controller,
    slot: Any,
    path: Path,
    logs: list[str],
    baseline: tuple[Any, Any],
    answers: dict[str, str],
) -> list[str]:
    expect = expectation(path)
    kind, name = names_in(path)
    assert cluster.embedded is not None
    refusal = apply_strictly(cluster.embedded, path)
    problems: list[str] = []
    if refusal is not None:
        # The request names the object (kubectl prints the file); the answer must name the
        # field or value that is wrong.
        if expect not in refusal:
            problems.append(f"{path.name}: refused without naming {expect!r}: {refusal}")
        answers[path.name] = f"refused: {refusal}"
    else:
        found: list[str] = []

        async def answered() -> bool:
            found[:] = await answers_about(cluster, kind, name, logs)
            return any(expect in line for line in found)

        try:
            await eventually(answered, within=ANSWER_WITHIN, message=f"{path.name}: an answer")
        except AssertionError:
            problems.append(f"{path.name}: no status, Event or log names {expect!r}: {found}")
        else:
            answers[path.name] = next(line for line in found if expect in line).strip()
        # Remove it again so each file meets the controller on its own.
        doc = yaml.safe_load(path.read_text())
        await remove(cluster, doc)
    ended = [
        name
        for name in controller.inspect().ended_tasks
        if name in ("informers", "leader-election")
    ]
    if ended:
        problems.append(f"{path.name}: the controller's {ended} ended")

    def undisturbed() -> bool:
        return controller.inspect().idle and good_outputs(controller, slot) == baseline

    try:
        await eventually(undisturbed, within=ANSWER_WITHIN, message="the good outputs")
    except AssertionError:
        problems.append(f"{path.name}: the good outputs changed: {good_outputs(controller, slot)}")
    return problems


def test_the_corpus_has_at_least_forty_hostile_objects() -> None:
    files = corpus()
    assert len(files) >= 40
    kinds = {names_in(path)[0] for path in files}
    assert {"HTTPRoute", "Service", "Ingress", "ModuleSet"} <= kinds


# Forty-odd files answered one after another: minutes under heavy load, not the suite's 600 s.
@pytest.mark.timeout(3600)
@pytest.mark.embedded_only(
    "each file's expected answer is in the embedded server's words (the real server's refusals "
    "are compared by the differential corpus, tests/differential)"
)
def test_every_bad_input_gets_a_clear_answer_and_disturbs_nothing(tmp_path: Path) -> None:
    problems, answers = asyncio.run(run_corpus(tmp_path))
    assert problems == [], "\n".join(problems)
    assert len(answers) == len(corpus())
