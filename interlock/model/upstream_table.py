"""The upstream table a controller pushes to its edge workers, the changes between two, as JSON.

The controller's own edge resolves a route's backend from two tables the controller keeps: the
outbound policy of each Service port an edge route sends to (HTTPRoutes splitting it by
weight), and the ready endpoints of every Service those policies name. An ``interlock edge``
worker has no informers, so the controller sends it a copy (:class:`UpstreamTable`) and then
only what changed (:class:`TableChanges`: the controller keeps its table by change,
``controller.worker_upstreams.EdgeTable``; :func:`table_changes` is the same between two whole
tables), and the worker resolves from its copy exactly as the controller's edge does
(:class:`~interlock.dataplane.pushed_upstreams.PushedUpstreams`).

JSON (``PUT`` and ``PATCH /v1/upstreams`` of the edge's admin API)::

    {"policies": [{"namespace", "service", "port", "policy"}],
     "services": [{"namespace", "name", "known", "exists",
                   "ports": [{"port", "addresses": [[host, port]]}]}],
     "removedPolicies": [{"namespace", "service", "port"}],
     "removedServices": [{"namespace", "name"}]}

``policy`` is :func:`~interlock.model.policy_codec.encode_policy`'s form. A ``PUT`` replaces the
whole table; a ``PATCH`` sets and removes rows (its body also names the ``epoch`` of the table
it changes, which the admin API checks). :func:`changes_from_json` names the field of a body it
cannot read.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from interlock.model.meta import ObjectKey
from interlock.model.outbound import OutboundPolicy
from interlock.model.policy_codec import decode_policy, encode_policy
from interlock.model.service import ServicePortKey

Address = tuple[str, int]


@dataclass(frozen=True, slots=True)
class ServiceEndpoints:
    """One Service as the controller's upstream cache knows it."""

    known: bool
    """The cache has read the Service and its EndpointSlices (until then: 503, not known yet)."""
    exists: bool
    ports: tuple[tuple[int, tuple[Address, ...]], ...] = ()
    """Each Service port and its ready addresses (none ready: an empty tuple)."""


@dataclass(frozen=True, slots=True)
class UpstreamTable:
    """What an edge worker resolves backends from."""

    policies: Mapping[ServicePortKey, OutboundPolicy] = field(default_factory=dict)
    """The ready policy of each Service port an edge route sends to."""
    services: Mapping[ObjectKey, ServiceEndpoints] = field(default_factory=dict)
    """Every Service those policies (and routes) may send to."""


@dataclass(frozen=True, slots=True)
class TableChanges:
    """Rows to set and rows to remove; :attr:`replace`: the whole table is these rows."""

    policies: tuple[tuple[ServicePortKey, OutboundPolicy], ...] = ()
    services: tuple[tuple[ObjectKey, ServiceEndpoints], ...] = ()
    removed_policies: tuple[ServicePortKey, ...] = ()
    removed_services: tuple[ObjectKey, ...] = ()
    replace: bool = False

    def __len__(self) -> int:
        return (
            len(self.policies)
            + len(self.services)
            + len(self.removed_policies)
            + len(self.removed_services)
        )


def table_changes(old: UpstreamTable | None, new: UpstreamTable) -> TableChanges:
    """What turns ``old`` into ``new``; ``old`` None (unknown: a worker that just started or
    whose last push failed) gives the whole of ``new`` to replace what it holds."""
    if old is None:
        return TableChanges(
            policies=tuple(new.policies.items()),
            services=tuple(new.services.items()),
            replace=True,
        )
    return TableChanges(
        policies=tuple(
            (key, policy) for key, policy in new.policies.items() if old.policies.get(key) != policy
        ),
        services=tuple(
            (key, service)
            for key, service in new.services.items()
            if old.services.get(key) != service
        ),
        removed_policies=tuple(key for key in old.policies if key not in new.policies),
        removed_services=tuple(key for key in old.services if key not in new.services),
    )


def in_batches(changes: TableChanges, size: int) -> list[TableChanges]:
    """``changes`` split into requests of at most ``size`` rows each (a large table does not
    become one body the admin API would refuse); only the first keeps :attr:`replace`. An
    empty replace is one (empty) batch; other empty changes none."""
    rows: list[tuple[str, Any]] = [
        *(("policy", row) for row in changes.policies),
        *(("service", row) for row in changes.services),
        *(("removed policy", key) for key in changes.removed_policies),
        *(("removed service", key) for key in changes.removed_services),
    ]
    if not rows:
        return [changes] if changes.replace else []
    batches = []
    for start in range(0, len(rows), size):
        part = rows[start : start + size]
        batches.append(
            TableChanges(
                policies=tuple(row for kind, row in part if kind == "policy"),
                services=tuple(row for kind, row in part if kind == "service"),
                removed_policies=tuple(row for kind, row in part if kind == "removed policy"),
                removed_services=tuple(row for kind, row in part if kind == "removed service"),
                replace=changes.replace and start == 0,
            )
        )
    return batches


# --- JSON ---------------------------------------------------------------------------------------


def changes_json(changes: TableChanges) -> dict[str, Any]:
    """The body of ``PUT`` (:attr:`TableChanges.replace`) or ``PATCH /v1/upstreams``."""
    return {
        "policies": [
            {**_port_json(key), "policy": encode_policy(policy)} for key, policy in changes.policies
        ],
        "services": [
            {
                "namespace": key.namespace,
                "name": key.name,
                "known": service.known,
                "exists": service.exists,
                "ports": [
                    {"port": port, "addresses": [list(address) for address in addresses]}
                    for port, addresses in service.ports
                ],
            }
            for key, service in changes.services
        ],
        "removedPolicies": [_port_json(key) for key in changes.removed_policies],
        "removedServices": [
            {"namespace": key.namespace, "name": key.name} for key in changes.removed_services
        ],
    }


def changes_from_json(data: object, *, replace: bool) -> TableChanges:
    """The changes of a ``PUT`` (``replace``) or ``PATCH`` body; ``ValueError`` names the
    field that cannot be read."""
    if not isinstance(data, Mapping):
        raise ValueError("the body must be a JSON object")
    policies = []
    for i, item in enumerate(_list(data, "policies")):
        where = f"policies[{i}]"
        policies.append((_port_key(item, where), _policy(item, where)))
    services = []
    for i, item in enumerate(_list(data, "services")):
        where = f"services[{i}]"
        services.append((_service_key(item, where), _service(item, where)))
    return TableChanges(
        policies=tuple(policies),
        services=tuple(services),
        removed_policies=tuple(
            _port_key(item, f"removedPolicies[{i}]")
            for i, item in enumerate(_list(data, "removedPolicies"))
        ),
        removed_services=tuple(
            _service_key(item, f"removedServices[{i}]")
            for i, item in enumerate(_list(data, "removedServices"))
        ),
        replace=replace,
    )


def _port_json(key: ServicePortKey) -> dict[str, Any]:
    return {"namespace": key.namespace, "service": key.name, "port": key.port}


def _list(data: Mapping[str, Any], name: str) -> list[Any]:
    value = data.get(name, [])
    if not isinstance(value, list):
        raise ValueError(f"{name}: a list is required")
    return value


def _text(item: Mapping[str, Any], name: str, where: str) -> str:
    value = item.get(name)
    if not isinstance(value, str) or not value:
        raise ValueError(f"{where}.{name}: a non-empty string is required")
    return value


def _port(value: object, where: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= 65535:
        raise ValueError(f"{where}: an integer between 1 and 65535 is required")
    return value


def _object(item: object, where: str) -> Mapping[str, Any]:
    if not isinstance(item, Mapping):
        raise ValueError(f"{where}: an object is required")
    return item


def _port_key(item: object, where: str) -> ServicePortKey:
    row = _object(item, where)
    return ServicePortKey(
        _text(row, "namespace", where),
        _text(row, "service", where),
        _port(row.get("port"), f"{where}.port"),
    )


def _service_key(item: object, where: str) -> ObjectKey:
    row = _object(item, where)
    return ObjectKey(namespace=_text(row, "namespace", where), name=_text(row, "name", where))


def _policy(item: Mapping[str, Any], where: str) -> OutboundPolicy:
    try:
        return decode_policy(item.get("policy"))
    except ValueError as error:
        raise ValueError(f"{where}.{error}") from None


def _service(item: Mapping[str, Any], where: str) -> ServiceEndpoints:
    known, exists = item.get("known"), item.get("exists")
    if not isinstance(known, bool) or not isinstance(exists, bool):
        raise ValueError(f"{where}: known and exists must be booleans")
    ports = []
    for i, port_item in enumerate(_list(item, "ports")):
        port_where = f"{where}.ports[{i}]"
        row = _object(port_item, port_where)
        addresses = []
        for j, address in enumerate(_list(row, "addresses")):
            if (
                not isinstance(address, list)
                or len(address) != 2
                or not isinstance(address[0], str)
            ):
                raise ValueError(f"{port_where}.addresses[{j}]: [host, port] is required")
            addresses.append((address[0], _port(address[1], f"{port_where}.addresses[{j}]")))
        ports.append((_port(row.get("port"), f"{port_where}.port"), tuple(addresses)))
    return ServiceEndpoints(known=known, exists=exists, ports=tuple(ports))
