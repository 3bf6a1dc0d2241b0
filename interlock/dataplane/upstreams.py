"""Where a route's backend lives: the :class:`UpstreamResolver` boundary and two resolvers.

The data plane knows a route's backend only as a Service port. Which pods serve it depends on
the outbound policy of that port (weighted splits, filters, a missing backend Service) and on
its ready endpoints — controller state the data plane must not own. The boundary is the
engine's :class:`~interlock.dataplane.source.PolicySource` (``policy`` and ``addresses`` of a
Service port); the controller implements it from its ServicePortWatch subscriptions and
EndpointSlices (``interlock.controller.upstreams.UpstreamIndex``); this module ships the two
resolvers that need no controller:

* :class:`StaticUpstreams` — a table (and optionally policies), for tests, benchmarks, demos;
* :class:`DnsUpstreams` — the standalone data plane (``interlock edge``), which runs without the
  controller's state and relies on cluster DNS: ``{service}.{namespace}.svc`` (plus the cluster
  domain when one is configured) on the Service port, letting kube-proxy pick the pod.

Both calls are synchronous on purpose: they are made on every request, and their answers come
from caches kept current elsewhere.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from interlock.dataplane.source import Address, PolicySource, UpstreamError
from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey

UpstreamResolver = PolicySource
"""The edge's name for the engine's boundary."""

__all__ = ["Address", "DnsUpstreams", "StaticUpstreams", "UpstreamError", "UpstreamResolver"]


class StaticUpstreams:
    """A fixed table of Service ports to addresses; change it with :meth:`set` / :meth:`remove`.

    A Service port absent from the table does not exist (500); one mapped to no address has no
    ready endpoint (503). :meth:`set_policy` gives a Service port an outbound policy (without
    one, requests go to the Service port itself).
    """

    def __init__(self, table: Mapping[tuple[str, str, int], Sequence[Address]] | None = None):
        self._table: dict[ServicePortKey, list[Address]] = {
            ServicePortKey(*key): list(addresses) for key, addresses in (table or {}).items()
        }
        self._policies: dict[ServicePortKey, OutboundPolicy] = {}

    def set(self, *, namespace: str, service: str, port: int, addresses: Sequence[Address]) -> None:
        self._table[ServicePortKey(namespace, service, port)] = list(addresses)

    def remove(self, *, namespace: str, service: str, port: int) -> None:
        self._table.pop(ServicePortKey(namespace, service, port), None)

    def set_policy(self, policy: OutboundPolicy) -> None:
        self._policies[ServicePortKey(policy.namespace, policy.service, policy.port)] = policy

    def policy(self, target: ServicePortKey) -> OutboundPolicy | None:
        return self._policies.get(target)

    def addresses(self, target: ServicePortKey) -> Sequence[Address] | UpstreamError:
        addresses = self._table.get(target)
        if addresses is None:
            return UpstreamError(500, f"{target.describe()} does not exist")
        if not addresses:
            return UpstreamError(503, f"{target.describe()} has no ready endpoint")
        return addresses


class DnsUpstreams:
    """Resolve a Service port to its cluster DNS name; the connector resolves the name.
    ``fixed`` Service ports go to the addresses given instead (``interlock edge --upstream``)."""

    def __init__(
        self,
        *,
        cluster_domain: str | None = None,
        fixed: Mapping[ServicePortKey, Sequence[Address]] | None = None,
    ) -> None:
        self._suffix = "svc" if not cluster_domain else f"svc.{cluster_domain.strip('.')}"
        self._fixed = dict(fixed or {})

    def policy(self, target: ServicePortKey) -> OutboundPolicy | None:
        return None

    def addresses(self, target: ServicePortKey) -> Sequence[Address] | UpstreamError:
        fixed = self._fixed.get(target)
        if fixed is not None:
            return fixed
        return [(f"{target.name}.{target.namespace}.{self._suffix}", target.port)]
