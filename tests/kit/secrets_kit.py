"""Credentials for edge tests: htpasswd, a JWKS with its signing key, a webhook key."""

from __future__ import annotations

import base64
import json
import time
from typing import Any

import bcrypt
import jwt
from cryptography.hazmat.primitives.asymmetric import ec
from jwt.algorithms import ECAlgorithm

from interlock.model.moduleset import Modules, SecretValue

ISSUER = "https://issuer.example"
AUDIENCE = "api"
SIGNING_KEY = ec.generate_private_key(ec.SECP256R1())
PASSWORD = "correct horse"
WEBHOOK_KEY = b"whsec-planted-0123456789"

_JWK: dict[str, Any] = {
    **json.loads(ECAlgorithm.to_jwk(SIGNING_KEY.public_key())),
    "kid": "ec-1",
    "alg": "ES256",
}

SECRETS: dict[tuple[str, str], SecretValue] = {
    ("users", "htpasswd"): SecretValue(
        b"alice:" + bcrypt.hashpw(PASSWORD.encode(), bcrypt.gensalt(rounds=4)) + b"\n"
    ),
    ("jwks", "jwks.json"): SecretValue(json.dumps({"keys": [_JWK]}).encode()),
    ("hook", "secret"): SecretValue(WEBHOOK_KEY),
}

BASIC_AUTH = Modules.model_validate(
    {"basicAuth": {"realm": "app", "secretRef": {"name": "users", "key": "htpasswd"}}}
)
JWT = Modules.model_validate(
    {
        "jwt": {
            "issuer": ISSUER,
            "audiences": [AUDIENCE],
            "jwksSecretRef": {"name": "jwks", "key": "jwks.json"},
        }
    }
)


def basic_header(user: str = "alice", password: str = PASSWORD) -> dict[str, str]:
    token = base64.b64encode(f"{user}:{password}".encode()).decode()
    return {"Authorization": f"Basic {token}"}


def bearer_header() -> dict[str, str]:
    now = int(time.time())
    token = jwt.encode(
        {"iss": ISSUER, "aud": AUDIENCE, "sub": "alice", "iat": now, "exp": now + 300},
        SIGNING_KEY,
        algorithm="ES256",
        headers={"kid": "ec-1"},
    )
    return {"Authorization": f"Bearer {token}"}
