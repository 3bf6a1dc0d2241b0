"""The chain as a whole: the documented order, error classes, and Secrets kept out of sight."""

from __future__ import annotations

import hashlib
import hmac
import json
from dataclasses import fields

import bcrypt
import pytest
from jwt.utils import base64url_encode

from interlock.edge.modules import (
    ORDER,
    MissingSecretError,
    ModuleConfigError,
    compile_modules,
)
from interlock.model.moduleset import SecretValue
from tests.kit.modules_testkit import Clock, basic, modules, view

PLANTED_PASSWORD = "planted-password-5f1c"
PLANTED_HASH = bcrypt.hashpw(PLANTED_PASSWORD.encode(), bcrypt.gensalt(rounds=4))
PLANTED_WEBHOOK_KEY = b"planted-webhook-key-9a7e"
PLANTED_HMAC_KEY = b"planted-jwks-oct-key-0123456789abcdef0123"

SECRETS = {
    ("users", "htpasswd"): SecretValue(b"alice:" + PLANTED_HASH + b"\n"),
    ("hook", "secret"): SecretValue(PLANTED_WEBHOOK_KEY),
    (
        "jwks",
        "jwks.json",
    ): SecretValue(
        json.dumps(
            {
                "keys": [
                    {"kty": "oct", "kid": "k1", "k": base64url_encode(PLANTED_HMAC_KEY).decode()}
                ]
            }
        ).encode()
    ),
}
PLANTED = [
    PLANTED_PASSWORD,
    PLANTED_HASH.decode(),
    PLANTED_HASH.decode()[7:29],  # the salt alone
    PLANTED_WEBHOOK_KEY.decode(),
    PLANTED_HMAC_KEY.decode(),
    base64url_encode(PLANTED_HMAC_KEY).decode(),
]

EVERYTHING = {
    "ipRestriction": {"allow": ["10.0.0.0/8"], "deny": ["10.1.0.0/16"]},
    "rateLimit": {"requests": 100, "period": "1m"},
    "basicAuth": {"realm": "app", "secretRef": {"name": "users", "key": "htpasswd"}},
    "webhookVerification": {"provider": "github", "secretRef": {"name": "hook", "key": "secret"}},
    "circuitBreaker": {"volumeThreshold": 1},
    "headers": {"request": {"add": {"X-Team": "blue"}}, "response": {"remove": ["Server"]}},
    "compression": {"enabled": True},
}


def assert_no_secret(text: str) -> None:
    for planted in PLANTED:
        assert planted not in text


def test_empty_modules_pass_everything_through() -> None:
    edge = compile_modules(modules({}), {})
    assert edge.check_request(view(peer_ip="garbage")) is None
    assert not edge.needs_body
    assert not edge.compress
    assert edge.summary()["order"] == []


@pytest.mark.parametrize(
    ("settings", "inert"),
    [
        ({}, True),
        ({"ipRestriction": {"allow": ["10.0.0.0/8"]}, "rateLimit": {"requests": 1}}, True),
        ({"circuitBreaker": {"volumeThreshold": 1}}, False),
        ({"headers": {"response": {"remove": ["Server"]}}}, False),
        ({"headers": {"request": {"add": {"X-Team": "blue"}}}}, False),
        ({"compression": {"enabled": True}}, False),
    ],
)
def test_a_chain_is_inert_only_without_circuit_breaker_headers_and_compression(
    settings: dict[str, object], inert: bool
) -> None:
    # The relay skips record_upstream, response_headers and should_compress of an inert chain.
    assert compile_modules(modules(settings), {}).inert is inert


def test_summary_lists_modules_in_order_with_their_config() -> None:
    edge = compile_modules(modules(EVERYTHING), SECRETS, trusted_proxies=["192.0.2.0/24"])
    summary = edge.summary()
    assert summary["order"] == [
        "ipRestriction",
        "rateLimit",
        "basicAuth",
        "webhookVerification",
        "circuitBreaker",
        "headers",
        "compression",
    ]
    assert summary["order"] == [name for name in ORDER if name in summary["order"]]
    assert summary["trustedProxies"] == ["192.0.2.0/24"]
    shown = summary["modules"]
    assert isinstance(shown, dict)
    assert shown["ipRestriction"] == {"allow": ["10.0.0.0/8"], "deny": ["10.1.0.0/16"]}
    assert shown["basicAuth"] == {
        "realm": "app",
        "secretRef": {"name": "users", "key": "htpasswd"},
        "users": 1,
    }


def test_planted_secrets_never_appear_in_summary_or_reprs() -> None:
    everything = {**EVERYTHING, "basicAuth": None}
    for raw in (
        EVERYTHING,
        {
            **everything,
            "jwt": {"issuer": "https://i", "jwksSecretRef": {"name": "jwks", "key": "jwks.json"}},
        },
    ):
        edge = compile_modules(modules(raw), SECRETS)
        edge.check_request(view(peer_ip="10.0.0.1", headers=basic("alice", PLANTED_PASSWORD)))
        assert_no_secret(json.dumps(edge.summary()))
        assert_no_secret(repr(edge))
        # Every field (dataclasses.fields: a compiled ModuleChain, setup.py, has no __slots__).
        for each in fields(edge):
            assert_no_secret(repr(getattr(edge, each.name)))
        assert_no_secret(repr(SECRETS))


def test_planted_secrets_never_appear_in_rejections() -> None:
    edge = compile_modules(modules(EVERYTHING), SECRETS)
    for request in (
        view(peer_ip="10.0.0.1", headers=basic("alice", "wrong")),
        view(peer_ip="10.0.0.1", headers=basic("alice", PLANTED_PASSWORD), body=b"{}"),
        view(peer_ip="192.168.0.1"),
    ):
        rejection = edge.check_request(request)
        assert rejection is not None
        assert_no_secret(repr(rejection))


def test_planted_secrets_never_appear_in_config_errors() -> None:
    bad_secrets = {
        ("users", "htpasswd"): SecretValue(b"alice:" + PLANTED_PASSWORD.encode() + b"\n"),
        ("jwks", "jwks.json"): SecretValue(
            json.dumps(
                {
                    "keys": [
                        {
                            "kty": "oct",
                            "kid": "k1",
                            "k": base64url_encode(PLANTED_HMAC_KEY).decode(),
                            "alg": "none",
                        }
                    ]
                }
            ).encode()
        ),
    }
    for raw in (
        {"basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}}},
        {"jwt": {"issuer": "https://i", "jwksSecretRef": {"name": "jwks", "key": "jwks.json"}}},
    ):
        with pytest.raises(ModuleConfigError) as caught:
            compile_modules(modules(raw), bad_secrets)
        assert_no_secret(str(caught.value))
        assert_no_secret(repr(caught.value))
        assert caught.value.__cause__ is None


def test_denied_address_does_not_spend_rate_limit_tokens() -> None:
    edge = compile_modules(
        modules({"ipRestriction": {"deny": ["10.9.0.0/16"]}, "rateLimit": {"requests": 1}}),
        {},
        clock=Clock(),
    )
    for _ in range(3):
        rejection = edge.check_request(view(peer_ip="10.9.0.1"))
        assert rejection is not None
        assert rejection.status == 403
    assert edge.check_request(view(peer_ip="10.8.0.1")) is None


def test_rate_limit_runs_before_auth_so_guessing_is_limited() -> None:
    edge = compile_modules(
        modules(
            {
                "rateLimit": {"requests": 2},
                "basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}},
            }
        ),
        SECRETS,
        clock=Clock(),
    )
    statuses = [edge.check_request(view(headers=basic("alice", f"guess-{n}"))) for n in range(3)]
    assert [r.status for r in statuses if r is not None] == [401, 401, 429]


def test_unauthenticated_requests_do_not_take_the_half_open_trial() -> None:
    clock = Clock()
    edge = compile_modules(
        modules(
            {
                "basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}},
                "circuitBreaker": {"volumeThreshold": 1, "trippedDuration": "10s"},
            }
        ),
        SECRETS,
        clock=clock,
    )
    good = view(headers=basic("alice", PLANTED_PASSWORD))
    assert edge.check_request(good) is None
    edge.record_upstream(None)
    clock.advance(10)
    anonymous = edge.check_request(view())
    assert anonymous is not None
    assert anonymous.status == 401
    assert edge.check_request(good) is None  # the trial is still available


def test_webhook_body_is_verified_after_basic_auth() -> None:
    edge = compile_modules(modules(EVERYTHING), SECRETS)
    body = b'{"ok":true}'
    signature = hmac.new(PLANTED_WEBHOOK_KEY, body, hashlib.sha256).hexdigest()
    signed = {"X-Hub-Signature-256": f"sha256={signature}"}
    credentials = basic("alice", PLANTED_PASSWORD)
    assert (
        edge.check_request(view(peer_ip="10.0.0.1", headers={**credentials, **signed}, body=body))
        is None
    )
    unsigned = edge.check_request(view(peer_ip="10.0.0.1", headers=credentials, body=body))
    assert unsigned is not None
    assert unsigned.body == "invalid webhook signature\n"


def test_basic_auth_and_jwt_together_is_a_config_error() -> None:
    with pytest.raises(ModuleConfigError, match="configure only one"):
        compile_modules(
            modules(
                {
                    "basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}},
                    "jwt": {
                        "issuer": "https://i",
                        "jwksSecretRef": {"name": "jwks", "key": "jwks.json"},
                    },
                }
            ),
            SECRETS,
        )


def test_a_permanent_error_is_reported_before_a_missing_secret() -> None:
    raw = {
        "basicAuth": {"secretRef": {"name": "absent", "key": "htpasswd"}},
        "rateLimit": {"requests": 1, "period": "often"},
    }
    with pytest.raises(ModuleConfigError, match=r"^rateLimit\.period"):
        compile_modules(modules(raw), {})
    raw = {
        "basicAuth": {"secretRef": {"name": "absent", "key": "htpasswd"}},
        "webhookVerification": {
            "provider": "slack",
            "secretRef": {"name": "hook", "key": "secret"},
        },
    }
    with pytest.raises(ModuleConfigError, match="is empty"):
        compile_modules(modules(raw), {("hook", "secret"): SecretValue(b"")})
    with pytest.raises(MissingSecretError, match="absent"):
        compile_modules(modules(raw), SECRETS)


def test_a_refusal_cannot_be_altered_by_the_caller() -> None:
    # Refusals are shared between requests: one caller must not change what the next one gets.
    edge = compile_modules(modules({"ipRestriction": {"deny": ["0.0.0.0/0"]}}), {})
    rejection = edge.check_request(view(peer_ip="10.0.0.1"))
    assert rejection is not None
    with pytest.raises(TypeError):
        rejection.headers["Set-Cookie"] = "x"  # type: ignore[index]
