"""Linkerd's OutboundPolicies over gRPC: how targets are found, Get and Watch, readiness,
shutdown and the call counters, through a real grpcio client and the generated stubs, against
a policy source the test controls (the encoding itself: ``test_grpc_encode.py``)."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator

import grpc
import pytest

from interlock.api.grpc.counters import GrpcApiCounters
from interlock.api.grpc.proto import net_pb2, outbound_pb2, outbound_pb2_grpc
from interlock.api.grpc.server import GrpcPolicyServer
from interlock.api.metrics import MetricsSources, metrics_registry
from interlock.config import Address
from interlock.mailbox.testing import eventually
from interlock.model.cluster_ips import ServiceAddresses
from interlock.model.policy_watch import PolicyUpdate, WatchTarget
from interlock.model.service import ServicePortKey, parse_service
from tests.kit.grpc_policies import policy_of
from tests.kit.outbound_objects import service
from tests.kit.policy_sources import ControlledSource

WORKLOAD = json.dumps({"ns": "shop", "pod": "client-0"})
WEB = WatchTarget(ServicePortKey("default", "web", 80), client_namespace="shop")


class ModelSource(ControlledSource):
    """Policies given as the model's :class:`OutboundPolicy` (``policy_of``'s arguments), which
    the gRPC API encodes itself."""

    def set(self, target: WatchTarget, **kwargs: object) -> None:
        update = PolicyUpdate(policy=policy_of(**kwargs), body=b"")  # type: ignore[arg-type]
        self.put(target, update)


@pytest.fixture
def source() -> ModelSource:
    return ModelSource()


@pytest.fixture
def addresses() -> ServiceAddresses:
    found = ServiceAddresses()
    found.upsert(parse_service(service("web", cluster_ip="10.96.0.10")))
    return found


@pytest.fixture
async def server(
    source: ModelSource, addresses: ServiceAddresses
) -> AsyncIterator[GrpcPolicyServer]:
    running = GrpcPolicyServer(
        source=source, addresses=addresses, counters=GrpcApiCounters(), first_policy_timeout=0.5
    )
    await running.start(Address(host="127.0.0.1", port=0))
    yield running
    await running.stop(grace=1.0)


@pytest.fixture
async def stub(server: GrpcPolicyServer) -> AsyncIterator[outbound_pb2_grpc.OutboundPoliciesStub]:
    assert server.address is not None
    async with grpc.aio.insecure_channel(f"127.0.0.1:{server.address.port}") as channel:
        yield outbound_pb2_grpc.OutboundPoliciesStub(channel)


def by_authority(authority: str, workload: str = WORKLOAD) -> outbound_pb2.TrafficSpec:
    return outbound_pb2.TrafficSpec(source_workload=workload, authority=authority)


def by_address(ip: int, port: int, workload: str = WORKLOAD) -> outbound_pb2.TrafficSpec:
    address = net_pb2.TcpAddress(ip=net_pb2.IPAddress(ipv4=ip), port=port)
    return outbound_pb2.TrafficSpec(source_workload=workload, addr=address)


def ipv4(text: str) -> int:
    a, b, c, d = (int(part) for part in text.split("."))
    return (a << 24) | (b << 16) | (c << 8) | d


def backend_paths(policy: outbound_pb2.OutboundPolicy) -> list[str]:
    routes = policy.protocol.detect.http1.routes
    return [
        wb.backend.backend.balancer.discovery.dst.path
        for route in routes
        for rule in route.rules
        for wb in rule.backends.random_available.backends
    ]


async def test_get_by_authority_answers_the_policy_of_the_workloads_namespace(source, stub):
    source.set(WEB, parent=service("web"), client_namespace="shop")
    policy = await stub.Get(by_authority("web.default.svc.cluster.local:80"))
    assert source.asked == [WEB]
    resource = policy.metadata.resource
    assert (resource.group, resource.kind, resource.namespace, resource.name, resource.port) == (
        "core",
        "Service",
        "default",
        "web",
        80,
    )
    assert policy.protocol.WhichOneof("kind") == "detect"
    [route] = policy.protocol.detect.http1.routes
    assert route.metadata.default == "http"


@pytest.mark.parametrize(
    ("workload", "namespace"),
    [
        (json.dumps({"ns": "shop", "pod": "p"}), "shop"),
        (json.dumps({"ns": "lab", "external_workload": "vm-1"}), "lab"),
        ("legacy:pod-0", "legacy"),
    ],
)
async def test_source_workload_names_the_client_namespace(source, stub, workload, namespace):
    target = WatchTarget(ServicePortKey("default", "web", 8080), client_namespace=namespace)
    source.set(target, parent=service("web", ports=(8080,)), port=8080)
    await stub.Get(by_authority("web.default.svc.cluster.local:8080", workload))
    assert source.asked == [target]


@pytest.mark.parametrize(
    ("spec", "code"),
    [
        (by_authority("web.default.svc.cluster.local:80", ""), grpc.StatusCode.INVALID_ARGUMENT),
        (by_authority("web.default.svc.cluster.local", '{"ns": "x"}'), "INVALID_ARGUMENT"),
        (by_authority("example.com:443"), grpc.StatusCode.NOT_FOUND),
        (by_authority("web.default:80"), grpc.StatusCode.NOT_FOUND),
        (outbound_pb2.TrafficSpec(source_workload=WORKLOAD), grpc.StatusCode.INVALID_ARGUMENT),
        (by_address(ipv4("10.96.7.7"), 80), grpc.StatusCode.NOT_FOUND),
    ],
    ids=["no-workload", "workload-without-pod", "egress-name", "not-svc", "no-target", "no-svc-ip"],
)
async def test_what_has_no_policy_is_refused_as_linkerd_refuses_it(server, stub, spec, code):
    with pytest.raises(grpc.aio.AioRpcError) as refused:
        await stub.Get(spec)
    expected = code if isinstance(code, grpc.StatusCode) else grpc.StatusCode[code]
    assert refused.value.code() == expected
    assert server.counters.handled[("Get", expected.name)] == 1


async def test_a_cluster_ip_finds_its_service(source, stub):
    source.set(WEB, parent=service("web"), client_namespace="shop")
    policy = await stub.Get(by_address(ipv4("10.96.0.10"), 80))
    assert policy.metadata.resource.name == "web"
    assert source.asked == [WEB]


async def test_a_port_the_service_lacks_is_forbidden(stub):
    policy = await stub.Get(by_address(ipv4("10.96.0.10"), 9999))
    assert policy.metadata.resource.port == 9999
    [route] = policy.protocol.opaque.routes
    assert route.metadata.default == "undefined-port"
    assert route.rules[0].filters[0].WhichOneof("kind") == "forbidden"


async def test_an_address_outside_the_cluster_is_forwarded_as_egress(stub):
    policy = await stub.Get(by_address(ipv4("192.0.2.7"), 443))
    assert policy.metadata.default == "egress-fallback"
    [route] = policy.protocol.detect.opaque.routes
    forward = route.rules[0].backends.first_available.backends[0].backend.forward
    assert (forward.addr.ip.ipv4, forward.addr.port) == (ipv4("192.0.2.7"), 443)


async def test_watch_sends_the_policy_then_each_change_on_one_stream(server, source, stub):
    api = service("api")
    route = {
        "apiVersion": "gateway.networking.k8s.io/v1",
        "kind": "HTTPRoute",
        "metadata": {"name": "r", "namespace": "default"},
        "spec": {
            "parentRefs": [{"group": "core", "kind": "Service", "name": "web", "port": 80}],
            "rules": [{"backendRefs": [{"name": "api", "port": 80}]}],
        },
    }
    source.set(WEB, parent=service("web"), routes=(route,), client_namespace="shop")
    stream = stub.Watch(by_authority("web.default.svc.cluster.local:80"))
    first = await stream.read()
    [missing] = first.protocol.detect.http1.routes[0].rules[0].backends.random_available.backends
    assert missing.backend.backend.metadata.default == "invalid"
    assert missing.backend.filters[0].failure_injector.status == 500
    source.set(
        WEB, parent=service("web"), routes=(route,), services=(api,), client_namespace="shop"
    )
    second = await stream.read()
    assert backend_paths(second) == ["api.default.svc.cluster.local:80"]
    assert server.counters.watches_open == 1
    stream.cancel()
    await eventually(lambda: source.readers(WEB) == 0, within=10)
    assert server.counters.sent["Watch"] == 2


async def test_calls_wait_for_the_initial_sync_then_answer_unavailable(source, addresses):
    never = asyncio.Event()
    server = GrpcPolicyServer(
        source=source, addresses=addresses, wait_ready=never.wait, first_policy_timeout=0.2
    )
    address = await server.start(Address(host="127.0.0.1", port=0))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{address.port}") as channel:
            stub = outbound_pb2_grpc.OutboundPoliciesStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Get(by_authority("web.default.svc.cluster.local:80"))
            assert refused.value.code() == grpc.StatusCode.UNAVAILABLE
            assert "initial sync" in (refused.value.details() or "")
    finally:
        await server.stop(grace=1.0)
    assert source.asked == []


async def test_stopping_ends_every_watch_with_ok(server, source, stub):
    source.set(WEB, parent=service("web"), client_namespace="shop")
    stream = stub.Watch(by_authority("web.default.svc.cluster.local:80"))
    await stream.read()
    await server.stop(grace=1.0)
    assert await stream.read() == grpc.aio.EOF
    assert await stream.code() == grpc.StatusCode.OK
    assert server.counters.handled[("Watch", "OK")] == 1
    assert source.readers(WEB) == 0


async def test_the_cluster_networks_decide_what_is_egress(source, addresses):
    server = GrpcPolicyServer(
        source=source, addresses=addresses, cluster_networks=("192.0.2.0/24",)
    )
    address = await server.start(Address(host="127.0.0.1", port=0))
    try:
        async with grpc.aio.insecure_channel(f"127.0.0.1:{address.port}") as channel:
            stub = outbound_pb2_grpc.OutboundPoliciesStub(channel)
            with pytest.raises(grpc.aio.AioRpcError) as refused:
                await stub.Get(by_address(ipv4("192.0.2.7"), 443))
            assert refused.value.code() == grpc.StatusCode.NOT_FOUND
            egress = await stub.Get(by_address(ipv4("10.1.2.3"), 443))
            assert egress.metadata.default == "egress-fallback"
    finally:
        await server.stop(grace=1.0)


async def test_metrics_count_calls_by_method_and_code(server, source, stub):
    source.set(WEB, parent=service("web"), client_namespace="shop")
    await stub.Get(by_authority("web.default.svc.cluster.local:80"))
    with pytest.raises(grpc.aio.AioRpcError):
        await stub.Get(by_authority("example.com:443"))
    registry = metrics_registry(MetricsSources(grpc_api=server.counters.statistics), process=False)
    text = registry.exposition().decode()
    service_ = 'grpc_service="io.linkerd.proxy.outbound.OutboundPolicies"'
    for code, count in (("OK", 1), ("NOT_FOUND", 1)):
        line = (
            f'interlock_grpc_server_handled_total{{grpc_code="{code}",grpc_method="Get",'
            f'{service_},grpc_type="unary"}} {count}.0'
        )
        assert line in text, text
    assert f'interlock_grpc_server_started_total{{grpc_method="Get",{service_}' in text
    assert "interlock_grpc_watches_open 0.0" in text
