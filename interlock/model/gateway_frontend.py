"""Client certificate validation on a Gateway's HTTPS listeners (``spec.tls.frontend``).

A Gateway may ask the clients of its HTTPS listeners for a certificate issued by CAs it names:
a ``default`` for every HTTPS listener and ``perPort`` overrides, each with
``caCertificateRefs`` (ConfigMaps holding PEM under ``ca.crt``; another namespace's only where a
ReferenceGrant there permits it) and a ``mode``: ``AllowValidOnly`` (no valid certificate, no
connection) or ``AllowInsecureFallback`` (every client is let in; the Gateway says so in its
``InsecureFrontendValidationMode`` condition).

Without this module a listener configured for mutual TLS would serve every client: the worst
way to fail, because nothing on the Gateway would say so. So a listener whose validation cannot
be built is never served without it: any bad reference turns the listener's ``ResolvedRefs``
False with the spec's reason (``InvalidCACertificateRef``, ``InvalidCACertificateKind``,
``RefNotPermitted``), and when no reference is usable the listener is not ``Accepted``
(``NoValidCACertificate``) and serves nothing. Pure functions of the Gateway, the ConfigMaps and
the ReferenceGrants; the data plane turns :class:`ClientValidation` into its TLS context.
"""

from __future__ import annotations

import base64
import binascii
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Literal

from pydantic import Field

from interlock.model.gateway import ReferenceGrant, normalize_group, reference_permitted
from interlock.model.meta import KubeModel, ObjectKey

CA_KEY = "ca.crt"
"""The ConfigMap key of a PEM CA bundle (Support: Core); as ``backend_tls.CA_KEY``, which
imports this module's callers and so cannot be imported here."""

FrontendValidationMode = Literal["AllowValidOnly", "AllowInsecureFallback"]
ALLOW_VALID_ONLY: FrontendValidationMode = "AllowValidOnly"
ALLOW_INSECURE_FALLBACK: FrontendValidationMode = "AllowInsecureFallback"


class ObjectReference(KubeModel):
    """The Gateway API's ObjectReference: group and kind are required, namespace optional."""

    group: str
    kind: str
    name: str
    namespace: str | None = None


class FrontendTLSValidation(KubeModel):
    ca_certificate_refs: tuple[ObjectReference, ...] = Field((), alias="caCertificateRefs")
    mode: FrontendValidationMode = ALLOW_VALID_ONLY


class FrontendTLSSettings(KubeModel):
    validation: FrontendTLSValidation | None = None


class FrontendTLSPort(KubeModel):
    port: int
    tls: FrontendTLSSettings = Field(default_factory=FrontendTLSSettings)


class FrontendTLSConfig(KubeModel):
    """``spec.tls.frontend``: the default and the per-port overrides."""

    default: FrontendTLSSettings = Field(default_factory=FrontendTLSSettings)
    per_port: tuple[FrontendTLSPort, ...] = Field((), alias="perPort")


@dataclass(frozen=True, slots=True)
class ClientValidation:
    """What an HTTPS listener asks of its clients: a certificate issued by one of the CAs of
    ``ca_bundle`` (PEM text, public), or — ``insecure_fallback`` — nothing it enforces."""

    ca_bundle: str
    mode: FrontendValidationMode = ALLOW_VALID_ONLY

    @property
    def insecure_fallback(self) -> bool:
        return self.mode == ALLOW_INSECURE_FALLBACK


@dataclass(frozen=True, slots=True)
class FrontendProblem:
    """A listener condition the validation turns False, with the spec's reason."""

    condition: str
    reason: str
    message: str


def _settings_for(
    frontend: FrontendTLSConfig, port: int
) -> tuple[FrontendTLSValidation | None, str]:
    """The validation that applies on ``port`` (an override, else the default) and its path."""
    for index, entry in enumerate(frontend.per_port):
        if entry.port == port:
            return entry.tls.validation, f"spec.tls.frontend.perPort[{index}].tls.validation"
    return frontend.default.validation, "spec.tls.frontend.default.validation"


_PEM_CERTIFICATE = re.compile(
    r"-----BEGIN CERTIFICATE-----\s*([A-Za-z0-9+/=\s]+?)\s*-----END CERTIFICATE-----"
)


def pem_certificates(text: str) -> tuple[str, ...]:
    """The PEM certificate blocks of ``text`` whose body is base64 of a DER SEQUENCE."""
    found: list[str] = []
    for match in _PEM_CERTIFICATE.finditer(text):
        try:
            der = base64.b64decode("".join(match.group(1).split()), validate=True)
        except (binascii.Error, ValueError):
            continue
        if der[:1] == b"\x30":
            found.append(match.group(0))
    return tuple(found)


def client_validation(
    frontend: FrontendTLSConfig | None,
    *,
    namespace: str,
    port: int,
    where: str,
    ca_bundles: Mapping[ObjectKey, str | None],
    grants: Iterable[ReferenceGrant],
) -> tuple[ClientValidation | None, tuple[FrontendProblem, ...]]:
    """The client validation of an HTTPS listener on ``port`` of a Gateway in ``namespace``
    (None: none configured, or none usable), and the problems that keep it from being whole.

    ``where`` names the listener in messages; ``ca_bundles``: the ``ca.crt`` of each ConfigMap
    known (None: it has none), as BackendTLSPolicies read them. Every reference is checked;
    the usable ones' certificates are trusted together. A listener asked to validate with no
    usable CA gets ``Accepted`` False (``NoValidCACertificate``): it must not serve clients
    unchecked.
    """
    if frontend is None:
        return None, ()
    validation, path = _settings_for(frontend, port)
    if validation is None:
        return None, ()
    grant_list = tuple(grants)
    bundles: list[str] = []
    problems: list[FrontendProblem] = []
    for index, ref in enumerate(validation.ca_certificate_refs):
        field = f"{where}: {path}.caCertificateRefs[{index}]"
        if normalize_group(ref.group) != "" or ref.kind != "ConfigMap":
            problems.append(
                FrontendProblem(
                    "ResolvedRefs",
                    "InvalidCACertificateKind",
                    f"{field}: {ref.kind} in group {ref.group or 'core'} is not supported; "
                    "name a core ConfigMap with the CA certificate under ca.crt",
                )
            )
            continue
        key = ObjectKey(namespace=ref.namespace or namespace, name=ref.name)
        if not reference_permitted(
            grant_list, from_kind="Gateway", from_namespace=namespace, kind="ConfigMap", target=key
        ):
            problems.append(
                FrontendProblem(
                    "ResolvedRefs",
                    "RefNotPermitted",
                    f"{field}: ConfigMap {key}: no ReferenceGrant in namespace {key.namespace} "
                    f"permits references from Gateways in namespace {namespace}",
                )
            )
            continue
        bundle = ca_bundles.get(key)
        certificates = pem_certificates(bundle) if bundle else ()
        if not certificates:
            problems.append(
                FrontendProblem(
                    "ResolvedRefs",
                    "InvalidCACertificateRef",
                    f"{field}: ConfigMap {key} "
                    + (
                        "does not exist"
                        if key not in ca_bundles
                        else f"holds no PEM certificate under {CA_KEY}"
                    ),
                )
            )
            continue
        bundles.append("\n".join(certificates) + "\n")
    if not bundles:
        problems.append(
            FrontendProblem(
                "Accepted",
                "NoValidCACertificate",
                f"{where}: {path}: no usable CA certificate to validate clients with"
                + ("" if validation.ca_certificate_refs else " (caCertificateRefs is empty)"),
            )
        )
        return None, tuple(problems)
    return ClientValidation(ca_bundle="".join(bundles), mode=validation.mode), tuple(problems)


def ca_certificate_dependencies(
    frontend: FrontendTLSConfig | None, *, namespace: str
) -> tuple[ObjectKey, ...]:
    """The ConfigMaps ``frontend`` names (to follow them), in order, once each."""
    if frontend is None:
        return ()
    validations = [frontend.default.validation, *(p.tls.validation for p in frontend.per_port)]
    found: list[ObjectKey] = []
    for validation in validations:
        for ref in () if validation is None else validation.ca_certificate_refs:
            if normalize_group(ref.group) == "" and ref.kind == "ConfigMap":
                key = ObjectKey(namespace=ref.namespace or namespace, name=ref.name)
                if key not in found:
                    found.append(key)
    return tuple(found)
