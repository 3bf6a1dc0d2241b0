"""Verified TLS to a Gateway backend: which certificates a BackendTLSPolicy's subject
alternative names accept (checked once the handshake verified the chain)."""

from __future__ import annotations

from interlock.dataplane.upstream_tls import peer_problem
from interlock.model.backend_tls import BackendTLS


def tls(*names: tuple[str, str]) -> BackendTLS:
    return BackendTLS(hostname="abc.example.com", ca_bundle=None, subject_alt_names=names)


PEER = {
    "subjectAltName": (
        ("DNS", "*.example.com"),
        ("DNS", "other.example.org"),
        ("URI", "spiffe://abc.example.com/test-identity"),
    )
}


def test_one_listed_name_on_the_certificate_is_enough() -> None:
    assert peer_problem(tls(("Hostname", "abc.example.com")), PEER) is None  # by its wildcard
    assert peer_problem(tls(("Hostname", "OTHER.example.org")), PEER) is None
    assert peer_problem(tls(("URI", "spiffe://abc.example.com/test-identity")), PEER) is None
    assert (
        peer_problem(
            tls(("Hostname", "dce.example.net"), ("URI", "spiffe://abc.example.com/test-identity")),
            PEER,
        )
        is None
    )


def test_names_the_certificate_does_not_carry_are_refused_and_said() -> None:
    wanted = tls(("Hostname", "example.com"), ("URI", "spiffe://def.example.com/test-identity"))
    problem = peer_problem(wanted, PEER)
    assert problem is not None
    assert "Hostname example.com" in problem and "spiffe://def.example.com" in problem
    # A wildcard covers one label only, and a URI must match exactly.
    assert peer_problem(tls(("Hostname", "a.b.example.com")), PEER) is not None
    assert peer_problem(tls(("URI", "spiffe://abc.example.com/test")), PEER) is not None
    assert peer_problem(tls(("Hostname", "abc.example.com")), None) is not None


def test_without_listed_names_the_hostname_check_of_the_handshake_decides() -> None:
    assert peer_problem(tls(), None) is None
