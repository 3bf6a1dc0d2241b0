"""Linkerd's annotations and the rule fields (timeouts, retries, accrual, protocol, opaque ports)
reach open watches, end to end.

Each change is followed by exactly the expected next document, every document validates
against the JSON Schema the API serves, and a change that alters nothing produces no document
(checked by making a later change that does, and reading that one next).
"""

from __future__ import annotations

from typing import Any

from tests.kit.e2e_clients import Cluster, PolicyClient, eventually
from tests.kit.outbound_objects import GATEWAY, served_retry, service
from tests.kit.policy_documents import next_valid, served_validator, service_seen


def annotated(obj: dict[str, Any], annotations: dict[str, str]) -> dict[str, Any]:
    return {**obj, "metadata": {**obj["metadata"], "annotations": annotations}}


ROUTE = {
    "apiVersion": f"{GATEWAY}/v1",
    "kind": "HTTPRoute",
    "metadata": {"name": "web-route", "namespace": "default"},
    "spec": {
        "parentRefs": [{"group": "core", "kind": "Service", "name": "web"}],
        "rules": [{"name": "all", "backendRefs": [{"name": "web", "port": 80}]}],
    },
}


async def test_annotations_and_fields_under_an_open_watch(cluster: Cluster, policy: PolicyClient):
    validator = await served_validator(policy)
    web = service("web")
    await cluster.apply(web)
    watch = await policy.watch("web")
    await service_seen(watch)
    validator.validate(watch.latest)
    assert (watch.latest["protocol"], watch.latest["failureAccrual"]) == ("detect", None)

    # Service annotations: the Default route gets them; failure accrual with Linkerd's defaults.
    await cluster.apply(
        annotated(
            web,
            {
                "retry.linkerd.io/http": "gateway-error",
                "timeout.linkerd.io/request": "10s",
                "balancer.linkerd.io/failure-accrual": "consecutive",
            },
        )
    )
    document = await next_valid(watch, validator)
    (rule,) = document["routes"][0]["rules"]
    assert rule["retry"]["statusRanges"] == [{"min": 502, "max": 504}]
    assert rule["retry"]["source"] == "service"
    assert rule["timeouts"]["request"] == "10s"
    assert document["failureAccrual"] == {
        "kind": "consecutive",
        "maxFailures": 7,
        "minPenalty": "1s",
        "maxPenalty": "1m",
        "jitterRatio": 0.5,
    }

    # A route whose annotations override the Service's, one of them malformed.
    await cluster.apply(
        annotated(ROUTE, {"timeout.linkerd.io/request": "3s", "retry.linkerd.io/limit": "lots"})
    )
    document = await next_valid(watch, validator)
    (rule,) = document["routes"][0]["rules"]
    assert (document["routes"][0]["name"], rule["name"]) == ("web-route", "all")
    assert rule["timeouts"]["request"] == "3s"
    assert rule["retry"]["source"] == "service"  # the route's own retry is malformed
    assert rule["distribution"] == "RandomWeighted"

    async def status_names_the_annotation() -> bool:
        stored = await cluster.get(ROUTE)
        entries = ((stored or {}).get("status") or {}).get("parents", [])
        return any(
            "annotation retry.linkerd.io/limit: 'lots' is not a whole number" in c["message"]
            for e in entries
            for c in e["conditions"]
            if c["type"] == "Accepted" and c["status"] == "True"
        )

    await eventually(status_names_the_annotation, message="Accepted names the bad annotation")

    # An annotation nobody reads changes nothing; the rule's retry field then wins.
    await cluster.apply(
        annotated(web, {**(await cluster.get(web))["metadata"]["annotations"], "x": "y"})
    )
    with_retry = {
        **ROUTE,
        "spec": {
            **ROUTE["spec"],
            "rules": [{**ROUTE["spec"]["rules"][0], "retry": {"codes": [503], "attempts": 2}}],
        },
    }
    stored = await cluster.apply(annotated(with_retry, {"timeout.linkerd.io/request": "3s"}))
    if "retry" not in stored["spec"]["rules"][0]:
        # A real API server with the standard-channel CRDs prunes the experimental field: the
        # policy is unchanged, so the next document is the one the next change causes.
        current = (await cluster.get(web))["metadata"]["annotations"]
        await cluster.apply(annotated(web, {**current, "timeout.linkerd.io/idle": "1m"}))
        document = await next_valid(watch, validator)
        rule = document["routes"][0]["rules"][0]
        assert (rule["timeouts"]["idle"], rule["retry"]["source"]) == ("1m", "service")
        watch.close()
        return
    document = await next_valid(watch, validator)
    assert document["routes"][0]["rules"][0]["retry"] == served_retry(codes=[503], attempts=2)
    watch.close()


async def test_protocol_follows_app_protocol(cluster: Cluster, policy: PolicyClient):
    validator = await served_validator(policy)
    db = service("db", ports=(5432,))
    await cluster.apply(db)
    watch = await policy.watch("db", 5432)
    await service_seen(watch)
    assert watch.latest["protocol"] == "detect"
    opaque = {
        **db,
        "spec": {
            **db["spec"],
            "ports": [{**db["spec"]["ports"][0], "appProtocol": "linkerd.io/opaque"}],
        },
    }
    await cluster.apply(opaque)
    assert (await next_valid(watch, validator))["protocol"] == "opaque"
    h2c = {
        **db,
        "spec": {
            **db["spec"],
            "ports": [{**db["spec"]["ports"][0], "appProtocol": "kubernetes.io/h2c"}],
        },
    }
    await cluster.apply(h2c)
    assert (await next_valid(watch, validator))["protocol"] == "http2"
    watch.close()


async def test_protocol_follows_the_namespace_opaque_ports(cluster: Cluster, policy: PolicyClient):
    """Linkerd's rule: the Namespace's ``config.linkerd.io/opaque-ports`` applies to its
    Services, the Service's own annotation overrides it; each change is exactly one document."""
    validator = await served_validator(policy)
    namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "opaque-ns"}}
    await cluster.apply(namespace)
    db = service("db", namespace="opaque-ns", ports=(5432,))
    await cluster.apply(db)
    watch = await policy.watch("db", 5432, namespace="opaque-ns")
    await service_seen(watch)
    assert watch.latest["protocol"] == "detect"

    opaque_ports = "config.linkerd.io/opaque-ports"
    await cluster.apply(annotated(namespace, {opaque_ports: "3306,5432"}))
    assert (await next_valid(watch, validator))["protocol"] == "opaque"
    # The Service's own annotation wins (it does not list 5432).
    await cluster.apply(annotated(db, {opaque_ports: "3306"}))
    assert (await next_valid(watch, validator))["protocol"] == "detect"
    # While the Service has its own, the Namespace's changes nothing: no document; the next
    # one is the Service's annotation going away, which brings the Namespace's back.
    await cluster.apply(annotated(namespace, {opaque_ports: "5432-5440"}))
    await cluster.apply(annotated(db, {}))
    assert (await next_valid(watch, validator))["protocol"] == "opaque"
    await cluster.apply(annotated(namespace, {}))
    assert (await next_valid(watch, validator))["protocol"] == "detect"
    watch.close()
