"""Where a route's backend lives: the :class:`UpstreamResolver` boundary and two resolvers.

The data plane knows a route's backend only as a Service port. Which pods serve it depends on
the outbound policy of that port (weighted splits, a missing backend Service) and on its ready
endpoints — controller state the data plane must not own. The controller implements
this protocol from its ServicePortWatch subscriptions and EndpointSlices
(``interlock.controller.upstreams.ControllerUpstreams``); this module ships the
two resolvers that need no controller:

* :class:`StaticUpstreams` — a table, for tests, benchmarks and demos;
* :class:`DnsUpstreams` — the standalone data plane (``interlock edge``), which runs without the
  controller's state and relies on cluster DNS: ``{service}.{namespace}.svc`` (plus the cluster
  domain when one is configured) on the Service port, letting kube-proxy pick the pod.

``resolve`` is synchronous on purpose: it is called on every request, and its answers come from
caches kept current elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol


@dataclass(frozen=True, slots=True)
class UpstreamError:
    """No upstream can be chosen; the edge answers ``status`` (500: no Service, 503: none ready)."""

    status: int
    message: str


Address = tuple[str, int]


class UpstreamResolver(Protocol):
    def resolve(
        self,
        *,
        namespace: str,
        service: str,
        port: int,
        method: str,
        path: str,
        headers: Mapping[str, str],
        query: Mapping[str, str],
    ) -> list[Address] | UpstreamError:
        """Candidate addresses for this request (the proxy round-robins among them), or why not.

        ``headers`` is case-insensitive. Method, path, headers and query let a resolver apply
        HTTPRoute matches of the backend Service's outbound policy.
        """
        ...


class StaticUpstreams:
    """A fixed table of Service ports to addresses; change it with :meth:`set` / :meth:`remove`.

    A Service port absent from the table does not exist (500); one mapped to no address has no
    ready endpoint (503).
    """

    def __init__(self, table: Mapping[tuple[str, str, int], Sequence[Address]] | None = None):
        self._table: dict[tuple[str, str, int], list[Address]] = {
            key: list(addresses) for key, addresses in (table or {}).items()
        }

    def set(self, *, namespace: str, service: str, port: int, addresses: Sequence[Address]) -> None:
        self._table[(namespace, service, port)] = list(addresses)

    def remove(self, *, namespace: str, service: str, port: int) -> None:
        self._table.pop((namespace, service, port), None)

    def resolve(
        self,
        *,
        namespace: str,
        service: str,
        port: int,
        method: str,
        path: str,
        headers: Mapping[str, str],
        query: Mapping[str, str],
    ) -> list[Address] | UpstreamError:
        addresses = self._table.get((namespace, service, port))
        if addresses is None:
            return UpstreamError(500, f"Service {namespace}/{service} port {port} does not exist")
        if not addresses:
            return UpstreamError(
                503, f"Service {namespace}/{service} port {port} has no ready endpoint"
            )
        return list(addresses)


class DnsUpstreams:
    """Resolve a Service port to its cluster DNS name; the connector resolves the name."""

    def __init__(self, *, cluster_domain: str | None = None) -> None:
        self._suffix = "svc" if not cluster_domain else f"svc.{cluster_domain.strip('.')}"

    def resolve(
        self,
        *,
        namespace: str,
        service: str,
        port: int,
        method: str,
        path: str,
        headers: Mapping[str, str],
        query: Mapping[str, str],
    ) -> list[Address] | UpstreamError:
        return [(f"{service}.{namespace}.{self._suffix}", port)]
