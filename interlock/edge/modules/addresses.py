"""Client addresses: parsing peers and CIDRs, and who may speak for the client.

ipRestriction and rateLimit decide on the *client's* address. Behind a load balancer the TCP peer
is the balancer, and the client is named in ``X-Forwarded-For``; but anyone can send that header,
so believing it from an arbitrary peer would let a client pick the address it is judged by. We
believe it only when the peer is a configured trusted proxy, and then walk the list from the
right, skipping trusted hops, to the first hop no trusted proxy vouches for (the same rule as
nginx's ``real_ip_recursive``).

IPv4 clients on a dual-stack socket appear as IPv4-mapped IPv6 (``::ffff:10.1.2.3``); they are
normalised to IPv4 so an IPv4 CIDR matches them.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from ipaddress import IPv4Address, IPv6Address, ip_address

from multidict import MultiMapping

from interlock.edge.modules.errors import ModuleConfigError
from interlock.model.module_settings import IPNetwork, parse_cidr

IPAddress = IPv4Address | IPv6Address

UNKNOWN_CLIENT = "unknown"
"""The client address reported when it cannot be parsed (RFC 7239's ``unknown``)."""

_PEERS_SIZE = 4096
"""Most peer addresses kept parsed (``_peers``); ``_PEER_LENGTH`` the longest text kept."""
_PEER_LENGTH = 64

_peers: dict[str, IPAddress] = {}
"""A TCP peer's address as the server gives it -> :func:`parse_address`'s answer: a client's
requests come from the same few peers, and ``ipaddress.ip_address`` is a chain of Python calls
(about 5,000 instructions an IPv4 address). Keyed by the exact text, so an address reads as it
did; bounded in count and length (emptied when full), so new peers cost the parse as before."""


def _peer_address(text: str) -> IPAddress | None:
    address = parse_address(text)
    if address is not None and len(text) <= _PEER_LENGTH:
        if len(_peers) >= _PEERS_SIZE:
            _peers.clear()
        _peers[text] = address
    return address


def parse_address(text: str) -> IPAddress | None:
    """The address in ``text`` (``1.2.3.4``, ``1.2.3.4:80``, ``[::1]:80``, ``::1``), or None."""
    text = text.strip()
    if text.startswith("["):
        end = text.find("]")
        if end < 0:
            return None
        text = text[1:end]
    elif text.count(":") == 1:
        text = text.split(":", 1)[0]
    if "%" in text:
        # A zone index (fe80::1%eth0) names an interface, not a different client.
        text = text.split("%", 1)[0]
    try:
        address = ip_address(text)
    except ValueError:
        return None
    if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
        return address.ipv4_mapped
    return address


def parse_networks(values: Sequence[str], *, field: str) -> tuple[IPNetwork, ...]:
    """Parse CIDRs with the model's rules (:func:`~interlock.model.module_settings.parse_cidr`,
    as ipRestriction's); errors name ``field[i]``. For ``--trusted-proxies``, not a module."""
    networks: list[IPNetwork] = []
    for index, value in enumerate(values):
        network = parse_cidr(value)
        if isinstance(network, str):
            raise ModuleConfigError(f"{field}[{index}]", network)
        networks.append(network)
    return tuple(networks)


def in_any(address: IPAddress, networks: Iterable[IPNetwork]) -> bool:
    """Whether ``address`` lies in one of ``networks`` (addresses of the other family never do)."""
    return any(address in network for network in networks)


class TrustedProxies:
    """Resolves the client address of a request, believing X-Forwarded-For only from proxies."""

    __slots__ = ("_networks",)

    def __init__(self, cidrs: Sequence[str]) -> None:
        self._networks = parse_networks(cidrs, field="trustedProxies")

    def __repr__(self) -> str:
        return f"TrustedProxies({[str(n) for n in self._networks]})"

    def cidrs(self) -> list[str]:
        return [str(network) for network in self._networks]

    def trusts(self, peer_ip: str) -> bool:
        """Whether the peer is a trusted proxy (its ``X-Forwarded-*`` headers are believed)."""
        if not self._networks:
            return False
        peer = parse_address(peer_ip)
        return peer is not None and in_any(peer, self._networks)

    def client_address(self, *, peer_ip: str, headers: Mapping[str, str]) -> IPAddress | None:
        """The client's address, or None when it cannot be known (fail closed on it)."""
        peer = _peers.get(peer_ip) or _peer_address(peer_ip)
        if peer is None or not self._networks or not in_any(peer, self._networks):
            return peer
        current = peer
        for hop in reversed(_forwarded_hops(headers)):
            address = parse_address(hop)
            if address is None:
                # A trusted proxy vouched for something that is not an address: we cannot tell
                # who the client is, and guessing (the proxy itself) could let it through.
                return None
            if not in_any(address, self._networks):
                return address
            current = address
        return current


def _forwarded_hops(headers: Mapping[str, str]) -> list[str]:
    """Every hop of every X-Forwarded-For header line, in order (leftmost = farthest)."""
    if isinstance(headers, MultiMapping):
        lines = list(headers.getall("X-Forwarded-For", []))
    else:
        line = headers.get("X-Forwarded-For")
        lines = [line] if line is not None else []
    return [hop.strip() for line in lines for hop in line.split(",") if hop.strip()]
