"""The two ways compiling modules can fail, why they are different types, and the Secret
lookup that raises one of them.

The edge actor must decide whether to retry. An invalid configuration (a CIDR that does not
parse, an htpasswd line that is not bcrypt, a JWKS that does not load) stays invalid until a user
changes an input, so retrying it only burns CPU and spams Events: it is a
:class:`ModuleConfigError`. A Secret that is not there *yet* usually appears a moment later (the
ModuleSet and its Secret are applied together), so it is a :class:`MissingSecretError`, retried
with backoff and at once when the Secret arrives. An oauth or oidc provider that cannot be
reached while the chain is prepared is transient as well: :class:`ProviderUnavailableError`
(defined here, not in ``oidc.py``, so that the edge can catch it without loading PyJWT and
``cryptography``, which only a route with oauth or oidc needs).

Messages name the module and field the way a ModuleSet user writes them
(``ipRestriction.allow[1]: ...``) and never contain a Secret's value.
"""

from __future__ import annotations

from collections.abc import Mapping

from interlock.model.moduleset import SecretKeyRef, SecretValue


class ModuleConfigError(Exception):
    """Permanent: the module configuration (or the content of its Secret) cannot be used."""

    def __init__(self, field: str, reason: str) -> None:
        self.field = field
        self.reason = reason
        super().__init__(f"{field}: {reason}")


class MissingSecretError(Exception):
    """Transient: a Secret key a module references is not (yet) known."""

    def __init__(self, field: str, ref: SecretKeyRef) -> None:
        self.field = field
        self.secret_name = ref.name
        self.secret_key = ref.key
        super().__init__(f"{field}: Secret {ref.name!r} with key {ref.key!r} is not present")


class ProviderUnavailableError(Exception):
    """Transient: the identity provider could not be reached or answered 5xx/429."""


def describe_ref(ref: SecretKeyRef) -> str:
    """How an error names a Secret key: its name and key, never its value."""
    return f"Secret {ref.name!r} key {ref.key!r}"


def lookup_secret(
    secrets: Mapping[tuple[str, str], SecretValue], ref: SecretKeyRef, *, field: str
) -> SecretValue:
    """The value ``ref`` points at, or :class:`MissingSecretError` naming ``field``."""
    value = secrets.get((ref.name, ref.key))
    if value is None:
        raise MissingSecretError(field, ref)
    return value
