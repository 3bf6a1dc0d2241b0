"""``/metrics`` of a running controller after real traffic: the names and labels operators
look for — client-go's ``rest_client_*`` and the Kubernetes API requests by verb and resource
(on the real lane these are kube-apiserver's answers), reconciles by Kubernetes kind, and the
policy API's answers and open watch streams."""

from __future__ import annotations

import aiohttp
from prometheus_client.parser import text_string_to_metric_families

from interlock.controller.app import Controller
from tests.kit.e2e_clients import Cluster, PolicyClient, eventually
from tests.kit.outbound_objects import GATEWAY, backend, http_route, parent, service

Samples = dict[str, list[tuple[dict[str, str], float]]]


async def _scrape(http: aiohttp.ClientSession, admin: str) -> Samples:
    async with http.get(f"{admin}/metrics") as response:
        assert response.status == 200
        text = await response.text()
    samples: Samples = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, []).append((sample.labels, sample.value))
    return samples


def _value(samples: Samples, name: str, **labels: str) -> float:
    """The sum of ``name``'s samples whose labels include ``labels`` (0 when none match)."""
    return sum(
        value
        for found, value in samples.get(name, [])
        if all(found.get(key) == wanted for key, wanted in labels.items())
    )


async def test_metrics_after_traffic_name_requests_reconciles_and_policy_answers(
    cluster: Cluster, controller: Controller, policy: PolicyClient, http: aiohttp.ClientSession
) -> None:
    assert controller.admin_site is not None and controller.policy_site is not None
    admin = controller.admin_site.url
    await cluster.apply(service("web"))
    await cluster.apply(http_route("r", parents=[parent("web")], backends=[backend("web")]))
    watch = await policy.watch("web")
    await watch.until(lambda p: p["routes"][0]["name"] == "r")
    await policy.get("web")
    async with http.get(f"{controller.policy_site.url}/v1/outbound/default/Not_A_Name/80") as bad:
        assert bad.status == 400

    async def status_written() -> bool:
        samples = await _scrape(http, admin)
        return (
            _value(
                samples,
                "interlock_kube_requests_total",
                verb="patch",
                group=GATEWAY,
                resource="httproutes",
                subresource="status",
            )
            >= 1
        )

    await eventually(status_written, message="the route's status patch counted")
    samples = await _scrape(http, admin)

    # client-go's names and labels.
    assert _value(samples, "rest_client_requests_total", code="200", method="GET") >= 1
    hosts = {labels["host"] for labels, _ in samples["rest_client_requests_total"]}
    assert hosts and all(hosts), hosts
    assert _value(samples, "rest_client_request_duration_seconds_count", verb="GET") >= 1
    assert _value(samples, "rest_client_request_duration_seconds_bucket", le="+Inf") >= 1

    # By Kubernetes verb, group and resource: the informers' list and watch, the Lease.
    kube = "interlock_kube_requests_total"
    assert _value(samples, kube, verb="list", group="", resource="services", code="200") >= 1
    assert _value(samples, kube, verb="watch", group="", resource="services", code="200") >= 1
    assert _value(samples, kube, verb="list", group=GATEWAY, resource="httproutes") >= 1
    assert _value(samples, kube, group="coordination.k8s.io", resource="leases") >= 1
    assert _value(samples, kube, verb="discover") >= 1
    duration = "interlock_kube_request_duration_seconds_count"
    assert _value(samples, duration, verb="list", resource="services") >= 1
    # Requests waiting for their answer: the Services watch started its stream, so none.
    in_flight = {
        (labels["verb"], labels["resource"]): value
        for labels, value in samples["interlock_kube_requests_in_flight"]
    }
    assert in_flight[("watch", "services")] == 0, in_flight

    # Reconciles by Kubernetes kind, not by actor address prefix.
    reconciles = "interlock_reconciles_total"
    assert _value(samples, reconciles, kind="Service", result="success") >= 1
    assert _value(samples, reconciles, kind="HTTPRoute", result="success") >= 1
    assert {labels["result"] for labels, _ in samples[reconciles]} == {"success", "error"}
    assert _value(samples, "interlock_reconcile_seconds_count", kind="HTTPRoute") >= 1

    # The policy API: answers by request and code, open watch streams.
    answers = "interlock_policy_requests_total"
    assert _value(samples, answers, request="get", code="200") >= 1
    assert _value(samples, answers, request="get", code="400") == 1
    assert _value(samples, answers, request="watch", code="200") == 1
    assert _value(samples, "interlock_policy_watches_open") == 1
    assert _value(samples, "interlock_policy_watches_opened_total") == 1

    watch.close()

    async def watch_closed() -> bool:
        return _value(await _scrape(http, admin), "interlock_policy_watches_open") == 0

    await eventually(watch_closed, message="the closed watch stream no longer counted open")
