"""jwt: tokens signed by keys of the JWKS Secret pass; every kind of bad token gets a 401."""

from __future__ import annotations

import hashlib
import hmac
import json
from typing import Any

import jwt
import pytest
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec, ed25519, rsa
from jwt.algorithms import ECAlgorithm, OKPAlgorithm, RSAAlgorithm
from jwt.utils import base64url_encode

from interlock.edge.modules import (
    MissingSecretError,
    ModuleChain,
    ModuleConfigError,
    compile_modules,
)
from interlock.model.moduleset import SecretValue
from tests.kit.modules_testkit import Clock, modules, view

ISSUER = "https://issuer.example"
NOW = 1_700_000_000.0

RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)
EC_KEY = ec.generate_private_key(ec.SECP256R1())
ED_KEY = ed25519.Ed25519PrivateKey.generate()
OTHER_RSA_KEY = rsa.generate_private_key(public_exponent=65537, key_size=2048)


def public_jwk(algorithm: Any, key: Any, kid: str, **extra: str) -> dict[str, Any]:
    jwk: dict[str, Any] = json.loads(algorithm.to_jwk(key.public_key()))
    return {**jwk, "kid": kid, **extra}


JWKS = {
    "keys": [
        public_jwk(RSAAlgorithm, RSA_KEY, "rsa-1", alg="RS256", use="sig"),
        public_jwk(ECAlgorithm, EC_KEY, "ec-1"),
        public_jwk(OKPAlgorithm, ED_KEY, "ed-1"),
    ]
}


def chain(
    jwks: object = JWKS, audiences: list[str] | None = None, wall: Clock | None = None
) -> ModuleChain:
    return compile_modules(
        modules(
            {
                "jwt": {
                    "issuer": ISSUER,
                    "audiences": audiences or [],
                    "jwksSecretRef": {"name": "jwks", "key": "jwks.json"},
                }
            }
        ),
        {("jwks", "jwks.json"): SecretValue(json.dumps(jwks).encode())},
        wall_clock=wall or Clock(NOW),
    )


def token(
    key: Any = RSA_KEY, *, kid: str | None = "rsa-1", algorithm: str = "RS256", **claims: Any
) -> str:
    body = {"iss": ISSUER, "sub": "alice", "exp": NOW + 300, "iat": NOW, **claims}
    headers = {"kid": kid} if kid is not None else {}
    return jwt.encode(body, key, algorithm=algorithm, headers=headers)


def bearer(value: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {value}"}


def refusal(edge: ModuleChain, value: str) -> str:
    """The WWW-Authenticate of the 401 for ``value``; fails if the token was accepted."""
    rejection = edge.check_request(view(headers=bearer(value)))
    assert rejection is not None, "the token was accepted"
    assert rejection.status == 401
    assert value not in rejection.headers["WWW-Authenticate"]
    assert value not in rejection.body
    return rejection.headers["WWW-Authenticate"]


@pytest.mark.parametrize(
    ("key", "kid", "algorithm"),
    [(RSA_KEY, "rsa-1", "RS256"), (EC_KEY, "ec-1", "ES256"), (ED_KEY, "ed-1", "EdDSA")],
)
def test_token_signed_by_a_jwks_key_passes(key: Any, kid: str, algorithm: str) -> None:
    assert (
        chain().check_request(view(headers=bearer(token(key, kid=kid, algorithm=algorithm))))
        is None
    )


def test_missing_token_gets_401_with_bearer_challenge() -> None:
    rejection = chain().check_request(view())
    assert rejection is not None
    assert rejection.status == 401
    assert rejection.headers["WWW-Authenticate"].startswith("Bearer")


def test_expired_token() -> None:
    challenge = refusal(chain(), token(exp=NOW - 120))
    assert 'error="invalid_token"' in challenge
    assert "expired" in challenge


def test_expiry_within_leeway_still_passes() -> None:
    assert chain().check_request(view(headers=bearer(token(exp=NOW - 5)))) is None


def test_expiry_follows_the_injected_wall_clock() -> None:
    wall = Clock(NOW)
    edge = chain(wall=wall)
    value = token(exp=NOW + 60)
    assert edge.check_request(view(headers=bearer(value))) is None
    wall.advance(3600)
    assert "expired" in refusal(edge, value)


def test_token_without_exp_is_refused() -> None:
    value = jwt.encode({"iss": ISSUER}, RSA_KEY, algorithm="RS256", headers={"kid": "rsa-1"})
    assert "exp" in refusal(chain(), value)


def test_not_yet_valid_token() -> None:
    assert "not yet valid" in refusal(chain(), token(nbf=NOW + 600))


def test_wrong_audience() -> None:
    edge = chain(audiences=["api", "admin"])
    assert edge.check_request(view(headers=bearer(token(aud="admin")))) is None
    assert edge.check_request(view(headers=bearer(token(aud=["other", "api"])))) is None
    assert "audience" in refusal(edge, token(aud="billing"))
    assert "aud" in refusal(edge, token())


def test_without_audiences_any_audience_passes() -> None:
    assert chain().check_request(view(headers=bearer(token(aud="anything")))) is None


def test_wrong_issuer() -> None:
    assert "issuer" in refusal(chain(), token(iss="https://evil.example"))


def test_bad_signature() -> None:
    forged = token(OTHER_RSA_KEY, kid="rsa-1")
    assert "signature" in refusal(chain(), forged)


def test_tampered_payload_is_refused() -> None:
    header, payload, signature = token().split(".")
    other_payload = token(sub="mallory").split(".")[1]
    assert "signature" in refusal(chain(), f"{header}.{other_payload}.{signature}")
    assert payload != other_payload


def test_unknown_kid() -> None:
    assert "unknown signing key" in refusal(chain(), token(OTHER_RSA_KEY, kid="rsa-2"))


def test_alg_none_is_refused() -> None:
    unsigned = jwt.encode(
        {"iss": ISSUER, "exp": NOW + 300}, "", algorithm="none", headers={"kid": "rsa-1"}
    )
    refusal(chain(), unsigned)


def test_hs256_signed_with_the_rsa_public_key_is_refused() -> None:
    # The classic confusion: an attacker signs HS256 using the public key as the HMAC secret.
    # PyJWT refuses to produce such a token, so it is assembled by hand.
    public_pem = RSA_KEY.public_key().public_bytes(
        serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
    )
    header = base64url_encode(json.dumps({"alg": "HS256", "kid": "rsa-1"}).encode())
    payload = base64url_encode(json.dumps({"iss": ISSUER, "exp": NOW + 300}).encode())
    signature = hmac.new(public_pem, header + b"." + payload, hashlib.sha256).digest()
    forged = b".".join([header, payload, base64url_encode(signature)]).decode()
    assert "algorithm" in refusal(chain(), forged)


def test_hs256_with_an_oct_key_in_the_jwks() -> None:
    shared = b"an hmac key that is long enough for hs256!!"
    jwks = {"keys": [{"kty": "oct", "kid": "h1", "k": base64url_encode(shared).decode()}]}
    edge = chain(jwks=jwks)
    assert (
        edge.check_request(view(headers=bearer(token(shared, kid="h1", algorithm="HS256")))) is None
    )
    assert "signature" in refusal(edge, token(b"x" * 43, kid="h1", algorithm="HS256"))


def test_encryption_keys_in_the_jwks_are_skipped() -> None:
    jwks = {
        "keys": [
            public_jwk(RSAAlgorithm, OTHER_RSA_KEY, "enc-1", alg="RSA-OAEP"),
            public_jwk(RSAAlgorithm, OTHER_RSA_KEY, "enc-2", use="enc"),
            *JWKS["keys"],
        ]
    }
    edge = chain(jwks=jwks)
    assert edge.check_request(view(headers=bearer(token()))) is None
    assert "unknown signing key" in refusal(edge, token(OTHER_RSA_KEY, kid="enc-1"))
    keys = edge.summary()["modules"]["jwt"]["keys"]  # type: ignore[index]
    assert [key["kid"] for key in keys] == ["rsa-1", "ec-1", "ed-1"]


def test_malformed_token() -> None:
    assert "malformed" in refusal(chain(), "not.a.jwt")


@pytest.mark.parametrize(
    ("jwks", "reason"),
    [
        (b"{not json", "not valid JSON"),
        (b'{"kid": "x"}', "is not a JWKS"),
        (b'{"keys": []}', "no signing keys"),
        (b'{"keys": [{"kty": "RSA", "kid": "r", "n": "AQAB"}]}', "keys[0] is not a usable key"),
        (
            b'{"keys": [{"kty": "oct", "kid": "n", "alg": "none", "k": "c2VjcmV0"}]}',
            "'none' is not allowed",
        ),
    ],
)
def test_jwks_that_does_not_load_is_a_config_error(jwks: bytes, reason: str) -> None:
    with pytest.raises(ModuleConfigError) as caught:
        compile_modules(
            modules(
                {"jwt": {"issuer": ISSUER, "jwksSecretRef": {"name": "jwks", "key": "jwks.json"}}}
            ),
            {("jwks", "jwks.json"): SecretValue(jwks)},
        )
    assert caught.value.field.startswith("jwt.jwksSecretRef")
    assert reason in str(caught.value)
    assert "c2VjcmV0" not in str(caught.value)


def test_missing_jwks_secret_is_transient() -> None:
    with pytest.raises(MissingSecretError) as caught:
        compile_modules(
            modules(
                {"jwt": {"issuer": ISSUER, "jwksSecretRef": {"name": "jwks", "key": "jwks.json"}}}
            ),
            {},
        )
    assert caught.value.field == "jwt.jwksSecretRef"
    assert (caught.value.secret_name, caught.value.secret_key) == ("jwks", "jwks.json")
