"""The Gateways' sockets (edge/gateway_ports.GatewayPorts): an address that moves from one
Gateway to another keeps serving whatever order the two Gateways' changes are applied in."""

from __future__ import annotations

import asyncio
import socket
import ssl
from collections.abc import Sequence

from interlock.dataplane.limits import ProxyLimits
from interlock.dataplane.source import UpstreamError
from interlock.edge.gateway_ports import GatewayPorts
from interlock.model.gateway_routes import GatewayServing, ListenerServing, PortServing
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import SecretValue
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
