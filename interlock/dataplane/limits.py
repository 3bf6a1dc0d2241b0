"""How much of the edge one client may hold, and for how long: :class:`ProxyLimits`.

A proxy's resources are shared by every host it serves. Without these bounds one client can take
what all the others need: a few hundred slow uploads to one host hold every pooled upstream
connection (every other host then answers 504), a connection that never finishes its headers or
its body stays open forever, and a client that leaves keeps its upstream request running. Each
field is an ``interlock run`` / ``interlock edge`` flag (``docs/operations.md``, "Edge limits").
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyLimits:
    """Per-connection and per-upstream bounds of the data plane; every default is safe."""

    upstream_connections: int = 100
    """Connections open at once to one upstream address (host and port), in use or pooled;
    requests beyond it wait for one (up to the connect timeout, then 504), so one busy or slow
    backend cannot take the connections every other backend needs."""

    max_connections: int = 1000
    """Upstream connections open at once across all upstreams (0: no limit)."""

    header_timeout: float = 10.0
    """Seconds a client has to send a request's headers once it has sent its first byte; then
    the edge answers 408 and closes the connection."""

    body_timeout: float = 30.0
    """Seconds the edge waits for the next bytes of a request body; then it answers 408 (or,
    once the upstream answered, closes the connection) and cancels the upstream request."""

    idle_timeout: float = 60.0
    """Seconds a connection may stay open without a request in progress (a new connection that
    sends nothing, or a keep-alive connection between requests); then it is closed."""

    drain_timeout: float = 10.0
    """Seconds the edge waits, once stopping (SIGTERM), for requests in flight to finish before
    it cancels them; well under Kubernetes' default 30 s grace period, which also has to cover
    releasing the Lease and the rest of the shutdown."""

    password_workers: int = 2
    """Threads running basicAuth's bcrypt checks (off the event loop, so a password guesser
    cannot stall other hosts)."""

    password_checks: int = 64
    """bcrypt checks queued or running at once; beyond it a request gets 503 with
    ``Retry-After`` instead of waiting behind a guesser's."""

    http2_resets: int = 200
    """HTTP/2 streams a client may reset on one connection while they are being answered,
    refilled at this many per ``http2_reset_window``; past it the connection gets GOAWAY
    (ENHANCE_YOUR_CALM) and is closed (rapid reset, CVE-2023-44487)."""

    http2_reset_window: float = 30.0
    """Seconds over which ``http2_resets`` resets are allowed (Netty's 200 per 30 s)."""

    upgrade_connections: int = 10_000
    """Upgraded connections (WebSockets, other protocols) open at once in all; beyond it an
    upgrade is answered 503. They hold no connection of the HTTP pool
    (``upstream_connections``): each has an upstream connection of its own."""

    upgrade_connections_per_client: int = 100
    """Upgraded connections open at once from one client address (the peer's, or the one
    trusted proxies forwarded); beyond it an upgrade is answered 429."""

    upgrade_idle_timeout: float = 300.0
    """Seconds an upgraded connection may stay open without a byte either way; then it is
    closed (an application that keeps a quiet WebSocket open pings within it)."""

    underscores_in_headers: bool = False
    """Whether request headers whose names hold ``_`` reach modules and backends. Off: they
    are dropped as the request is read (nginx's ``underscores_in_headers off``), because CGI,
    WSGI, PHP and Rack backends read ``X_Client_Cert_Subject`` as ``X-Client-Cert-Subject``
    — a header the edge sets itself and a client must not be able to pose as."""

    def __post_init__(self) -> None:
        for name in (
            "header_timeout",
            "body_timeout",
            "idle_timeout",
            "drain_timeout",
            "http2_reset_window",
            "upgrade_idle_timeout",
        ):
            if not getattr(self, name) > 0:
                raise ValueError(f"edge limits: {name} must be a positive number of seconds")
        for name in (
            "upstream_connections",
            "password_workers",
            "password_checks",
            "http2_resets",
            "upgrade_connections",
            "upgrade_connections_per_client",
        ):
            if getattr(self, name) < 1:
                raise ValueError(f"edge limits: {name} must be at least 1")
        if self.max_connections < 0:
            raise ValueError("edge limits: max_connections must be 0 (no limit) or more")


DEFAULT_LIMITS = ProxyLimits()
