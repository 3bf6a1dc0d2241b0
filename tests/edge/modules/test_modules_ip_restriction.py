"""ipRestriction and the client address it judges (X-Forwarded-For only from trusted proxies)."""

from __future__ import annotations

import ipaddress

import pytest

from interlock.edge.modules import (
    ModuleChain,
    ModuleConfigError,
    Rejection,
    addresses,
    compile_modules,
)
from tests.kit.modules_testkit import modules, view


def chain(
    *,
    allow: list[str] | None = None,
    deny: list[str] | None = None,
    trusted_proxies: list[str] | None = None,
) -> ModuleChain:
    return compile_modules(
        modules({"ipRestriction": {"allow": allow or [], "deny": deny or []}}),
        {},
        trusted_proxies=trusted_proxies or [],
    )


def status(result: Rejection | None) -> int:
    """200 when the chain lets the request through, else the refusal's status."""
    return 200 if result is None else result.status


def test_allow_list_admits_members_and_refuses_others_with_403() -> None:
    edge = chain(allow=["10.0.0.0/8"])
    assert status(edge.check_request(view(peer_ip="10.20.30.40"))) == 200
    rejection = edge.check_request(view(peer_ip="192.168.1.1"))
    assert rejection is not None
    assert rejection.status == 403


def test_deny_wins_over_allow() -> None:
    edge = chain(allow=["10.0.0.0/8"], deny=["10.1.0.0/16"])
    assert status(edge.check_request(view(peer_ip="10.2.0.1"))) == 200
    assert status(edge.check_request(view(peer_ip="10.1.2.3"))) == 403


def test_empty_allow_admits_everyone_not_denied() -> None:
    edge = chain(deny=["198.51.100.0/24"])
    assert status(edge.check_request(view(peer_ip="203.0.113.1"))) == 200
    assert status(edge.check_request(view(peer_ip="198.51.100.9"))) == 403


def test_ipv6_networks() -> None:
    edge = chain(allow=["2001:db8::/32"], deny=["2001:db8:bad::/48"])
    assert status(edge.check_request(view(peer_ip="2001:db8:1::5"))) == 200
    assert status(edge.check_request(view(peer_ip="2001:db8:bad::1"))) == 403
    assert status(edge.check_request(view(peer_ip="2001:dead::1"))) == 403
    assert status(edge.check_request(view(peer_ip="10.0.0.1"))) == 403


def test_ipv4_mapped_ipv6_peer_is_judged_as_ipv4() -> None:
    edge = chain(allow=["10.0.0.0/8"], deny=["10.9.0.0/16"])
    assert status(edge.check_request(view(peer_ip="::ffff:10.1.1.1"))) == 200
    assert status(edge.check_request(view(peer_ip="::ffff:10.9.1.1"))) == 403


def test_unparseable_peer_is_refused_when_rules_exist() -> None:
    edge = chain(deny=["10.0.0.0/8"])
    assert status(edge.check_request(view(peer_ip="not-an-ip"))) == 403
    assert edge.client_ip(view(peer_ip="not-an-ip")) == "unknown"


def test_forged_forwarded_for_from_untrusted_peer_cannot_bypass() -> None:
    edge = chain(allow=["10.0.0.0/8"], trusted_proxies=["192.0.2.0/24"])
    forged = view(peer_ip="203.0.113.66", headers={"X-Forwarded-For": "10.0.0.1"})
    assert edge.client_ip(forged) == "203.0.113.66"
    assert status(edge.check_request(forged)) == 403


def test_forwarded_for_from_trusted_proxy_names_the_client() -> None:
    edge = chain(allow=["10.0.0.0/8"], trusted_proxies=["192.0.2.0/24"])
    through_proxy = view(peer_ip="192.0.2.10", headers={"X-Forwarded-For": "10.3.3.3"})
    assert edge.client_ip(through_proxy) == "10.3.3.3"
    assert status(edge.check_request(through_proxy)) == 200


def test_client_prepending_a_forged_hop_gets_the_rightmost_untrusted_address() -> None:
    # The client sent "X-Forwarded-For: 10.0.0.1"; the trusted proxy appended the real peer.
    edge = chain(allow=["10.0.0.0/8"], trusted_proxies=["192.0.2.0/24"])
    request = view(
        peer_ip="192.0.2.10",
        headers=[("X-Forwarded-For", "10.0.0.1"), ("X-Forwarded-For", "203.0.113.66, 192.0.2.11")],
    )
    assert edge.client_ip(request) == "203.0.113.66"
    assert status(edge.check_request(request)) == 403


def test_garbage_vouched_for_by_a_trusted_proxy_is_refused() -> None:
    edge = chain(allow=["192.0.2.0/24"], trusted_proxies=["192.0.2.0/24"])
    request = view(peer_ip="192.0.2.10", headers={"X-Forwarded-For": "evil"})
    assert edge.client_ip(request) == "unknown"
    assert status(edge.check_request(request)) == 403


def test_forwarded_hop_with_port_and_brackets_is_parsed() -> None:
    edge = chain(trusted_proxies=["192.0.2.10"])
    assert (
        edge.client_ip(view(peer_ip="192.0.2.10", headers={"X-Forwarded-For": "[2001:db8::1]:443"}))
        == "2001:db8::1"
    )
    assert (
        edge.client_ip(view(peer_ip="192.0.2.10", headers={"X-Forwarded-For": "198.51.100.1:8080"}))
        == "198.51.100.1"
    )


@pytest.mark.parametrize(
    ("allow", "deny", "field", "text"),
    [
        (
            ["10.0.0.0/8", "10.0.0.0/33"],
            [],
            "ipRestriction.allow[1]",
            '"10.0.0.0/33" is not a valid CIDR',
        ),
        ([], ["banana"], "ipRestriction.deny[0]", '"banana" is not a valid CIDR'),
        (["10.0.0.5/24"], [], "ipRestriction.allow[0]", 'did you mean "10.0.0.0/24"'),
    ],
)
def test_invalid_cidr_is_a_config_error_naming_the_field(
    allow: list[str], deny: list[str], field: str, text: str
) -> None:
    with pytest.raises(ModuleConfigError) as caught:
        chain(allow=allow, deny=deny)
    assert caught.value.field == field
    assert str(caught.value).startswith(f"{field}: ")
    assert text in str(caught.value)


def test_invalid_trusted_proxy_is_a_config_error() -> None:
    with pytest.raises(ModuleConfigError, match=r"trustedProxies\[0\]"):
        compile_modules(modules({}), {}, trusted_proxies=["300.0.0.0/8"])


def test_a_long_list_is_not_walked_entry_by_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    # A 40,000-address list used to cost one network comparison per entry per request (11 ms of
    # CPU, shared by every host); now a check bisects an index built when the module applies.
    allow = [str(ipaddress.IPv4Address(0x0A000000 + 2 * i)) for i in range(40_000)]
    edge = chain(allow=allow, deny=[f"192.168.{i}.0/24" for i in range(100)])
    compared = 0
    original = ipaddress.IPv4Network.__contains__

    def counting(network: ipaddress.IPv4Network, address: object) -> bool:
        nonlocal compared
        compared += 1
        return original(network, address)

    monkeypatch.setattr(ipaddress.IPv4Network, "__contains__", counting)
    assert status(edge.check_request(view(peer_ip="203.0.113.9"))) == 403
    assert status(edge.check_request(view(peer_ip=allow[-1]))) == 200
    assert status(edge.check_request(view(peer_ip="192.168.99.1"))) == 403
    assert compared == 0


@pytest.mark.parametrize(
    ("peer", "expected"),
    [
        ("10.9.1.1", 403),
        ("::ffff:10.9.1.1", 403),
        ("[::ffff:10.9.1.1]:443", 403),
        ("10.1.1.1:80", 200),
        ("2001:db8::1", 403),
        ("not-an-ip", 403),
        ("", 403),
    ],
)
def test_a_peer_is_judged_alike_on_every_request(peer: str, expected: int) -> None:
    """Peers' parsed addresses are remembered (``addresses._peers``): the second and later
    requests from a peer get the first one's verdict, an unparseable peer's included."""
    edge = chain(allow=["10.0.0.0/8"], deny=["10.9.0.0/16"])
    assert [status(edge.check_request(view(peer_ip=peer))) for _ in range(3)] == [expected] * 3


def test_the_remembered_peers_are_bounded(monkeypatch: pytest.MonkeyPatch) -> None:
    """New peers beyond the bound empty the memory and are judged as before."""
    monkeypatch.setattr(addresses, "_peers", {})
    monkeypatch.setattr(addresses, "_PEERS_SIZE", 4)
    edge = chain(deny=["10.0.0.3/32"])
    peers = [f"10.0.0.{n}" for n in range(10)]
    assert [status(edge.check_request(view(peer_ip=p))) for p in peers * 2] == (
        [200, 200, 200, 403, 200, 200, 200, 200, 200, 200] * 2
    )
    assert len(addresses._peers) <= 4
    assert status(edge.check_request(view(peer_ip="10.0.0." + "3" + " " * 80))) == 403
    assert all(len(text) <= addresses._PEER_LENGTH for text in addresses._peers)


def test_the_remembered_verdict_is_only_for_the_same_address(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The last verdict answers the same address object again; any other address, alternating
    with it (an equal one parsed anew included), is looked up."""
    edge = chain(allow=["10.0.0.0/8"], deny=["10.9.0.0/16"])
    peers = ["10.1.1.1", "10.9.1.1", "192.0.2.1", "10.1.1.1", "10.1.1.1", "10.9.1.1"]
    assert [status(edge.check_request(view(peer_ip=p))) for p in peers] == (
        [200, 403, 403, 200, 200, 403]
    )
    looked_up = 0
    original = ipaddress.IPv4Address.__int__

    def counting(address: ipaddress.IPv4Address) -> int:
        nonlocal looked_up
        looked_up += 1
        return original(address)

    monkeypatch.setattr(ipaddress.IPv4Address, "__int__", counting)
    assert status(edge.check_request(view(peer_ip="10.9.1.1"))) == 403  # the last one: no look-up
    assert looked_up == 0
    monkeypatch.setattr(addresses, "_peers", {})  # the same peer parsed anew: a new object
    assert [status(edge.check_request(view(peer_ip=p))) for p in ("10.9.1.1", "10.1.1.1")] == [
        403,
        200,
    ]
    assert looked_up > 0
