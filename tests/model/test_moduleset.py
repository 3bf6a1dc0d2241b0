"""ModuleSet parsing, validation messages, status conditions, merging and Secrets."""

import base64
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.model.meta import InvalidObject
from interlock.model.moduleset import (
    ModuleSet,
    SecretKeyRef,
    SecretValue,
    describe_invalid,
    merge_modules,
    module_secret_refs,
    module_set_conditions,
    module_set_event,
    parse_module_set,
    parse_secret,
)

NOW = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)


def module_set(modules: Any, *, name: str = "set", generation: int = 1, **extra: Any) -> ModuleSet:
    return parse_module_set(
        {
            "apiVersion": "interlock.dev/v1alpha1",
            "kind": "ModuleSet",
            "metadata": {"name": name, "namespace": "default", "generation": generation},
            "spec": {"modules": modules},
            **extra,
        }
    )


DESIGN_EXAMPLE = {
    "ipRestriction": {"allow": ["10.0.0.0/8"], "deny": ["10.1.0.0/16"]},
    "basicAuth": {"realm": "app", "secretRef": {"name": "users", "key": "htpasswd"}},
    "jwt": {
        "issuer": "https://issuer",
        "audiences": ["api"],
        "jwksSecretRef": {"name": "jwks", "key": "jwks.json"},
    },
    "webhookVerification": {"provider": "github", "secretRef": {"name": "hook", "key": "secret"}},
    "headers": {
        "request": {"add": {"X-Team": "blue"}, "remove": ["X-Debug"]},
        "response": {"add": {"X-Frame-Options": "DENY"}, "remove": ["Server"]},
    },
    "compression": {"enabled": True},
    "circuitBreaker": {
        "errorThresholdPercentage": 50,
        "volumeThreshold": 20,
        "rollingWindow": "10s",
        "trippedDuration": "30s",
    },
    "rateLimit": {"requests": 100, "period": "1m"},
}


def test_design_example_is_fully_parsed_and_only_the_auth_clash_reported() -> None:
    parsed = module_set(DESIGN_EXAMPLE)
    # The design example lists every module at once; the edge refuses basicAuth together with jwt
    # (both read the Authorization header), so the ModuleSet reports it rather than the route.
    assert [str(p) for p in parsed.problems] == [
        "spec.modules: basicAuth and jwt both read the Authorization header; "
        "configure only one of them"
    ]
    without_jwt = {k: v for k, v in DESIGN_EXAMPLE.items() if k != "jwt"}
    assert module_set(without_jwt).problems == ()
    modules = parsed.spec.modules
    assert modules.ip_restriction is not None
    assert modules.ip_restriction.deny == ["10.1.0.0/16"]
    assert modules.jwt is not None
    assert modules.jwt.jwks_secret_ref == SecretKeyRef(name="jwks", key="jwks.json")
    assert modules.rate_limit is not None
    assert modules.rate_limit.requests == 100
    assert module_secret_refs(modules) == {
        SecretKeyRef(name="users", key="htpasswd"),
        SecretKeyRef(name="jwks", key="jwks.json"),
        SecretKeyRef(name="hook", key="secret"),
    }


def test_ipv6_cidrs_and_bare_addresses_are_valid() -> None:
    parsed = module_set({"ipRestriction": {"allow": ["2001:db8::/32", "10.1.2.3", "::1"]}})
    assert parsed.problems == ()


@pytest.mark.parametrize(
    ("modules", "expected"),
    [
        (
            {"ipRestriction": {"allow": ["10.0.0.0/8", "10.0.0.0/33"]}},
            'spec.modules.ipRestriction.allow[1]: "10.0.0.0/33" is not a valid CIDR',
        ),
        (
            {"ipRestriction": {"deny": ["2001:db8::/129"]}},
            'spec.modules.ipRestriction.deny[0]: "2001:db8::/129" is not a valid CIDR',
        ),
        (
            {"ipRestriction": {"allow": ["10.0.0.1/8"]}},
            'spec.modules.ipRestriction.allow[0]: "10.0.0.1/8" has host bits set; '
            'did you mean "10.0.0.0/8"?',
        ),
        (
            {"ipRestriction": {"alow": ["10.0.0.0/8"]}},
            "spec.modules.ipRestriction.alow: unknown field",
        ),
        (
            {"rateLimit": {"requests": 0}},
            "spec.modules.rateLimit.requests: must be at least 1",
        ),
        (
            {"rateLimit": {"requests": 10, "period": "1 minute"}},
            'spec.modules.rateLimit.period: "1 minute" is not a duration; '
            'use e.g. "30s", "500ms", "1m" or "1h30m"',
        ),
        (
            {"rateLimit": {"requests": 10, "period": "0s"}},
            'spec.modules.rateLimit.period: "0s" must be longer than zero',
        ),
        (
            {"circuitBreaker": {"trippedDuration": "30"}},
            'spec.modules.circuitBreaker.trippedDuration: "30" is not a duration; '
            'use e.g. "30s", "500ms", "1m" or "1h30m"',
        ),
        (
            {"circuitBreaker": {"errorThresholdPercentage": 150}},
            "spec.modules.circuitBreaker.errorThresholdPercentage: must be at most 100",
        ),
        (
            {"webhookVerification": {"provider": "gitlab", "secretRef": {"name": "h", "key": "k"}}},
            "spec.modules.webhookVerification.provider: "
            "must be 'github', 'stripe', 'slack' or 'generic'",
        ),
        (
            {"basicAuth": {"realm": "app"}},
            "spec.modules.basicAuth.secretRef: is required",
        ),
        (
            {"basicAuth": {"secretRef": {"name": "Users!", "key": "htpasswd"}}},
            'spec.modules.basicAuth.secretRef.name: "Users!" is not a valid Secret name',
        ),
        (
            {"jwt": {"issuer": "i", "jwksSecretRef": {"name": "jwks", "key": "a/b"}}},
            'spec.modules.jwt.jwksSecretRef.key: "a/b" is not a valid Secret key',
        ),
        (
            {"jwt": {"issuer": " ", "jwksSecretRef": {"name": "jwks", "key": "k"}}},
            "spec.modules.jwt.issuer: must not be empty",
        ),
        (
            {"basicAuth": {"realm": 'a"b', "secretRef": {"name": "u", "key": "k"}}},
            "spec.modules.basicAuth.realm: "
            "must not contain quotes, backslashes or control characters",
        ),
        (
            {"headers": {"request": {"add": {"X Team": "blue"}}}},
            'spec.modules.headers.request.add["X Team"]: "X Team" is not a valid header name',
        ),
        # A trailing newline is not accepted (`^…$` with re.match did accept it).
        (
            {"headers": {"request": {"add": {"X-Team\n": "blue"}}}},
            'spec.modules.headers.request.add["X-Team\n"]: "X-Team\n" is not a valid header name',
        ),
        (
            {"basicAuth": {"secretRef": {"name": "users\n", "key": "k"}}},
            'spec.modules.basicAuth.secretRef.name: "users\n" is not a valid Secret name',
        ),
        (
            {"basicAuth": {"secretRef": {"name": "users", "key": "htpasswd\n"}}},
            'spec.modules.basicAuth.secretRef.key: "htpasswd\n" is not a valid Secret key',
        ),
        (
            {
                "oidc": {
                    "issuer": "https://i.example",
                    "clientId": "c",
                    "clientSecret": {"name": "a", "key": "k"},
                    "emailDomains": ["example.com\n"],
                }
            },
            'spec.modules.oidc.emailDomains[0]: "example.com\n" is not a domain name',
        ),
        (
            {"headers": {"response": {"remove": ["Server", "Bad:Name"]}}},
            'spec.modules.headers.response.remove[1]: "Bad:Name" is not a valid header name',
        ),
        (
            {"headers": {"request": {"add": {"X-Token": "abc\r\nEvil: 1"}}}},
            'spec.modules.headers.request.add["X-Token"]: the value contains a control character',
        ),
        (
            {"headers": {"request": {"remove": ["Host"]}}},
            "spec.modules.headers.request.remove[0]: Host is managed by the proxy and cannot be "
            "changed",
        ),
        (
            {
                "basicAuth": {"secretRef": {"name": "u", "key": "k"}},
                "jwt": {"issuer": "i", "jwksSecretRef": {"name": "j", "key": "k"}},
            },
            "spec.modules: basicAuth and jwt both read the Authorization header; "
            "configure only one of them",
        ),
        (
            {"ipRestrction": {"allow": ["10.0.0.0/8"]}},
            'spec.modules.ipRestrction: unknown module type "ipRestrction" (known types: '
            "basicAuth, circuitBreaker, compression, headers, ipRestriction, jwt, mutualTLS, "
            "oauth, oidc, rateLimit, webhookVerification)",
        ),
        (["ipRestriction"], "spec.modules: must be an object"),
        (
            {"compression": "yes please"},
            "spec.modules.compression: must be an object",
        ),
    ],
)
def test_validation_messages_name_module_and_field(modules: Any, expected: str) -> None:
    problems = module_set(modules).problems
    assert [str(p) for p in problems] == [expected]


def test_problem_names_the_module() -> None:
    [problem] = module_set({"ipRestriction": {"allow": ["x"]}}).problems
    assert problem.module == "ipRestriction"
    assert problem.field == "spec.modules.ipRestriction.allow[0]"


def test_unknown_module_type_is_not_silently_dropped_even_beside_valid_ones() -> None:
    parsed = module_set({"compression": {}, "waf": {"mode": "block"}})
    problems = parsed.problems
    assert [p.module for p in problems] == ["waf"]
    # The valid module is still readable, for status and debugging.
    assert parsed.spec.modules.compression is not None


def test_header_value_is_not_quoted_in_messages() -> None:
    problems = module_set({"headers": {"request": {"add": {"X-Token": "hunter2\n"}}}}).problems
    assert problems
    assert all("hunter2" not in str(p) for p in problems)


def test_problems_survive_a_dump_and_parse_round_trip() -> None:
    # A cache or debug page that dumps and re-parses a ModuleSet must not make it valid: the
    # invalid modules are gone from ``modules`` after the first parse.
    parsed = module_set({"waf": {}, "rateLimit": {"requests": 0}, "compression": {}})
    again = parse_module_set(parsed.model_dump(by_alias=True))
    assert again.problems == parsed.problems
    assert len(again.problems) == 2


def test_problems_in_the_input_can_only_make_a_set_invalid() -> None:
    parsed = parse_module_set(
        {
            "metadata": {"name": "s", "namespace": "d"},
            "spec": {"modules": {}, "problems": [{"module": "x", "field": "y", "reason": "z"}]},
        }
    )
    assert [str(p) for p in parsed.problems] == ["y: z"]


def test_empty_and_null_modules_are_valid() -> None:
    assert module_set({}).problems == ()
    assert module_set(None).problems == ()
    assert parse_module_set({"metadata": {"name": "s", "namespace": "d"}}).problems == ()


def test_module_set_without_namespace_is_rejected() -> None:
    with pytest.raises(InvalidObject) as err:
        parse_module_set({"metadata": {"name": "s"}, "spec": {}})
    assert str(err.value) == "ModuleSet s: metadata.namespace: is required"


def test_unreadable_module_set_raises_naming_it() -> None:
    with pytest.raises(InvalidObject) as err:
        parse_module_set({"metadata": {"name": "s", "namespace": "d"}, "spec": ["x"]})
    assert str(err.value).startswith("ModuleSet d/s: spec: ")


# --- conditions ---------------------------------------------------------------------------------


def test_valid_condition() -> None:
    parsed = module_set({"compression": {}}, generation=4)
    assert module_set_conditions(parsed, now=NOW) == [
        {
            "type": "Valid",
            "status": "True",
            "reason": "Valid",
            "message": "all modules are valid",
            "observedGeneration": 4,
            "lastTransitionTime": "2026-01-02T03:04:05Z",
        }
    ]


def test_invalid_condition_names_module_and_field() -> None:
    parsed = module_set({"ipRestriction": {"allow": ["10.0.0.0/33"]}})
    [condition] = module_set_conditions(parsed, now=NOW)
    assert condition["status"] == "False"
    assert condition["reason"] == "Invalid"
    assert condition["message"] == (
        'spec.modules.ipRestriction.allow[0]: "10.0.0.0/33" is not a valid CIDR'
    )


def test_long_problem_lists_are_cut_short() -> None:
    parsed = module_set({"ipRestriction": {"allow": [f"bad{i}" for i in range(15)]}})
    [condition] = module_set_conditions(parsed, now=NOW)
    assert condition["message"].endswith("; and 5 more")
    assert '"bad9"' in condition["message"]
    assert '"bad10"' not in condition["message"]


def test_transition_time_kept_while_status_unchanged() -> None:
    earlier = "2025-12-31T00:00:00Z"
    current = {"conditions": [{"type": "Valid", "status": "True", "lastTransitionTime": earlier}]}
    parsed = module_set({}, status=current)
    [same] = module_set_conditions(parsed, now=NOW)
    assert same["lastTransitionTime"] == earlier
    broken = module_set({"rateLimit": {"requests": 0}}, status=current)
    [changed] = module_set_conditions(broken, now=NOW)
    assert changed["lastTransitionTime"] == "2026-01-02T03:04:05Z"


# --- merging ------------------------------------------------------------------------------------


def test_merge_last_set_listed_wins_per_module_type() -> None:
    a = module_set(
        {"ipRestriction": {"allow": ["10.0.0.0/8"]}, "compression": {"enabled": True}}, name="a"
    )
    b = module_set(
        {"ipRestriction": {"allow": ["192.168.0.0/16"]}, "rateLimit": {"requests": 5}}, name="b"
    )
    merged = merge_modules([a, b])
    assert merged.ip_restriction is not None
    assert merged.ip_restriction.allow == ["192.168.0.0/16"]
    assert merged.compression is not None  # only in a: kept
    assert merged.rate_limit is not None  # only in b: kept
    reverse = merge_modules([b, a])
    assert reverse.ip_restriction is not None
    assert reverse.ip_restriction.allow == ["10.0.0.0/8"]


def test_merge_whole_module_replaced_not_field_merged() -> None:
    a = module_set({"headers": {"request": {"add": {"X-A": "1"}}}}, name="a")
    b = module_set({"headers": {"response": {"add": {"X-B": "2"}}}}, name="b")
    merged = merge_modules([a, b])
    assert merged.headers is not None
    assert merged.headers.request.add == {}
    assert merged.headers.response.add == {"X-B": "2"}


def test_merge_of_nothing_is_no_modules() -> None:
    assert merge_modules([]) == module_set({}).spec.modules


_MODULE_CHOICES = {
    "compression": [{"enabled": True}, {"enabled": False}],
    "rateLimit": [{"requests": 1}, {"requests": 2, "period": "1s"}],
    "ipRestriction": [{"allow": ["10.0.0.0/8"]}, {"deny": ["::1"]}],
}


@given(
    st.lists(
        st.dictionaries(
            st.sampled_from(sorted(_MODULE_CHOICES)), st.sampled_from([0, 1]), max_size=3
        ),
        max_size=5,
    )
)
def test_merge_takes_each_module_from_the_last_set_defining_it(
    choices: list[dict[str, int]],
) -> None:
    sets = [
        module_set({k: _MODULE_CHOICES[k][v] for k, v in c.items()}, name=f"s{i}")
        for i, c in enumerate(choices)
    ]
    merged = merge_modules(sets).model_dump(by_alias=True, exclude_none=True)
    for module in _MODULE_CHOICES:
        last = next((c[module] for c in reversed(choices) if module in c), None)
        if last is None:
            assert module not in merged
        else:
            expected = module_set({module: _MODULE_CHOICES[module][last]}).spec.modules
            assert merged[module] == expected.model_dump(by_alias=True, exclude_none=True)[module]


# --- secrets ------------------------------------------------------------------------------------

PLANTED = "s3cr3t-planted-value"


def secret(**data: str) -> Any:
    return parse_secret(
        {
            "metadata": {"name": "users", "namespace": "default"},
            "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
            "stringData": {"plain": PLANTED},
        }
    )


def test_secret_values_decoded_and_never_printed() -> None:
    parsed = secret(htpasswd=PLANTED)
    value = parsed.value("htpasswd")
    assert value is not None
    assert value.reveal() == PLANTED.encode()
    assert parsed.value("plain") == SecretValue(PLANTED.encode())
    assert parsed.value("missing") is None
    for text in (repr(parsed), str(parsed), parsed.model_dump_json(), repr(value), str(value)):
        assert PLANTED not in text
        assert base64.b64encode(PLANTED.encode()).decode() not in text


def test_secret_with_bad_value_type_names_field_not_value() -> None:
    with pytest.raises(InvalidObject) as err:
        parse_secret({"metadata": {"name": "s", "namespace": "d"}, "data": {"k": 12345}})
    assert str(err.value).startswith("Secret d/s: data.k: ")
    assert "12345" not in str(err.value)


# --- agreement with the edge ---------------------------------------------------------------------

_CIDRS = st.one_of(
    st.ip_addresses().map(str),
    st.builds(
        lambda address, prefix: f"{address}/{prefix}", st.ip_addresses(), st.integers(0, 130)
    ),
    st.sampled_from(["", "10.0.0.0/8 ", "not-a-cidr", "10.0.0.1/8", "::ffff:10.0.0.0/104"]),
)
_HEADER_NAMES = st.sampled_from(["X-Team", "Host", "bad name", "X:Y", "Upgrade", "x-ok"])
_HEADER_VALUES = st.sampled_from(["blue", "a\tb", "a\r\nb", "\x7f", ""])
_DURATIONS = st.sampled_from(["10s", "0s", "1m30s", "10", "-1s", "500ms"])


@settings(max_examples=200, deadline=None)
@given(
    allow=st.lists(_CIDRS, max_size=3),
    deny=st.lists(_CIDRS, max_size=2),
    headers=st.dictionaries(_HEADER_NAMES, _HEADER_VALUES, max_size=2),
    remove=st.lists(_HEADER_NAMES, max_size=2),
    window=_DURATIONS,
    period=_DURATIONS,
)
def test_a_valid_module_set_compiles_at_the_edge_and_an_invalid_one_does_not(
    allow: list[str],
    deny: list[str],
    headers: dict[str, str],
    remove: list[str],
    window: str,
    period: str,
) -> None:
    from interlock.edge.modules import ModuleConfigError, compile_modules

    parsed = module_set(
        {
            "ipRestriction": {"allow": allow, "deny": deny},
            "headers": {"request": {"add": headers, "remove": remove}},
            "circuitBreaker": {"rollingWindow": window},
            "rateLimit": {"requests": 5, "period": period},
        }
    )
    valid = parsed.problems == ()
    try:
        compile_modules(parsed.spec.modules, {})
        compiles = True
    except ModuleConfigError:
        compiles = False
    assert valid is compiles


def test_no_module_set_problem_is_worded_by_the_validation_library() -> None:
    bad = [
        {"rateLimit": {"requests": -1}},
        {"rateLimit": {"requests": "10"}},
        {"compression": "yes please"},
        {"circuitBreaker": {"errorThresholdPercentage": 101}},
        {"basicAuth": {"realm": "app"}},
        {"webhookVerification": {"provider": "gitlab", "secretRef": {"name": "h", "key": "k"}}},
    ]
    for modules in bad:
        reasons = [str(p) for p in module_set(modules).problems]
        assert reasons, modules
        for reason in reasons:
            assert "Input should" not in reason and "Field required" not in reason, reason


def test_a_module_set_event_says_how_it_is_now() -> None:
    bad = module_set({"ipRestriction": {"allow": ["10.0.0.0/33"]}})
    invalid = module_set_conditions(bad, now=NOW)
    good = module_set({"ipRestriction": {"allow": ["10.0.0.0/8"]}})
    valid = module_set_conditions(good, now=NOW)

    key = bad.key
    warning = module_set_event([], invalid, key=key)
    assert warning is not None and warning[:2] == ("Warning", "InvalidModuleSet")
    assert "spec.modules.ipRestriction.allow[0]" in warning[2]
    assert module_set_event(invalid, invalid, key=key) is None, "the same problem is not repeated"
    assert module_set_event(invalid, valid, key=key) == (
        "Normal",
        "Valid",
        "all modules are valid again",
    )
    assert module_set_event([], valid, key=key) is None, "a new valid ModuleSet is no news"
    assert module_set_event(valid, valid, key=key) is None


def test_an_invalid_setting_is_reported_with_its_module_set_namespace_and_field() -> None:
    # Read in a list of many objects' Events, or in the log, a message that gives only the
    # field path does not say which ModuleSet to fix (the Event said only the field path).
    modules = {"ipRestriction": {"allow": ["x"]}, "rateLimit": {"requests": 5, "period": "0s"}}
    bad = module_set(modules, name="api")
    expected_start = "ModuleSet default/api is invalid: spec.modules.ipRestriction.allow[0]: "
    assert describe_invalid(bad.key, bad.problems) == (
        expected_start + '"x" is not a valid CIDR (and 1 more)'
    )
    warning = module_set_event([], module_set_conditions(bad, now=NOW), key=bad.key)
    assert warning is not None and warning[2].startswith(expected_start)
    assert "spec.modules.rateLimit.period" in warning[2]


def test_a_setting_problem_is_found_when_the_module_set_is_parsed() -> None:
    # Not only the sifting's: a CIDR that types accept is checked at parse time too, so everyone
    # who asks (its status, the IngressActor, the Ingress and Gateway route models) reads one
    # result, and the copy the directory publishes carries it.
    bad = module_set({"ipRestriction": {"allow": ["10.0.0.0/33"]}})
    published = bad.model_copy(update={"status": {}})
    assert published.problems == bad.problems
    assert [p.field for p in bad.problems] == ["spec.modules.ipRestriction.allow[0]"]
