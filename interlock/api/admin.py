"""The admin server: liveness, readiness and debug views of a running controller.

Kept apart from the policy API so that probes and operators never compete with policy
clients, and so that more endpoints (``/metrics``, ``/debug/edges``) can be added by whoever
owns that data: :meth:`AdminApp.add_debug` mounts any JSON-able view under ``/debug/``, and
:attr:`AdminApp.app` holds the routes (:class:`~interlock.api.routes.Routes`) for anything else
(before it is served).

The admin port is reached by more than people: kubelet probes ``/healthz`` and ``/readyz`` by the
Pod's IP and Prometheus scrapes ``/metrics``, so the shipped Deployment binds it to every
interface. ``/debug/*`` lists every namespace's routes, modules and actors: it is served only to
clients on loopback (a person's ``kubectl port-forward`` arrives there) and the networks
``--debug-from`` adds, and refused with 403 to anyone else. Every path answers only requests
whose ``Host`` names this server (:mod:`interlock.api.hosts`).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from interlock.api.hosts import host_guard
from interlock.api.http_server import HTTPForbidden, HTTPNotFound, Response
from interlock.api.routes import Request, Routes
from interlock.model.allowed_hosts import AllowedHosts


def _json_default(value: object) -> object:
    # Statistics objects are dataclasses or expose ``_asdict``/``__dict__``; show what they hold.
    for attr in ("_asdict", "model_dump"):
        method = getattr(value, attr, None)
        if callable(method):
            return method()
    if hasattr(value, "__dataclass_fields__"):
        return {name: getattr(value, name) for name in value.__dataclass_fields__}
    if isinstance(value, set | frozenset | tuple):
        return list(value)
    return str(value)


def json_body(data: object) -> Response:
    """A JSON response for debug data of any common shape (dataclasses, sets, models)."""
    text = json.dumps(data, default=_json_default, indent=2, sort_keys=True)
    return Response(text=text, content_type="application/json")


LOOPBACK = ("127.0.0.0/8", "::1/128")
"""Where ``/debug/*`` is always served: this machine (and ``kubectl port-forward`` into a Pod)."""

_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def _peer_in(remote: str | None, networks: tuple[_Network, ...]) -> bool:
    if not remote:
        return False
    try:
        address = ipaddress.ip_address(remote.partition("%")[0])
    except ValueError:
        return False
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    return any(address in network for network in networks)


class AdminApp:
    """``/healthz`` (the process serves HTTP), ``/readyz`` (initial sync done) and ``/debug/*``
    (to loopback clients and those in ``debug_from`` only)."""

    def __init__(
        self,
        *,
        is_ready: Callable[[], bool],
        debug_from: Iterable[str] = (),
        allowed_hosts: AllowedHosts | None = None,
    ) -> None:
        self._is_ready = is_ready
        self._debug_from = tuple(
            ipaddress.ip_network(cidr, strict=False) for cidr in (*LOOPBACK, *debug_from)
        )
        self._debug: dict[str, Callable[[Mapping[str, str]], Any]] = {}
        self.app = Routes(guard=host_guard(allowed_hosts or AllowedHosts()))
        self.app.add_get("/healthz", self._healthz)
        self.app.add_get("/readyz", self._readyz)
        self.app.add_get("/debug/", self._debug_index)
        self.app.add_get("/debug/{name}", self._debug_view)

    def add_debug(self, name: str, view: Callable[[], Any]) -> None:
        """Serve ``view()`` as JSON at ``/debug/{name}``; it must never include Secret data."""
        self._debug[name] = lambda _query: view()

    def add_debug_query(self, name: str, view: Callable[[Mapping[str, str]], Any]) -> None:
        """Serve ``view(query)`` as JSON at ``/debug/{name}``, given the URL's query string."""
        self._debug[name] = view

    async def _healthz(self, _request: Request) -> Response:
        return Response(text="ok\n")

    async def _readyz(self, _request: Request) -> Response:
        if self._is_ready():
            return Response(text="ok\n")
        return Response(text="initial sync not finished\n", status=503)

    def _refuse_remote(self, request: Request) -> None:
        if not _peer_in(request.remote, self._debug_from):
            raise HTTPForbidden(
                text="/debug/ is served to loopback clients only (kubectl port-forward, then "
                "http://127.0.0.1:PORT/debug/); interlock run --debug-from CIDR adds a network\n"
            )

    async def _debug_index(self, request: Request) -> Response:
        self._refuse_remote(request)
        return json_body(sorted(f"/debug/{name}" for name in self._debug))

    async def _debug_view(self, request: Request) -> Response:
        self._refuse_remote(request)
        view = self._debug.get(request.match_info["name"])
        if view is None:
            raise HTTPNotFound(text=f"no debug view {request.match_info['name']!r}\n")
        return json_body(view(request.query))
