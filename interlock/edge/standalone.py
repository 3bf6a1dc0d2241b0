"""The data plane as its own process (``interlock edge``): the proxy plus its admin API.

Running the edge apart from the controller lets it scale and restart on its own; the controller
then programs it with :class:`~interlock.edge.http_provider.HttpEdge`. Without the controller's
state, upstreams resolve through cluster DNS (:class:`~interlock.dataplane.upstreams.DnsUpstreams`:
``{service}.{namespace}.svc`` on the Service port), so kube-proxy picks the pod and a backend
Service that does not exist shows up as a failed name lookup (502). With ``pushed`` (``interlock
edge --pushed-upstreams``, what ``interlock run --edge-workers`` starts) they resolve from the
tables the controller pushes through the admin API instead
(:class:`~interlock.dataplane.pushed_upstreams.PushedUpstreams`), as the controller's own edge.
"""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from aiohttp import web
from loguru import logger

from interlock.dataplane.limits import DEFAULT_LIMITS, ProxyLimits
from interlock.dataplane.listen import parse_host_port
from interlock.dataplane.metrics import Traffic
from interlock.dataplane.proxy import DEFAULT_TIMEOUTS, ProxyTimeouts
from interlock.dataplane.pushed_upstreams import PushedUpstreams
from interlock.dataplane.upstreams import DnsUpstreams, UpstreamResolver
from interlock.edge.admin_api import admin_app
from interlock.edge.inprocess import InProcessEdge
from interlock.edge.server import EdgeAddresses, EdgeServer
from interlock.model.allowed_hosts import AllowedHosts
from interlock.model.moduleset import SecretValue


@dataclass(frozen=True, slots=True)
class StandaloneAddresses:
    edge: EdgeAddresses
    admin: tuple[str, int]


class StandaloneEdge:
    """The data plane server and its admin API in one process; start, then stop."""

    def __init__(
        self,
        *,
        admin_token: SecretValue,
        allowed_hosts: AllowedHosts | None = None,
        trusted_proxies: Sequence[str] = (),
        upstreams: UpstreamResolver | None = None,
        timeouts: ProxyTimeouts = DEFAULT_TIMEOUTS,
        limits: ProxyLimits = DEFAULT_LIMITS,
        admin_tls: ssl.SSLContext | None = None,
        pushed: PushedUpstreams | None = None,
        traffic: Traffic | None = None,
    ) -> None:
        """``admin_tls``: serve the admin API over TLS with this context (its bearer token then
        never crosses the network in clear); None serves it over plain HTTP. ``pushed``: resolve
        upstreams from the tables the controller pushes (``upstreams`` must then be None).
        ``traffic``: where requests are counted (and logged, with its access log on)."""
        if pushed is not None and upstreams is not None:
            raise ValueError("StandaloneEdge: pushed upstream tables or a resolver, not both")
        self.edge = InProcessEdge(trusted_proxies=trusted_proxies)
        self.traffic = traffic or Traffic()
        self.pushed = pushed
        resolver = pushed or upstreams
        self.server = EdgeServer(
            edge=self.edge,
            upstreams=resolver if resolver is not None else DnsUpstreams(),
            trusted_proxies=trusted_proxies,
            timeouts=timeouts,
            limits=limits,
            traffic=self.traffic,
        )
        self._admin_token = admin_token
        self._admin_tls = admin_tls
        self._allowed_hosts = allowed_hosts or AllowedHosts()
        self._admin: web.AppRunner | None = None

    async def start(
        self, *, listen: str, admin: str, tls_listen: str | None = None, reuse_port: bool = False
    ) -> StandaloneAddresses:
        """Listen (port 0 picks a free port) and return the bound addresses; with
        ``reuse_port`` other workers may serve the same edge ports (not the admin API's)."""
        admin_host, admin_port = parse_host_port(admin)
        edge = await self.server.start(addr=listen, tls_addr=tls_listen, reuse_port=reuse_port)
        try:
            runner = web.AppRunner(
                admin_app(
                    self.edge,
                    token=self._admin_token,
                    allowed_hosts=self._allowed_hosts.with_listening(admin_host),
                    traffic=self.traffic,
                    upstreams=self.pushed,
                ),
                access_log=None,
                handle_signals=False,
            )
            await runner.setup()
            self._admin = runner
            await web.TCPSite(
                runner, admin_host, admin_port, reuse_address=True, ssl_context=self._admin_tls
            ).start()
        except BaseException:
            await self.stop()
            raise
        bound = runner.addresses[0]
        addresses = StandaloneAddresses(edge=edge, admin=(str(bound[0]), int(bound[1])))
        logger.info("edge admin API listening on {}", addresses.admin)
        return addresses

    async def stop(self) -> None:
        if self._admin is not None:
            await self._admin.cleanup()
            self._admin = None
        await self.server.stop()


def admin_tls_context(cert_file: str, key_file: str) -> ssl.SSLContext:
    """The admin API's server TLS context from PEM files (``interlock edge --admin-tls-cert``,
    ``--admin-tls-key``); raises ``OSError`` or ``ssl.SSLError`` when they cannot be used."""
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    context.load_cert_chain(cert_file, key_file)
    return context


def _say(line: str) -> None:
    print(line, flush=True)


async def run_standalone_edge(
    *,
    listen: str,
    admin: str,
    admin_token: SecretValue,
    allowed_hosts: AllowedHosts | None = None,
    trusted_proxies: Sequence[str] = (),
    tls_listen: str | None = None,
    limits: ProxyLimits = DEFAULT_LIMITS,
    upstreams: UpstreamResolver | None = None,
    reuse_port: bool = False,
    admin_tls: ssl.SSLContext | None = None,
    pushed: PushedUpstreams | None = None,
    traffic: Traffic | None = None,
    announce: Callable[[str], None] = _say,
) -> None:
    """Serve until cancelled, printing the bound addresses with ``announce`` (the ``interlock
    edge`` command: in JSON with ``--log-format json``)."""
    standalone = StandaloneEdge(
        admin_token=admin_token,
        allowed_hosts=allowed_hosts,
        trusted_proxies=trusted_proxies,
        limits=limits,
        upstreams=upstreams,
        admin_tls=admin_tls,
        pushed=pushed,
        traffic=traffic,
    )
    addresses = await standalone.start(
        listen=listen, admin=admin, tls_listen=tls_listen, reuse_port=reuse_port
    )
    assert addresses.edge.http is not None  # ``listen`` is a plain address
    http_host, http_port = addresses.edge.http
    announce(f"edge listening on http://{_url_host(http_host)}:{http_port}")
    if addresses.edge.https is not None:
        https_host, https_port = addresses.edge.https
        announce(f"edge TLS listening on https://{_url_host(https_host)}:{https_port}")
    admin_host, admin_port = addresses.admin
    scheme = "http" if admin_tls is None else "https"
    announce(f"edge admin API on {scheme}://{_url_host(admin_host)}:{admin_port}")
    try:
        await asyncio.Event().wait()
    finally:
        await standalone.stop()


def _url_host(host: str) -> str:
    return f"[{host}]" if ":" in host else host
