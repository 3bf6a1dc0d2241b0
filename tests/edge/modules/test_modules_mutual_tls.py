"""mutualTLS, the route's half: the client certificate TLS verified must come from this route's
CAs and be valid now; the backend gets the verified identity, never a client's copy.

(The handshake half — the host's trust store, one listener for hosts with and without
mutualTLS — is tested over real TLS in ``tests/edge/test_mutual_tls_server.py``.)
"""

from __future__ import annotations

import datetime
import hashlib

import pytest
from multidict import CIMultiDict

from interlock.edge.modules import (
    MissingSecretError,
    ModuleChain,
    ModuleConfigError,
    RequestView,
    compile_modules,
)
from interlock.edge.modules.client_cert_headers import (
    FINGERPRINT_HEADER,
    SAN_HEADER,
    SUBJECT_HEADER,
)
from interlock.edge.modules.mutual_tls import header_safe
from tests.kit.modules_testkit import modules, secrets
from tests.kit.tls_certs import TestCa

CA = TestCa("Team CA")
OTHER_CA = TestCa("Other CA")
CONFIG = {"mutualTLS": {"caSecretRef": {"name": "client-ca", "key": "ca.crt"}}}


def chain_with(bundle: str, extra: dict[str, object] | None = None) -> ModuleChain:
    return compile_modules(
        modules({**CONFIG, **(extra or {})}), secrets(client_ca__ca_crt=bundle.encode())
    )


def request(peer_certificate: bytes | None, **headers: str) -> RequestView:
    return RequestView(
        method="GET",
        path="/",
        headers=CIMultiDict(headers),
        peer_certificate=peer_certificate,
    )


def upstream(chain: ModuleChain, view: RequestView, **sent: str) -> CIMultiDict[str]:
    headers: CIMultiDict[str] = CIMultiDict(sent)
    chain.upstream_request_headers(headers, peer_certificate=view.peer_certificate)
    return headers


def test_a_certificate_from_the_routes_ca_is_admitted_and_its_identity_goes_upstream() -> None:
    chain = chain_with(CA.pem)
    alice = CA.issue("alice", organization="Example", dns=("alice.example",), emails=("a@x.io",))
    view = request(alice.der)
    assert chain.needs_peer_certificate
    assert chain.check_request(view) is None
    forged = {SUBJECT_HEADER: "CN=ceo", FINGERPRINT_HEADER: "00", SAN_HEADER: "DNS:ceo"}
    sent = upstream(chain, view, **forged)
    assert sent.getall(SUBJECT_HEADER) == ["O=Example,CN=alice"]
    assert sent.getall(SAN_HEADER) == ["DNS:alice.example, email:a@x.io"]
    assert sent.getall(FINGERPRINT_HEADER) == [hashlib.sha256(alice.der).hexdigest()]


def test_no_certificate_is_403_and_client_copies_of_the_headers_never_pass() -> None:
    chain = chain_with(CA.pem)
    rejection = chain.check_request(request(None))
    assert rejection is not None and rejection.status == 403
    assert "requires a client certificate" in rejection.body
    # A route's headers are stripped even for a request that arrived without a certificate
    # (the server never sends it upstream, but the stripping does not depend on that).
    sent = upstream(chain, request(None), **{SUBJECT_HEADER: "CN=ceo"})
    assert SUBJECT_HEADER not in sent


def test_a_certificate_of_another_ca_or_outside_its_validity_is_403() -> None:
    chain = chain_with(CA.pem)
    mallory = OTHER_CA.issue("mallory")
    rejection = chain.check_request(request(mallory.der))
    assert rejection is not None and rejection.status == 403
    assert "not accepted" in rejection.body

    now = datetime.datetime.now(datetime.UTC)
    expired = CA.issue(
        "old",
        valid_from=now - datetime.timedelta(days=2),
        valid_until=now - datetime.timedelta(days=1),
    )
    rejection = chain.check_request(request(expired.der))
    assert rejection is not None and rejection.status == 403
    garbage = chain.check_request(request(b"\x30\x03not a certificate"))
    assert garbage is not None and garbage.status == 403


def test_a_bundle_of_several_cas_admits_each_of_them() -> None:
    chain = chain_with(CA.pem + OTHER_CA.pem)
    assert chain.check_request(request(CA.issue("a").der)) is None
    assert chain.check_request(request(OTHER_CA.issue("b").der)) is None
    assert chain.client_ca_bundle is not None and chain.client_ca_bundle.count("BEGIN") == 2


def test_bad_bundles_are_permanent_and_name_the_field_not_the_bytes() -> None:
    with pytest.raises(ModuleConfigError, match=r"mutualTLS\.caSecretRef .*holds no PEM"):
        chain_with("not a certificate")
    leaf = CA.issue("not-a-ca")
    with pytest.raises(
        ModuleConfigError, match=r"certificate 1 \(CN=not-a-ca\) is not a CA"
    ) as exc:
        chain_with(leaf.cert_pem)
    assert "BEGIN" not in str(exc.value)


def test_a_missing_ca_secret_is_transient() -> None:
    with pytest.raises(MissingSecretError, match=r"mutualTLS\.caSecretRef"):
        compile_modules(modules(CONFIG), {})


def test_runs_right_after_ip_restriction_and_shows_in_the_summary() -> None:
    chain = chain_with(
        CA.pem, {"ipRestriction": {"allow": ["10.0.0.0/8"]}, "rateLimit": {"requests": 5}}
    )
    assert chain.names[:3] == ("ipRestriction", "mutualTLS", "rateLimit")
    summary = chain.summary()["modules"]
    assert isinstance(summary, dict)
    assert summary["mutualTLS"]["certificateAuthorities"] == ["CN=Team CA"]
    assert "BEGIN" not in repr(summary)


def test_header_values_cannot_carry_control_characters() -> None:
    assert header_safe("CN=a\r\nX-Evil: 1") == "CN=a\\0D\\0AX-Evil: 1"
    assert header_safe("DNS:a,b", escape=",") == "DNS:a\\2Cb"
    assert header_safe("CN=é") == "CN=\\C3\\A9"
    tricky = CA.issue("eve\nX-Admin: yes")
    sent = upstream(chain_with(CA.pem), request(tricky.der))
    assert "\n" not in sent[SUBJECT_HEADER]


def test_routes_without_mutual_tls_drop_client_copies_but_their_headers_module_may_set_them() -> (
    None
):
    """A backend behind a route with mutualTLS and one without must not believe a subject a
    client forged on the second."""
    forged = {SUBJECT_HEADER: "CN=ceo", SAN_HEADER.lower(): "DNS:ceo", FINGERPRINT_HEADER: "00"}
    plain = compile_modules(modules({}), {})
    sent = upstream(plain, request(None), **forged)
    assert not any(name in sent for name in (SUBJECT_HEADER, SAN_HEADER, FINGERPRINT_HEADER))
    configured = compile_modules(
        modules({"headers": {"request": {"add": {SUBJECT_HEADER: "CN=static"}}}}), {}
    )
    assert upstream(configured, request(None), **forged).getall(SUBJECT_HEADER) == ["CN=static"]
