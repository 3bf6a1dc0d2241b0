"""TLSRoute and TCPRoute on Service parents reach an open watch and get a status, end to end:
through the informer, router, route actor and StatusWriter for their kinds.

Every change is followed by exactly the expected next document (each one valid against the
JSON Schema the API serves), and a change that alters nothing produces no document: checked by
making a later change that does, and reading that one next.
"""

from __future__ import annotations

from typing import Any

from tests.kit.e2e_clients import Cluster, PolicyClient, eventually
from tests.kit.outbound_objects import GATEWAY, service, stream_route
from tests.kit.policy_documents import next_valid, served_validator, service_seen

CONTROLLER = "interlock.dev/policy-controller"


def backends(document: dict[str, Any]) -> list[tuple[str, int, bool, Any]]:
    (route,) = document["routes"]
    (rule,) = route["rules"]
    return [(b["name"], b["weight"], b["exists"], b["failureInjector"]) for b in rule["backends"]]


async def our_conditions(cluster: Cluster, obj: dict[str, Any]) -> dict[str, tuple[str, str]]:
    stored = await cluster.get(obj)
    entries = ((stored or {}).get("status") or {}).get("parents", [])
    ours = [e for e in entries if e.get("controllerName") == CONTROLLER]
    if len(ours) != 1:
        return {}
    return {c["type"]: (c["status"], c["reason"]) for c in ours[0]["conditions"]}


async def test_tcp_route_under_an_open_watch(cluster: Cluster, policy: PolicyClient):
    validator = await served_validator(policy)
    await cluster.apply(service("db", ports=(5432,)))
    await cluster.apply(service("db-v1", ports=(5432,)))
    watch = await policy.watch("db", 5432)
    await service_seen(watch)
    assert watch.latest["protocol"] == "detect"

    route = stream_route(
        "TCPRoute",
        "db-split",
        [{"name": "db-v1", "port": 5432, "weight": 3}, {"name": "db-v2", "port": 5432}],
    )
    await cluster.apply(route)
    document = await next_valid(watch, validator)
    assert document["protocol"] == "opaque"
    assert [(r["kind"], r["name"]) for r in document["routes"]] == [("TCPRoute", "db-split")]
    assert backends(document) == [
        ("db-v1", 3, True, None),
        (
            "db-v2",
            1,
            False,
            {
                "status": 500,
                "message": "backend Service default/db-v2 does not exist",
                "refuseConnection": True,
            },
        ),
    ]

    async def backend_not_found() -> bool:
        return (await our_conditions(cluster, route)) == {
            "Accepted": ("True", "Accepted"),
            "ResolvedRefs": ("False", "BackendNotFound"),
        }

    await eventually(backend_not_found, message="TCPRoute ResolvedRefs False / BackendNotFound")

    # A Service no route refers to changes nothing: no document. The backend's creation is next.
    await cluster.apply(service("unrelated", ports=(5432,)))
    await cluster.apply(service("db-v2", ports=(5432,)))
    document = await next_valid(watch, validator)
    assert backends(document) == [("db-v1", 3, True, None), ("db-v2", 1, True, None)]

    async def resolved() -> bool:
        conditions = await our_conditions(cluster, route)
        return bool(conditions) and all(s == "True" for s, _ in conditions.values())

    await eventually(resolved, message="TCPRoute Accepted and ResolvedRefs")

    await cluster.delete(route)
    document = await next_valid(watch, validator)
    assert ([r["kind"] for r in document["routes"]], document["protocol"]) == (
        ["Default"],
        "detect",
    )
    watch.close()


async def test_tls_route_under_an_open_watch(cluster: Cluster, policy: PolicyClient):
    validator = await served_validator(policy)
    await cluster.apply(service("db", ports=(5432,)))
    watch = await policy.watch("db", 5432)
    await service_seen(watch)

    route = stream_route(
        "TLSRoute", "db-tls", [{"name": "db-tls", "port": 5432}], hostnames=["db.example.com"]
    )
    await cluster.apply(route)
    document = await next_valid(watch, validator)
    assert document["protocol"] == "tls"
    (served,) = document["routes"]
    assert (served["kind"], served["hostnames"]) == ("TLSRoute", ["db.example.com"])
    assert backends(document)[0][2:] == (
        False,
        {
            "status": 500,
            "message": "backend Service default/db-tls does not exist",
            "refuseConnection": True,
        },
    )

    # New SNI hostnames: exactly one document with them.
    await cluster.apply({**route, "spec": {**route["spec"], "hostnames": ["*.db.example.com"]}})
    document = await next_valid(watch, validator)
    assert document["routes"][0]["hostnames"] == ["*.db.example.com"]

    await cluster.delete(route)
    document = await next_valid(watch, validator)
    assert [r["kind"] for r in document["routes"]] == ["Default"]
    watch.close()


async def accepted_as(cluster: Cluster, obj: dict[str, Any], status: str, reason: str) -> str:
    """Wait until our ``Accepted`` condition on ``obj`` has ``status``/``reason``; its message."""
    found: dict[str, str] = {}

    async def condition() -> bool:
        stored = await cluster.get(obj)
        entries = ((stored or {}).get("status") or {}).get("parents", [])
        for entry in entries:
            for c in (
                entry.get("conditions", ()) if entry.get("controllerName") == CONTROLLER else ()
            ):
                if c["type"] == "Accepted" and (c["status"], c["reason"]) == (status, reason):
                    found["message"] = c["message"]
                    return True
        return False

    kind, name = obj["kind"], obj["metadata"]["name"]
    await eventually(condition, message=f"{kind} {name} Accepted {status} / {reason}")
    return found["message"]


async def test_route_kinds_conflict_on_a_port_and_the_loser_follows_the_winner(
    cluster: Cluster, policy: PolicyClient
):
    validator = await served_validator(policy)
    await cluster.apply(service("db", ports=(5432,)))
    watch = await policy.watch("db", 5432)
    await service_seen(watch)
    to_db = [{"name": "db", "port": 5432}]

    tcp = stream_route("TCPRoute", "db-tcp", to_db)
    await cluster.apply(tcp)
    document = await next_valid(watch, validator)
    assert [(r["kind"], r["name"]) for r in document["routes"]] == [("TCPRoute", "db-tcp")]
    await accepted_as(cluster, tcp, "True", "Accepted")

    # A second TCPRoute, newer: the port keeps the first, so no document; its status says why.
    second = stream_route("TCPRoute", "db-tcp-2", to_db)
    await cluster.apply(second)
    message = await accepted_as(cluster, second, "False", "RouteReasonConflicted")
    assert message.startswith(
        "conflicts with TCPRoute default/db-tcp on Service default/db port 5432"
    )
    await cluster.delete(second)

    # A TLSRoute takes the port from the TCPRoute: exactly the next document.
    tls = stream_route("TLSRoute", "db-tls", to_db, hostnames=["db.example.com"])
    await cluster.apply(tls)
    document = await next_valid(watch, validator)
    assert ([r["kind"] for r in document["routes"]], document["protocol"]) == (["TLSRoute"], "tls")
    message = await accepted_as(cluster, tcp, "False", "RouteReasonConflicted")
    assert message == (
        "conflicts with TLSRoute default/db-tls on Service default/db port 5432, which is served "
        "instead (route kinds take a port in the order GRPCRoute > HTTPRoute > TLSRoute > TCPRoute)"
    )

    # An HTTPRoute takes it from both.
    http = {
        "apiVersion": f"{GATEWAY}/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "db-http", "namespace": "default"},
        "spec": {"parentRefs": tls["spec"]["parentRefs"], "rules": [{"backendRefs": to_db}]},
    }
    await cluster.apply(http)
    document = await next_valid(watch, validator)
    assert ([r["kind"] for r in document["routes"]], document["protocol"]) == (
        ["HTTPRoute"],
        "detect",
    )
    assert "HTTPRoute default/db-http" in await accepted_as(
        cluster, tls, "False", "RouteReasonConflicted"
    )

    # The winner goes: the TLSRoute is served and Accepted again; then the TCPRoute.
    await cluster.delete(http)
    document = await next_valid(watch, validator)
    assert [r["kind"] for r in document["routes"]] == ["TLSRoute"]
    await accepted_as(cluster, tls, "True", "Accepted")
    await cluster.delete(tls)
    document = await next_valid(watch, validator)
    assert [(r["kind"], r["name"]) for r in document["routes"]] == [("TCPRoute", "db-tcp")]
    await accepted_as(cluster, tcp, "True", "Accepted")
    await cluster.delete(tcp)
    document = await next_valid(watch, validator)
    assert [r["kind"] for r in document["routes"]] == ["Default"]
    watch.close()
