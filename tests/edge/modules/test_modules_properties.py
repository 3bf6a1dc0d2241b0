"""Properties that must hold for every input, not just the examples: hypothesis finds the rest."""

from __future__ import annotations

from ipaddress import IPv4Address, IPv6Address

from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.edge.modules import compile_modules
from interlock.edge.modules.rate_limit import RateLimit
from interlock.model.module_settings import RateLimitSettings
from interlock.model.moduleset import Modules, RateLimitModule
from tests.kit.modules_testkit import view

TRUSTED = ["192.0.2.0/24", "2001:db8:ffff::/48"]

trusted_hops = st.one_of(
    st.integers(0, 255).map(lambda n: f"192.0.2.{n}"),
    st.integers(0, 2**16 - 1).map(lambda n: f"2001:db8:ffff::{n:x}"),
)


def _untrusted_v6(address: IPv4Address | IPv6Address) -> bool:
    """An IPv6 client outside the trusted network (and not an IPv4 address written as one)."""
    return (
        isinstance(address, IPv6Address)
        and address.ipv4_mapped is None
        and not str(address).startswith("2001:db8:ffff:")
    )


# A client is any address outside the trusted networks.
clients = st.one_of(
    st.ip_addresses(v=4).filter(lambda a: not str(a).startswith("192.0.2.")),
    st.ip_addresses(v=6).filter(_untrusted_v6),
)
# Whatever a client writes into its own X-Forwarded-For.
forged = st.lists(
    st.one_of(
        trusted_hops,
        st.ip_addresses().map(str),
        st.text(alphabet="abcdefx0123456789.:[]", max_size=12),
    ),
    max_size=4,
)


@settings(max_examples=200, deadline=None)
@given(
    client=clients,
    prepended=forged,
    proxies=st.lists(trusted_hops, min_size=1, max_size=4),
)
def test_behind_trusted_proxies_the_client_cannot_choose_its_address(
    client: IPv4Address | IPv6Address, prepended: list[str], proxies: list[str]
) -> None:
    # Each proxy appends the address of its own peer; the edge sees the last proxy as its peer.
    chain = compile_modules(Modules(), {}, trusted_proxies=TRUSTED)
    hops = [*prepended, str(client), *proxies[:-1]]
    request = view(peer_ip=proxies[-1], headers={"X-Forwarded-For": ", ".join(hops)})
    assert chain.client_ip(request) == str(client)


@settings(max_examples=100, deadline=None)
@given(peer=clients, prepended=forged)
def test_from_an_untrusted_peer_forwarded_for_is_ignored(
    peer: IPv4Address | IPv6Address, prepended: list[str]
) -> None:
    chain = compile_modules(Modules(), {}, trusted_proxies=TRUSTED)
    request = view(peer_ip=str(peer), headers={"X-Forwarded-For": ", ".join(prepended)})
    assert chain.client_ip(request) == str(peer)


@settings(max_examples=200, deadline=None)
@given(
    requests=st.integers(1, 20),
    period=st.sampled_from(["1s", "10s", "1m"]),
    gaps=st.lists(st.floats(0, 5, allow_nan=False), min_size=1, max_size=80),
)
def test_a_client_never_gets_more_than_the_burst_plus_the_refill(
    requests: int, period: str, gaps: list[float]
) -> None:
    seconds = {"1s": 1.0, "10s": 10.0, "1m": 60.0}[period]
    limiter = RateLimit(
        RateLimitSettings(RateLimitModule(requests=requests, period=period), seconds)
    )
    now = 0.0
    allowed = 0
    for gap in gaps:
        now += gap
        if limiter.check("client", now=now) is None:
            allowed += 1
    assert allowed <= requests + now * requests / seconds + 1e-9
