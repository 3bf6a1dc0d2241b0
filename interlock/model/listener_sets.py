"""ListenerSets: listeners declared outside a Gateway, merged into it when the Gateway allows.

A Gateway is usually owned by a platform team; the teams serving applications behind it need
listeners of their own (their hostnames, their certificates) without editing the Gateway. A
``ListenerSet`` (``gateway.networking.k8s.io/v1``) names a parent Gateway and holds listeners;
the Gateway takes them only if its ``spec.allowedListeners`` admits the ListenerSet's namespace
(``None`` by default: no ListenerSet at all; ``Same``; ``Selector`` on the namespace's labels;
``All``). Routes attach to a ListenerSet's listeners by a parentRef of kind ``ListenerSet``;
a parentRef naming the Gateway reaches only the Gateway's own listeners.

The merged listeners follow the spec's precedence: the Gateway's first, then the ListenerSets,
oldest first, ties by ``namespace/name``, each in its own order. A listener that wants a port
an earlier listener serves with another protocol is ``Conflicted`` (``ProtocolConflict``); one
repeating an earlier listener's port, protocol and hostname is ``Conflicted``
(``HostnameConflict``). Both are refused (``Accepted`` and ``Programmed`` False with that
reason) while the earlier one keeps serving: adding a ListenerSet can never take traffic away
from a listener that had it.

This module decides, as pure functions: whether a Gateway admits a ListenerSet
(:func:`admits`), the merged checks with those conflicts (:func:`merge_listener_sets`), and
the status written on each ListenerSet (:func:`listener_set_status`).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from interlock.model.gateway import GATEWAY_GROUP, ReferenceGrant, normalize_group
from interlock.model.gateway_conditions import condition, stored_conditions
from interlock.model.gateway_listeners import (
    AddressProblem,
    Gateway,
    GatewaySpec,
    Listener,
    ListenerCheck,
    ListenerProblem,
    listener_problems,
    listener_status,
    namespace_admitted,
    stored_listener_conditions,
)
from interlock.model.meta import KubeModel, KubeObject, ObjectKey, parse_namespaced
from interlock.model.moduleset import SecretValue


class ParentGatewayReference(KubeModel):
    group: str = GATEWAY_GROUP
    kind: str = "Gateway"
    name: str = Field(min_length=1)
    namespace: str | None = None


class ListenerSetSpec(KubeModel):
    parent_ref: ParentGatewayReference = Field(alias="parentRef")
    listeners: tuple[Listener, ...] = Field((), max_length=64)


class ListenerSet(KubeObject):
    """A ListenerSet as parsed; ``status`` is kept as stored (its timestamps)."""

    spec: ListenerSetSpec
    status: dict[str, Any] = Field(default_factory=dict)

    def parent(self) -> ObjectKey | None:
        """The Gateway it names (None when its parentRef is not a Gateway)."""
        ref = self.spec.parent_ref
        if normalize_group(ref.group) != GATEWAY_GROUP or ref.kind != "Gateway":
            return None
        return ObjectKey(namespace=ref.namespace or self.metadata.namespace, name=ref.name)


def parse_listener_set(raw: dict[str, Any]) -> ListenerSet:
    """A ListenerSet from API JSON; raises ``InvalidObject`` naming the bad field."""
    return parse_namespaced(ListenerSet, "ListenerSet", raw)


def precedence(listener_set: ListenerSet) -> tuple[float, str, str]:
    """The spec's order among ListenerSets: oldest first, then ``namespace/name``."""
    created = listener_set.metadata.creation_timestamp
    moment = 0.0 if created is None else created.replace(tzinfo=created.tzinfo or UTC).timestamp()
    return (moment, listener_set.metadata.namespace, listener_set.metadata.name)


def admits(
    gateway: Gateway, listener_set: ListenerSet, namespace_labels: Mapping[str, str] | None
) -> bool:
    """Whether ``gateway``'s ``allowedListeners`` admits ``listener_set`` (labels: those of
    the ListenerSet's namespace, None when unknown)."""
    rule = gateway.spec.allowed_listeners.namespaces
    return namespace_admitted(
        rule.from_,
        rule.selector,
        namespace=listener_set.metadata.namespace,
        home=gateway.metadata.namespace,
        labels=namespace_labels,
    )


def _conflict(
    check: ListenerCheck,
    protocols: Mapping[int, str],
    hostnames: set[tuple[int, str, str | None]],
) -> ListenerProblem | None:
    listener = check.listener
    where = f"ListenerSet {check.owner}: listener {listener.name}"
    taken = protocols.get(listener.port)
    if taken is not None and taken != listener.protocol:
        return ListenerProblem(
            "Conflicted",
            "ProtocolConflict",
            f"{where}: port {listener.port} is served with protocol {taken} by a listener "
            "that takes precedence (the Gateway's, or an older ListenerSet's); one port "
            "carries one protocol",
        )
    if (listener.port, listener.protocol, listener.hostname) in hostnames:
        return ListenerProblem(
            "Conflicted",
            "HostnameConflict",
            f"{where}: port {listener.port}, protocol {listener.protocol} and hostname "
            f"{listener.hostname or '(any)'} are taken by a listener that takes precedence "
            "(the Gateway's, or an older ListenerSet's)",
        )
    return None


def merge_listener_sets(
    gateway_checks: Sequence[ListenerCheck],
    listener_sets: Sequence[tuple[ObjectKey, Sequence[ListenerCheck]]],
) -> dict[ObjectKey, tuple[ListenerCheck, ...]]:
    """The checks of each admitted ListenerSet's listeners (``listener_sets`` in precedence
    order, each checked on its own by ``listener_problems``) with the conflicts against the
    listeners before them; see the module docstring."""
    protocols: dict[int, str] = {}
    hostnames: set[tuple[int, str, str | None]] = set()

    def claim(check: ListenerCheck) -> None:
        if check.accepted:
            listener = check.listener
            protocols.setdefault(listener.port, listener.protocol)
            hostnames.add((listener.port, listener.protocol, listener.hostname))

    for check in gateway_checks:
        claim(check)
    merged: dict[ObjectKey, tuple[ListenerCheck, ...]] = {}
    for key, checks in listener_sets:
        found: list[ListenerCheck] = []
        for check in checks:
            # In the merged list the first listener of a port keeps it, within a ListenerSet
            # too: its own rule for a Gateway (every listener of a port wanted with two
            # protocols is conflicted) gives way to that order.
            others = tuple(p for p in check.problems if p.condition != "Conflicted")
            problem = _conflict(check, protocols, hostnames)
            # The conflict comes first: it is what the listener is refused for.
            kept = replace(check, problems=others if problem is None else (problem, *others))
            claim(kept)
            found.append(kept)
        merged[key] = tuple(found)
    return merged


@dataclass(frozen=True, slots=True)
class ListenerSetOutcome:
    """What became of a ListenerSet naming one of our Gateways: ``refused`` is None when it is
    attached, else ``(reason, message)`` (``NotAllowed``, ``ParentNotAccepted``)."""

    refused: tuple[str, str] | None
    checks: tuple[ListenerCheck, ...] = ()

    @property
    def accepted(self) -> bool:
        """Attached with at least one valid listener (counted in ``attachedListenerSets``)."""
        return self.refused is None and any(check.usable for check in self.checks)


def parent_accepted(
    own_checks: Sequence[ListenerCheck],
    address: str | AddressProblem,
    port_failures: Mapping[int, str] | None = None,
) -> bool:
    """Whether the Gateway is ``Accepted`` (as ``gateway_status`` decides): ListenerSets of a
    Gateway that is not are refused (``ParentNotAccepted``)."""
    if isinstance(address, AddressProblem) and address.condition == "Accepted":
        return False
    failures = port_failures or {}
    return any(c.usable and c.listener.port not in failures for c in own_checks)


def listener_set_outcomes(
    gateway: Gateway,
    own_checks: Sequence[ListenerCheck],
    listener_sets: Iterable[ListenerSet],
    *,
    accepted: bool,
    namespace_labels: Mapping[str, Mapping[str, str]],
    secrets: Mapping[ObjectKey, Mapping[str, SecretValue]],
    grants: Iterable[ReferenceGrant],
    ca_bundles: Mapping[ObjectKey, str | None] | None = None,
) -> dict[ObjectKey, ListenerSetOutcome]:
    """What becomes of each ListenerSet naming ``gateway`` (``accepted``: is the Gateway),
    in precedence order: refused (``NotAllowed``, ``ParentNotAccepted``) or attached, with
    its listeners checked as the Gateway's are (certificates in the ListenerSet's namespace,
    ReferenceGrants from ListenerSets; the Gateway's ``spec.tls.frontend`` with
    ``ca_bundles``) and the conflicts with the listeners before them."""
    grant_list = tuple(grants)
    refused: dict[ObjectKey, ListenerSetOutcome] = {}
    admitted: list[tuple[ObjectKey, Sequence[ListenerCheck]]] = []
    ordered = sorted(listener_sets, key=precedence)
    for listener_set in ordered:
        key = listener_set.key
        if not admits(gateway, listener_set, namespace_labels.get(key.namespace)):
            refused[key] = ListenerSetOutcome(
                (
                    "NotAllowed",
                    f"Gateway {gateway.key} does not admit ListenerSets from namespace "
                    f"{key.namespace} (spec.allowedListeners.namespaces.from: "
                    f"{gateway.spec.allowed_listeners.namespaces.from_})",
                )
            )
        elif not accepted:
            refused[key] = ListenerSetOutcome(
                ("ParentNotAccepted", f"Gateway {gateway.key} is not accepted (see its status)")
            )
        else:
            # Its listeners are checked as those of a Gateway declaring them in its namespace.
            holder = Gateway.model_construct(
                metadata=listener_set.metadata,
                spec=GatewaySpec.model_construct(
                    gateway_class_name=gateway.spec.gateway_class_name,
                    listeners=listener_set.spec.listeners,
                ),
                status={},
            )
            admitted.append(
                (
                    key,
                    listener_problems(
                        holder,
                        secrets=secrets,
                        grants=grant_list,
                        from_kind="ListenerSet",
                        owner=key,
                        ca_bundles=ca_bundles,
                        frontend_of=gateway,
                    ),
                )
            )
    merged = merge_listener_sets(own_checks, admitted)
    return {
        listener_set.key: refused.get(listener_set.key)
        or ListenerSetOutcome(None, merged[listener_set.key])
        for listener_set in ordered
    }


def listener_set_status(
    listener_set: ListenerSet,
    outcome: ListenerSetOutcome,
    *,
    address: str | AddressProblem,
    attached: Mapping[str, int],
    now: datetime,
    port_failures: Mapping[int, str] | None = None,
) -> dict[str, Any]:
    """The ``status`` interlock writes on a ListenerSet naming one of its Gateways.

    ``address``: the parent Gateway's; ``attached``: accepted routes per listener name.
    ``Accepted`` is True while one listener is valid (``ListenersNotValid`` names the others,
    False when none is), ``Programmed`` once one of them is served.
    """
    generation = listener_set.metadata.generation
    stored = stored_conditions(listener_set.status.get("conditions"))

    def make(kind: str, status: bool, reason: str, message: str) -> dict[str, Any]:
        return condition(
            kind, status, reason, message, generation=generation, stored=stored, now=now
        )

    if outcome.refused is not None:
        reason, message = outcome.refused
        return {
            "conditions": [
                make("Accepted", False, reason, message),
                make("Programmed", False, reason, message),
            ],
            "listeners": [],
        }
    stored_listeners = stored_listener_conditions(listener_set.status)
    failures = port_failures or {}
    listeners = [
        listener_status(
            check,
            attached=attached.get(check.listener.name, 0),
            address_ok=isinstance(address, str),
            port_failure=failures.get(check.listener.port),
            generation=generation,
            stored=stored_listeners.get(check.listener.name, {}),
            now=now,
        )
        for check in outcome.checks
    ]
    invalid = [c.listener.name for c in outcome.checks if not c.usable]
    served = [
        c.listener.name
        for c in outcome.checks
        if c.usable and c.listener.port not in failures and isinstance(address, str)
    ]
    if len(invalid) == len(outcome.checks):
        accepted = make(
            "Accepted", False, "ListenersNotValid", "no listener is valid: " + ", ".join(invalid)
        )
    elif invalid:
        accepted = make(
            "Accepted", True, "ListenersNotValid", "listeners not valid: " + ", ".join(invalid)
        )
    else:
        accepted = make("Accepted", True, "Accepted", "every listener is valid")
    if served:
        programmed = make("Programmed", True, "Programmed", "served: " + ", ".join(served))
    elif len(invalid) == len(outcome.checks):
        programmed = make("Programmed", False, "ListenersNotValid", "no listener is valid")
    elif isinstance(address, AddressProblem):
        programmed = make("Programmed", False, "ParentNotProgrammed", address.message)
    else:
        programmed = make(
            "Programmed", False, "PortUnavailable", "none of its listeners' ports could be opened"
        )
    return {"conditions": [accepted, programmed], "listeners": listeners}
