"""The ModuleSet resource (``interlock.dev/v1alpha1``) and Secret values.

A ModuleSet names the modules an edge route runs before its backend. These types are the
contract between the model (which merges ModuleSets and resolves their Secrets) and the edge data
plane (which enforces them), so the field names follow the CRD exactly.

Secret values are wrapped in :class:`SecretValue`, whose ``repr`` and ``str`` never show the
value: a Secret must not reach a log line, a trace, an Event or a debug page by accident.

A ModuleSet is parsed so that it *fails closed*: pydantic would silently ignore an unknown module
type (``ipRestrction:``) or an unknown field inside a module (``ipRestriction: {alow: [...]}``),
which would serve a route with less protection than its author wrote. :class:`ModuleSetSpec`
therefore sifts ``spec.modules`` before validation and keeps every unknown key and every invalid
module as a :class:`ModuleProblem`, then adds what types alone cannot check (CIDRs, durations,
header names). That is the one validation of a ModuleSet: it happens when the ModuleSet is
parsed, and everyone who asks whether a set may be used (its status, the Ingresses and Gateway
routes naming it) reads the result, :attr:`ModuleSet.problems`. A ModuleSet with any problem is
never used for a route; :func:`describe_invalid` is how every report of it reads.
"""

from __future__ import annotations

import base64
import binascii
import types
import typing
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime
from typing import Any, Literal

from pydantic import BaseModel, Field, ValidationError, model_validator

from interlock.model.ingress_nginx import IngressNginxModule
from interlock.model.meta import (
    KubeModel,
    KubeObject,
    ObjectKey,
    parse_namespaced,
)
from interlock.model.secret_value import SecretValue as SecretValue
from interlock.model.validation import describe as describe_validation_error


class SecretKeyRef(KubeModel):
    """A key of a Secret in the ModuleSet's own namespace."""

    name: str
    key: str


class Secret(KubeObject):
    """A v1 Secret; only ``data`` (base64) and ``stringData`` are read, values never printed."""

    type: str = "Opaque"
    raw_data: dict[str, str] = Field(default_factory=dict, alias="data", repr=False, exclude=True)
    string_data: dict[str, str] = Field(
        default_factory=dict, alias="stringData", repr=False, exclude=True
    )

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
    replay_window: str | None = Field(None, alias="replayWindow")
    """github only: refuse a delivery whose ``X-GitHub-Delivery`` id was already accepted within
    this duration (GitHub signs no timestamp, so a captured delivery verifies again). Off when
    unset."""


class CircuitBreakerModule(KubeModel):
    error_threshold_percentage: float = Field(50, alias="errorThresholdPercentage", ge=0, le=100)
    volume_threshold: int = Field(20, alias="volumeThreshold", ge=1)
    rolling_window: str = Field("10s", alias="rollingWindow")
    tripped_duration: str = Field("30s", alias="trippedDuration")


class RateLimitModule(KubeModel):
    requests: int = Field(ge=1)
    period: str = "1m"


class OAuthProviderSettings(KubeModel):
    """What every oauth provider and the oidc module share: the client, who may sign in, and
    how long a session lasts (see ``docs/modules.md``)."""

    options_passthrough: bool = Field(False, alias="optionsPassthrough")
    """OPTIONS requests (CORS preflights) reach the backend without a session."""
    inactivity_timeout: str | None = Field(None, alias="inactivityTimeout")
    maximum_duration: str | None = Field(None, alias="maximumDuration")
    auth_check_interval: str | None = Field(None, alias="authCheckInterval")
    client_id: str = Field("", alias="clientId")
    client_secret: SecretKeyRef | None = Field(None, alias="clientSecret")
    scopes: list[str] = Field(default_factory=list)
    email_addresses: list[str] = Field(default_factory=list, alias="emailAddresses")
    email_domains: list[str] = Field(default_factory=list, alias="emailDomains")
    session_secret: SecretKeyRef | None = Field(None, alias="sessionSecret")
    """Keys of the session cookie, one per line (the first seals, all open: rotation); when
    unset they are derived from the client secret."""
    identity_headers: dict[str, str] = Field(default_factory=dict, alias="identityHeaders")
    """Extra headers to the backend: header name → claim name."""


class GenericOAuthProvider(OAuthProviderSettings):
    """A provider given by its endpoints instead of a preset."""

    authorize_url: str = Field(alias="authorizeUrl")
    token_url: str = Field(alias="tokenUrl")
    userinfo_url: str = Field(alias="userinfoUrl")


class OAuthModule(KubeModel):
    """Exactly one provider: a preset (endpoints and claims known) or ``generic``."""

    google: OAuthProviderSettings | None = None
    github: OAuthProviderSettings | None = None
    gitlab: OAuthProviderSettings | None = None
    microsoft: OAuthProviderSettings | None = None
    generic: GenericOAuthProvider | None = None

    def providers(self) -> list[tuple[str, OAuthProviderSettings]]:
        """The configured providers, by name (exactly one in a valid module)."""
        return [
            (name, config)
            for name in OAUTH_PROVIDERS
            if (config := getattr(self, name)) is not None
        ]


OAUTH_PROVIDERS = ("google", "github", "gitlab", "microsoft", "generic")


class OidcModule(OAuthProviderSettings):
    """An OpenID Connect provider found by discovery from its issuer."""

    issuer: str


class MutualTlsModule(KubeModel):
    """Client certificates required, verified against the CA certificates in a Secret key (PEM;
    one or more certificates, roots or intermediates: each one is a trust anchor)."""

    ca_secret_ref: SecretKeyRef = Field(alias="caSecretRef")


class Modules(KubeModel):
    """Every module is optional. Field order here is not the order they run in (see edge/)."""

    ip_restriction: IpRestrictionModule | None = Field(None, alias="ipRestriction")
    mutual_tls: MutualTlsModule | None = Field(None, alias="mutualTLS")
    basic_auth: BasicAuthModule | None = Field(None, alias="basicAuth")
    jwt: JwtModule | None = None
    webhook_verification: WebhookVerificationModule | None = Field(
        None, alias="webhookVerification"
    )
    headers: HeadersModule | None = None
    compression: CompressionModule | None = None
    circuit_breaker: CircuitBreakerModule | None = Field(None, alias="circuitBreaker")
    rate_limit: RateLimitModule | None = Field(None, alias="rateLimit")
    oauth: OAuthModule | None = None
    oidc: OidcModule | None = None
    ingress_nginx: IngressNginxModule | None = Field(None, alias="ingressNginx")
    """Not a ModuleSet module: what an Ingress's ingress-nginx annotations ask of a route, set
    only by :func:`interlock.model.ingress_nginx.translate` (a ModuleSet naming it is invalid)."""


INTERNAL_MODULES = frozenset({"ingress_nginx"})
"""Modules fields no ModuleSet may set (see :attr:`Modules.ingress_nginx`)."""


class ModuleProblem(KubeModel):
    """Why a ModuleSet cannot be used: the module, the field path and the reason.

    ``str()`` reads ``spec.modules.ipRestriction.allow[1]: "10.0.0.0/33" is not a valid CIDR``.
    ``module`` is the module type as written (``""`` when the problem is ``spec.modules`` itself).
    """

    module: str
    field: str
    reason: str

    def __str__(self) -> str:
        return f"{self.field}: {self.reason}"


class ModuleSetSpec(KubeModel):
    modules: Modules = Field(default_factory=Modules)
    problems: tuple[ModuleProblem, ...] = ()
    """What is wrong in ``spec.modules`` as written, found by the sifting below.

    Kept in dumps and carried over when a dump is parsed again: the invalid modules are no longer
    in ``modules`` by then, and losing their problems would turn an invalid set valid. Problems
    given in the input can only make a set invalid, never valid, so accepting them is safe.
    """

    @model_validator(mode="before")
    @classmethod
    def _check_modules(cls, data: Any) -> Any:
        if not isinstance(data, dict):
            return data
        modules = data.get("modules")
        found: list[ModuleProblem] = []
        if not isinstance(modules, Modules):
            kept, found = _sift_modules(modules)
            modules = Modules.model_validate(kept)
        # Imported here: module_settings reads this module's types (one validation, below them).
        from interlock.model.module_settings import setting_problems

        found.extend(setting_problems(modules))
        carried = [
            p if isinstance(p, ModuleProblem) else ModuleProblem.model_validate(p)
            for p in data.get("problems") or ()
        ]
        # A dump parsed again finds its setting problems again: each is kept once, in order.
        problems = tuple(dict.fromkeys([*carried, *found]))
        return {**data, "modules": modules, "problems": problems}


class ModuleSet(KubeObject):
    spec: ModuleSetSpec = Field(default_factory=ModuleSetSpec)
    status: dict[str, Any] = Field(default_factory=dict)

    @property
    def problems(self) -> tuple[ModuleProblem, ...]:
        """Every reason this ModuleSet cannot be used, in the order they appear; empty when
        valid. Found once, when it was parsed; its modules apply to no route while any remain.

        The settings are checked by :func:`~interlock.model.module_settings.module_settings`,
        the one check the edge's ``compile_modules`` runs too, so a ModuleSet reported Valid does
        not fail later for its configuration (the content of its Secrets is only known to the
        edge)."""
        return self.spec.problems


def describe_invalid(key: ObjectKey, problems: Sequence[ModuleProblem]) -> str:
    """How an invalid ModuleSet is reported wherever it is (an Ingress's or a route's error, the
    ModuleSet's Event, the log): the ModuleSet with its namespace, then its first problem with
    the field path. ``ModuleSet shop/bad is invalid: spec.modules.ipRestriction.allow[0]:
    "10.0.0.0/33" is not a valid CIDR (and 1 more)``."""
    more = f" (and {len(problems) - 1} more)" if len(problems) > 1 else ""
    return f"ModuleSet {key} is invalid: {problems[0]}{more}"


def parse_module_set(raw: dict[str, Any]) -> ModuleSet:
    """Parse a ModuleSet.

    Raises :class:`InvalidObject` only when the object as a whole is unreadable (no name, a
    ``spec`` that is not an object). Problems inside ``spec.modules`` do not raise: they are kept
    in ``spec.problems`` so the ModuleSet still exists for status and for the Ingresses naming it
    (which then fail closed with a permanent error rather than wait for it to "appear").
    """
    return parse_namespaced(ModuleSet, "ModuleSet", raw)


def parse_secret(raw: dict[str, Any]) -> Secret:
    """Parse a v1 Secret; errors name the Secret and field, never a value."""
    return parse_namespaced(Secret, "Secret", raw)


# --- sifting spec.modules ----------------------------------------------------------------------

_MODULE_FIELDS: dict[str, str] = {
    (info.alias or name): name
    for name, info in Modules.model_fields.items()
    if name not in INTERNAL_MODULES
}
"""Module type as written in YAML (``ipRestriction``) → field name (``ip_restriction``)."""

_INTERNAL_NAMES = frozenset(
    {*INTERNAL_MODULES, *(Modules.model_fields[name].alias or name for name in INTERNAL_MODULES)}
)


def _module_class(field_name: str) -> type[BaseModel]:
    found = _model_in(Modules.model_fields[field_name].annotation)
    assert found is not None, field_name  # every Modules field is an optional module model
    return found


def _model_in(annotation: Any) -> type[BaseModel] | None:
    """The pydantic model inside ``annotation`` (``X`` or ``X | None``), if there is one."""
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    if typing.get_origin(annotation) in (typing.Union, types.UnionType):
        for arg in typing.get_args(annotation):
            found = _model_in(arg)
            if found is not None:
                return found
    return None


def _loc_path(loc: tuple[int | str, ...]) -> str:
    return "".join(f"[{part}]" if isinstance(part, int) else f".{part}" for part in loc)


def _unknown_fields(model: type[BaseModel], value: Any, path: str) -> Iterator[str]:
    """Paths of keys in ``value`` that ``model`` would silently ignore, recursively."""
    if not isinstance(value, dict):
        return
    known: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        known[name] = info.annotation
        if info.alias:
            known[info.alias] = info.annotation
    for key, sub in value.items():
        if key not in known:
            yield f"{path}.{key}"
            continue
        nested = _model_in(known[key])
        if nested is not None:
            yield from _unknown_fields(nested, sub, f"{path}.{key}")


def _sift_modules(modules: Any) -> tuple[dict[str, Any], list[ModuleProblem]]:
    """The modules that validate, and a problem for every unknown or invalid one."""
    if modules is None:
        return {}, []
    if not isinstance(modules, dict):
        return {}, [ModuleProblem(module="", field="spec.modules", reason="must be an object")]
    kept: dict[str, Any] = {}
    problems: list[ModuleProblem] = []
    for module, config in modules.items():
        path = f"spec.modules.{module}"
        if config is None and module in _INTERNAL_NAMES:
            continue  # a dump of Modules names every field; an empty internal one is no problem
        field_name = _MODULE_FIELDS.get(module) or (
            module if module in Modules.model_fields and module not in INTERNAL_MODULES else ""
        )
        if not field_name:
            known = ", ".join(sorted(_MODULE_FIELDS))
            problems.append(
                ModuleProblem(
                    module=module,
                    field=path,
                    reason=f'unknown module type "{module}" (known types: {known})',
                )
            )
            continue
        if config is None:
            continue
        model = _module_class(field_name)
        problems.extend(
            ModuleProblem(module=module, field=field, reason="unknown field")
            for field in _unknown_fields(model, config, path)
        )
        try:
            # Strict, as the CRD schema is: "yes" is not a boolean, "100" is not a number.
            kept[module] = model.model_validate(config, strict=True)
        except ValidationError as exc:
            problems.extend(
                ModuleProblem(
                    module=module,
                    field=path + _loc_path(tuple(e["loc"])),
                    reason=describe_validation_error(e),
                )
                for e in exc.errors(include_url=False, include_input=False)
            )
    return kept, problems


# --- status ------------------------------------------------------------------------------------

VALID_CONDITION = "Valid"
_MAX_PROBLEMS_IN_MESSAGE = 10


def module_set_conditions(module_set: ModuleSet, *, now: datetime) -> list[dict[str, Any]]:
    """``status.conditions`` for ``module_set``: ``Valid`` True, or False with reason ``Invalid``
    and its :attr:`~ModuleSet.problems` (the condition is on the ModuleSet: it does not name it).

    ``lastTransitionTime`` is kept from the current status while the condition's status does not
    change, so equal inputs give equal conditions and the status writer has nothing to write.
    """
    problems = module_set.problems
    valid = not problems
    status = "True" if valid else "False"
    if valid:
        message = "all modules are valid"
    else:
        shown = "; ".join(str(p) for p in problems[:_MAX_PROBLEMS_IN_MESSAGE])
        hidden = len(problems) - _MAX_PROBLEMS_IN_MESSAGE
        message = shown + (f"; and {hidden} more" if hidden > 0 else "")
    transition = _rfc3339(now)
    for condition in module_set.status.get("conditions") or []:
        if (
            isinstance(condition, dict)
            and condition.get("type") == VALID_CONDITION
            and condition.get("status") == status
            and isinstance(condition.get("lastTransitionTime"), str)
        ):
            transition = condition["lastTransitionTime"]
    return [
        {
            "type": VALID_CONDITION,
            "status": status,
            "reason": "Valid" if valid else "Invalid",
            "message": message,
            "observedGeneration": module_set.metadata.generation,
            "lastTransitionTime": transition,
        }
    ]


def module_set_event(
    stored: Sequence[object], conditions: Sequence[dict[str, Any]], *, key: ObjectKey
) -> tuple[Literal["Normal", "Warning"], str, str] | None:
    """The Event (type, reason, message) ModuleSet ``key`` gets when its Valid condition changes
    from ``stored`` (its status now) to ``conditions``, or None: a Warning when it becomes invalid
    (or invalid differently), a Normal recovery when it becomes valid again, nothing for a new
    valid one or an unchanged condition — so the newest Event on a ModuleSet says how it is now.
    The Warning names the ModuleSet as :func:`describe_invalid` does: an Event is read in lists
    of many objects' Events, and in logs and tools that drop ``involvedObject``."""
    new = next((c for c in conditions if c.get("type") == VALID_CONDITION), None)
    if new is None:
        return None
    old = next(
        (c for c in stored if isinstance(c, dict) and c.get("type") == VALID_CONDITION), None
    )
    if new.get("status") == "False":
        if old is not None and (old.get("status"), old.get("message")) == ("False", new["message"]):
            return None
        return (
            "Warning",
            "InvalidModuleSet",
            f"ModuleSet {key} is invalid: {new['message']}; Ingresses that use it keep what "
            "they serve and get none of its changes until it is fixed",
        )
    if old is not None and old.get("status") == "False":
        return ("Normal", "Valid", "all modules are valid again")
    return None


def _rfc3339(moment: datetime) -> str:
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


# --- merging and secrets -----------------------------------------------------------------------


def merge_modules(module_sets: Sequence[ModuleSet]) -> Modules:
    """The modules of ``module_sets`` in annotation order: per module type, the last set wins."""
    merged: dict[str, Any] = {}
    for module_set in module_sets:
        for name in Modules.model_fields:
            config = getattr(module_set.spec.modules, name)
            if config is not None:
                merged[name] = config
    return Modules(**merged)


def module_secret_ref_fields(modules: Modules) -> list[tuple[str, str, SecretKeyRef]]:
    """``(module, field, ref)`` for every Secret key ``modules`` reference, e.g.
    ``("basicAuth", "secretRef", SecretKeyRef(name="users", key="htpasswd"))``."""
    refs: list[tuple[str, str, SecretKeyRef]] = []
    if modules.mutual_tls is not None:
        refs.append(("mutualTLS", "caSecretRef", modules.mutual_tls.ca_secret_ref))
    if modules.basic_auth is not None:
        refs.append(("basicAuth", "secretRef", modules.basic_auth.secret_ref))
    if modules.jwt is not None:
        refs.append(("jwt", "jwksSecretRef", modules.jwt.jwks_secret_ref))
    if modules.webhook_verification is not None:
        refs.append(("webhookVerification", "secretRef", modules.webhook_verification.secret_ref))
    if modules.oauth is not None:
        for name, settings in modules.oauth.providers():
            refs.extend(("oauth", f"{name}.{field}", ref) for field, ref in _login_refs(settings))
    if modules.oidc is not None:
        refs.extend(("oidc", field, ref) for field, ref in _login_refs(modules.oidc))
    return refs


def _login_refs(settings: OAuthProviderSettings) -> list[tuple[str, SecretKeyRef]]:
    refs = []
    if settings.client_secret is not None:
        refs.append(("clientSecret", settings.client_secret))
    if settings.session_secret is not None:
        refs.append(("sessionSecret", settings.session_secret))
    return refs


def module_secret_refs(modules: Modules) -> set[SecretKeyRef]:
    """The Secret keys ``modules`` reference (in the ModuleSets' namespace)."""
    return {ref for _, _, ref in module_secret_ref_fields(modules)}
