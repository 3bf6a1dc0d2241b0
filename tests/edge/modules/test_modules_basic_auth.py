"""basicAuth: htpasswd bcrypt users; 401 with a Basic challenge for everyone else."""

from __future__ import annotations

import base64

import bcrypt
import pytest
from modules_testkit import basic, modules, view

from interlock.edge.modules import (
    MissingSecretError,
    ModuleChain,
    ModuleConfigError,
    compile_modules,
)
from interlock.model.moduleset import SecretValue


def bcrypt_hash(password: str, prefix: bytes = b"$2b$") -> bytes:
    hashed = bcrypt.hashpw(password.encode(), bcrypt.gensalt(rounds=4))
    return prefix + hashed[4:]


HTPASSWD = (
    b"# users of the app\n"
    + b"alice:"
    + bcrypt_hash("wonderland", b"$2y$")
    + b"\n"
    + b"\n"
    + b"bob:"
    + bcrypt_hash("builder", b"$2a$")
    + b"\n"
    + b"carol:"
    + bcrypt_hash("s3cret:with:colons")
    + b"\n"
)


def chain(htpasswd: bytes = HTPASSWD, realm: str = "app") -> ModuleChain:
    return compile_modules(
        modules({"basicAuth": {"realm": realm, "secretRef": {"name": "users", "key": "htpasswd"}}}),
        {("users", "htpasswd"): SecretValue(htpasswd)},
    )


@pytest.mark.parametrize(
    ("user", "password"),
    [("alice", "wonderland"), ("bob", "builder"), ("carol", "s3cret:with:colons")],
)
def test_valid_credentials_pass_for_every_bcrypt_prefix(user: str, password: str) -> None:
    assert chain().check_request(view(headers=basic(user, password))) is None


@pytest.mark.parametrize(
    "headers",
    [
        {},
        basic("alice", "wrong"),
        basic("mallory", "wonderland"),
        {"Authorization": "Bearer abc"},
        {"Authorization": "Basic !!!not-base64"},
        {"Authorization": "Basic " + base64.b64encode(b"no-colon").decode()},
    ],
)
def test_anything_else_gets_401_with_basic_challenge(headers: dict[str, str]) -> None:
    rejection = chain(realm="app").check_request(view(headers=headers))
    assert rejection is not None
    assert rejection.status == 401
    assert rejection.headers["WWW-Authenticate"].startswith('Basic realm="app"')


def test_a_cached_success_does_not_outlive_a_changed_password() -> None:
    # The cache belongs to one compiled chain: a recompiled Secret starts with no cache.
    old = chain()
    assert old.check_request(view(headers=basic("alice", "wonderland"))) is None
    assert old.check_request(view(headers=basic("alice", "wonderland"))) is None
    new = chain(b"alice:" + bcrypt_hash("changed") + b"\n")
    assert new.check_request(view(headers=basic("alice", "wonderland"))) is not None
    assert new.check_request(view(headers=basic("alice", "changed"))) is None


def test_cached_success_does_not_admit_a_different_password() -> None:
    edge = chain()
    assert edge.check_request(view(headers=basic("alice", "wonderland"))) is None
    assert edge.check_request(view(headers=basic("alice", "wonderlan"))) is not None


def test_unknown_user_still_runs_bcrypt(monkeypatch: pytest.MonkeyPatch) -> None:
    edge = chain()
    checked: list[bytes] = []
    real = bcrypt.checkpw

    def spy(password: bytes, hashed: bytes) -> bool:
        checked.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", spy)
    assert edge.check_request(view(headers=basic("nobody", "x"))) is not None
    assert len(checked) == 1


@pytest.mark.parametrize(
    ("htpasswd", "reason"),
    [
        (b"alice:$apr1$abc$defghijklmnopqrstuvwx\n", "line 1: the hash is not bcrypt"),
        (b"# comment\nalice:{SHA}W6ph5Mm5Pz8GgiULbPgzG37mj9g=\n", "line 2: the hash is not bcrypt"),
        (b"alice:plaintext\n", "line 1: the hash is not bcrypt"),
        (b"just-a-name\n", "line 1 is not of the form user:hash"),
        (b"# nobody\n\n", "holds no users"),
        (
            b"alice:" + bcrypt_hash("a") + b"\nalice:" + bcrypt_hash("b") + b"\n",
            "line 2: the user is listed twice",
        ),
    ],
)
def test_htpasswd_that_is_not_bcrypt_is_a_config_error(htpasswd: bytes, reason: str) -> None:
    with pytest.raises(ModuleConfigError) as caught:
        chain(htpasswd)
    assert caught.value.field == "basicAuth.secretRef (Secret 'users' key 'htpasswd')"
    assert reason in str(caught.value)
    assert b"plaintext" not in str(caught.value).encode()
    assert "$apr1$" not in str(caught.value)


def test_realm_with_a_quote_is_a_config_error() -> None:
    with pytest.raises(ModuleConfigError, match=r"^basicAuth\.realm: "):
        chain(realm='say "hi"')


def test_missing_secret_is_transient() -> None:
    with pytest.raises(MissingSecretError) as caught:
        compile_modules(
            modules({"basicAuth": {"secretRef": {"name": "users", "key": "htpasswd"}}}), {}
        )
    assert caught.value.field == "basicAuth.secretRef"
    assert "users" in str(caught.value)
