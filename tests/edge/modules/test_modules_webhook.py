"""webhookVerification: valid and invalid signatures for every provider."""

from __future__ import annotations

import hashlib
import hmac

import pytest

from interlock.edge.modules import ModuleChain, ModuleConfigError, compile_modules
from interlock.model.moduleset import SecretValue
from tests.kit.modules_testkit import Clock, modules, view

KEY = b"whsec_planted_webhook_key"
BODY = b'{"event":"push","ref":"refs/heads/main"}'
NOW = 1_700_000_000


def chain(provider: str, secret: bytes = KEY + b"\n", wall: Clock | None = None) -> ModuleChain:
    return compile_modules(
        modules(
            {
                "webhookVerification": {
                    "provider": provider,
                    "secretRef": {"name": "hook", "key": "secret"},
                }
            }
        ),
        {("hook", "secret"): SecretValue(secret)},
        wall_clock=wall or Clock(NOW),
    )


def sign(message: bytes, key: bytes = KEY) -> str:
    return hmac.new(key, message, hashlib.sha256).hexdigest()


def status(edge: ModuleChain, headers: dict[str, str], body: bytes | None = BODY) -> int:
    rejection = edge.check_request(view(method="POST", headers=headers, body=body))
    return 200 if rejection is None else rejection.status


def test_chain_asks_for_the_body() -> None:
    assert chain("github").needs_body
    assert not compile_modules(modules({}), {}).needs_body


def test_github() -> None:
    edge = chain("github")
    assert status(edge, {"X-Hub-Signature-256": f"sha256={sign(BODY)}"}) == 200
    assert status(edge, {"X-Hub-Signature-256": f"sha256={sign(BODY + b' ')}"}) == 401
    assert status(edge, {"X-Hub-Signature-256": f"sha1={sign(BODY)}"}) == 401
    assert status(edge, {"X-Hub-Signature-256": f"sha256={sign(BODY, b'other')}"}) == 401
    assert status(edge, {}) == 401


def test_generic_accepts_prefixed_and_bare_hex() -> None:
    edge = chain("generic")
    assert status(edge, {"X-Signature": f"sha256={sign(BODY)}"}) == 200
    assert status(edge, {"X-Signature": sign(BODY).upper()}) == 200
    assert status(edge, {"X-Signature": sign(b"other")}) == 401
    assert status(edge, {"X-Signature": "zz"}) == 401


def test_stripe() -> None:
    edge = chain("stripe")
    good = sign(f"{NOW}.".encode() + BODY)
    assert status(edge, {"Stripe-Signature": f"t={NOW},v1={good}"}) == 200
    # While a secret is rolled Stripe sends one v1 per secret; any may match.
    assert status(edge, {"Stripe-Signature": f"t={NOW},v1={'0' * 64},v1={good},v0=abc"}) == 200
    assert status(edge, {"Stripe-Signature": f"t={NOW + 1},v1={good}"}) == 401
    assert status(edge, {"Stripe-Signature": f"v1={good}"}) == 401


def test_stripe_rejects_a_replay_outside_five_minutes() -> None:
    wall = Clock(NOW)
    edge = chain("stripe", wall=wall)
    header = {"Stripe-Signature": f"t={NOW},v1={sign(f'{NOW}.'.encode() + BODY)}"}
    wall.advance(299)
    assert status(edge, header) == 200
    wall.advance(2)
    assert status(edge, header) == 401


def test_slack() -> None:
    wall = Clock(NOW)
    edge = chain("slack", wall=wall)
    headers = {
        "X-Slack-Request-Timestamp": str(NOW),
        "X-Slack-Signature": "v0=" + sign(f"v0:{NOW}:".encode() + BODY),
    }
    assert status(edge, headers) == 200
    assert status(edge, {**headers, "X-Slack-Request-Timestamp": str(NOW - 1)}) == 401
    assert (
        status(edge, {**headers, "X-Slack-Signature": "v1=" + headers["X-Slack-Signature"][3:]})
        == 401
    )
    wall.advance(301)
    assert status(edge, headers) == 401


def test_missing_body_fails_closed() -> None:
    assert status(chain("github"), {"X-Hub-Signature-256": f"sha256={sign(b'')}"}, body=None) == 401


@pytest.mark.parametrize("secret", [b"", b"  \n"])
def test_empty_secret_is_a_config_error(secret: bytes) -> None:
    with pytest.raises(ModuleConfigError, match=r"^webhookVerification\.secretRef .*: is empty"):
        chain("github", secret=secret)
