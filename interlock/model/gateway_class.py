"""GatewayClass: which classes are interlock's, and what their status says.

A GatewayClass names the controller that implements it. interlock takes the classes whose
``controllerName`` is :data:`GATEWAY_CONTROLLER_NAME` and tells their users, on the class itself,
that it accepted them (``Accepted``, with ``observedGeneration``) and which Gateway API features
it implements (``status.supportedFeatures``: the conformance suite reads that list to choose the
tests it runs, so it lists only what interlock passes). Classes of other controllers are never
written to: two controllers writing one status would fight.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from pydantic import Field

from interlock.model.gateway_conditions import condition, stored_conditions
from interlock.model.meta import KubeModel, KubeObject, parse_object
from interlock.model.route_status import GATEWAY_CONTROLLER_NAME as GATEWAY_CONTROLLER_NAME

SUPPORTED_FEATURES: tuple[str, ...] = tuple(
    sorted(
        (
            "Gateway",
            "HTTPRoute",
            "ReferenceGrant",
            "BackendTLSPolicy",
            "BackendTLSPolicySANValidation",
            "GatewayBackendClientCertificate",
            "GatewayAddressEmpty",
            "GatewayFrontendClientCertificateValidation",
            "GatewayFrontendClientCertificateValidationInsecureFallback",
            "GatewayHTTPListenerIsolation",
            "GatewayInfrastructurePropagation",
            "GatewayHTTPSListenerDetectMisdirectedRequests",
            "GatewayPort8080",
            "GatewayStaticAddresses",
            "HTTPRouteBackendProtocolH2C",
            "HTTPRouteRequestMirror",
            "HTTPRouteRequestMultipleMirrors",
            "HTTPRouteRequestPercentageMirror",
            "HTTPRoute303RedirectStatusCode",
            "HTTPRoute307RedirectStatusCode",
            "HTTPRoute308RedirectStatusCode",
            "HTTPRouteBackendProtocolWebSocket",
            "HTTPRouteBackendRequestHeaderModification",
            "HTTPRouteBackendTimeout",
            "HTTPRouteCORS",
            "HTTPRouteDestinationPortMatching",
            "HTTPRouteHostRewrite",
            "HTTPRouteMethodMatching",
            "HTTPRouteNamedRouteRule",
            "HTTPRouteParentRefPort",
            "HTTPRoutePathRedirect",
            "HTTPRoutePathRewrite",
            "HTTPRoutePortRedirect",
            "HTTPRouteQueryParamMatching",
            "HTTPRouteRequestTimeout",
            "HTTPRouteResponseHeaderModification",
            "HTTPRouteRetry",
            "HTTPRouteSchemeRedirect",
            "ListenerSet",
            "TLSRoute",
        )
    )
)
"""The conformance features interlock passes (``pkg/features`` names of v1.6.1), sorted: those
whose every test passed in a run of the official suite (GATEWAY-HTTP, and GATEWAY-TLS's core
TLSRoute; docs/gateway.md, "Conformance"). The suite chooses its tests by this list, so a
feature is added only once its tests pass."""


class ParametersReference(KubeModel):
    group: str
    kind: str
    name: str
    namespace: str | None = None


class GatewayClassSpec(KubeModel):
    controller_name: str = Field(alias="controllerName")
    parameters_ref: ParametersReference | None = Field(None, alias="parametersRef")


class GatewayClass(KubeObject):
    """A GatewayClass (cluster-scoped); ``status`` is kept as stored, for carrying timestamps."""

    spec: GatewayClassSpec
    status: dict[str, Any] = Field(default_factory=dict)

    @property
    def is_ours(self) -> bool:
        return self.spec.controller_name == GATEWAY_CONTROLLER_NAME


def parse_gateway_class(raw: dict[str, Any]) -> GatewayClass:
    """A GatewayClass from API JSON; raises ``InvalidObject`` naming the bad field."""
    return parse_object(GatewayClass, "GatewayClass", raw)


def gateway_class_status(gateway_class: GatewayClass, *, now: datetime) -> dict[str, Any]:
    """The ``status`` interlock writes on one of its classes.

    A class with ``parametersRef`` is not accepted (``InvalidParameters``): interlock reads no
    parameters, and pretending to would hide that the referenced settings have no effect.
    """
    stored: Mapping[str, Mapping[str, Any]] = stored_conditions(
        gateway_class.status.get("conditions")
    )
    generation = gateway_class.metadata.generation
    ref = gateway_class.spec.parameters_ref
    if ref is None:
        accepted = condition(
            "Accepted",
            True,
            "Accepted",
            f"interlock ({GATEWAY_CONTROLLER_NAME}) implements this class",
            generation=generation,
            stored=stored,
            now=now,
        )
    else:
        accepted = condition(
            "Accepted",
            False,
            "InvalidParameters",
            f"GatewayClass {gateway_class.metadata.name}: spec.parametersRef "
            f"({ref.kind} {ref.name}): interlock reads no parameters; remove parametersRef",
            generation=generation,
            stored=stored,
            now=now,
        )
    return {
        "conditions": [accepted],
        "supportedFeatures": [{"name": name} for name in sorted(SUPPORTED_FEATURES)],
    }
