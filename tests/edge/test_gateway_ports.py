"""The Gateways' sockets (edge/gateway_ports.GatewayPorts): an address that moves from one
Gateway to another keeps serving whatever order the two Gateways' changes are applied in."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Sequence

from interlock.dataplane.limits import ProxyLimits
from interlock.dataplane.source import UpstreamError
from interlock.edge.gateway_ports import GatewayPortEdge, GatewayPorts
from interlock.edge.routing import ServedRoute, select_route
from interlock.model.gateway import parse_http_route
from interlock.model.gateway_routes import (
    GatewayServing,
    ListenerServing,
    PortServing,
    VirtualHost,
)
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import SecretValue
from interlock.model.outbound import OutboundPolicy
from interlock.model.outbound_policy import build_outbound_policy
from interlock.model.route_resolution import resolve_route
from interlock.model.service import parse_service
from tests.kit.tls_certs import self_signed


class NoUpstreams:
    """No Service has a policy or an endpoint (these tests never reach a backend)."""

    def policy(self, target: object) -> None:
        return None

    def addresses(self, target: object) -> Sequence[object] | UpstreamError:
        return UpstreamError(503, "no endpoints")


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def serving(name: str, port: int, *, tls: bool = False) -> GatewayServing:
    certificates: tuple[tuple[SecretValue, SecretValue], ...] = ()
    if tls:
        cert, key = self_signed("a.example")
        certificates = ((SecretValue(cert.encode()), SecretValue(key.encode())),)
    listener = ListenerServing(
        name="web", hostname=None, certificates=certificates, virtual_hosts=()
    )
    protocol = "HTTPS" if tls else "HTTP"
    return GatewayServing(
        gateway=ObjectKey("infra", name),
        address="127.0.0.1",
        ports=(PortServing(port=port, protocol=protocol, listeners=(listener,)),),
    )


async def status_line(port: int, *, tls: bool = False) -> bytes:
    context = None
    if tls:
        context = ssl.create_default_context()
        context.check_hostname = False
        context.verify_mode = ssl.CERT_NONE
    reader, writer = await asyncio.open_connection(
        "127.0.0.1", port, ssl=context, server_hostname="a.example" if tls else None
    )
    writer.write(b"GET / HTTP/1.1\r\nHost: a.example\r\nConnection: close\r\n\r\n")
    line = await reader.readline()
    writer.close()
    return line


async def test_an_address_moved_to_another_gateway_survives_the_first_ones_removal() -> None:
    port = free_port()
    ports = GatewayPorts(upstreams=NoUpstreams(), limits=ProxyLimits())  # type: ignore[arg-type]
    try:
        assert not (await ports.apply("infra/a", serving("a", port))).failures
        # "b" is given the address "a" had before "a"'s own change (its removal) is applied.
        assert not (await ports.apply("infra/b", serving("b", port))).failures
        await ports.remove("infra/a")
        assert ports.sockets == (("127.0.0.1", port),)
        assert (await status_line(port)).startswith(b"HTTP/1.1 404")
        await ports.remove("infra/b")
        assert not ports.sockets
    finally:
        await ports.close()


async def test_a_port_that_turns_https_speaks_tls_from_then_on() -> None:
    port = free_port()
    ports = GatewayPorts(upstreams=NoUpstreams(), limits=ProxyLimits())  # type: ignore[arg-type]
    try:
        await ports.apply("infra/a", serving("a", port))
        assert (await status_line(port)).startswith(b"HTTP/1.1 404")
        # The listener on that port changes to HTTPS: the socket must be reopened with TLS.
        assert not (await ports.apply("infra/a", serving("a", port, tls=True))).failures
        assert (await status_line(port, tls=True)).startswith(b"HTTP/1.1 404")
        await ports.apply("infra/a", serving("a", port))
        assert (await status_line(port)).startswith(b"HTTP/1.1 404")
    finally:
        await ports.close()


WEB = parse_service(
    {"metadata": {"name": "web", "namespace": "shop"}, "spec": {"ports": [{"port": 80}]}}
)


def routed(*paths: str) -> OutboundPolicy:
    """A virtual host's policy: one HTTPRoute per path prefix, named after it."""
    routes = [
        resolve_route(
            parse_http_route(
                {
                    "metadata": {"name": f"r{path.replace('/', '-')}", "namespace": "shop"},
                    "spec": {
                        "parentRefs": [{"group": "", "kind": "Service", "name": "web"}],
                        "rules": [{"matches": [{"path": {"type": "PathPrefix", "value": path}}]}],
                    },
                }
            ),
            {WEB.key: WEB},
            [],
        )
        for path in paths
    ]
    return build_outbound_policy(WEB, "shop", "web", 80, "shop", routes)


def port_serving(**hosts: OutboundPolicy) -> tuple[GatewayServing, PortServing]:
    """Port 8080 of Gateway infra/a, one listener, a virtual host per host name."""
    virtual = tuple(VirtualHost(hostname=host, policy=policy) for host, policy in hosts.items())
    listener = ListenerServing(name="web", hostname=None, certificates=(), virtual_hosts=virtual)
    port = PortServing(port=8080, protocol="HTTP", listeners=(listener,))
    return GatewayServing(gateway=ObjectKey("infra", "a"), address="127.0.0.1", ports=(port,)), port


def served(edge: GatewayPortEdge, host: str, path: str) -> str | None:
    """The route id a request for ``host`` and ``path`` is served by, chosen as the edge's
    steps choose it (``steps.decide_now``): the host's table, its route, the rule."""
    table = edge.routes_of_host(host)
    if table is None:
        return None
    selected = select_route(table, path)
    assert selected is not None
    route = edge.route_for_request(selected, method="GET", path=path, headers={}, query={})
    assert route is None or isinstance(route, ServedRoute)
    return None if route is None else route.route_id


async def test_a_request_chooses_among_the_routes_the_port_serves_now() -> None:
    """The table a Gateway request chooses in is the port's latest: after an update the
    request goes to the new routes, never to a table served before."""
    edge = GatewayPortEdge()
    await edge.update(*port_serving(**{"a.example": routed("/one")}))
    assert served(edge, "a.example", "/one/x") == "web/a.example shop/r-one rule 0"
    before = edge.routes_of_host("a.example")
    await edge.update(*port_serving(**{"a.example": routed("/two"), "b.example": routed("/one")}))
    assert edge.routes_of_host("a.example") is not before
    assert served(edge, "a.example", "/one/x") is None  # no rule: 404
    assert served(edge, "a.example", "/two") == "web/a.example shop/r-two rule 0"
    assert served(edge, "b.example", "/one") == "web/b.example shop/r-one rule 0"
    await edge.update(*port_serving(**{"b.example": routed("/one")}))
    assert served(edge, "a.example", "/two") is None  # the listener's, no route: 404
    # The same table for every request between two updates (built once, not per request).
    assert edge.routes_of_host("b.example") is edge.routes_of_host("b.example")
