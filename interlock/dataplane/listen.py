"""Where a front door listens: a ``HOST:PORT`` flag read into the pair sockets take.

The edge, its admin API and the mesh listener each take an address flag; one reading of it
(brackets around an IPv6 host, the port checked) keeps their errors and their accepted forms
the same.
"""

from __future__ import annotations


def parse_host_port(value: str) -> tuple[str, int]:
    """``HOST:PORT`` (``[::1]:8080`` for IPv6) → (host, port); raises ValueError naming it."""
    host, sep, port_text = value.rpartition(":")
    if not sep or not host:
        raise ValueError(f"address {value!r}: HOST:PORT is required")
    if host.startswith("[") and host.endswith("]"):
        host = host[1:-1]
    try:
        port = int(port_text)
    except ValueError:
        raise ValueError(f"address {value!r}: port {port_text!r} is not a number") from None
    if not 0 <= port <= 65535:
        raise ValueError(f"address {value!r}: port {port} is out of range")
    return host, port
