"""What a Linkerd proxy's ``TrafficSpec`` asks for, read as Linkerd's controller reads it.

A proxy names its target by address (a Service's cluster IP and port) or by authority
(``name.namespace.svc.cluster.local:port``), and itself by ``source_workload``: JSON
(``{"ns": "shop", "pod": "web-0"}``, or ``external_workload`` instead of ``pod``) from current
proxies, ``namespace:pod`` from older ones. The client namespace of the policy is the workload's
namespace. The rules and the gRPC status of each refusal are Linkerd's, so a proxy that works
with Linkerd's controller gets the same answers here. Pure: no gRPC import, the status is named.
"""

from __future__ import annotations

import ipaddress
import json
import re
from dataclasses import dataclass
from typing import Literal

StatusName = Literal["INVALID_ARGUMENT", "NOT_FOUND"]

DEFAULT_CLUSTER_NETWORKS = (
    "10.0.0.0/8",
    "100.64.0.0/10",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "fd00::/8",
)
"""Linkerd's default ``clusterNetworks``: an address inside them that is no Service's is not
found; one outside them is egress, forwarded as it is."""

_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")


@dataclass(frozen=True, slots=True)
class TargetError(Exception):
    """A TrafficSpec that has no policy; ``status`` is the gRPC status Linkerd answers with."""

    status: StatusName
    message: str

    def __str__(self) -> str:
        return self.message


def source_namespace(workload: str) -> str:
    """The namespace of the proxy's workload (its policy's client namespace)."""
    if workload.startswith("{"):
        try:
            parsed = json.loads(workload)
        except ValueError:
            parsed = None
        if (
            isinstance(parsed, dict)
            and isinstance(parsed.get("ns"), str)
            and parsed["ns"]
            and sum(isinstance(parsed.get(k), str) for k in ("pod", "external_workload")) == 1
            and parsed.keys() <= {"ns", "pod", "external_workload"}
        ):
            namespace: str = parsed["ns"]
            return namespace
        raise TargetError("INVALID_ARGUMENT", f"Invalid workload: {workload}")
    namespace, colon, pod = workload.partition(":")
    if not colon or not namespace or not pod:
        raise TargetError("INVALID_ARGUMENT", f"Invalid workload: {workload}")
    return namespace


def parse_authority(authority: str, *, cluster_domain: str) -> tuple[str, str, int]:
    """``(namespace, name, port)`` of a Service authority; port 80 when none is given."""
    host, port = authority, 80
    head, colon, tail = authority.rpartition(":")
    if colon and "]" not in tail:
        if not tail.isdigit() or not 0 < int(tail) < 65536:
            raise TargetError("INVALID_ARGUMENT", "invalid authority")
        host, port = head, int(tail)
    host = host.rstrip(".").lower()
    if not host:
        raise TargetError("INVALID_ARGUMENT", "authority must have a host")
    parts = host.split(".")
    suffix = cluster_domain.split(".")
    if parts[3:] not in ([], suffix) or len(parts) < 3 or parts[2] != "svc":
        raise TargetError(
            "NOT_FOUND", f"authority must be of the form <name>.<namespace>.svc.{cluster_domain}"
        )
    name, namespace = parts[0], parts[1]
    if not (_LABEL.fullmatch(name) and _LABEL.fullmatch(namespace)):
        raise TargetError("INVALID_ARGUMENT", "invalid authority")
    return namespace, name, port


def ip_from_fields(ipv4: int | None, ipv6: tuple[int, int] | None) -> str:
    """An ``io.linkerd.proxy.net.IPAddress`` (a fixed32, or two fixed64 halves) as text."""
    if ipv4 is not None:
        return str(ipaddress.IPv4Address(ipv4))
    if ipv6 is not None:
        return str(ipaddress.IPv6Address((ipv6[0] << 64) | ipv6[1]))
    raise TargetError("INVALID_ARGUMENT", "traffic target must have an IP")


def in_networks(ip: str, networks: tuple[str, ...]) -> bool:
    address = ipaddress.ip_address(ip)
    return any(address in ipaddress.ip_network(network, strict=False) for network in networks)
