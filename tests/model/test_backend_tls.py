"""BackendTLSPolicy and a Gateway's backend client certificate, decided as pure functions:
which policy applies to a Service port, what each policy's status says, what a Gateway sends
to a backend, and whether its client certificate resolves."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from interlock.model.backend_tls import (
    BackendTLSResolution,
    backend_tls_status,
    backend_with_tls,
    client_certificate,
    parse_backend_tls_policy,
    resolve_backend_tls,
    serve_backend_tls,
)
from interlock.model.gateway import ReferenceGrant
from interlock.model.gateway_listeners import parse_gateway
from interlock.model.gateway_mirrors import RuleMirror
from interlock.model.gateway_routes import GatewayServing, ListenerServing, PortServing, VirtualHost
from interlock.model.meta import ObjectKey
from interlock.model.moduleset import SecretValue
from interlock.model.outbound import Backend, OutboundPolicy
from interlock.model.service import Service, parse_service

NOW = datetime(2026, 1, 1, tzinfo=UTC)
NS = "infra"
CA = "-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n"
GW = ObjectKey(namespace=NS, name="gw")


def policy(
    name: str,
    service: str,
    *,
    section: str | None = None,
    age: int = 0,
    refs: list[dict[str, str]] | None = None,
    well_known: str | None = None,
    sans: list[dict[str, str]] | None = None,
    hostname: str = "abc.example.com",
    status: dict[str, Any] | None = None,
) -> Any:
    target: dict[str, str] = {"group": "", "kind": "Service", "name": service}
    if section is not None:
        target["sectionName"] = section
    validation: dict[str, Any] = {"hostname": hostname}
    if refs is not None:
        validation["caCertificateRefs"] = refs
    if well_known is not None:
        validation["wellKnownCACertificates"] = well_known
    if sans is not None:
        validation["subjectAltNames"] = sans
    return parse_backend_tls_policy(
        {
            "metadata": {
                "name": name,
                "namespace": NS,
                "generation": 3,
                "creationTimestamp": (NOW + timedelta(seconds=age)).isoformat(),
            },
            "spec": {"targetRefs": [target], "validation": validation},
            "status": status or {},
        }
    )


def config_map(name: str) -> dict[str, str]:
    return {"group": "", "kind": "ConfigMap", "name": name}


def svc(name: str, *ports: tuple[str, int]) -> Service:
    return parse_service(
        {
            "metadata": {"name": name, "namespace": NS},
            "spec": {"ports": [{"name": n, "port": p} for n, p in ports]},
        }
    )


def backend(service: str, port: int) -> Backend:
    return Backend(
        kind="Service", group="", namespace=NS, name=service, port=port, weight=1, exists=True
    )


SERVICES = {
    ObjectKey(namespace=NS, name=s.metadata.name): s
    for s in (
        svc("one", ("https-1", 443), ("https-2", 8443)),
        svc("two", ("https", 443)),
    )
}
BUNDLES: dict[ObjectKey, str | None] = {
    ObjectKey(namespace=NS, name="ca"): CA,
    ObjectKey(namespace=NS, name="empty"): None,
    ObjectKey(namespace=NS, name="garbled"): "-----BEGIN CERTIFICATE-----\nnot base64!\n"
    "-----END CERTIFICATE-----\n",
}


def accepted(status: dict[str, Any], gateway: str = "gw") -> dict[str, tuple[str, str]]:
    for entry in status["ancestors"]:
        if entry["ancestorRef"]["name"] == gateway:
            return {c["type"]: (c["status"], c["reason"]) for c in entry["conditions"]}
    return {}


def status_of(found: Any, resolution: BackendTLSResolution) -> dict[str, Any]:
    ports = {(ObjectKey(namespace=NS, name=n), p) for n, p in (("one", 443), ("one", 8443))}
    ports.add((ObjectKey(namespace=NS, name="two"), 443))
    return backend_tls_status(
        found, resolution, services=SERVICES, gateway_backends={GW: ports}, now=NOW
    )


def test_the_oldest_of_two_policies_naming_a_service_applies_and_the_other_is_conflicted() -> None:
    old = policy("old", "two", refs=[config_map("ca")], hostname="other.example.com")
    new = policy("new", "two", refs=[config_map("ca")], age=5)
    resolution = resolve_backend_tls([new, old], services=SERVICES, ca_bundles=BUNDLES)

    sent = backend_with_tls(backend("two", 443), resolution, None)
    assert sent.tls is not None and sent.tls.hostname == "other.example.com"
    assert accepted(status_of(old, resolution))["Accepted"] == ("True", "Accepted")
    assert accepted(status_of(new, resolution))["Accepted"] == ("False", "Conflicted")


def test_a_policy_naming_the_port_wins_that_port_without_a_conflict() -> None:
    whole = policy("whole", "one", refs=[config_map("ca")])
    port = policy("port", "one", section="https-1", refs=[config_map("ca")], age=5, hostname="o.e")
    resolution = resolve_backend_tls([whole, port], services=SERVICES, ca_bundles=BUNDLES)

    first = backend_with_tls(backend("one", 443), resolution, None).tls
    second = backend_with_tls(backend("one", 8443), resolution, None).tls
    assert first is not None and first.hostname == "o.e"
    assert second is not None and second.hostname == "abc.example.com"
    assert accepted(status_of(port, resolution))["Accepted"] == ("True", "Accepted")
    assert accepted(status_of(whole, resolution))["Accepted"] == ("True", "Accepted")


def test_two_policies_naming_one_port_conflict_and_ties_go_by_name() -> None:
    b = policy("b", "one", section="https-1", refs=[config_map("ca")])
    a = policy("a", "one", section="https-1", refs=[config_map("ca")], hostname="a.example")
    resolution = resolve_backend_tls([b, a], services=SERVICES, ca_bundles=BUNDLES)

    found = backend_with_tls(backend("one", 443), resolution, None).tls
    assert found is not None and found.hostname == "a.example"
    assert accepted(status_of(b, resolution))["Accepted"] == ("False", "Conflicted")
    assert backend_with_tls(backend("one", 8443), resolution, None).tls is None  # not named


def test_invalid_ca_references_give_the_spec_reasons_and_the_backend_is_never_contacted() -> None:
    cases = {
        "missing": ([config_map("nowhere")], "InvalidCACertificateRef"),
        "malformed": ([config_map("empty")], "InvalidCACertificateRef"),
        "garbled": ([config_map("garbled")], "InvalidCACertificateRef"),
        "kind": ([{"group": "invalid.io", "kind": "InvalidKind", "name": "x"}], "InvalidKind"),
    }
    for name, (refs, reason) in cases.items():
        found = policy(name, "two", refs=refs)
        resolution = resolve_backend_tls([found], services=SERVICES, ca_bundles=BUNDLES)
        conditions = accepted(status_of(found, resolution))
        assert conditions == {
            "Accepted": ("False", "NoValidCACertificate"),
            "ResolvedRefs": ("False", reason),
        }, name
        sent = backend_with_tls(backend("two", 443), resolution, None)
        assert not sent.exists and sent.tls is None
        assert sent.failure_injector is not None and sent.failure_injector.status == 500
        assert "CERTIFICATE" not in sent.failure_injector.message


def test_one_invalid_reference_beside_a_valid_one_still_fails_the_connection() -> None:
    found = policy("mixed", "two", refs=[config_map("ca"), config_map("nowhere")])
    resolution = resolve_backend_tls([found], services=SERVICES, ca_bundles=BUNDLES)
    assert accepted(status_of(found, resolution)) == {
        "Accepted": ("True", "Accepted"),
        "ResolvedRefs": ("False", "InvalidCACertificateRef"),
    }
    assert not backend_with_tls(backend("two", 443), resolution, None).exists


def test_a_valid_policy_sets_what_the_data_plane_verifies_and_the_gateway_presents() -> None:
    sans = [
        {"type": "URI", "uri": "spiffe://abc.example.com/id"},
        {"type": "Hostname", "hostname": "abc.example.com"},
    ]
    found = policy("ok", "two", refs=[config_map("ca")], sans=sans)
    resolution = resolve_backend_tls([found], services=SERVICES, ca_bundles=BUNDLES)
    pair = (SecretValue(b"cert"), SecretValue(b"key"))
    tls = backend_with_tls(backend("two", 443), resolution, pair).tls
    assert tls is not None
    assert tls.hostname == "abc.example.com"
    assert tls.ca_bundle is not None and tls.ca_bundle.reveal().decode() == CA
    assert tls.subject_alt_names == (
        ("URI", "spiffe://abc.example.com/id"),
        ("Hostname", "abc.example.com"),
    )
    assert tls.client_certificate == pair
    assert "key" not in repr(tls) and "cert'" not in repr(tls)
    # A backend no policy names is sent to in clear, as before.
    assert backend_with_tls(backend("one", 443), resolution, pair).tls is None


def test_system_cas_are_accepted_and_unknown_well_known_sets_are_invalid() -> None:
    system = policy("system", "two", well_known="System")
    other = policy("other", "one", well_known="example.com/mine")
    resolution = resolve_backend_tls([system, other], services=SERVICES, ca_bundles=BUNDLES)
    tls = backend_with_tls(backend("two", 443), resolution, None).tls
    assert tls is not None and tls.ca_bundle is None
    assert accepted(status_of(other, resolution))["Accepted"] == ("False", "Invalid")
    assert not backend_with_tls(backend("one", 443), resolution, None).exists


def test_status_names_only_gateways_sending_to_the_policy_and_keeps_other_controllers() -> None:
    foreign = {
        "ancestorRef": {"name": "theirs", "namespace": NS},
        "controllerName": "example.com/other",
        "conditions": [],
    }
    found = policy("ok", "two", refs=[config_map("ca")], status={"ancestors": [foreign]})
    resolution = resolve_backend_tls([found], services=SERVICES, ca_bundles=BUNDLES)
    other = ObjectKey(namespace=NS, name="elsewhere")
    status = backend_tls_status(
        found,
        resolution,
        services=SERVICES,
        gateway_backends={
            GW: {(ObjectKey(namespace=NS, name="two"), 443)},
            other: {(ObjectKey(namespace=NS, name="one"), 443)},
        },
        now=NOW,
    )
    assert [a["ancestorRef"]["name"] for a in status["ancestors"]] == ["theirs", "gw"]
    ours = status["ancestors"][1]
    assert ours["controllerName"] == "interlock.dev/gateway-controller"
    assert ours["ancestorRef"] == {
        "group": "gateway.networking.k8s.io",
        "kind": "Gateway",
        "namespace": NS,
        "name": "gw",
    }
    assert {c["observedGeneration"] for c in ours["conditions"]} == {3}


def gateway_with_client(ref: dict[str, str]) -> Any:
    return parse_gateway(
        {
            "metadata": {"name": "gw", "namespace": NS},
            "spec": {
                "gatewayClassName": "interlock",
                "listeners": [{"name": "http", "port": 80, "protocol": "HTTP"}],
                "tls": {"backend": {"clientCertificateRef": ref}},
            },
        }
    )


PEM_PAIR = {
    "tls.crt": SecretValue(b"-----BEGIN CERTIFICATE-----\nx\n-----END CERTIFICATE-----\n"),
    "tls.key": SecretValue(b"-----BEGIN PRIVATE KEY-----\nx\n-----END PRIVATE KEY-----\n"),
}


def test_client_certificate_references_resolve_or_say_why() -> None:
    secrets = {
        ObjectKey(namespace=NS, name="good"): PEM_PAIR,
        ObjectKey(namespace=NS, name="empty"): {},
        ObjectKey(namespace="other", name="cert"): PEM_PAIR,
    }
    cases = {
        "nonexistent": ({"name": "nowhere"}, "InvalidClientCertificateRef"),
        "group": (
            {"group": "wrong.io", "kind": "Secret", "name": "good"},
            "InvalidClientCertificateRef",
        ),
        "kind": ({"group": "", "kind": "WrongKind", "name": "good"}, "InvalidClientCertificateRef"),
        "malformed": ({"name": "empty"}, "InvalidClientCertificateRef"),
        "grant": ({"name": "cert", "namespace": "other"}, "RefNotPermitted"),
        "good": ({"name": "good"}, "ResolvedRefs"),
    }
    for name, (ref, reason) in cases.items():
        check = client_certificate(gateway_with_client(ref), secrets=secrets, grants=())
        assert check is not None and check.reason == reason, name
        assert check.resolved == (reason == "ResolvedRefs"), name
    grant = ReferenceGrant.model_validate(
        {
            "metadata": {"name": "g", "namespace": "other"},
            "spec": {
                "from": [
                    {"group": "gateway.networking.k8s.io", "kind": "Gateway", "namespace": NS}
                ],
                "to": [{"group": "", "kind": "Secret"}],
            },
        }
    )
    check = client_certificate(
        gateway_with_client({"name": "cert", "namespace": "other"}), secrets=secrets, grants=[grant]
    )
    assert check is not None and check.pair == (PEM_PAIR["tls.crt"], PEM_PAIR["tls.key"])
    assert "BEGIN" not in repr(check)


def test_mirror_copies_go_verified_to_a_port_a_policy_names_and_never_in_clear() -> None:
    good = policy("ok", "two", refs=[config_map("ca")])
    broken = policy("broken", "one", section="https-1", refs=[config_map("nowhere")])
    resolution = resolve_backend_tls([good, broken], services=SERVICES, ca_bundles=BUNDLES)
    to_tls = RuleMirror(namespace=NS, service="two", port=443, fraction=1.0)
    to_broken = RuleMirror(namespace=NS, service="one", port=443, fraction=1.0)
    to_plain = RuleMirror(namespace=NS, service="one", port=8443, fraction=0.5)
    virtual = VirtualHost(
        hostname=None,
        policy=OutboundPolicy(
            namespace=NS, service="gw/http/*", port=80, client_namespace=NS, routes=()
        ),
        mirrors={(NS, "r", 0): (to_tls, to_broken, to_plain), (NS, "r", 1): (to_broken,)},
    )
    serving = GatewayServing(
        gateway=GW,
        address="127.0.0.1",
        ports=(
            PortServing(
                port=80,
                protocol="HTTP",
                listeners=(
                    ListenerServing(
                        name="http", hostname=None, certificates=(), virtual_hosts=(virtual,)
                    ),
                ),
            ),
        ),
    )
    pair = (SecretValue(b"cert"), SecretValue(b"key"))
    served = serve_backend_tls(serving, resolution, pair)
    mirrors = served.ports[0].listeners[0].virtual_hosts[0].mirrors
    assert set(mirrors) == {(NS, "r", 0)}
    verified, plain = mirrors[(NS, "r", 0)]
    assert plain == to_plain
    assert verified.service == "two" and verified.tls is not None
    assert verified.tls.hostname == "abc.example.com" and verified.tls.client_certificate == pair
