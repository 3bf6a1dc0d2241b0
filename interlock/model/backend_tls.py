"""BackendTLSPolicy and a Gateway's backend client certificate: how a Gateway speaks TLS to a
backend, decided as pure functions.

A BackendTLSPolicy (``gateway.networking.k8s.io/v1``) names Services (``targetRefs``; a
``sectionName`` is a Service port's name) and says how a Gateway connecting to them must check
their certificate: signed by the CA bundles of ``caCertificateRefs`` (ConfigMaps in the policy's
namespace, key ``ca.crt``) or by the system's CAs (``wellKnownCACertificates: System``), for
``hostname`` (also sent as SNI) or, when ``subjectAltNames`` are listed, for one of those. A
Gateway's ``spec.tls.backend.clientCertificateRef`` (a ``kubernetes.io/tls`` Secret) is the
certificate it presents to such backends.

Without this module a route to a TLS backend would be forwarded in clear (and fail), or worse,
a policy whose CA cannot be read would be ignored and the backend reached unverified. Here:

* :func:`resolve_backend_tls` decides, per Service port, the one policy that applies (a policy
  naming the port beats one naming the whole Service; among equals the oldest, then
  ``namespace/name``, wins and the others are ``Conflicted``) and whether it is usable. A
  backend whose policy is not usable is never contacted: its requests are answered 500
  (:func:`apply_backend_tls`), as the spec requires ("connections using an invalid
  CACertificateRef MUST fail");
* :func:`backend_tls_status` writes each policy's ``status.ancestors``: one entry per Gateway of
  ours serving a route to a Service port the policy names, with ``Accepted`` and
  ``ResolvedRefs`` and the spec's reasons; entries of other controllers are kept;
* :func:`client_certificate` checks a Gateway's client certificate reference (``ResolvedRefs``
  on the Gateway: ``InvalidClientCertificateRef``, ``RefNotPermitted``).

Certificates and keys travel as :class:`~interlock.model.moduleset.SecretValue` (printed as
``<redacted>``); a CA bundle is public but is still only ever named, never printed.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from datetime import UTC, datetime
from typing import Any

from pydantic import Field

from interlock.model.gateway import GATEWAY_GROUP, ReferenceGrant, normalize_group
from interlock.model.gateway_class import GATEWAY_CONTROLLER_NAME
from interlock.model.gateway_conditions import condition, stored_conditions
from interlock.model.gateway_listeners import (
    CertificatePair,
    Gateway,
    secret_reference_permitted,
    tls_pair,
)
from interlock.model.gateway_mirrors import RuleMirror
from interlock.model.gateway_routes import GatewayServing
from interlock.model.meta import KubeModel, KubeObject, ObjectKey, parse_namespaced
from interlock.model.moduleset import SecretValue
from interlock.model.outbound import Backend, FailureInjector, OutboundPolicy
from interlock.model.service import Service

CA_KEY = "ca.crt"
"""The ConfigMap key a CA bundle is read from."""
MAX_ANCESTORS = 16
"""``status.ancestors`` holds at most this many entries (the CRD's limit)."""


class PolicyTargetReference(KubeModel):
    group: str = ""
    kind: str
    name: str
    section_name: str | None = Field(None, alias="sectionName")


class CACertificateReference(KubeModel):
    group: str = ""
    kind: str
    name: str


class SubjectAltName(KubeModel):
    type: str
    hostname: str = ""
    uri: str = ""


class BackendTLSValidation(KubeModel):
    ca_certificate_refs: tuple[CACertificateReference, ...] = Field((), alias="caCertificateRefs")
    well_known_ca_certificates: str | None = Field(None, alias="wellKnownCACertificates")
    hostname: str
    subject_alt_names: tuple[SubjectAltName, ...] = Field((), alias="subjectAltNames")


class BackendTLSPolicySpec(KubeModel):
    target_refs: tuple[PolicyTargetReference, ...] = Field((), alias="targetRefs")
    validation: BackendTLSValidation


class BackendTLSPolicy(KubeObject):
    """A BackendTLSPolicy as parsed; ``status`` kept as stored (other controllers' entries)."""

    spec: BackendTLSPolicySpec
    status: dict[str, Any] = Field(default_factory=dict)


def parse_backend_tls_policy(raw: dict[str, Any]) -> BackendTLSPolicy:
    """A BackendTLSPolicy from API JSON; raises ``InvalidObject`` naming the bad field."""
    return parse_namespaced(BackendTLSPolicy, "BackendTLSPolicy", raw)


@dataclass(frozen=True, slots=True)
class BackendTLS:
    """How the data plane speaks TLS to one backend: what it verifies, what it presents."""

    hostname: str
    """The SNI sent, and the name the certificate must be valid for when ``subject_alt_names``
    is empty."""
    ca_bundle: SecretValue | None
    """PEM CA certificates the backend's chain must end in; None: the system's CAs."""
    subject_alt_names: tuple[tuple[str, str], ...] = ()
    """``("Hostname", name)`` or ``("URI", uri)``: the certificate must carry one of them."""
    client_certificate: CertificatePair | None = field(default=None, repr=False)
    """``(tls.crt, tls.key)`` the Gateway presents, if it has one."""


@dataclass(frozen=True, slots=True)
class PolicyVerdict:
    """What one policy is worth on its own: its conditions, and its TLS settings if usable."""

    accepted: tuple[bool, str, str]
    resolved: tuple[bool, str, str]
    tls: BackendTLS | None


PortKey = tuple[ObjectKey, int]
"""A Service port: the Service and the port number."""


@dataclass(frozen=True, slots=True)
class BackendTLSResolution:
    """:func:`resolve_backend_tls`' result."""

    verdicts: Mapping[ObjectKey, PolicyVerdict]
    """Per policy, judged on its own (not counting conflicts)."""
    conflicted: Mapping[ObjectKey, str]
    """Policies that lost a target to another, with the winner's message."""
    by_port: Mapping[PortKey, ObjectKey]
    """Per Service port a policy names: the policy that applies."""


def _age(policy: BackendTLSPolicy) -> tuple[float, str, str]:
    created = policy.metadata.creation_timestamp
    return (
        datetime.max.replace(tzinfo=UTC).timestamp() if created is None else created.timestamp(),
        policy.metadata.namespace,
        policy.metadata.name,
    )


def _is_service(ref: PolicyTargetReference) -> bool:
    return normalize_group(ref.group) == "" and ref.kind == "Service"


def judge_policy(
    policy: BackendTLSPolicy, *, ca_bundles: Mapping[ObjectKey, str | None]
) -> PolicyVerdict:
    """One policy's conditions and settings, from the CA bundles of its namespace's ConfigMaps
    (``ca_bundles``: the ``ca.crt`` of each ConfigMap known, None when it has none)."""
    key = policy.key
    validation = policy.spec.validation
    refs = validation.ca_certificate_refs
    well_known = validation.well_known_ca_certificates
    where = f"BackendTLSPolicy {key}"
    resolved_ok = (True, "ResolvedRefs", "every CA certificate reference is resolved")
    if well_known and refs:
        problem = f"{where}: validation names both caCertificateRefs and wellKnownCACertificates"
        return PolicyVerdict((False, "Invalid", problem), resolved_ok, None)
    if not refs:
        if well_known != "System":
            problem = (
                f"{where}: validation.wellKnownCACertificates {well_known!r} is not supported "
                "(System is)"
                if well_known
                else f"{where}: validation names no CA (caCertificateRefs or "
                "wellKnownCACertificates: System)"
            )
            return PolicyVerdict((False, "Invalid", problem), resolved_ok, None)
        return PolicyVerdict(
            (True, "Accepted", "backends are verified against the system's CAs"),
            resolved_ok,
            _settings(validation, None),
        )
    bundles: list[str] = []
    problems: list[tuple[str, str]] = []
    for index, ref in enumerate(refs):
        field_name = f"validation.caCertificateRefs[{index}]"
        if normalize_group(ref.group) != "" or ref.kind != "ConfigMap":
            problems.append(
                (
                    "InvalidKind",
                    f"{field_name}: {ref.kind} in group {ref.group or 'core'} is not supported "
                    "(a ConfigMap is)",
                )
            )
            continue
        cm_key = ObjectKey(namespace=key.namespace, name=ref.name)
        if cm_key not in ca_bundles:
            problems.append(
                ("InvalidCACertificateRef", f"{field_name}: ConfigMap {cm_key} does not exist")
            )
            continue
        bundle = ca_bundles[cm_key]
        if bundle is None or not pem_certificates(bundle):
            problems.append(
                (
                    "InvalidCACertificateRef",
                    f"{field_name}: ConfigMap {cm_key} holds no PEM certificate under {CA_KEY}",
                )
            )
            continue
        bundles.append(bundle)
    resolved = (
        resolved_ok
        if not problems
        else (False, problems[0][0], "; ".join(message for _, message in problems))
    )
    if not bundles:
        return PolicyVerdict(
            (False, "NoValidCACertificate", f"{where}: no CA certificate reference is valid"),
            resolved,
            None,
        )
    settings = _settings(validation, SecretValue("\n".join(bundles).encode()))
    if problems:
        # Some references are invalid: connections using them must fail, so none is made.
        return PolicyVerdict(
            (True, "Accepted", "some CA certificate references are invalid"), resolved, None
        )
    return PolicyVerdict((True, "Accepted", "the policy is accepted"), resolved, settings)


_PEM_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----\s*([A-Za-z0-9+/=\s]+?)\s*-----END CERTIFICATE-----"
)


def pem_certificates(text: str) -> tuple[bytes, ...]:
    """The DER bytes of each PEM certificate block of ``text`` whose body is base64 (a block
    that is not is left out, as is anything between blocks)."""
    found: list[bytes] = []
    for match in _PEM_CERTIFICATE.finditer(text):
        try:
            der = base64.b64decode("".join(match.group(1).split()), validate=True)
        except binascii.Error:
            continue
        if der:
            found.append(der)
    return tuple(found)


def _settings(validation: BackendTLSValidation, ca_bundle: SecretValue | None) -> BackendTLS:
    names = tuple(
        (san.type, san.hostname if san.type == "Hostname" else san.uri)
        for san in validation.subject_alt_names
        if san.type in ("Hostname", "URI")
    )
    return BackendTLS(hostname=validation.hostname, ca_bundle=ca_bundle, subject_alt_names=names)


def resolve_backend_tls(
    policies: Iterable[BackendTLSPolicy],
    *,
    services: Mapping[ObjectKey, Service],
    ca_bundles: Mapping[ObjectKey, str | None],
) -> BackendTLSResolution:
    """Which policy applies to each Service port (see the module docstring), and each policy's
    verdict. Only Services in ``services`` are resolved (a port name needs its Service)."""
    ordered = sorted(policies, key=_age)
    verdicts = {policy.key: judge_policy(policy, ca_bundles=ca_bundles) for policy in ordered}
    # (Service, sectionName or None) -> the oldest policy naming it.
    owners: dict[tuple[ObjectKey, str | None], ObjectKey] = {}
    conflicted: dict[ObjectKey, str] = {}
    for policy in ordered:
        for ref in policy.spec.target_refs:
            if not _is_service(ref):
                continue
            target = (ObjectKey(namespace=policy.key.namespace, name=ref.name), ref.section_name)
            owner = owners.setdefault(target, policy.key)
            if owner != policy.key:
                port_text = "" if ref.section_name is None else f" port {ref.section_name}"
                conflicted[policy.key] = (
                    f"BackendTLSPolicy {owner} names Service {target[0]}{port_text} too and takes "
                    "precedence (older, or first by namespace/name)"
                )
    by_port: dict[PortKey, ObjectKey] = {}
    for (service_key, section), owner in owners.items():
        service = services.get(service_key)
        if service is None:
            continue
        for port in service.spec.ports:
            if section is None:
                by_port.setdefault((service_key, port.port), owner)
            elif port.name == section:
                by_port[(service_key, port.port)] = owner  # the port's own policy wins
    return BackendTLSResolution(verdicts=verdicts, conflicted=conflicted, by_port=by_port)


def _named_ports(policy: BackendTLSPolicy, services: Mapping[ObjectKey, Service]) -> set[PortKey]:
    """The Service ports a policy names (whether or not it applies to them)."""
    found: set[PortKey] = set()
    for ref in policy.spec.target_refs:
        if not _is_service(ref):
            continue
        key = ObjectKey(namespace=policy.key.namespace, name=ref.name)
        service = services.get(key)
        for port in () if service is None else service.spec.ports:
            if ref.section_name is None or port.name == ref.section_name:
                found.add((key, port.port))
    return found


def backend_tls_debug(
    policies: Iterable[BackendTLSPolicy],
    *,
    services: Mapping[ObjectKey, Service],
    ca_bundles: Mapping[ObjectKey, str | None],
) -> dict[str, Any]:
    """What ``/debug/gateways`` shows of the policies: per policy its conditions' reasons, a
    conflict, and the Service ports it applies to (no CA, no key)."""
    resolution = resolve_backend_tls(policies, services=services, ca_bundles=ca_bundles)
    ports: dict[ObjectKey, list[str]] = {}
    for (service, port), owner in sorted(resolution.by_port.items(), key=lambda i: str(i[0])):
        ports.setdefault(owner, []).append(f"{service}:{port}")
    return {
        str(key): {
            "accepted": verdict.accepted[1],
            "resolvedRefs": verdict.resolved[1],
            "conflicted": key in resolution.conflicted,
            "usable": verdict.tls is not None,
            "appliesTo": ports.get(key, []),
        }
        for key, verdict in sorted(resolution.verdicts.items(), key=lambda i: str(i[0]))
    }


# --- the Gateway's client certificate ------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ClientCertificateCheck:
    """A Gateway's ``spec.tls.backend.clientCertificateRef``: the pair, or why not."""

    pair: CertificatePair | None = field(repr=False)
    reason: str
    message: str

    @property
    def resolved(self) -> bool:
        return self.pair is not None


def client_certificate(
    gateway: Gateway,
    *,
    secrets: Mapping[ObjectKey, Mapping[str, SecretValue]],
    grants: Iterable[ReferenceGrant],
) -> ClientCertificateCheck | None:
    """The Gateway's backend client certificate (None: it names none)."""
    tls = gateway.spec.tls
    ref = None if tls is None or tls.backend is None else tls.backend.client_certificate_ref
    if ref is None:
        return None
    namespace = gateway.metadata.namespace
    where = f"Gateway {gateway.key}: spec.tls.backend.clientCertificateRef"
    if normalize_group(ref.group) != "" or ref.kind != "Secret":
        return ClientCertificateCheck(
            None,
            "InvalidClientCertificateRef",
            f"{where}: {ref.kind} in group {ref.group or 'core'} is not a core Secret",
        )
    key = ObjectKey(namespace=ref.namespace or namespace, name=ref.name)
    if not secret_reference_permitted("Gateway", namespace, key, grants):
        return ClientCertificateCheck(
            None,
            "RefNotPermitted",
            f"{where}: Secret {key}: no ReferenceGrant in namespace {key.namespace} permits "
            f"references from Gateways in namespace {namespace}",
        )
    values = secrets.get(key)
    pair = None if values is None else tls_pair(values)
    if pair is None:
        return ClientCertificateCheck(
            None,
            "InvalidClientCertificateRef",
            f"{where}: Secret {key} "
            + ("does not exist" if values is None else "holds no PEM tls.crt and tls.key"),
        )
    return ClientCertificateCheck(pair, "ResolvedRefs", f"{where}: Secret {key} is used")


def client_certificate_dependency(gateway: Gateway) -> ObjectKey | None:
    """The Secret a Gateway's backend client certificate reference names, if any."""
    tls = gateway.spec.tls
    ref = None if tls is None or tls.backend is None else tls.backend.client_certificate_ref
    if ref is None or normalize_group(ref.group) != "" or ref.kind != "Secret":
        return None
    return ObjectKey(namespace=ref.namespace or gateway.metadata.namespace, name=ref.name)


def ca_dependencies(policy: BackendTLSPolicy) -> tuple[ObjectKey, ...]:
    """The ConfigMaps a policy's CA references name."""
    return tuple(
        ObjectKey(namespace=policy.key.namespace, name=ref.name)
        for ref in policy.spec.validation.ca_certificate_refs
        if normalize_group(ref.group) == "" and ref.kind == "ConfigMap"
    )


# --- serving ---------------------------------------------------------------------------------


def policy_backends(policy: OutboundPolicy) -> set[PortKey]:
    """The Service ports an outbound policy's routes send to."""
    return {
        (backend.key, backend.port)
        for route in policy.routes
        for rule in route.rules
        for backend in rule.backends
        if backend.exists and backend.port is not None
    }


def backend_with_tls(
    backend: Backend,
    resolution: BackendTLSResolution,
    client: CertificatePair | None,
) -> Backend:
    """``backend`` as a Gateway sends to it: with the TLS settings of the policy that applies to
    its Service port, refused (500, never contacted) when that policy is not usable."""
    if not backend.exists or backend.port is None:
        return backend
    owner = resolution.by_port.get((backend.key, backend.port))
    if owner is None:
        return backend
    verdict = resolution.verdicts[owner]
    if verdict.tls is None:
        message = (
            f"backend {backend.namespace}/{backend.name} port {backend.port}: BackendTLSPolicy "
            f"{owner} cannot be used ({verdict.accepted[1]}, {verdict.resolved[1]})"
        )
        return replace(
            backend,
            exists=False,
            failure_injector=FailureInjector(status=500, message=message),
        )
    return replace(backend, tls=replace(verdict.tls, client_certificate=client))


def apply_backend_tls(
    policy: OutboundPolicy,
    resolution: BackendTLSResolution,
    client: CertificatePair | None,
) -> OutboundPolicy:
    """``policy`` with each backend as :func:`backend_with_tls` makes it (the same object when
    no backend is named by a policy)."""
    if not any(port in resolution.by_port for port in policy_backends(policy)):
        return policy
    routes = tuple(
        replace(
            route,
            rules=tuple(
                replace(
                    rule,
                    backends=tuple(backend_with_tls(b, resolution, client) for b in rule.backends),
                )
                for rule in route.rules
            ),
        )
        for route in policy.routes
    )
    return replace(policy, routes=routes)


def serve_backend_tls(
    serving: GatewayServing,
    resolution: BackendTLSResolution,
    client: CertificatePair | None,
) -> GatewayServing:
    """What a Gateway serves, each backend with its TLS settings (:func:`apply_backend_tls`,
    ``client``: the Gateway's backend client certificate), RequestMirror copies too (none
    to a port whose policy cannot be used)."""
    if not resolution.by_port:
        return serving
    return replace(
        serving,
        ports=tuple(
            replace(
                port,
                listeners=tuple(
                    replace(
                        listener,
                        virtual_hosts=tuple(
                            replace(
                                virtual,
                                policy=apply_backend_tls(virtual.policy, resolution, client),
                                mirrors={
                                    rule: kept
                                    for rule, mirrors in virtual.mirrors.items()
                                    if (kept := _mirrors_with_tls(mirrors, resolution, client))
                                },
                            )
                            for virtual in listener.virtual_hosts
                        ),
                    )
                    for listener in port.listeners
                ),
            )
            for port in serving.ports
        ),
    )


def _mirrors_with_tls(
    mirrors: tuple[RuleMirror, ...],
    resolution: BackendTLSResolution,
    client: CertificatePair | None,
) -> tuple[RuleMirror, ...]:
    """The mirrors, each to a Service port a policy names with its TLS settings; one whose
    policy cannot be used gets no copy (never in clear, never unverified)."""
    kept: list[RuleMirror] = []
    for mirror in mirrors:
        key = (ObjectKey(namespace=mirror.namespace, name=mirror.service), mirror.port)
        owner = resolution.by_port.get(key)
        if owner is None:
            kept.append(mirror)
            continue
        tls = resolution.verdicts[owner].tls
        if tls is not None:
            kept.append(replace(mirror, tls=replace(tls, client_certificate=client)))
    return tuple(kept)


def serving_backends(serving: GatewayServing) -> set[PortKey]:
    """The Service ports a Gateway sends to."""
    return {
        found
        for port in serving.ports
        for listener in port.listeners
        for virtual in listener.virtual_hosts
        for found in policy_backends(virtual.policy)
    }


# --- status ------------------------------------------------------------------------------------


def _ancestor_ref(gateway: ObjectKey) -> dict[str, Any]:
    return {
        "group": GATEWAY_GROUP,
        "kind": "Gateway",
        "namespace": gateway.namespace,
        "name": gateway.name,
    }


def backend_tls_status(
    policy: BackendTLSPolicy,
    resolution: BackendTLSResolution,
    *,
    services: Mapping[ObjectKey, Service],
    gateway_backends: Mapping[ObjectKey, set[PortKey]],
    now: datetime,
) -> dict[str, Any]:
    """The ``status`` interlock wants on ``policy``: other controllers' ancestors as stored,
    then one entry per Gateway of ours sending to a Service port the policy names."""
    stored = policy.status.get("ancestors")
    kept: list[dict[str, Any]] = []
    ours_stored: dict[tuple[str, str], Mapping[str, Mapping[str, Any]]] = {}
    for entry in stored if isinstance(stored, list) else ():
        if not isinstance(entry, dict):
            continue
        if entry.get("controllerName") != GATEWAY_CONTROLLER_NAME:
            kept.append(entry)
            continue
        ref = entry.get("ancestorRef")
        if isinstance(ref, dict):
            ours_stored[(str(ref.get("namespace", "")), str(ref.get("name", "")))] = (
                stored_conditions(entry.get("conditions"))
            )
    named = _named_ports(policy, services)
    generation = policy.metadata.generation
    verdict = resolution.verdicts.get(policy.key)
    ancestors = list(kept)
    for gateway in sorted(gateway_backends, key=lambda k: (k.namespace, k.name)):
        if len(ancestors) >= MAX_ANCESTORS:
            break
        if not named & gateway_backends[gateway]:
            continue
        before = ours_stored.get((gateway.namespace, gateway.name), {})
        accepted, resolved = (
            ((False, "Invalid", "unknown"), (False, "Invalid", "unknown"))
            if verdict is None
            else (verdict.accepted, verdict.resolved)
        )
        lost = resolution.conflicted.get(policy.key)
        if lost is not None and accepted[0]:
            accepted = (False, "Conflicted", lost)
        ancestors.append(
            {
                "ancestorRef": _ancestor_ref(gateway),
                "controllerName": GATEWAY_CONTROLLER_NAME,
                "conditions": [
                    condition("Accepted", *accepted, generation=generation, stored=before, now=now),
                    condition(
                        "ResolvedRefs", *resolved, generation=generation, stored=before, now=now
                    ),
                ],
            }
        )
    return {"ancestors": ancestors}
