"""The upstream table pushed to edge workers: the changes between two tables, their batches and
their JSON."""

from __future__ import annotations

import json

import pytest

from interlock.model.meta import ObjectKey
from interlock.model.service import ServicePortKey
from interlock.model.upstream_table import (
    ServiceEndpoints,
    TableChanges,
    UpstreamTable,
    changes_from_json,
    changes_json,
    in_batches,
    table_changes,
)
from tests.kit.grpc_policies import policy_of

WEB = ServicePortKey("default", "web", 80)
BLUE = ObjectKey(namespace="default", name="blue")
GREEN = ObjectKey(namespace="default", name="green")
SERVICE = {"metadata": {"name": "web", "namespace": "default"}, "spec": {"ports": [{"port": 80}]}}
POLICY = policy_of(SERVICE)
BLUE_ROWS = ServiceEndpoints(known=True, exists=True, ports=((80, (("10.0.0.1", 8080),)),))


def test_an_unknown_worker_gets_the_whole_table_to_replace_its_own() -> None:
    table = UpstreamTable(policies={WEB: POLICY}, services={BLUE: BLUE_ROWS})
    changes = table_changes(None, table)
    assert changes.replace
    assert changes.policies == ((WEB, POLICY),) and changes.services == ((BLUE, BLUE_ROWS),)


def test_a_known_worker_gets_only_what_changed() -> None:
    old = UpstreamTable(policies={WEB: POLICY}, services={BLUE: BLUE_ROWS})
    moved = ServiceEndpoints(known=True, exists=True, ports=((80, (("10.0.0.2", 8080),)),))
    green = ServiceEndpoints(known=False, exists=False)
    new = UpstreamTable(policies={WEB: POLICY}, services={BLUE: moved, GREEN: green})
    assert table_changes(old, new) == TableChanges(services=((BLUE, moved), (GREEN, green)))
    assert table_changes(new, UpstreamTable()) == TableChanges(
        removed_policies=(WEB,), removed_services=(BLUE, GREEN)
    )
    assert len(table_changes(new, new)) == 0


def test_batches_keep_every_row_once_and_replace_only_first() -> None:
    services = {ObjectKey(namespace="default", name=f"s{i}"): BLUE_ROWS for i in range(7)}
    changes = table_changes(None, UpstreamTable(policies={WEB: POLICY}, services=services))
    batches = in_batches(changes, 3)
    assert [len(batch) for batch in batches] == [3, 3, 2]
    assert [batch.replace for batch in batches] == [True, False, False]
    assert [key for batch in batches for key, _ in batch.services] == list(services)
    assert in_batches(TableChanges(replace=True), 3) == [TableChanges(replace=True)]
    assert in_batches(TableChanges(), 3) == []


def test_the_json_comes_back_equal() -> None:
    changes = TableChanges(
        policies=((WEB, POLICY),),
        services=((BLUE, BLUE_ROWS), (GREEN, ServiceEndpoints(known=True, exists=False))),
        removed_policies=(ServicePortKey("default", "old", 8080),),
        removed_services=(ObjectKey(namespace="default", name="old"),),
    )
    text = json.dumps(changes_json(changes))
    assert changes_from_json(json.loads(text), replace=False) == changes


@pytest.mark.parametrize(
    ("body", "message"),
    [
        ([], "the body must be a JSON object"),
        ({"policies": {}}, "policies: a list is required"),
        ({"policies": [{"namespace": "default", "service": "web"}]}, r"policies\[0\]\.port"),
        ({"policies": [{**WEB._asdict(), "service": "web", "policy": 1}]}, r"policies\[0\]"),
        ({"services": [{"namespace": "default", "name": "b", "known": 1}]}, "booleans"),
        (
            {
                "services": [
                    {
                        "namespace": "default",
                        "name": "b",
                        "known": True,
                        "exists": True,
                        "ports": [{"port": 80, "addresses": [["10.0.0.1", 0]]}],
                    }
                ]
            },
            r"services\[0\]\.ports\[0\]\.addresses\[0\]",
        ),
        ({"removedServices": [{"namespace": "default"}]}, r"removedServices\[0\]\.name"),
    ],
)
def test_a_body_that_cannot_be_read_names_the_field(body: object, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        changes_from_json(body, replace=False)
