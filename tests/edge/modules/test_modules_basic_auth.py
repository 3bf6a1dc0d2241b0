"""basicAuth: htpasswd bcrypt users; 401 with a Basic challenge for everyone else."""

from __future__ import annotations

import base64

import bcrypt
import pytest

from interlock.edge.modules import (
    MissingSecretError,
    ModuleChain,
    ModuleConfigError,
    compile_modules,
)
from interlock.model.moduleset import SecretValue
from tests.kit.modules_testkit import basic, modules, view


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


@pytest.fixture
def bcrypt_checks(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The hashes bcrypt.checkpw is called with, in order."""
    checked: list[bytes] = []
    real = bcrypt.checkpw

    def spy(password: bytes, hashed: bytes) -> bool:
        checked.append(hashed)
        return real(password, hashed)

    monkeypatch.setattr(bcrypt, "checkpw", spy)
    return checked


def test_unknown_user_still_runs_bcrypt(bcrypt_checks: list[bytes]) -> None:
    edge = chain()
    assert edge.check_request(view(headers=basic("nobody", "x"))) is not None
    assert len(bcrypt_checks) == 1


def test_a_client_retrying_a_stale_password_costs_one_bcrypt_check(
    bcrypt_checks: list[bytes],
) -> None:
    edge = chain()
    for _ in range(5):
        assert edge.check_request(view(headers=basic("alice", "stale"))) is not None
    assert len(bcrypt_checks) == 1


def test_every_new_guess_costs_a_bcrypt_check(bcrypt_checks: list[bytes]) -> None:
    edge = chain()
    for guess in range(5):
        assert edge.check_request(view(headers=basic("alice", f"guess-{guess}"))) is not None
    assert len(bcrypt_checks) == 5


def test_failed_guesses_cannot_flush_cached_good_credentials(
    bcrypt_checks: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("interlock.edge.modules.basic_auth.CACHE_SIZE", 3)
    edge = chain()
    assert edge.check_request(view(headers=basic("alice", "wonderland"))) is None
    for guess in range(10):
        edge.check_request(view(headers=basic("alice", f"guess-{guess}")))
    checks = len(bcrypt_checks)
    assert edge.check_request(view(headers=basic("alice", "wonderland"))) is None
    assert len(bcrypt_checks) == checks


def test_credentials_split_differently_are_not_confused() -> None:
    # "ab" + ":" + "c" and "a" + ":" + "bc" must not share a cache entry.
    htpasswd = b"ab:" + bcrypt_hash("c") + b"\n"
    edge = chain(htpasswd)
    assert edge.check_request(view(headers=basic("ab", "c"))) is None
    assert edge.check_request(view(headers=basic("a", "bc"))) is not None


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


def test_the_least_recently_used_answer_is_the_one_forgotten(
    bcrypt_checks: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("interlock.edge.modules.basic_auth.CACHE_SIZE", 2)
    edge = chain()
    alice, bob, carol = (
        basic("alice", "wonderland"),
        basic("bob", "builder"),
        basic("carol", "s3cret:with:colons"),
    )
    for headers in (alice, bob, alice, carol):  # alice used after bob: bob is forgotten
        assert edge.check_request(view(headers=headers)) is None
    assert len(bcrypt_checks) == 3
    assert edge.check_request(view(headers=alice)) is None
    assert edge.check_request(view(headers=carol)) is None
    assert len(bcrypt_checks) == 3
    assert edge.check_request(view(headers=bob)) is None
    assert len(bcrypt_checks) == 4


def test_the_same_credentials_spelled_otherwise_are_checked_again(
    bcrypt_checks: list[bytes],
) -> None:
    """The caches are keyed by the Authorization value as sent; another spelling of the same
    credentials is checked once more, and admitted or refused alike."""
    edge = chain()
    value = basic("alice", "wonderland")["Authorization"]
    for spelled in (value, value.replace("Basic", "basic"), value + " "):
        assert edge.check_request(view(headers={"Authorization": spelled})) is None
        assert edge.check_request(view(headers={"Authorization": spelled})) is None
    assert len(bcrypt_checks) == 3


def test_the_same_value_again_is_answered_by_its_own_chain_only() -> None:
    """A success is remembered with the very value object it came with (a connection hands
    its next request the same objects): that object gets the same answer from that chain
    only — another route's chain, or one compiled from a changed Secret, checks it anew."""
    value = basic("alice", "wonderland")["Authorization"]
    old = chain()
    for _ in range(3):  # bcrypt, then the cache, then the remembered object
        assert old.check_request(view(headers={"Authorization": value})) is None
    changed = chain(b"alice:" + bcrypt_hash("changed") + b"\n")
    other_route = chain(b"bob:" + bcrypt_hash("builder") + b"\n")
    for edge in (changed, other_route):
        for _ in range(2):
            assert edge.check_request(view(headers={"Authorization": value})) is not None
    assert old.check_request(view(headers={"Authorization": value})) is None
    assert old.check_request(view(headers={"Authorization": value + "x"})) is not None


def test_a_remembered_success_forgotten_by_the_cache_is_checked_again(
    bcrypt_checks: list[bytes], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr("interlock.edge.modules.basic_auth.CACHE_SIZE", 1)
    edge = chain()
    alice = {"Authorization": basic("alice", "wonderland")["Authorization"]}
    for _ in range(3):
        assert edge.check_request(view(headers=alice)) is None
    assert len(bcrypt_checks) == 1
    assert edge.check_request(view(headers=basic("bob", "builder"))) is None  # alice forgotten
    assert edge.check_request(view(headers=alice)) is None
    assert len(bcrypt_checks) == 3
