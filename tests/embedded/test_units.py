"""Pure pieces of the embedded server whose behaviour users see directly."""

from __future__ import annotations

from datetime import timedelta

import pytest

from interlock.embedded.errors import ApiError
from interlock.embedded.jsonpath import evaluate_jsonpath
from interlock.embedded.patch import json_merge_patch, json_patch, strategic_merge_patch
from interlock.embedded.protobuf import decode_object
from interlock.embedded.selectors import parse_field_selector, parse_label_selector
from interlock.embedded.timefmt import human_duration

SERVICES = ("", "services")


def test_strategic_merge_deletes_and_orders_ports_by_merge_key() -> None:
    current = {
        "spec": {
            "ports": [
                {"name": "http", "port": 80, "protocol": "TCP", "targetPort": 80},
                {"name": "admin", "port": 9000, "protocol": "TCP", "targetPort": 9000},
            ]
        }
    }
    patch = {
        "spec": {
            "$setElementOrder/ports": [{"port": 443}, {"port": 80}],
            "ports": [{"name": "https", "port": 443}, {"$patch": "delete", "port": 9000}],
        }
    }
    result = strategic_merge_patch(current, patch, kind=SERVICES)
    assert [(p["port"], p.get("protocol")) for p in result["spec"]["ports"]] == [
        (443, None),
        (80, "TCP"),
    ]


def test_strategic_merge_finalizers_are_a_set_and_other_lists_are_replaced() -> None:
    current = {"metadata": {"finalizers": ["a"]}, "spec": {"selector": {"x": "1"}, "ips": ["1"]}}
    patch = {
        "metadata": {"finalizers": ["b"], "$deleteFromPrimitiveList/finalizers": ["a"]},
        "spec": {"ips": ["2"], "selector": {"$patch": "replace", "y": "2"}},
    }
    result = strategic_merge_patch(current, patch, kind=SERVICES)
    assert result["metadata"]["finalizers"] == ["b"]
    assert result["spec"] == {"selector": {"y": "2"}, "ips": ["2"]}


def test_json_merge_patch_null_deletes() -> None:
    assert json_merge_patch({"a": {"b": 1, "c": 2}}, {"a": {"b": None, "d": 3}}) == {
        "a": {"c": 2, "d": 3}
    }


def test_json_patch_operations_and_failed_test() -> None:
    document = {"metadata": {"labels": {"a/b": "1"}}, "spec": {"items": [1, 2]}}
    result = json_patch(
        document,
        [
            {"op": "add", "path": "/spec/items/-", "value": 3},
            {"op": "remove", "path": "/metadata/labels/a~1b"},
            {"op": "copy", "from": "/spec/items", "path": "/spec/copy"},
            {"op": "move", "from": "/spec/copy", "path": "/spec/moved"},
            {"op": "replace", "path": "/spec/items/0", "value": 0},
        ],
    )
    assert result == {"metadata": {"labels": {}}, "spec": {"items": [0, 2, 3], "moved": [1, 2, 3]}}
    assert document["spec"]["items"] == [1, 2], "the input is not modified"
    with pytest.raises(ApiError) as failed:
        json_patch(document, [{"op": "test", "path": "/spec/items/0", "value": 9}])
    assert failed.value.code == 422
    with pytest.raises(ApiError) as not_a_list:
        json_patch(document, {"spec": {}})
    assert not_a_list.value.code == 400


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("app=web", ["web-blue", "web-green"]),
        ("app==web,color!=blue", ["web-green"]),
        ("color in (blue, red)", ["web-blue", "db"]),
        ("color notin (blue)", ["web-green", "db", "bare"]),
        ("color", ["web-blue", "web-green", "db"]),
        ("!color", ["bare"]),
    ],
)
def test_label_selectors(selector: str, expected: list[str]) -> None:
    objects = [
        {"metadata": {"name": "web-blue", "labels": {"app": "web", "color": "blue"}}},
        {"metadata": {"name": "web-green", "labels": {"app": "web", "color": "green"}}},
        {"metadata": {"name": "db", "labels": {"app": "db", "color": "red"}}},
        {"metadata": {"name": "bare"}},
    ]
    predicate = parse_label_selector(selector)
    assert predicate is not None
    assert [o["metadata"]["name"] for o in objects if predicate(o)] == expected


def test_field_selectors_on_any_dotted_path() -> None:
    event = {
        "metadata": {"name": "e", "namespace": "default"},
        "involvedObject": {"kind": "Service"},
    }
    assert parse_field_selector("metadata.namespace=default,involvedObject.kind==Service")(event)
    assert not parse_field_selector("metadata.name!=e")(event)
    with pytest.raises(ApiError) as bad:
        parse_field_selector("nonsense")
    assert bad.value.code == 400


def test_printer_column_jsonpaths() -> None:
    obj = {
        "spec": {"hostnames": ["a", "b"], "rules": [{"host": "x"}, {"host": "y"}]},
        "status": {
            "conditions": [
                {"type": "Ready", "status": "False"},
                {"type": "Valid", "status": "True"},
            ]
        },
    }
    assert evaluate_jsonpath(".spec.hostnames", obj) == [["a", "b"]]
    assert evaluate_jsonpath(".spec.rules[*].host", obj) == ["x", "y"]
    assert evaluate_jsonpath(".spec.rules[-1].host", obj) == ["y"]
    assert evaluate_jsonpath('.status.conditions[?(@.type=="Valid")].status', obj) == ["True"]
    assert evaluate_jsonpath(".status.missing", obj) == []


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (5, "5s"),
        (119, "119s"),
        (150, "2m30s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (30 * 3600, "30h"),
        (3 * 86400 + 3600, "3d1h"),
        (400 * 86400, "400d"),
        (3 * 365 * 86400, "3y"),
    ],
)
def test_ages_read_like_kubectl(seconds: int, text: str) -> None:
    assert human_duration(timedelta(seconds=seconds)) == text


# The exact body kubectl 1.32 sends for `kubectl create service nodeport web2 --tcp=80:8080`.
KUBECTL_SERVICE_PROTOBUF = bytes.fromhex(
    "6b3873000a0d0a027631120753657276696365126b0a210a047765623212001a0022002a00320038"
    "0042005a0b0a0361707012047765623212420a1b0a0738302d383038301203544350185022070800"
    "10903f1a002800120b0a036170701204776562321a0022084e6f6465506f72743a00420052005a00"
    "600068001a020a001a002200"
)


def test_protobuf_bodies_from_kubectl_decode_to_the_json_object() -> None:
    assert decode_object(KUBECTL_SERVICE_PROTOBUF) == {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web2", "labels": {"app": "web2"}},
        "spec": {
            "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
            "selector": {"app": "web2"},
            "type": "NodePort",
        },
    }


def test_protobuf_of_an_undescribed_kind_is_refused_with_415() -> None:
    lease = (
        b"k8s\x00"
        + bytes.fromhex("0a1f0a16636f6f7264696e6174696f6e2e6b38732e696f2f76311205")
        + b"Lease"
    )
    with pytest.raises(ApiError) as refused:
        decode_object(lease)
    assert refused.value.code == 415
    with pytest.raises(ApiError) as garbage:
        decode_object(b"not protobuf")
    assert garbage.value.code == 415
