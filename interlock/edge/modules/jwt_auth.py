"""jwt: bearer tokens verified against a JWKS held in a Secret, with PyJWT.

The JWKS is loaded once, when the module is compiled, so a JWKS that does not parse is a
configuration error up front and never a failure per request. Each key allows exactly one
algorithm (its ``alg``, or the one its type implies: RS256 for RSA, ES256 for P-256, EdDSA for
Ed25519, HS256 for ``oct``); a token must name that algorithm in its header. Tying the algorithm
to the key closes the classic confusions (``alg: none``, or HS256 signed with an RSA public key).

Claims: ``iss`` must equal ``issuer``; when ``audiences`` is set, ``aud`` must contain one of
them (when it is empty, ``aud`` is not checked); ``exp`` is required; ``exp``, ``nbf`` and
``iat`` are checked against the injected wall clock with :data:`LEEWAY_SECONDS` of leeway.

Refusals are 401 with ``WWW-Authenticate: Bearer error="invalid_token", error_description=…``;
the description is one of a fixed set of phrases, never the token or a library message.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

import jwt
from jwt import PyJWK
from jwt.exceptions import (
    InvalidAudienceError,
    InvalidIssuerError,
    InvalidSignatureError,
    MissingRequiredClaimError,
    PyJWKError,
    PyJWTError,
)

from interlock.edge.modules.errors import ModuleConfigError, describe_ref, lookup_secret
from interlock.edge.modules.view import Rejection, reject
from interlock.model.moduleset import JwtModule, SecretValue

LEEWAY_SECONDS = 30.0
"""Clock skew tolerated on ``exp``, ``nbf`` and ``iat``."""

ALLOWED_ALGORITHMS = frozenset(
    {
        "RS256",
        "RS384",
        "RS512",
        "PS256",
        "PS384",
        "PS512",
        "ES256",
        "ES384",
        "ES512",
        "EdDSA",
        "HS256",
        "HS384",
        "HS512",
    }
)


ENCRYPTION_ALGORITHMS = frozenset(
    {
        "RSA1_5",
        "RSA-OAEP",
        "RSA-OAEP-256",
        "RSA-OAEP-384",
        "RSA-OAEP-512",
        "ECDH-ES",
        "ECDH-ES+A128KW",
        "ECDH-ES+A192KW",
        "ECDH-ES+A256KW",
        "A128KW",
        "A192KW",
        "A256KW",
        "A128GCMKW",
        "A192GCMKW",
        "A256GCMKW",
        "dir",
    }
)
"""JWE key algorithms: an identity provider's JWKS may list such keys next to its signing keys;
they cannot verify a signature, so they are skipped like keys marked ``"use": "enc"``."""


class _Key:
    """One verification key. Its repr omits the key (an ``oct`` key is a shared secret)."""

    __slots__ = ("algorithm", "kid", "material")

    def __init__(self, *, kid: str | None, algorithm: str, material: Any) -> None:
        self.kid = kid
        self.algorithm = algorithm
        self.material = material

    def __repr__(self) -> str:
        return f"_Key(kid={self.kid!r}, algorithm={self.algorithm!r})"


class JwtAuth:
    """Compiled JWKS and claim rules."""

    __slots__ = ("_audiences", "_issuer", "_keys", "_ref", "_wall_clock")

    def __init__(
        self,
        config: JwtModule,
        secrets: Mapping[tuple[str, str], SecretValue],
        *,
        wall_clock: Callable[[], float],
    ) -> None:
        self._issuer = config.issuer
        self._audiences = tuple(config.audiences)
        self._ref = config.jwks_secret_ref
        self._wall_clock = wall_clock
        secret = lookup_secret(secrets, config.jwks_secret_ref, field="jwt.jwksSecretRef")
        self._keys = _load_jwks(
            secret, where=f"jwt.jwksSecretRef ({describe_ref(config.jwks_secret_ref)})"
        )

    def __repr__(self) -> str:
        return f"JwtAuth({self.summary()})"

    def check(self, headers: Mapping[str, str]) -> Rejection | None:
        token = _bearer_token(headers.get("Authorization"))
        if token is None:
            return _challenge(None)
        try:
            header = jwt.get_unverified_header(token)
        except PyJWTError:
            return _challenge("malformed token")
        key = self._key_for(header.get("kid"))
        if key is None:
            return _challenge("unknown signing key")
        if header.get("alg") != key.algorithm:
            return _challenge("algorithm not allowed for this key")
        try:
            claims = jwt.decode(
                token,
                key=key.material,
                algorithms=[key.algorithm],
                issuer=self._issuer,
                audience=list(self._audiences) or None,
                options={
                    "require": ["exp", "iss"],
                    "verify_aud": bool(self._audiences),
                    # Time claims are checked below against the injected clock.
                    "verify_exp": False,
                    "verify_nbf": False,
                    "verify_iat": False,
                },
            )
        except InvalidSignatureError:
            return _challenge("bad signature")
        except InvalidIssuerError:
            return _challenge("wrong issuer")
        except InvalidAudienceError:
            return _challenge("wrong audience")
        except MissingRequiredClaimError as exc:
            return _challenge(f"missing claim {exc.claim}")
        except PyJWTError:
            return _challenge("malformed token")
        return self._check_times(claims)

    def _key_for(self, kid: object) -> _Key | None:
        if kid is None:
            # Without a kid the token can only mean the one key there is.
            return self._keys[0] if len(self._keys) == 1 else None
        return next((key for key in self._keys if key.kid == kid), None)

    def _check_times(self, claims: Mapping[str, Any]) -> Rejection | None:
        now = self._wall_clock()
        for claim in ("exp", "nbf", "iat"):
            value = claims.get(claim)
            if value is not None and (
                not isinstance(value, int | float) or isinstance(value, bool)
            ):
                return _challenge(f"claim {claim} is not a number")
        if now > claims["exp"] + LEEWAY_SECONDS:
            return _challenge("token expired")
        nbf = claims.get("nbf")
        if nbf is not None and now < nbf - LEEWAY_SECONDS:
            return _challenge("token not yet valid")
        iat = claims.get("iat")
        if iat is not None and now < iat - LEEWAY_SECONDS:
            return _challenge("token issued in the future")
        return None

    def summary(self) -> dict[str, object]:
        return {
            "issuer": self._issuer,
            "audiences": list(self._audiences),
            "jwksSecretRef": {"name": self._ref.name, "key": self._ref.key},
            "keys": [{"kid": key.kid, "alg": key.algorithm} for key in self._keys],
        }


def _challenge(description: str | None) -> Rejection:
    value = (
        "Bearer"
        if description is None
        else (f'Bearer error="invalid_token", error_description="{description}"')
    )
    return reject(401, "unauthorized\n", {"WWW-Authenticate": value})


def _bearer_token(authorization: str | None) -> str | None:
    if not authorization:
        return None
    scheme, _, token = authorization.strip().partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        return None
    return token.strip()


def _load_jwks(secret: SecretValue, *, where: str) -> tuple[_Key, ...]:
    """The usable signing keys of a JWKS. Errors never quote the document (it may hold keys)."""
    try:
        document = json.loads(secret.reveal())
    except (ValueError, UnicodeDecodeError):
        raise ModuleConfigError(where, "is not valid JSON") from None
    if not isinstance(document, dict) or not isinstance(document.get("keys"), list):
        raise ModuleConfigError(where, 'is not a JWKS: expected {"keys": [...]}')
    keys: list[_Key] = []
    kids: set[str] = set()
    for index, entry in enumerate(document["keys"]):
        field = f"keys[{index}]"
        if not isinstance(entry, dict):
            raise ModuleConfigError(where, f"{field} is not an object")
        algorithm = entry.get("alg")
        if entry.get("use") == "enc" or algorithm in ENCRYPTION_ALGORITHMS:
            continue
        if algorithm is not None and algorithm not in ALLOWED_ALGORITHMS:
            raise ModuleConfigError(where, f"{field}: algorithm {str(algorithm)!r} is not allowed")
        kid = entry.get("kid")
        if kid is not None and not isinstance(kid, str):
            raise ModuleConfigError(where, f"{field}: kid must be a string")
        if kid is not None and kid in kids:
            raise ModuleConfigError(where, f"{field}: kid {kid!r} is used twice")
        try:
            jwk = PyJWK(entry)
        except (PyJWKError, PyJWTError, ValueError, TypeError, KeyError):
            # PyJWT's messages can quote the key material; name only the entry.
            raise ModuleConfigError(
                where, f"{field} is not a usable key (kty {str(entry.get('kty'))!r})"
            ) from None
        if jwk.algorithm_name not in ALLOWED_ALGORITHMS:
            raise ModuleConfigError(
                where, f"{field}: algorithm {jwk.algorithm_name!r} is not allowed"
            )
        if kid is not None:
            kids.add(kid)
        keys.append(_Key(kid=kid, algorithm=jwk.algorithm_name, material=jwk.key))
    if not keys:
        raise ModuleConfigError(where, "holds no signing keys")
    return tuple(keys)
