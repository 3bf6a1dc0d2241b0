"""Which Service a cluster IP belongs to: how Linkerd's proxies name most of their targets.

A meshed client connecting to a Service connects to its cluster IP, and its proxy asks the
policy controller for that address (``TrafficSpec.addr`` of Linkerd's proxy API), not for a
name. The Service directory keeps this index beside its Services, so the gRPC API
(``interlock/api/grpc/``) turns an address into the Service port whose policy it serves. An
address is normalized (``ipaddress``) so that every spelling of an IPv6 address finds the same
Service; a headless Service (``clusterIP: None``) has no address here.
"""

from __future__ import annotations

import ipaddress

from interlock.model.meta import ObjectKey
from interlock.model.service import Service


def normalized_ip(text: str) -> str | None:
    """``text`` as ``ipaddress`` writes it, or None when it is no IP address."""
    try:
        return str(ipaddress.ip_address(text))
    except ValueError:
        return None


def cluster_ips(service: Service) -> tuple[str, ...]:
    """The Service's cluster IPs (both families when dual-stack), normalized."""
    spec = service.spec
    listed = spec.cluster_ips or ((spec.cluster_ip,) if spec.cluster_ip else ())
    found = (normalized_ip(ip) for ip in listed if ip != "None")
    return tuple(ip for ip in found if ip is not None)


class ServiceAddresses:
    """Cluster IP → the Service that has it; updated by the Service directory."""

    __slots__ = ("_by_ip", "_ips")

    def __init__(self) -> None:
        self._by_ip: dict[str, Service] = {}
        self._ips: dict[ObjectKey, tuple[str, ...]] = {}

    def upsert(self, service: Service) -> None:
        key = service.key
        self.delete(key)
        ips = cluster_ips(service)
        if ips:
            self._ips[key] = ips
            for ip in ips:
                self._by_ip[ip] = service

    def delete(self, key: ObjectKey) -> None:
        for ip in self._ips.pop(key, ()):
            found = self._by_ip.get(ip)
            if found is not None and found.key == key:
                del self._by_ip[ip]

    def lookup(self, ip: str) -> Service | None:
        """The Service whose cluster IP is ``ip`` (any spelling), or None."""
        normal = normalized_ip(ip)
        return None if normal is None else self._by_ip.get(normal)

    def __len__(self) -> int:
        return len(self._by_ip)
