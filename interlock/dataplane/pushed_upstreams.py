"""An edge worker's copy of the controller's upstream tables: :class:`PushedUpstreams`.

An ``interlock edge`` started by ``interlock run --edge-workers`` (``--pushed-upstreams``) has
no informers of its own. The controller pushes it the policies and endpoints its own edge
resolves with (:mod:`interlock.model.upstream_table`, through the admin API), and this class
answers the engine's two questions from that copy, with the same answers the controller's
index gives: the policy of a Service port (None while unknown: the Service port itself), its
ready addresses, and why there are none (the one wording of
:func:`~interlock.dataplane.source.no_address`). No DNS: a worker routes where the
controller's edge would.
"""

from __future__ import annotations

import secrets
from collections.abc import Sequence

from interlock.dataplane.source import Address, UpstreamError, no_address
from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy
from interlock.model.service import ServicePortKey
from interlock.model.upstream_table import ServiceEndpoints, TableChanges


class PushedUpstreams:
    """The engine's :class:`~interlock.dataplane.source.PolicySource` over pushed tables."""

    def __init__(self) -> None:
        self._policies: dict[ServicePortKey, OutboundPolicy] = {}
        self._services: dict[ObjectKey, ServiceEndpoints] = {}
        self._addresses: dict[ServicePortKey, list[Address]] = {}
        self.pushes = 0
        """Changes applied (``PUT`` and ``PATCH /v1/upstreams``)."""
        self.epoch = secrets.token_hex(8)
        """Names this copy: a ``PATCH`` names the epoch its sender last saw (from a ``PUT``'s
        answer), so one sent to an edge that restarted since (an empty copy, a new epoch) is
        refused and the whole table sent again instead of a few rows on nothing."""

    def apply(self, changes: TableChanges) -> None:
        """Take a push: replace the tables, or set and remove rows."""
        if changes.replace:
            self._policies.clear()
            self._services.clear()
            self._addresses.clear()
        for target in changes.removed_policies:
            self._policies.pop(target, None)
        for key in changes.removed_services:
            self._set_service(key, None)
        self._policies.update(changes.policies)
        for key, service in changes.services:
            self._set_service(key, service)
        self.pushes += 1

    def _set_service(self, key: ObjectKey, service: ServiceEndpoints | None) -> None:
        old = self._services.pop(key, None)
        if old is not None:
            for port, _ in old.ports:
                self._addresses.pop(ServicePortKey(key.namespace, key.name, port), None)
        if service is None:
            return
        self._services[key] = service
        if service.exists:
            for port, addresses in service.ports:
                self._addresses[ServicePortKey(key.namespace, key.name, port)] = list(addresses)

    def has_policy(self, target: ServicePortKey) -> bool:
        """Whether the controller pushed ``target``'s policy (a backend is attached only then)."""
        return target in self._policies

    def policy(self, target: ServicePortKey) -> OutboundPolicy | None:
        return self._policies.get(target)

    def addresses(self, target: ServicePortKey) -> Sequence[Address] | UpstreamError:
        addresses = self._addresses.get(target)
        if addresses:
            return addresses
        service = self._services.get(target.service_key())
        return no_address(
            target,
            known=service is not None and service.known,
            exists=service is not None and service.exists,
            has_port=target in self._addresses,
        )

    def counts(self) -> dict[str, int]:
        """Rows held, for ``GET /v1/worker``."""
        return {
            "policies": len(self._policies),
            "services": len(self._services),
            "pushes": self.pushes,
        }
