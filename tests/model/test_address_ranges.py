"""The indexed network set answers exactly as checking every network one by one would, and
ipRestriction keeps its rules (deny wins, an empty allow list allows all) with it."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv4Network, IPv6Address, IPv6Network, ip_network

from hypothesis import given
from hypothesis import strategies as st

from interlock.edge.modules.ip_restriction import IpRestriction
from interlock.model.address_ranges import AddressRanges
from interlock.model.module_settings import ModuleSettings, module_settings
from interlock.model.moduleset import IpRestrictionModule, Modules

# Networks and addresses packed into small spaces of each family, so that lists overlap, nest,
# touch and leave gaps, and addresses fall on every boundary.
V4_BASE = int(IPv4Address("10.0.0.0"))
V6_BASE = int(IPv6Address("2001:db8::"))

v4_networks = st.builds(
    lambda offset, prefix: IPv4Network((V4_BASE + offset, prefix), strict=False),
    st.integers(0, 1023),
    st.integers(22, 32),
)
v6_networks = st.builds(
    lambda offset, prefix: IPv6Network((V6_BASE + offset, prefix), strict=False),
    st.integers(0, 1023),
    st.integers(118, 128),
)
networks = st.lists(st.one_of(v4_networks, v6_networks), max_size=40)
addresses = st.one_of(
    st.integers(-2, 1025).map(lambda n: IPv4Address(V4_BASE + n)),
    st.integers(-2, 1025).map(lambda n: IPv6Address(V6_BASE + n)),
    st.ip_addresses(),
)


def naive_contains(listed: list[IPv4Network | IPv6Network], address: object) -> bool:
    return any(address in network for network in listed)


@given(networks, st.lists(addresses, min_size=1, max_size=20))
def test_an_address_is_in_the_ranges_exactly_when_it_is_in_one_network(
    listed: list[IPv4Network | IPv6Network], probes: list[IPv4Address | IPv6Address]
) -> None:
    ranges = AddressRanges(listed)
    assert bool(ranges) == bool(listed)
    for address in probes:
        assert (address in ranges) == naive_contains(listed, address), (listed, address)
    # Every network's first and last address, and the ones just outside it.
    for network in listed:
        for value in (-1, 0, network.num_addresses - 1, network.num_addresses):
            edge = int(network.network_address) + value
            if 0 <= edge <= (2**32 - 1 if network.version == 4 else 2**128 - 1):
                address = network.network_address.__class__(edge)
                assert (address in ranges) == naive_contains(listed, address)


@given(networks, networks, addresses)
def test_ip_restriction_decides_as_the_rules_say(
    allow: list[IPv4Network | IPv6Network],
    deny: list[IPv4Network | IPv6Network],
    address: IPv4Address | IPv6Address,
) -> None:
    config = IpRestrictionModule(allow=[str(n) for n in allow], deny=[str(n) for n in deny])
    settings = module_settings(Modules(ipRestriction=config))
    assert isinstance(settings, ModuleSettings) and settings.ip_restriction is not None
    module = IpRestriction(settings.ip_restriction)
    denied = naive_contains(deny, address)
    allowed = not allow or naive_contains(allow, address)
    assert (module.check(address) is None) == (not denied and allowed)


def test_overlapping_and_adjacent_networks_merge() -> None:
    ranges = AddressRanges(
        ip_network(cidr)
        for cidr in ("10.0.0.0/25", "10.0.0.128/25", "10.0.0.7/32", "10.0.2.0/24", "::1/128")
    )
    assert len(ranges) == 3  # 10.0.0.0/24, 10.0.2.0/24, ::1
    assert IPv4Address("10.0.0.255") in ranges and IPv4Address("10.0.1.0") not in ranges
    assert IPv6Address("::1") in ranges and IPv4Address("0.0.0.1") not in ranges
