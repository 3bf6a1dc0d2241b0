"""The ModuleSet resource (``interlock.dev/v1alpha1``) and Secret values.

A ModuleSet names the modules an edge route runs before its backend. These types are the
contract between the model (which merges ModuleSets and resolves their Secrets) and the edge data
plane (which enforces them), so the field names follow the CRD exactly.

Secret values are wrapped in :class:`SecretValue`, whose ``repr`` and ``str`` never show the
value: a Secret must not reach a log line, a trace, an Event or a debug page by accident.
"""

from __future__ import annotations

import base64
import binascii
from typing import Any, Literal

from pydantic import Field

from interlock.model.meta import KubeModel, ObjectMeta


class SecretValue:
    """Bytes from a Secret. Printing it shows ``<redacted>``; call :meth:`reveal` to use it."""

    __slots__ = ("_value",)

    def __init__(self, value: bytes) -> None:
        self._value = value

    def reveal(self) -> bytes:
        return self._value

    def __repr__(self) -> str:
        return "SecretValue(<redacted>)"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SecretValue) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


class SecretKeyRef(KubeModel):
    """A key of a Secret in the ModuleSet's own namespace."""

    name: str
    key: str


class Secret(KubeModel):
    """A v1 Secret; only ``data`` (base64) and ``stringData`` are read, values never printed."""

    metadata: ObjectMeta
    type: str = "Opaque"
    raw_data: dict[str, str] = Field(default_factory=dict, alias="data", repr=False)
    string_data: dict[str, str] = Field(default_factory=dict, alias="stringData", repr=False)

    def value(self, key: str) -> SecretValue | None:
        """The decoded value of ``key``, or None when the key is absent or not valid base64."""
        if key in self.string_data:
            return SecretValue(self.string_data[key].encode())
        encoded = self.raw_data.get(key)
        if encoded is None:
            return None
        try:
            return SecretValue(base64.b64decode(encoded, validate=True))
        except (binascii.Error, ValueError):
            return None


class HeaderChanges(KubeModel):
    add: dict[str, str] = Field(default_factory=dict)
    remove: list[str] = Field(default_factory=list)


class HeadersModule(KubeModel):
    request: HeaderChanges = Field(default_factory=HeaderChanges)
    response: HeaderChanges = Field(default_factory=HeaderChanges)


class CompressionModule(KubeModel):
    enabled: bool = True


class IpRestrictionModule(KubeModel):
    """CIDRs as written by the user; they are parsed when the module is applied (deny wins)."""

    allow: list[str] = Field(default_factory=list)
    deny: list[str] = Field(default_factory=list)


class BasicAuthModule(KubeModel):
    realm: str = "interlock"
    secret_ref: SecretKeyRef = Field(alias="secretRef")


class JwtModule(KubeModel):
    issuer: str
    audiences: list[str] = Field(default_factory=list)
    jwks_secret_ref: SecretKeyRef = Field(alias="jwksSecretRef")


class WebhookVerificationModule(KubeModel):
    provider: Literal["github", "stripe", "slack", "generic"]
    secret_ref: SecretKeyRef = Field(alias="secretRef")


class CircuitBreakerModule(KubeModel):
    error_threshold_percentage: float = Field(50, alias="errorThresholdPercentage", ge=0, le=100)
    volume_threshold: int = Field(20, alias="volumeThreshold", ge=1)
    rolling_window: str = Field("10s", alias="rollingWindow")
    tripped_duration: str = Field("30s", alias="trippedDuration")


class RateLimitModule(KubeModel):
    requests: int = Field(ge=1)
    period: str = "1m"


class Modules(KubeModel):
    """Every module is optional. Field order here is not the order they run in (see edge/)."""

    ip_restriction: IpRestrictionModule | None = Field(None, alias="ipRestriction")
    basic_auth: BasicAuthModule | None = Field(None, alias="basicAuth")
    jwt: JwtModule | None = None
    webhook_verification: WebhookVerificationModule | None = Field(
        None, alias="webhookVerification"
    )
    headers: HeadersModule | None = None
    compression: CompressionModule | None = None
    circuit_breaker: CircuitBreakerModule | None = Field(None, alias="circuitBreaker")
    rate_limit: RateLimitModule | None = Field(None, alias="rateLimit")


class ModuleSetSpec(KubeModel):
    modules: Modules = Field(default_factory=Modules)


class ModuleSet(KubeModel):
    metadata: ObjectMeta
    spec: ModuleSetSpec = Field(default_factory=ModuleSetSpec)
    status: dict[str, Any] = Field(default_factory=dict)
