"""Gateways and their listeners: what each listener can serve, and the status that says so.

A Gateway is a request for a place that receives traffic: an address, and listeners on that
address (a port, a protocol, maybe a hostname, TLS settings, which routes may attach). Users read
on the Gateway whether each listener works and, when one does not, why — and one broken listener
must not take the others down. This module decides, for one Gateway at a time and as a pure
function of its inputs:

* each listener's problems (:func:`listener_problems`): an unsupported protocol, route kinds it
  cannot carry, a TLS certificate it cannot use (missing, not permitted by a ReferenceGrant,
  not a TLS Secret), client certificate validation it cannot build (``gateway_frontend.py``),
  a port whose listeners disagree on the protocol;
* the address of each Gateway from the configured pool (:func:`assign_addresses`): stable —
  a Gateway keeps the address its status already holds while that is free — and never shared,
  because the data plane tells Gateways apart by the local address a connection arrived on;
* the ``status`` written on the Gateway (:func:`gateway_status`): ``Accepted``/``Programmed``
  on the Gateway and ``Accepted``/``Conflicted``/``ResolvedRefs``/``Programmed`` per listener
  with the Gateway API's reasons, ``supportedKinds``, ``attachedRoutes`` and ``addresses``.
"""

from __future__ import annotations

import ipaddress
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from interlock.model.gateway import (
    GATEWAY_GROUP,
    ReferenceGrant,
    normalize_group,
    reference_permitted,
)
from interlock.model.gateway_conditions import condition, stored_conditions
from interlock.model.gateway_frontend import (
    ClientValidation,
    FrontendTLSConfig,
    ca_certificate_dependencies,
    client_validation,
)
from interlock.model.meta import KubeModel, KubeObject, ObjectKey, parse_namespaced
from interlock.model.moduleset import SecretValue

HTTP_ROUTE_KIND = (GATEWAY_GROUP, "HTTPRoute")
GRPC_ROUTE_KIND = (GATEWAY_GROUP, "GRPCRoute")
TLS_ROUTE_KIND = (GATEWAY_GROUP, "TLSRoute")

CertificatePair = tuple[SecretValue, SecretValue]
"""A listener certificate: ``(tls.crt, tls.key)`` PEM, never printed."""

PROTOCOL_ROUTE_KINDS: Mapping[str, tuple[tuple[str, str], ...]] = {
    "HTTP": (HTTP_ROUTE_KIND, GRPC_ROUTE_KIND),
    "HTTPS": (HTTP_ROUTE_KIND, GRPC_ROUTE_KIND),
    "TLS": (TLS_ROUTE_KIND,),
}
"""The listener protocols interlock serves, each with the route kinds it carries (``TLS``: in
``tls.mode`` Passthrough only, the connection spliced to a backend by its SNI)."""


class LabelSelectorRequirement(KubeModel):
    key: str
    operator: str
    values: tuple[str, ...] = ()


class LabelSelector(KubeModel):
    match_labels: dict[str, str] = Field(default_factory=dict, alias="matchLabels")
    match_expressions: tuple[LabelSelectorRequirement, ...] = Field((), alias="matchExpressions")

    def matches(self, labels: Mapping[str, str]) -> bool:
        if any(labels.get(key) != value for key, value in self.match_labels.items()):
            return False
        for requirement in self.match_expressions:
            present = requirement.key in labels
            value = labels.get(requirement.key)
            operator = requirement.operator
            if operator == "In" and value not in requirement.values:
                return False
            if operator == "NotIn" and present and value in requirement.values:
                return False
            if operator == "Exists" and not present:
                return False
            if operator == "DoesNotExist" and present:
                return False
            if operator not in ("In", "NotIn", "Exists", "DoesNotExist"):
                return False
        return True


class RouteNamespaces(KubeModel):
    from_: str = Field("Same", alias="from")
    selector: LabelSelector | None = None


class RouteGroupKind(KubeModel):
    group: str = GATEWAY_GROUP
    kind: str


class AllowedRoutes(KubeModel):
    namespaces: RouteNamespaces = Field(default_factory=RouteNamespaces)
    kinds: tuple[RouteGroupKind, ...] = ()


class SecretObjectReference(KubeModel):
    group: str = ""
    kind: str = "Secret"
    name: str
    namespace: str | None = None


class GatewayTLSConfig(KubeModel):
    mode: str = "Terminate"
    certificate_refs: tuple[SecretObjectReference, ...] = Field((), alias="certificateRefs")


class Listener(KubeModel):
    name: str
    hostname: str | None = None
    port: int
    protocol: str
    tls: GatewayTLSConfig | None = None
    allowed_routes: AllowedRoutes = Field(default_factory=AllowedRoutes, alias="allowedRoutes")


class GatewaySpecAddress(KubeModel):
    type: str = "IPAddress"
    value: str = ""


class LocalParametersReference(KubeModel):
    group: str = ""
    kind: str = ""
    name: str = ""


class GatewayInfrastructure(KubeModel):
    parameters_ref: LocalParametersReference | None = Field(None, alias="parametersRef")
    labels: dict[str, str] = Field(default_factory=dict)
    annotations: dict[str, str] = Field(default_factory=dict)


class ListenerNamespaces(KubeModel):
    """``allowedListeners.namespaces``: where attached ListenerSets may live (``None``: none)."""

    from_: str = Field("None", alias="from")
    selector: LabelSelector | None = None


class AllowedListeners(KubeModel):
    namespaces: ListenerNamespaces = Field(default_factory=ListenerNamespaces)


class GatewayBackendTLS(KubeModel):
    client_certificate_ref: SecretObjectReference | None = Field(None, alias="clientCertificateRef")


class GatewaySpecTLS(KubeModel):
    """``spec.tls``: ``backend``, the client certificate presented to TLS backends, and
    ``frontend``, the client certificates HTTPS listeners ask for."""

    backend: GatewayBackendTLS | None = None
    frontend: FrontendTLSConfig | None = None


class GatewaySpec(KubeModel):
    gateway_class_name: str = Field(alias="gatewayClassName")
    listeners: tuple[Listener, ...] = ()
    addresses: tuple[GatewaySpecAddress, ...] = ()
    infrastructure: GatewayInfrastructure | None = None
    allowed_listeners: AllowedListeners = Field(
        default_factory=AllowedListeners, alias="allowedListeners"
    )
    tls: GatewaySpecTLS | None = None

    @property
    def frontend(self) -> FrontendTLSConfig | None:
        return None if self.tls is None else self.tls.frontend


class Gateway(KubeObject):
    """A Gateway as parsed; ``status`` is kept as stored (its address, its timestamps)."""

    spec: GatewaySpec
    status: dict[str, Any] = Field(default_factory=dict)

    def stored_address(self) -> str | None:
        found = self.status.get("addresses")
        if isinstance(found, list):
            for entry in found:
                if isinstance(entry, dict) and isinstance(entry.get("value"), str):
                    return str(entry["value"])
        return None


def parse_gateway(raw: dict[str, Any]) -> Gateway:
    """A Gateway from API JSON; raises ``InvalidObject`` naming the bad field."""
    return parse_namespaced(Gateway, "Gateway", raw)


# --- addresses ------------------------------------------------------------------------------


def parse_address_pool(text: str) -> tuple[str, ...]:
    """``--gateway-addresses``: a CIDR (``127.10.0.0/24``: its host addresses) or a comma
    list of addresses and CIDRs, in order. Raises ValueError naming what is wrong."""
    found: list[str] = []
    for part in (p.strip() for p in text.split(",")):
        if not part:
            continue
        try:
            if "/" in part:
                network = ipaddress.ip_network(part, strict=False)
                hosts = list(network.hosts()) if network.num_addresses > 2 else list(network)
                if len(hosts) > 65536:
                    raise ValueError(f"{part} holds more than 65,536 addresses")
                found.extend(str(host) for host in hosts)
            else:
                found.append(str(ipaddress.ip_address(part)))
        except ValueError as error:
            raise ValueError(f"--gateway-addresses: {part!r}: {error}") from None
    if not found:
        raise ValueError("--gateway-addresses: no address given")
    return tuple(dict.fromkeys(found))


def _age(gateway: Gateway) -> tuple[float, str, str]:
    created = gateway.metadata.creation_timestamp
    moment = 0.0 if created is None else created.replace(tzinfo=created.tzinfo or UTC).timestamp()
    return (moment, gateway.metadata.namespace, gateway.metadata.name)


@dataclass(frozen=True, slots=True)
class AddressProblem:
    """Why a Gateway got no address (and so is not served): the condition and reason to
    report, and a sentence."""

    condition: str
    reason: str
    message: str


def assign_addresses(
    gateways: Iterable[Gateway],
    pool: Sequence[str],
    assigned: Mapping[ObjectKey, str] | None = None,
) -> dict[ObjectKey, str | AddressProblem]:
    """An address from ``pool`` for each Gateway, or why it has none.

    Oldest Gateways choose first. A Gateway asking for addresses (``spec.addresses``) is served
    on the first of them when every one is in the pool and free (else it is not programmed:
    ``AddressNotUsable``); one asking for another type than ``IPAddress`` is not accepted; an
    ``IPAddress`` without a value asks for any address. The others keep the address their
    status holds while it is in the pool and free, else take the first free one: a Gateway's
    address survives restarts and the arrival of other Gateways. ``assigned``: what the last call
    gave each Gateway, kept before the status's address, which lags it (written, then seen in a
    watch event): a Gateway whose address is in flight must not move when another one leaves and
    frees an address before its own.
    """
    earlier = assigned or {}
    ordered = sorted(gateways, key=_age)
    in_pool = set(pool)
    taken: set[str] = set()
    result: dict[ObjectKey, str | AddressProblem] = {}
    waiting: list[Gateway] = []
    for gateway in ordered:
        infrastructure = gateway.spec.infrastructure
        parameters = None if infrastructure is None else infrastructure.parameters_ref
        if parameters is not None:
            result[gateway.key] = AddressProblem(
                "Accepted",
                "InvalidParameters",
                f"spec.infrastructure.parametersRef ({parameters.kind} {parameters.name}): "
                "interlock reads no parameters; remove parametersRef",
            )
            continue
        requested = gateway.spec.addresses
        bad_type = next((a.type for a in requested if a.type != "IPAddress"), None)
        if bad_type is not None:
            result[gateway.key] = AddressProblem(
                "Accepted",
                "UnsupportedAddress",
                f"spec.addresses: type {bad_type} is not supported; use IPAddress",
            )
            continue
        # An IPAddress without a value asks for an address, any one: as if none was asked for.
        wanted = [a.value for a in requested if a.value]
        if not wanted:
            waiting.append(gateway)
            continue
        unusable = [value for value in wanted if value not in in_pool or value in taken]
        if unusable:
            result[gateway.key] = AddressProblem(
                "Programmed",
                "AddressNotUsable",
                f"spec.addresses: {', '.join(unusable)}: not in interlock's address pool "
                "(--gateway-addresses) or used by another Gateway",
            )
            continue
        # The data plane serves a Gateway on one address: the first it asks for.
        usable = wanted[0]
        taken.update(wanted)
        result[gateway.key] = usable
    later: list[Gateway] = []
    for gateway in waiting:
        kept = earlier.get(gateway.key) or gateway.stored_address()
        if kept is not None and kept in in_pool and kept not in taken:
            taken.add(kept)
            result[gateway.key] = kept
        else:
            later.append(gateway)
    free = (address for address in pool if address not in taken)
    for gateway in later:
        address = next(free, None)
        if address is None:
            result[gateway.key] = AddressProblem(
                "Programmed",
                "AddressNotAssigned",
                "every address of interlock's pool (--gateway-addresses) is taken"
                if pool
                else "interlock has no address pool for Gateways: start it with "
                "--gateway-addresses CIDR",
            )
        else:
            taken.add(address)
            result[gateway.key] = address
    return result


# --- listeners -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ListenerProblem:
    """Something that keeps a listener from working fully; ``condition`` is the condition it
    turns False (or, for ``Conflicted``, True), with the spec's ``reason``."""

    condition: str
    reason: str
    message: str


@dataclass(frozen=True, slots=True)
class ListenerCheck:
    """What a listener can do: the route kinds it carries, its problems, its usable
    certificates (Secret keys, in ``certificateRefs`` order) and the client certificates it
    asks for (HTTPS, ``spec.tls.frontend``)."""

    listener: Listener
    supported_kinds: tuple[tuple[str, str], ...]
    problems: tuple[ListenerProblem, ...]
    certificates: tuple[CertificatePair, ...] = ()
    owner: ObjectKey | None = None
    """The ListenerSet declaring the listener; None: the Gateway itself."""
    client_validation: ClientValidation | None = None

    @property
    def accepted(self) -> bool:
        return not any(p.condition in ("Accepted", "Conflicted") for p in self.problems)

    @property
    def usable(self) -> bool:
        """Whether routes may attach and traffic be served: accepted, with a kind to carry
        and, for HTTPS, a certificate."""
        if not self.accepted or not self.supported_kinds:
            return False
        return self.listener.protocol != "HTTPS" or bool(self.certificates)


def _kinds(
    listener: Listener, where: str
) -> tuple[tuple[tuple[str, str], ...], list[ListenerProblem]]:
    carried = PROTOCOL_ROUTE_KINDS.get(listener.protocol, ())
    if not listener.allowed_routes.kinds:
        return carried, []
    kinds: list[tuple[str, str]] = []
    bad: list[str] = []
    for entry in listener.allowed_routes.kinds:
        key = (normalize_group(entry.group), entry.kind)
        if key in carried:
            if key not in kinds:
                kinds.append(key)
        else:
            bad.append(f"{entry.group or 'core'}/{entry.kind}")
    problems = []
    if bad:
        problems.append(
            ListenerProblem(
                "ResolvedRefs",
                "InvalidRouteKinds",
                f"{where}.allowedRoutes.kinds: {', '.join(bad)} cannot be carried by a "
                f"{listener.protocol} listener",
            )
        )
    return tuple(kinds), problems


def _certificates(
    gateway: Gateway,
    listener: Listener,
    where: str,
    *,
    secrets: Mapping[ObjectKey, Mapping[str, SecretValue]],
    grants: Iterable[ReferenceGrant],
    from_kind: str,
) -> tuple[tuple[CertificatePair, ...], list[ListenerProblem]]:
    tls = listener.tls
    if tls is None or tls.mode != "Terminate" or not tls.certificate_refs:
        return (), [
            ListenerProblem(
                "ResolvedRefs",
                "InvalidCertificateRef",
                f"{where}.tls.certificateRefs: an HTTPS listener needs a certificate "
                "(tls.mode Terminate and a Secret of type kubernetes.io/tls)",
            )
        ]
    namespace = gateway.metadata.namespace
    usable: list[CertificatePair] = []
    problems: list[ListenerProblem] = []
    grant_list = tuple(grants)
    for index, ref in enumerate(tls.certificate_refs):
        field = f"{where}.tls.certificateRefs[{index}]"
        if normalize_group(ref.group) != "" or ref.kind != "Secret":
            problems.append(
                ListenerProblem(
                    "ResolvedRefs",
                    "InvalidCertificateRef",
                    f"{field}: {ref.kind} in group {ref.group or 'core'} is not a core Secret",
                )
            )
            continue
        key = ObjectKey(namespace=ref.namespace or namespace, name=ref.name)
        if not secret_reference_permitted(from_kind, namespace, key, grant_list):
            problems.append(
                ListenerProblem(
                    "ResolvedRefs",
                    "RefNotPermitted",
                    f"{field}: Secret {key}: no ReferenceGrant in namespace {key.namespace} "
                    f"permits references from {from_kind}s in namespace {namespace}",
                )
            )
            continue
        values = secrets.get(key)
        pair = None if values is None else tls_pair(values)
        if pair is None:
            problems.append(
                ListenerProblem(
                    "ResolvedRefs",
                    "InvalidCertificateRef",
                    f"{field}: Secret {key} "
                    + ("does not exist" if values is None else "holds no PEM tls.crt and tls.key"),
                )
            )
            continue
        usable.append(pair)
    return tuple(usable), problems


def secret_reference_permitted(
    from_kind: str, namespace: str, key: ObjectKey, grants: Iterable[ReferenceGrant]
) -> bool:
    """Whether a ``from_kind`` (Gateway, ListenerSet) in ``namespace`` may use the Secret
    ``key``: one of its own namespace, or one a ReferenceGrant of the Secret's namespace lets
    that kind refer to."""
    return reference_permitted(
        grants, from_kind=from_kind, from_namespace=namespace, kind="Secret", target=key
    )


def tls_pair(values: Mapping[str, SecretValue]) -> CertificatePair | None:
    cert, key = values.get("tls.crt"), values.get("tls.key")
    if cert is None or key is None:
        return None
    if b"-----BEGIN CERTIFICATE-----" not in cert.reveal():
        return None
    if b"PRIVATE KEY-----" not in key.reveal():
        return None
    return (cert, key)


def listener_problems(
    gateway: Gateway,
    *,
    secrets: Mapping[ObjectKey, Mapping[str, SecretValue]],
    grants: Iterable[ReferenceGrant],
    from_kind: str = "Gateway",
    owner: ObjectKey | None = None,
    ca_bundles: Mapping[ObjectKey, str | None] | None = None,
    frontend_of: Gateway | None = None,
) -> tuple[ListenerCheck, ...]:
    """Each listener of ``gateway`` checked on its own (and against the others on its port);
    ``ca_bundles``: the ``ca.crt`` of the ConfigMaps known (None: it has none), for the client
    certificate validation of HTTPS listeners.

    A ListenerSet's listeners are checked as those of a Gateway holding them in the
    ListenerSet's namespace (``model/listener_sets.py``): ``from_kind`` ``ListenerSet`` (what
    a ReferenceGrant for their certificates must permit), ``owner`` its key, ``frontend_of``
    its parent Gateway, whose ``spec.tls.frontend`` applies to every HTTPS listener on its
    ports, a ListenerSet's too (read in the Gateway's namespace, as the Gateway's own)."""
    source = gateway if frontend_of is None else frontend_of
    protocols_by_port: dict[int, set[str]] = {}
    for listener in gateway.spec.listeners:
        protocols_by_port.setdefault(listener.port, set()).add(listener.protocol)
    grant_list = tuple(grants)
    checks: list[ListenerCheck] = []
    for index, listener in enumerate(gateway.spec.listeners):
        where = f"{from_kind} {gateway.key}: spec.listeners[{index}] ({listener.name})"
        problems: list[ListenerProblem] = []
        if listener.protocol not in PROTOCOL_ROUTE_KINDS:
            problems.append(
                ListenerProblem(
                    "Accepted",
                    "UnsupportedProtocol",
                    f"{where}.protocol: {listener.protocol} is not supported; "
                    f"use {' or '.join(PROTOCOL_ROUTE_KINDS)}",
                )
            )
            checks.append(ListenerCheck(listener, (), tuple(problems), owner=owner))
            continue
        if listener.protocol == "TLS" and (
            listener.tls is None or listener.tls.mode != "Passthrough"
        ):
            # Terminating TLS for TLSRoutes (plain TCP to the backend) is not served: the
            # spec's reason for it (TLSRouteListenerTerminateNotSupported) is UnsupportedValue.
            problems.append(
                ListenerProblem(
                    "Accepted",
                    "UnsupportedValue",
                    f"{where}.tls.mode: a TLS listener is served in mode Passthrough only "
                    "(TLSRoutes reach their backends without the Gateway terminating TLS); "
                    "use an HTTPS listener to terminate TLS",
                )
            )
            checks.append(ListenerCheck(listener, (), tuple(problems), owner=owner))
            continue
        if len(protocols_by_port[listener.port]) > 1:
            others = sorted(protocols_by_port[listener.port] - {listener.protocol})
            problems.append(
                ListenerProblem(
                    "Conflicted",
                    "ProtocolConflict",
                    f"{where}: port {listener.port} is also used with protocol "
                    f"{', '.join(others)}; one port carries one protocol",
                )
            )
        kinds, kind_problems = _kinds(listener, where)
        problems.extend(kind_problems)
        certificates: tuple[CertificatePair, ...] = ()
        validation: ClientValidation | None = None
        if listener.protocol == "HTTPS":
            certificates, cert_problems = _certificates(
                gateway, listener, where, secrets=secrets, grants=grant_list, from_kind=from_kind
            )
            problems.extend(cert_problems)
            validation, frontend_problems = client_validation(
                source.spec.frontend,
                namespace=source.metadata.namespace,
                port=listener.port,
                where=where if source is gateway else f"{where}, Gateway {source.key}",
                ca_bundles=ca_bundles or {},
                grants=grant_list,
            )
            problems.extend(
                ListenerProblem(p.condition, p.reason, p.message) for p in frontend_problems
            )
        checks.append(
            ListenerCheck(listener, kinds, tuple(problems), certificates, owner, validation)
        )
    return tuple(checks)


def frontend_ca_dependencies(gateway: Gateway) -> tuple[ObjectKey, ...]:
    """The ConfigMaps the Gateway's client certificate validation names (to follow them)."""
    return ca_certificate_dependencies(gateway.spec.frontend, namespace=gateway.metadata.namespace)


def certificate_dependencies(gateway: Gateway) -> tuple[ObjectKey, ...]:
    """The Secrets the Gateway's HTTPS listeners name (to follow them)."""
    return listener_certificate_dependencies(gateway.metadata.namespace, gateway.spec.listeners)


def listener_certificate_dependencies(
    namespace: str, listeners: Iterable[Listener]
) -> tuple[ObjectKey, ...]:
    """The Secrets ``listeners`` declared in ``namespace`` (a Gateway's or a ListenerSet's)
    name."""
    found: list[ObjectKey] = []
    for listener in listeners:
        if listener.tls is None:
            continue
        for ref in listener.tls.certificate_refs:
            if normalize_group(ref.group) == "" and ref.kind == "Secret":
                key = ObjectKey(namespace=ref.namespace or namespace, name=ref.name)
                if key not in found:
                    found.append(key)
    return tuple(found)


# --- status --------------------------------------------------------------------------------


def listener_status(
    check: ListenerCheck,
    *,
    attached: int,
    address_ok: bool,
    port_failure: str | None,
    generation: int,
    stored: Mapping[str, Mapping[str, Any]],
    now: datetime,
) -> dict[str, Any]:
    by_condition: dict[str, ListenerProblem] = {}
    for problem in check.problems:
        by_condition.setdefault(problem.condition, problem)
    if port_failure is not None and "Accepted" not in by_condition:
        by_condition["Accepted"] = ListenerProblem("Accepted", "PortUnavailable", port_failure)

    def make(kind: str, status: bool, reason: str, message: str) -> dict[str, Any]:
        return condition(
            kind, status, reason, message, generation=generation, stored=stored, now=now
        )

    accepted = by_condition.get("Accepted")
    conflicted = by_condition.get("Conflicted")
    resolved = by_condition.get("ResolvedRefs")
    # A conflicted listener is refused for its conflict, whatever else is wrong with it: the
    # conflict is what its owner must resolve first (another listener has its port).
    conditions = [
        make("Accepted", False, conflicted.reason, conflicted.message)
        if conflicted is not None
        else make("Accepted", False, accepted.reason, accepted.message)
        if accepted is not None
        else make("Accepted", True, "Accepted", "the listener is valid"),
        make("Conflicted", True, conflicted.reason, conflicted.message)
        if conflicted is not None
        else make("Conflicted", False, "NoConflicts", "no other listener conflicts with it"),
        make("ResolvedRefs", False, resolved.reason, resolved.message)
        if resolved is not None
        else make("ResolvedRefs", True, "ResolvedRefs", "every reference is resolved"),
    ]
    if check.usable and address_ok and port_failure is None:
        conditions.append(make("Programmed", True, "Programmed", "the data plane serves it"))
    else:
        why = conflicted or next(iter(by_condition.values()), None)
        conditions.append(
            make(
                "Programmed",
                False,
                conflicted.reason
                if conflicted is not None
                else "Invalid"
                if not check.usable or port_failure is not None
                else "Pending",
                why.message if why is not None else "the Gateway has no address yet",
            )
        )
    return {
        "name": check.listener.name,
        "supportedKinds": [{"group": group, "kind": kind} for group, kind in check.supported_kinds],
        "attachedRoutes": attached,
        "conditions": conditions,
    }


def stored_listener_conditions(status: Mapping[str, Any]) -> dict[str, Any]:
    """A stored ``status.listeners``' conditions by listener name, then by type."""
    found: dict[str, Any] = {}
    raw_listeners = status.get("listeners")
    if isinstance(raw_listeners, list):
        for entry in raw_listeners:
            if isinstance(entry, dict) and isinstance(entry.get("name"), str):
                found[entry["name"]] = stored_conditions(entry.get("conditions"))
    return found


MODULES_CONDITION = "interlock.dev/ModuleSets"
"""The Gateway condition saying whether the ModuleSets its annotations name apply."""


def gateway_status(
    gateway: Gateway,
    checks: Sequence[ListenerCheck],
    *,
    address: str | AddressProblem,
    attached: Mapping[str, int],
    now: datetime,
    port_failures: Mapping[int, str] | None = None,
    attached_listener_sets: int = 0,
    resolved_refs: tuple[bool, str, str] | None = None,
    listener_set_checks: Sequence[ListenerCheck] = (),
    modules: tuple[bool, str, str] | None = None,
) -> dict[str, Any]:
    """The ``status`` interlock writes on one of its Gateways.

    ``checks``: those of its own listeners (ListenerSets' listeners are reported on the
    ListenerSets); ``attached_listener_sets``: the accepted ListenerSets attached to it;
    ``listener_set_checks``: their listeners, which its ``InsecureFrontendValidationMode``
    speaks for too (its ``spec.tls.frontend`` applies to them).

    ``attached``: accepted routes per listener name; ``port_failures``: ports the data plane
    could not open, with why (their listeners are not Accepted: ``PortUnavailable``). The
    Gateway is ``Accepted`` while one listener is (``ListenersNotValid`` names the others);
    ``Programmed`` once it has an address and a listener the data plane serves.
    ``resolved_refs``: the Gateway's own references (its backend client certificate,
    ``interlock.model.backend_tls.client_certificate``) as ``(status, reason, message)``; a
    ``ResolvedRefs`` condition only when it has some. ``modules``: whether the ModuleSets its
    annotations name apply (``interlock.model.gateway_modules.modules_condition``), as an
    ``interlock.dev/ModuleSets`` condition only when it names some.
    """
    generation = gateway.metadata.generation
    stored = stored_conditions(gateway.status.get("conditions"))
    stored_listeners = stored_listener_conditions(gateway.status)
    address_ok = isinstance(address, str)
    listeners = [
        listener_status(
            check,
            attached=attached.get(check.listener.name, 0),
            address_ok=address_ok,
            port_failure=(port_failures or {}).get(check.listener.port),
            generation=generation,
            stored=stored_listeners.get(check.listener.name, {}),
            now=now,
        )
        for check in checks
    ]
    failed_ports = port_failures or {}
    invalid = [c.listener.name for c in checks if not c.usable or c.listener.port in failed_ports]
    usable = len(checks) - len(invalid)

    def make(kind: str, status: bool, reason: str, message: str) -> dict[str, Any]:
        return condition(
            kind, status, reason, message, generation=generation, stored=stored, now=now
        )

    if isinstance(address, AddressProblem) and address.condition == "Accepted":
        accepted = make("Accepted", False, address.reason, address.message)
    elif usable == 0:
        accepted = make(
            "Accepted",
            False,
            "ListenersNotValid",
            "no listener is valid: " + ", ".join(invalid) if invalid else "it has no listener",
        )
    elif invalid:
        accepted = make(
            "Accepted", True, "ListenersNotValid", "listeners not valid: " + ", ".join(invalid)
        )
    else:
        accepted = make("Accepted", True, "Accepted", "every listener is valid")
    if isinstance(address, AddressProblem):
        programmed = make("Programmed", False, address.reason, address.message)
    elif usable == 0:
        programmed = make("Programmed", False, "Invalid", "no listener can be served")
    else:
        programmed = make("Programmed", True, "Programmed", f"served at {address}")
    conditions = [accepted, programmed]
    if resolved_refs is not None:
        conditions.append(make("ResolvedRefs", *resolved_refs))
    if modules is not None:
        conditions.append(make(MODULES_CONDITION, *modules))
    insecure = sorted(
        {
            check.listener.port
            for check in (*checks, *listener_set_checks)
            if check.usable
            and check.client_validation is not None
            and check.client_validation.insecure_fallback
        }
    )
    if insecure:
        # The spec: present while a listener lets clients in unchecked, removed once none does.
        conditions.append(
            make(
                "InsecureFrontendValidationMode",
                True,
                "ConfigurationChanged",
                "spec.tls.frontend: mode AllowInsecureFallback on port "
                + ", ".join(str(port) for port in insecure)
                + ": clients are let in without a valid certificate",
            )
        )
    status: dict[str, Any] = {
        "conditions": conditions,
        "listeners": listeners,
        "attachedListenerSets": attached_listener_sets,
    }
    status["addresses"] = (
        [{"type": "IPAddress", "value": address}] if isinstance(address, str) else []
    )
    return status


def route_kinds_allowed(
    listener: Listener,
    *,
    route_namespace: str,
    gateway_namespace: str,
    namespace_labels: Mapping[str, str] | None,
) -> bool:
    """Whether ``allowedRoutes.namespaces`` lets a route of ``route_namespace`` attach."""
    rule = listener.allowed_routes.namespaces
    return namespace_admitted(
        rule.from_,
        rule.selector,
        namespace=route_namespace,
        home=gateway_namespace,
        labels=namespace_labels,
    )


def namespace_admitted(
    from_: str,
    selector: LabelSelector | None,
    *,
    namespace: str,
    home: str,
    labels: Mapping[str, str] | None,
) -> bool:
    """A ``namespaces.from`` rule (``All``, ``Same`` as ``home``, ``Selector`` on the
    namespace's ``labels``, anything else: none) applied to ``namespace``."""
    if from_ == "All":
        return True
    if from_ == "Same":
        return namespace == home
    if from_ == "Selector":
        return selector is not None and labels is not None and selector.matches(labels)
    return False
