"""The Service interlock keeps for each Gateway, with ``spec.infrastructure`` (both lanes).

A user (or a tool) finds a Gateway's resources by the label
``gateway.networking.k8s.io/gateway-name``; the Gateway's ``spec.infrastructure`` labels and
annotations are on them; the Service names the Gateway's ports and address, follows changes to
the Gateway, and goes with it.
"""

from __future__ import annotations

from typing import Any

from interlock.kube.resources import SERVICE
from tests.kit.e2e_clients import eventually
from tests.kit.gateway_env import Env, gateway_obj, http_listener
from tests.kit.gateway_env import env as env

SELECTOR = "gateway.networking.k8s.io/gateway-name=one"


def with_infrastructure(
    gateway: dict[str, Any], labels: dict[str, str], annotations: dict[str, str]
) -> dict[str, Any]:
    gateway["spec"]["infrastructure"] = {"labels": labels, "annotations": annotations}
    return gateway


async def services(env: Env) -> list[dict[str, Any]]:
    return await env.cluster.list(SERVICE, namespace="default", label_selector=SELECTOR)


async def test_a_gateway_has_a_service_with_its_infrastructure_metadata(env: Env) -> None:
    gateway = gateway_obj("one", http_listener("web", port=8080), http_listener("alt", port=8081))
    await env.cluster.apply(with_infrastructure(gateway, {"team": "blue"}, {"cost-centre": "1234"}))
    address = await env.address("one")
    found: list[dict[str, Any]] = []

    async def kept() -> bool:
        found[:] = await services(env)
        if len(found) != 1:
            return False
        meta = found[0]["metadata"]
        return (
            meta.get("labels", {}).get("team") == "blue"
            and meta.get("annotations", {}).get("cost-centre") == "1234"
            and meta.get("annotations", {}).get("interlock.dev/gateway-address") == address
        )

    await eventually(kept, message="the Gateway's Service carries its infrastructure metadata")
    service = found[0]
    assert service["metadata"]["name"] == "one-interlock-gateway"
    assert service["metadata"]["labels"]["app.kubernetes.io/managed-by"] == "interlock"
    gateway_uid = (await env.read("Gateway", "one") or {})["metadata"]["uid"]
    owners = service["metadata"]["ownerReferences"]
    assert [(o["kind"], o["name"], o["uid"]) for o in owners] == [("Gateway", "one", gateway_uid)]
    assert service["spec"]["clusterIP"] == "None"
    assert [(p["name"], p["port"]) for p in service["spec"]["ports"]] == [
        ("http-8080", 8080),
        ("http-8081", 8081),
    ]

    # The Gateway changes: the Service follows (a label replaced, a port gone).
    gateway = gateway_obj("one", http_listener("web", port=8080))
    await env.cluster.apply(with_infrastructure(gateway, {"team": "green"}, {}))

    async def followed() -> bool:
        found[:] = await services(env)
        if len(found) != 1:
            return False
        meta, spec = found[0]["metadata"], found[0]["spec"]
        return (
            meta.get("labels", {}).get("team") == "green"
            and "cost-centre" not in meta.get("annotations", {})
            and [p["port"] for p in spec["ports"]] == [8080]
        )

    await eventually(followed, message="the Service follows the Gateway's changes")

    # The Gateway goes: so does its Service.
    obj = await env.read("Gateway", "one")
    assert obj is not None
    await env.cluster.delete(obj)

    async def gone() -> bool:
        return await services(env) == []

    await eventually(gone, message="the Service goes with its Gateway")


async def test_a_users_service_of_that_name_is_left_alone(env: Env) -> None:
    users = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "two-interlock-gateway", "namespace": "default"},
        "spec": {"ports": [{"name": "web", "port": 9000}]},
    }
    await env.cluster.apply(users)
    await env.cluster.apply(gateway_obj("two", http_listener("web", port=8080)))
    await env.address("two")
    # A later Gateway's Service is written after "two"'s was attempted (one writer, in order).
    await env.cluster.apply(gateway_obj("one", http_listener("web", port=8080)))

    async def ones_written() -> bool:
        return len(await services(env)) == 1

    await eventually(ones_written, message="the next Gateway's Service is written")
    kept = await env.cluster.get(users)
    assert kept is not None
    assert "gateway.networking.k8s.io/gateway-name" not in kept["metadata"].get("labels", {})
    assert [p["port"] for p in kept["spec"]["ports"]] == [9000]
    await env.cluster.delete(kept)
