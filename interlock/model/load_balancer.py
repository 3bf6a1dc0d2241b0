"""What an Ingress's ``status.loadBalancer`` says: where clients reach the edge.

Users (and tools such as external-dns or ``kubectl get ingress``) read the Ingress's address from
``status.loadBalancer.ingress``, so a wrong value sends traffic, or DNS records, to nowhere. There
are two sources, chosen by ``interlock run``'s flags:

* ``--publish-service NAMESPACE/NAME`` (ingress-nginx's flag): the Service in front of the edge
  Pods is the address users reach. :func:`published_service_status` copies its load-balancer
  ingress (and its external IPs), or else, while no load balancer was provisioned, its cluster
  IPs; an ExternalName Service publishes its name. This is the in-cluster answer: the Pods'
  own addresses are neither stable nor reachable from outside.
* Without it, the edge's own listening address (:func:`listen_address_status`): right for a
  process on a host, and for ``interlock demo``. A wildcard listen address (``0.0.0.0``, ``::``)
  names no address at all; the function then says *nothing* (``None``: no status is written),
  because the only host name at hand would be the Pod's, which no client outside the Pod can
  resolve, and every Ingress would advertise the replica that happened to lead.

Both are pure: the caller passes the Service it watches, or the address it bound.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Sequence
from typing import Any
from urllib.parse import urlsplit

from interlock.model.meta import ObjectKey
from interlock.model.service import Service

LoadBalancerStatus = dict[str, Any]
"""An Ingress ``status.loadBalancer`` value: ``{"ingress": [{"ip"|"hostname", "ports"?}]}``."""


def parse_publish_service(value: str, *, flag: str = "--publish-service") -> ObjectKey:
    """``NAMESPACE/NAME`` → the Service's key; errors name the flag and the value."""
    namespace, sep, name = value.partition("/")
    if not sep or not namespace or not name or "/" in name:
        raise ValueError(f"{flag}: {value!r} is not NAMESPACE/NAME (for example ingress/edge)")
    return ObjectKey(namespace=namespace, name=name)


def published_service_status(service: Service) -> LoadBalancerStatus:
    """``status.loadBalancer`` for every Ingress when the edge is published through ``service``.

    The Service's ``status.loadBalancer.ingress`` entries (IP or host name, with their ports),
    followed by its ``spec.externalIPs`` not already listed; when it has neither, an
    ExternalName Service's ``externalName``, else its cluster IPs (``spec.clusterIPs``, or
    ``spec.clusterIP``). A headless Service with none of these gives ``{"ingress": []}``, which
    clears an address written before rather than leaving a stale one.
    """
    entries: list[dict[str, Any]] = []
    for lb in service.status.load_balancer.ingress:
        entry: dict[str, Any] = {}
        if lb.ip:
            entry["ip"] = lb.ip
        if lb.hostname:
            entry["hostname"] = lb.hostname
        if not entry:
            continue
        if lb.ports:
            entry["ports"] = [port.to_status() for port in lb.ports]
        entries.append(entry)
    listed = {entry.get("ip") for entry in entries}
    entries.extend({"ip": ip} for ip in service.spec.external_ips if ip not in listed)
    if not entries:
        spec = service.spec
        if service.is_external_name and spec.external_name:
            entries.append({"hostname": spec.external_name})
        else:
            cluster_ips = spec.cluster_ips or ((spec.cluster_ip,) if spec.cluster_ip else ())
            entries.extend({"ip": ip} for ip in cluster_ips if ip != "None")
    return {"ingress": entries}


def listen_address_status(host: str, *, ports: Sequence[int]) -> LoadBalancerStatus | None:
    """``status.loadBalancer`` naming where the edge listens: ``host`` (an IP, or else a host
    name) with ``ports`` (TCP; none given, none written).

    ``None`` for a wildcard ``host`` (``0.0.0.0``, ``::``, empty): it names no address a client
    can use, so nothing is written (see the module docstring; ``--publish-service`` is the way
    to publish an in-cluster edge).
    """
    entry = host_entry(host)
    if entry is None:
        return None
    if ports:
        entry["ports"] = [{"port": port, "protocol": "TCP"} for port in ports]
    return {"ingress": [entry]}


def host_entry(host: str) -> dict[str, Any] | None:
    """``{"ip": …}`` for an IP, ``{"hostname": …}`` otherwise; ``None`` for a wildcard."""
    if host in ("", "*"):
        return None
    try:
        ip = ipaddress.ip_address(host)
    except ValueError:
        return {"hostname": host}
    return None if ip.is_unspecified else {"ip": str(ip)}


def edge_load_balancer_status(
    host: str, port: int, *, tls_port: int | None = None
) -> LoadBalancerStatus | None:
    """``status.loadBalancer`` naming where this process's edge listens (an IP, or else a host
    name), with its HTTP port and, when it serves HTTPS, that port too; ``None`` (nothing
    written) for a wildcard listen address, which names no address a client can reach."""
    return listen_address_status(host, ports=[port] if tls_port is None else [port, tls_port])


def remote_load_balancer_status(admin_url: str) -> LoadBalancerStatus | None:
    """``status.loadBalancer`` for a data plane in another process: the host of its admin URL,
    without ports.

    The admin API does not say where that process serves traffic, so this is a fallback: the
    only address the controller knows. ``interlock edge`` serves traffic and its admin API from
    the same host (one Pod), which makes the host right; the ports are left out rather than
    guessed. In a cluster, ``--publish-service`` is the better source.
    """
    return listen_address_status(urlsplit(admin_url).hostname or "", ports=())
