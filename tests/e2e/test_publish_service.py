"""``--publish-service``: every Ingress's ``status.loadBalancer`` is the address of the Service
in front of the edge, followed as it changes; without it, a wildcard ``--edge-addr`` writes
nothing (the Pod's host name is no address a client can use).

Objects are written through the API server as a user (and a cloud's load-balancer controller,
for the Service's status) would write them; the controller reads them through its informers.
"""

from __future__ import annotations

from typing import Any

from interlock.actors.topics import (
    INGRESS_STATUS_TOPIC,
)
from interlock.config import Address, EdgeConfig
from interlock.controller.app import Controller
from interlock.kube.transport import KubeApiError
from interlock.model.meta import ObjectKey
from tests.kit.e2e_clients import LOCAL, Cluster, StartController, create_if_absent, eventually
from tests.kit.edge_objects import INGRESS_CLASS_OBJ, ingress

# Inside the real test cluster's service range (10.96.0.0/16) so both servers accept it; the
# real server refuses one already allocated, so the next is tried.
CLUSTER_IPS = ("10.96.77.7", "10.96.77.8", "10.96.77.9")


def edge_service(cluster_ip: str = CLUSTER_IPS[0]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "interlock-edge", "namespace": "default"},
        "spec": {
            "type": "LoadBalancer",
            "clusterIP": cluster_ip,
            "selector": {"app": "interlock"},
            "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
        },
    }


def served_hosts(controller: Controller) -> set[str]:
    edge = controller.inspect().edge
    assert edge is not None and edge.served is not None
    return set(edge.served_hosts)


async def load_balancer(cluster: Cluster, name: str) -> Any:
    current = await cluster.get(ingress(name, ""))
    assert current is not None, f"Ingress default/{name} is gone"
    return current.get("status", {}).get("loadBalancer")


async def set_service_load_balancer(cluster: Cluster, ingress: list[dict[str, Any]]) -> None:
    """What a cloud's load-balancer controller does once it provisioned one."""
    patch = {"status": {"loadBalancer": {"ingress": ingress}}}
    await cluster.patch(edge_service(), patch, status=True)


async def test_ingress_status_follows_the_published_service(
    cluster: Cluster, start_controller: StartController
) -> None:
    await create_if_absent(cluster, INGRESS_CLASS_OBJ)
    controller = await start_controller(
        identity="replica-1",
        edge=EdgeConfig(
            addr=Address("0.0.0.0", 0),
            publish_service=ObjectKey(namespace="default", name="interlock-edge"),
        ),
    )
    await create_if_absent(cluster, ingress("shop", "shop.example"))
    await create_if_absent(cluster, ingress("blog", "blog.example"))

    def served() -> bool:
        return {"shop.example", "blog.example"} <= served_hosts(controller)

    await eventually(served, within=60.0, message="the edge serves both hosts")
    # Before the Service exists no address is known, and nothing is written.
    assert controller.system.retained(INGRESS_STATUS_TOPIC) == {}

    # No load balancer provisioned yet: the cluster IP.
    for address in CLUSTER_IPS:
        try:
            await cluster.create(edge_service(address))
            break
        except KubeApiError as error:
            if error.code != 422:
                raise
    cluster_ip = {"ingress": [{"ip": address}]}

    async def both(expected: Any) -> bool:
        return all([await load_balancer(cluster, name) == expected for name in ("shop", "blog")])

    await eventually(lambda: both(cluster_ip), within=60.0, message="cluster IP on both")

    # A load balancer provisioned later: its address (with its ports) replaces the cluster IP.
    await set_service_load_balancer(
        cluster, [{"ip": "192.0.2.10", "ports": [{"port": 80, "protocol": "TCP"}]}]
    )
    provisioned = {"ingress": [{"ip": "192.0.2.10", "ports": [{"port": 80, "protocol": "TCP"}]}]}
    await eventually(lambda: both(provisioned), within=60.0, message="load-balancer IP on both")

    # And a host name from a cloud that hands out names.
    await set_service_load_balancer(cluster, [{"hostname": "lb.example.net"}])
    named = {"ingress": [{"hostname": "lb.example.net"}]}
    await eventually(lambda: both(named), within=60.0, message="load-balancer host name")

    # An Ingress created afterwards gets the current address at once.
    await create_if_absent(cluster, ingress("late", "late.example"))

    async def late() -> bool:
        return await load_balancer(cluster, "late") == named

    await eventually(late, within=60.0, message="the late Ingress's address")


async def test_a_wildcard_edge_address_without_publish_service_writes_no_address(
    cluster: Cluster, start_controller: StartController
) -> None:
    await create_if_absent(cluster, INGRESS_CLASS_OBJ)
    controller = await start_controller(
        identity="replica-1", edge=EdgeConfig(addr=Address("0.0.0.0", 0))
    )
    await create_if_absent(cluster, ingress("wild", "wild.example"))

    def served() -> bool:
        return "wild.example" in served_hosts(controller)

    await eventually(served, within=60.0, message="the edge serves wild.example")
    # The IngressActor decides the status in the same step that publishes the host, so by now
    # a desired status would be retained; the API server has none either.
    assert controller.system.retained(INGRESS_STATUS_TOPIC) == {}
    assert await load_balancer(cluster, "wild") in (None, {})


async def test_a_specific_edge_address_is_still_written(
    cluster: Cluster, start_controller: StartController
) -> None:
    await create_if_absent(cluster, INGRESS_CLASS_OBJ)
    controller = await start_controller(identity="replica-1", edge=EdgeConfig(addr=LOCAL))
    edge = controller.inspect().edge
    assert edge is not None and edge.address is not None
    await create_if_absent(cluster, ingress("local", "local.example"))
    port = edge.address.port
    expected = {"ingress": [{"ip": "127.0.0.1", "ports": [{"port": port, "protocol": "TCP"}]}]}

    async def written() -> bool:
        return await load_balancer(cluster, "local") == expected

    await eventually(written, within=60.0, message="the edge's address")
