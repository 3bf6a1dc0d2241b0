"""Which ``Host`` headers interlock's own servers answer: the guard against DNS rebinding.

A web page can make a browser send requests to any address, including ``127.0.0.1:9091`` or a
Pod's IP, if the page's own host name is made to resolve there (DNS rebinding); the browser
then treats the answers as the page's own. What gives it away is the ``Host`` header: it names
the attacker's domain, not the server. So the API servers interlock runs for other programs —
the embedded API server, the admin server, the outbound policy API and ``interlock edge``'s
admin API — answer only requests whose ``Host`` names them:

- an IP address (any: the listening address, loopback, a Pod or Service IP). A page cannot
  rebind an IP literal: the browser's origin is then that address itself;
- ``localhost`` (and names under ``.localhost``, which resolve to loopback by RFC 6761);
- a name the operator allowed (``--allowed-host``): exactly, or every name under a ``*.`` suffix
  (``*.interlock-system.svc.cluster.local``), the way in-cluster clients reach a Service;
- no ``Host`` at all (HTTP/1.0): browsers always send one.

Names are compared without case, trailing dot and port.
"""

from __future__ import annotations

import ipaddress
import re
from collections.abc import Iterable
from dataclasses import dataclass

_NAME = re.compile(r"^(\*\.)?([a-z0-9]([-a-z0-9]*[a-z0-9])?)(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


def host_name(header: str) -> str:
    """The host of a ``Host`` header: without port, brackets, trailing dot; lower case."""
    text = header.strip().lower()
    if text.startswith("["):
        return text[1 : text.find("]")] if "]" in text else text
    if text.count(":") == 1:
        text = text.partition(":")[0]
    return text.rstrip(".")


def _is_ip(name: str) -> bool:
    try:
        ipaddress.ip_address(name.partition("%")[0])
    except ValueError:
        return False
    return True


@dataclass(frozen=True, slots=True)
class AllowedHosts:
    """The names a server answers besides IP addresses and ``localhost``."""

    names: frozenset[str] = frozenset()
    suffixes: tuple[str, ...] = ()
    """``.example.com`` for an allowed ``*.example.com``."""

    @classmethod
    def parse(cls, values: Iterable[str], *, flag: str) -> AllowedHosts:
        """Names or ``*.``-wildcards; errors name the flag and the value."""
        names: set[str] = set()
        suffixes: list[str] = []
        for value in values:
            name = value.strip().lower().rstrip(".")
            if not _NAME.fullmatch(name) and not _is_ip(name):
                raise ValueError(
                    f"{flag}: {value!r} is not a host name or *.suffix (for example "
                    "interlock-policy.interlock-system.svc or *.interlock-system.svc.cluster.local)"
                )
            if name.startswith("*."):
                suffixes.append(name[1:])
            else:
                names.add(name)
        return cls(names=frozenset(names), suffixes=tuple(suffixes))

    def with_listening(self, host: str) -> AllowedHosts:
        """These plus the host a server listens on, when it is a name (``--admin-addr
        admin.internal:9090``)."""
        name = host_name(host)
        if not name or _is_ip(name) or name in self.names:
            return self
        return AllowedHosts(names=self.names | {name}, suffixes=self.suffixes)

    def allows(self, header: str | None) -> bool:
        """Whether a request with this ``Host`` header (None: none sent) is answered."""
        if header is None:
            return True
        name = host_name(header)
        if not name:
            return False
        if name == "localhost" or name.endswith(".localhost") or _is_ip(name):
            return True
        return name in self.names or name.endswith(self.suffixes)


def refusal(header: str, *, flag: str) -> str:
    """What a refused client reads: the host it named and how the operator allows it."""
    return (
        f"Host {host_name(header)!r} is not one of this server's names: requests must name it by "
        f"an IP address, localhost or a name given with {flag} (a guard against DNS rebinding)\n"
    )
