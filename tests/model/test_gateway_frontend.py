"""A Gateway's client certificate validation (``spec.tls.frontend``), decided as pure functions."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from interlock.model.gateway import parse_reference_grant
from interlock.model.gateway_frontend import pem_certificates
from interlock.model.gateway_listeners import (
    frontend_ca_dependencies,
    gateway_status,
    listener_problems,
    parse_gateway,
)
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import SecretValue
from tests.kit.tls_certs import TestCa, self_signed

NOW = datetime(2026, 1, 1, tzinfo=UTC)
CA = TestCa("frontend").pem
CA_2 = TestCa("frontend-2").pem


def https(name: str, port: int) -> dict[str, Any]:
    return {
        "name": name,
        "port": port,
        "protocol": "HTTPS",
        "tls": {"certificateRefs": [{"name": "cert"}]},
    }


def gateway(frontend: dict[str, Any] | None, *listeners: dict[str, Any]) -> Any:
    spec: dict[str, Any] = {"gatewayClassName": "interlock", "listeners": list(listeners)}
    if frontend is not None:
        spec["tls"] = {"frontend": frontend}
    return parse_gateway(
        {"metadata": {"name": "gw", "namespace": "infra", "generation": 2}, "spec": spec}
    )


def validation(*names: str, mode: str | None = None, **ref: str) -> dict[str, Any]:
    refs = [
        {"group": ref.get("group", ""), "kind": ref.get("kind", "ConfigMap"), "name": n}
        for n in names
    ]
    if "namespace" in ref:
        for entry in refs:
            entry["namespace"] = ref["namespace"]
    found: dict[str, Any] = {"caCertificateRefs": refs}
    if mode is not None:
        found["mode"] = mode
    return {"validation": found}


_CERT, _KEY = self_signed("gw.example")
SECRETS = {
    ObjectKey(namespace="infra", name="cert"): {
        "tls.crt": SecretValue(_CERT.encode()),
        "tls.key": SecretValue(_KEY.encode()),
    }
}
CA_BUNDLES = {
    ObjectKey(namespace="infra", name="ca"): CA,
    ObjectKey(namespace="infra", name="ca-2"): CA_2,
    ObjectKey(namespace="infra", name="not-pem"): "hello",
    ObjectKey(namespace="infra", name="other-key"): None,
    ObjectKey(namespace="cas", name="ca"): CA,
}
"""The ``ca.crt`` of each ConfigMap (None: "other-key" has none)."""


def checks(gw: Any, grants: tuple[Any, ...] = ()) -> dict[str, Any]:
    found = listener_problems(gw, secrets=SECRETS, grants=grants, ca_bundles=CA_BUNDLES)
    return {check.listener.name: check for check in found}


def reasons(check: Any) -> dict[str, str]:
    return {p.condition: p.reason for p in check.problems}


def test_the_default_applies_to_https_listeners_and_a_port_override_to_its_port() -> None:
    gw = gateway(
        {"default": validation("ca"), "perPort": [{"port": 8443, "tls": validation("ca-2")}]},
        https("main", 443),
        https("own", 8443),
        {"name": "plain", "port": 80, "protocol": "HTTP"},
    )
    found = checks(gw)
    assert found["main"].client_validation is not None
    assert found["main"].client_validation.ca_bundle.strip() == CA.strip()
    assert found["own"].client_validation is not None
    assert found["own"].client_validation.ca_bundle.strip() == CA_2.strip()
    assert found["plain"].client_validation is None
    assert not found["main"].client_validation.insecure_fallback
    assert frontend_ca_dependencies(gw) == (
        ObjectKey(namespace="infra", name="ca"),
        ObjectKey(namespace="infra", name="ca-2"),
    )


def test_each_unusable_reference_has_the_specs_reason() -> None:
    gw = gateway(
        {
            "default": validation("ca"),
            "perPort": [
                {"port": 7443, "tls": validation("missing")},
                {"port": 7444, "tls": validation("not-pem")},
                {"port": 7445, "tls": validation("other-key")},
                {"port": 8443, "tls": validation("svc", kind="Service")},
                {"port": 6443, "tls": validation("ca", namespace="cas")},
            ],
        },
        https("valid", 443),
        https("missing", 7443),
        https("not-pem", 7444),
        https("other-key", 7445),
        https("kind", 8443),
        https("grant", 6443),
    )
    found = checks(gw)
    assert found["valid"].accepted and found["valid"].problems == ()
    for name, reason in (
        ("missing", "InvalidCACertificateRef"),
        ("not-pem", "InvalidCACertificateRef"),
        ("other-key", "InvalidCACertificateRef"),
        ("kind", "InvalidCACertificateKind"),
        ("grant", "RefNotPermitted"),
    ):
        check = found[name]
        assert reasons(check) == {"ResolvedRefs": reason, "Accepted": "NoValidCACertificate"}
        assert check.client_validation is None and not check.usable, name


def test_a_grant_permits_another_namespaces_config_map() -> None:
    grant = parse_reference_grant(
        {
            "metadata": {"name": "g", "namespace": "cas"},
            "spec": {
                "from": [
                    {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": "infra"}
                ],
                "to": [{"group": "", "kind": "ConfigMap", "name": "ca"}],
            },
        }
    )
    gw = gateway({"default": validation("ca", namespace="cas")}, https("main", 443))
    found = checks(gw, (grant,))["main"]
    assert found.problems == () and found.client_validation is not None
    assert ObjectKey(namespace="cas", name="ca") in frontend_ca_dependencies(gw)


def test_one_usable_reference_keeps_the_listener_and_reports_the_other() -> None:
    gw = gateway({"default": validation("ca", "missing")}, https("main", 443))
    found = checks(gw)["main"]
    assert found.accepted
    assert [(p.condition, p.reason) for p in found.problems] == [
        ("ResolvedRefs", "InvalidCACertificateRef")
    ]
    assert "caCertificateRefs[1]" in found.problems[0].message
    assert found.client_validation is not None


def test_insecure_fallback_is_a_gateway_condition_while_a_listener_uses_it() -> None:
    def status(frontend: dict[str, Any]) -> dict[str, tuple[str, str]]:
        gw = gateway(frontend, https("main", 443))
        found = listener_problems(gw, secrets=SECRETS, grants=(), ca_bundles=CA_BUNDLES)
        written = gateway_status(gw, found, address="10.0.0.1", attached={}, now=NOW)
        return {c["type"]: (c["status"], c["reason"]) for c in written["conditions"]}

    insecure = status({"default": validation("ca", mode="AllowInsecureFallback")})
    assert insecure["InsecureFrontendValidationMode"] == ("True", "ConfigurationChanged")
    assert "InsecureFrontendValidationMode" not in status({"default": validation("ca")})
    # An override on a port no HTTPS listener uses lets nobody in: no condition.
    unused = {
        "default": validation("ca"),
        "perPort": [{"port": 9443, "tls": validation("ca", mode="AllowInsecureFallback")}],
    }
    assert "InsecureFrontendValidationMode" not in status(unused)


def test_pem_certificates_are_the_blocks_that_decode() -> None:
    assert pem_certificates(CA + "junk\n" + CA_2) == (CA.strip(), CA_2.strip())
    broken = "-----BEGIN CERTIFICATE-----\n!!!\n-----END CERTIFICATE-----\n"
    assert pem_certificates(broken) == ()
    assert pem_certificates("") == ()


def test_a_listener_sets_listener_in_fallback_sets_the_gateways_condition() -> None:
    frontend = {"default": validation("ca", mode="AllowInsecureFallback")}
    gw = gateway(frontend, {"name": "plain", "port": 80, "protocol": "HTTP"})
    own = listener_problems(gw, secrets=SECRETS, grants=(), ca_bundles=CA_BUNDLES)
    # A ListenerSet's HTTPS listener, checked as ListenerSets' are: the Gateway's frontend.
    holder = gateway(None, https("team", 443))
    from_set = listener_problems(
        holder, secrets=SECRETS, grants=(), ca_bundles=CA_BUNDLES, frontend_of=gw
    )
    assert from_set[0].client_validation is not None

    def conditions(**extra: Any) -> dict[str, tuple[str, str]]:
        written = gateway_status(gw, own, address="10.0.0.1", attached={}, now=NOW, **extra)
        return {c["type"]: (c["status"], c["reason"]) for c in written["conditions"]}

    assert "InsecureFrontendValidationMode" not in conditions()
    assert conditions(listener_set_checks=from_set)["InsecureFrontendValidationMode"] == (
        "True",
        "ConfigurationChanged",
    )
