"""module_settings: the one check of module settings, and the typed values the edge builds from."""

from __future__ import annotations

from ipaddress import ip_network
from typing import Any

import pytest

from interlock.edge.modules import ModuleConfigError, compile_modules
from interlock.model.module_settings import ModuleSettings, module_settings
from interlock.model.moduleset import Modules


def settings_of(raw: dict[str, Any]) -> ModuleSettings:
    settings = module_settings(Modules.model_validate(raw))
    assert isinstance(settings, ModuleSettings), settings
    return settings


def test_settings_are_typed_for_the_builders() -> None:
    settings = settings_of(
        {
            "ipRestriction": {"allow": [" 10.0.0.0/8", "::ffff:192.0.2.0/120"], "deny": ["::1"]},
            "rateLimit": {"requests": 5, "period": "1m"},
            "circuitBreaker": {"rollingWindow": "1m30s", "trippedDuration": "500ms"},
            "webhookVerification": {
                "provider": "github",
                "secretRef": {"name": "hook", "key": "secret"},
                "replayWindow": "5m",
            },
            "headers": {"request": {"remove": ["X-Debug"], "add": {"X-Team": "blue"}}},
        }
    )
    assert settings.ip_restriction is not None
    # An IPv4-mapped network is the IPv4 network it covers (peers are unmapped the same way).
    assert settings.ip_restriction.allow == (ip_network("10.0.0.0/8"), ip_network("192.0.2.0/24"))
    assert settings.ip_restriction.deny == (ip_network("::1/128"),)
    assert settings.rate_limit is not None and settings.rate_limit.period == 60.0
    assert settings.circuit_breaker is not None
    assert settings.circuit_breaker.rolling_window == 90.0
    assert settings.circuit_breaker.tripped_duration == 0.5
    assert settings.replay_window == 300.0
    assert settings.headers is not None
    assert settings.headers.request.remove == ("x-debug",)
    assert settings.headers.request.add == (("X-Team", "blue"),)
    assert settings.login is None


def test_an_ingress_nginx_path_pattern_is_compiled_case_insensitive() -> None:
    settings = settings_of({"ingressNginx": {"pathPattern": "/API/v[0-9]+/(.*)"}})
    assert settings.ingress_nginx is not None and settings.ingress_nginx.pattern is not None
    assert settings.ingress_nginx.pattern.match("/api/v2/users")


def test_login_settings_name_the_provider_and_its_client_secret() -> None:
    settings = settings_of(
        {
            "oauth": {
                "github": {
                    "clientId": "app",
                    "clientSecret": {"name": "oauth", "key": "secret"},
                    "inactivityTimeout": "1h",
                }
            }
        }
    )
    login = settings.login
    assert login is not None
    assert (login.kind, login.provider, login.field) == ("oauth", "github", "oauth.github")
    assert (login.client_secret.name, login.client_secret.key) == ("oauth", "secret")
    assert login.inactivity_timeout == 3600.0
    assert login.maximum_duration is None and login.auth_check_interval is None


INVALID = [
    {"ipRestriction": {"allow": ["10.0.0.0/8", "10.0.0.0/33"]}},
    {"ipRestriction": {"deny": ["10.0.0.5/24"]}},
    {"rateLimit": {"requests": 1, "period": "soon"}},
    {"circuitBreaker": {"trippedDuration": "0s"}},
    {"headers": {"response": {"add": {"Content-Length": "0"}}}},
    {"headers": {"request": {"remove": ["Bad Name"]}}},
    {"basicAuth": {"realm": 'say "hi"', "secretRef": {"name": "users", "key": "htpasswd"}}},
    {"jwt": {"issuer": " ", "jwksSecretRef": {"name": "jwks", "key": "jwks.json"}}},
    {
        "webhookVerification": {
            "provider": "github",
            "secretRef": {"name": "hook", "key": "secret"},
            "replayWindow": "-1s",
        }
    },
    # Set by the annotation overlay, whose regex paths pass the same check, or sent as JSON to
    # a remote edge's admin API, which before this check compiled a nested repetition as given.
    {"ingressNginx": {"pathPattern": "/api/(v1"}},
    {"ingressNginx": {"pathPattern": "/files/(a+)+$"}},
]


@pytest.mark.parametrize("raw", INVALID)
def test_the_edge_refuses_settings_with_the_models_first_problem(raw: dict[str, Any]) -> None:
    modules = Modules.model_validate(raw)
    problems = module_settings(modules)
    assert isinstance(problems, list) and len(problems) == 1
    with pytest.raises(ModuleConfigError) as caught:
        compile_modules(modules, {})
    # One wording: the ModuleSet's status reads "spec.modules.<field>: <reason>", the edge
    # (whose modules may come from annotations or a remote API) the same without the prefix.
    assert f"spec.modules.{caught.value}" == str(problems[0])


def test_the_edge_says_how_many_more_problems_there_are() -> None:
    modules = Modules.model_validate({"ipRestriction": {"allow": ["a", "b", "c"]}})
    with pytest.raises(ModuleConfigError) as caught:
        compile_modules(modules, {})
    assert caught.value.field == "ipRestriction.allow[0]"
    assert caught.value.reason == '"a" is not a valid CIDR (and 2 more)'
