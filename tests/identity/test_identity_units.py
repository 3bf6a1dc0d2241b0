"""Unit tests of the identity modules' pure parts: the session cookie (sealing, tampering, key
rotation), ModuleSet validation naming the field, and identity-header stripping."""

from __future__ import annotations

from typing import Any

import pytest
from multidict import CIMultiDict

from interlock.edge.modules.identity import Admitted
from interlock.edge.modules.session import SessionKeyError, SessionSealer, session_keys
from interlock.model.moduleset import parse_module_set

OLD = b"o" * 32
NEW = b"n" * 32


def test_rotation_keeps_sessions_sealed_with_the_old_key_and_seals_with_the_new() -> None:
    old = SessionSealer([OLD], label=b"t")
    token = old.seal({"u": "alice"}, now=1000)
    rotated = SessionSealer([NEW, OLD], label=b"t")
    assert rotated.open(token, now=1001, max_age=60) == {"u": "alice"}
    fresh = rotated.seal({"u": "bob"}, now=1002)
    assert old.open(fresh, now=1003, max_age=60) is None, "sealed with the new key"
    assert SessionSealer([NEW], label=b"t").open(token, now=1001, max_age=60) is None


def test_a_tampered_or_too_old_session_is_no_session() -> None:
    sealer = SessionSealer([OLD], label=b"t")
    token = sealer.seal({"u": "alice"}, now=1000)
    flipped = token[:-5] + ("A" if token[-5] != "A" else "B") + token[-4:]
    assert sealer.open(flipped, now=1001, max_age=60) is None
    assert sealer.open(token, now=1000 + 120, max_age=60) is None
    assert "o" * 8 not in repr(sealer)


def test_session_keys_need_32_bytes_per_line() -> None:
    assert session_keys(NEW + b"\n\n" + OLD + b"\n") == [NEW, OLD]
    with pytest.raises(SessionKeyError, match="key line 2 is 5 bytes"):
        session_keys(NEW + b"\nshort")
    with pytest.raises(SessionKeyError, match="holds no key"):
        session_keys(b"\n \n")


def test_admitted_replaces_client_sent_identity_headers_and_hides_the_session() -> None:
    admitted = Admitted(
        (("X-Forwarded-User", "u-alice"), ("X-Forwarded-Email", "alice@example.com")),
        frozenset({"x-forwarded-user", "x-forwarded-email", "x-auth-name"}),
        frozenset({"__interlock_session_x"}),
    )
    headers: CIMultiDict[str] = CIMultiDict(
        [
            ("x-forwarded-email", "ceo@example.com"),
            ("X-Forwarded-Email", "cfo@example.com"),
            ("X-Auth-Name", "CEO"),
            ("Cookie", "a=1; __interlock_session_x=secret; b=2"),
        ]
    )
    admitted.apply(headers)
    assert headers.getall("X-Forwarded-Email") == ["alice@example.com"]
    assert headers["X-Forwarded-User"] == "u-alice"
    assert "X-Auth-Name" not in headers
    assert headers["Cookie"] == "a=1; b=2"


def _problems(modules: dict[str, Any]) -> list[str]:
    module_set = parse_module_set(
        {
            "apiVersion": "interlock.dev/v1alpha1",
            "kind": "ModuleSet",
            "metadata": {"name": "auth", "namespace": "default"},
            "spec": {"modules": modules},
        }
    )
    return [str(p) for p in module_set.problems]


REF = {"name": "auth", "key": "client-secret"}


@pytest.mark.parametrize(
    ("modules", "expected"),
    [
        ({"oauth": {}}, "spec.modules.oauth: exactly one provider is required"),
        (
            {"oauth": {"google": {"clientSecret": REF}}},
            "spec.modules.oauth.google.clientId: is required",
        ),
        (
            {"oauth": {"google": {"clientId": "c"}}},
            "spec.modules.oauth.google.clientSecret: is required",
        ),
        (
            {
                "oauth": {
                    "github": {"clientId": "c", "clientSecret": REF, "inactivityTimeout": "ten"}
                }
            },
            "spec.modules.oauth.github.inactivityTimeout:",
        ),
        (
            {"oidc": {"issuer": "idp", "clientId": "c", "clientSecret": REF}},
            'spec.modules.oidc.issuer: "idp" is not an absolute http(s) URL',
        ),
        (
            {
                "oidc": {
                    "issuer": "https://idp",
                    "clientId": "c",
                    "clientSecret": REF,
                    "emailDomains": ["exa mple.com"],
                }
            },
            'spec.modules.oidc.emailDomains[0]: "exa mple.com" is not a domain name',
        ),
        (
            {
                "oidc": {
                    "issuer": "https://idp",
                    "clientId": "c",
                    "clientSecret": REF,
                    "identityHeaders": {"Host": "sub"},
                }
            },
            'spec.modules.oidc.identityHeaders["Host"]: Host is managed by the proxy',
        ),
        (
            {"oauth": {"generic": {"clientId": "c", "clientSecret": REF, "authorizeUrl": "x"}}},
            "spec.modules.oauth.generic.tokenUrl",
        ),
        (
            {
                "oidc": {"issuer": "https://idp", "clientId": "c", "clientSecret": REF},
                "oauth": {"google": {"clientId": "c", "clientSecret": REF}},
            },
            "oauth and oidc both sign users in",
        ),
    ],
)
def test_invalid_identity_modules_name_the_field(modules: dict[str, Any], expected: str) -> None:
    problems = _problems(modules)
    assert any(expected in p for p in problems), problems


def test_the_seed_example_with_a_client_id_is_valid() -> None:
    seed = {
        "optionsPassthrough": True,
        "inactivityTimeout": "10m",
        "maximumDuration": "24h",
        "authCheckInterval": "20m",
        "clientId": "my-client",
        "clientSecret": REF,
        "emailDomains": ["ngrok.com"],
    }
    assert _problems({"oauth": {"google": seed}}) == []
