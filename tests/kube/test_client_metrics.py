"""Every request to the Kubernetes API is counted once, by verb, resource and code."""

from __future__ import annotations

import asyncio
import socket
from typing import Any

import pytest
from kubernetes_asyncio.client import ApiClient, Configuration

from interlock.kube.client_metrics import (
    ERROR_CODE,
    RequestAttributes,
    client_metrics,
    instrument,
    request_attributes,
)
from interlock.kube.transport import KubeApiError, request_json

GATEWAY = "gateway.networking.k8s.io"


@pytest.mark.parametrize(
    ("method", "path", "query", "expected"),
    [
        ("GET", "/api/v1/services", [("limit", "500")], ("list", "", "services", "")),
        ("GET", "/api/v1/services", [("watch", "true")], ("watch", "", "services", "")),
        ("GET", "/api/v1/namespaces/default/services/web", [], ("get", "", "services", "")),
        (
            "PATCH",
            f"/apis/{GATEWAY}/v1/namespaces/default/httproutes/web/status",
            [],
            ("patch", GATEWAY, "httproutes", "status"),
        ),
        ("POST", "/api/v1/namespaces/default/events", [], ("create", "", "events", "")),
        (
            "PUT",
            "/apis/coordination.k8s.io/v1/namespaces/kube-system/leases/interlock",
            [],
            ("update", "coordination.k8s.io", "leases", ""),
        ),
        ("DELETE", "/api/v1/namespaces/default/pods", [], ("deletecollection", "", "pods", "")),
        ("GET", "/api/v1/namespaces/default", [], ("get", "", "namespaces", "")),
        ("GET", "/api/v1/namespaces", [], ("list", "", "namespaces", "")),
        ("GET", "/apis", [], ("discover", "", "", "")),
        ("GET", f"/apis/{GATEWAY}/v1", [], ("discover", GATEWAY, "", "")),
        ("GET", "/version", [], ("discover", "", "", "")),
    ],
)
def test_request_attributes(
    method: str, path: str, query: list[tuple[str, str]], expected: tuple[str, str, str, str]
) -> None:
    verb, group, resource, subresource = expected
    assert request_attributes(method, path, query) == RequestAttributes(
        verb=verb, group=group, resource=resource, subresource=subresource
    )


async def test_answers_are_counted_with_their_code(api: Any) -> None:
    metrics = client_metrics(api)
    assert metrics is not None, "make_api_client instruments its client"
    assert instrument(api) is metrics, "instrumenting twice keeps one set of counters"
    await request_json(api, method="GET", path="/api/v1/namespaces/default/services", what="list")
    with pytest.raises(KubeApiError) as missing:
        await request_json(
            api, method="GET", path="/api/v1/namespaces/default/services/nope", what="get"
        )
    assert missing.value.code == 404
    stats = metrics.statistics()
    codes = {code for (code, method, _host) in stats.requests if method == "GET"}
    assert {"200", "404"} <= codes
    assert stats.resource_requests[("list", "", "services", "", "200")] >= 1
    assert stats.resource_requests[("get", "", "services", "", "404")] == 1
    histogram = stats.resource_durations[("get", "", "services")]
    assert sum(histogram.buckets) == 1 and histogram.total >= 0


async def test_no_answer_is_counted_as_an_error() -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    configuration = Configuration(host=f"http://127.0.0.1:{port}")
    api = ApiClient(configuration=configuration)
    try:
        metrics = instrument(api)
        with pytest.raises(KubeApiError) as refused:
            await request_json(api, method="GET", path="/api/v1/services", what="list")
        assert refused.value.code == 0
    finally:
        await api.close()
    stats = metrics.statistics()
    assert stats.requests == {(ERROR_CODE, "GET", f"127.0.0.1:{port}"): 1}
    assert stats.resource_requests == {("list", "", "services", "", ERROR_CODE): 1}


async def test_a_request_is_in_flight_until_its_answer() -> None:
    """``in_flight`` counts a request from its sending until its answer's headers (by verb and
    resource), and none once answered."""
    arrived = asyncio.Event()
    answer = asyncio.Event()

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        arrived.set()
        await answer.wait()
        body = b'{"kind":"ServiceList","items":[],"metadata":{}}'
        writer.write(
            b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
            b"Content-Length: %d\r\n\r\n%b" % (len(body), body)
        )
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    api = ApiClient(configuration=Configuration(host=f"http://127.0.0.1:{port}"))
    try:
        metrics = instrument(api)
        request = asyncio.create_task(
            request_json(api, method="GET", path="/api/v1/services", what="list")
        )
        await asyncio.wait_for(arrived.wait(), 10)
        assert metrics.statistics().in_flight == {("list", "", "services"): 1}
        answer.set()
        await asyncio.wait_for(request, 10)
        assert metrics.statistics().in_flight == {("list", "", "services"): 0}
    finally:
        await api.close()
        server.close()
        await server.wait_closed()
