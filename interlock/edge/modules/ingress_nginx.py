"""ingressNginx: what an Ingress's ingress-nginx annotations ask of a route, at the edge.

The translation (:mod:`interlock.model.ingress_nginx`) decides what each annotation means; this
module carries it out per request, with nginx's behaviour where users can see it: a regular
expression path matched case-insensitively from the start, ``rewrite-target`` replacing the
whole path with ``$1``…``$9`` substituted, a 308 to HTTPS for ``ssl-redirect``, a 302 for
``app-root`` on ``/``, a 204 with the CORS headers for a preflight, 413 for a body longer than
``proxy-body-size`` (by its ``Content-Length``), 503 past ``limit-connections``. It runs before
every other module, as nginx's rewrite phase runs before its access phase — so, as behind
ingress-nginx, a redirect or a CORS preflight is answered before ipRestriction or basicAuth.

Requests in flight per client (``limit-connections``) are counted while a request is handled:
the front door opens :func:`holding` around each request, and what :meth:`IngressNginx.admit`
took is given back when it closes.
"""

from __future__ import annotations

import random
import re
from collections.abc import Callable, Mapping, MutableMapping
from contextvars import ContextVar
from urllib.parse import quote

from interlock.dataplane.engine import FilteredHooks
from interlock.dataplane.filters import HeaderEdits
from interlock.dataplane.plan import Deadlines
from interlock.dataplane.proxy import ResponseHooks
from interlock.edge.modules.view import Rejection, RequestView, reject
from interlock.edge.provider import BackendTarget
from interlock.model.ingress_nginx import NginxCanary
from interlock.model.module_settings import IngressNginxSettings
from interlock.model.service import ServicePortKey

NOT_MATCHED = reject(404, "not found\n")
TOO_LARGE = reject(413, "request body too large\n")
TOO_MANY_CONNECTIONS = reject(503, "too many requests in flight from this address\n")

_GROUP = re.compile(r"\$(\d)")
_SLASHES = re.compile("/{2,}")
_LENGTH = re.compile(r"[0-9]+")
_SAFE = "/!$&'()*+,;=:@-._~%"
_UNSAFE = re.compile(r"[^A-Za-z0-9/!$&'()*+,;=:@\-._~%]")

_held: ContextVar[list[Callable[[], None]] | None] = ContextVar("ingress_nginx_held", default=None)


class holding:  # lower case: used as the function it was, ``with holding():``
    """Around one request: the ``limit-connections`` slots it takes are given back at the end.

    A class, not a ``contextlib.contextmanager``: every request through the edge enters one,
    and a generator-based context manager costs a generator, its frame and a StopIteration
    on each."""

    __slots__ = ("_releases", "_token")

    def __enter__(self) -> None:
        self._releases: list[Callable[[], None]] = []
        self._token = _held.set(self._releases)

    def __exit__(self, *exc: object) -> None:
        _held.reset(self._token)
        for release in self._releases:
            release()


class IngressNginx:
    """A compiled :class:`~interlock.model.ingress_nginx.IngressNginxModule`."""

    __slots__ = ("_config", "_in_flight", "_origins", "_pattern", "_random")

    def __init__(
        self, settings: IngressNginxSettings, *, rng: Callable[[], float] = random.random
    ) -> None:
        config = self._config = settings.module
        self._random = rng
        self._pattern = settings.pattern
        cors = config.cors
        self._origins: tuple[re.Pattern[str], ...] | None = None
        if cors is not None and "*" not in cors.allow_origins:
            self._origins = tuple(
                re.compile(re.escape(o).replace(r"\*\.", r"[^/.]+\."), re.IGNORECASE)
                for o in cors.allow_origins
            )
        self._in_flight: dict[str, int] = {}

    def __repr__(self) -> str:
        return f"IngressNginx({self.summary()})"

    # --- before the other modules -----------------------------------------------------------

    def admit(self, view: RequestView, *, client: str, scheme: str = "") -> Rejection | None:
        """The answer nginx gave before its access phase, or None to go on. ``scheme``: the
        one the client used (a trusted proxy's ``X-Forwarded-Proto``), else the view's."""
        scheme = scheme or view.scheme
        config = self._config
        if self._pattern is not None and self._pattern.match(view.path) is None:
            return NOT_MATCHED
        if config.max_body_size is not None:
            length = view.headers.get("content-length", "")
            if _LENGTH.fullmatch(length) and int(length) > config.max_body_size:
                return TOO_LARGE
        if config.ssl_redirect and scheme == "http":
            return _redirect(308, f"https://{_hostname(view.authority)}{_target(view)}")
        if config.redirect is not None:
            return _redirect(config.redirect_status, config.redirect)
        if config.app_root is not None and view.path == "/":
            return _redirect(302, f"{scheme}://{view.authority}{config.app_root}")
        if config.cors is not None and view.method == "OPTIONS":
            found = self._cors_headers(view.headers)
            if found is not None:
                return Rejection(
                    204,
                    {**dict(found), "Content-Type": "text/plain charset=UTF-8"},
                    "",
                )
        if config.connection_limit is not None:
            return self._hold(client, config.connection_limit)
        return None

    @property
    def needs_client(self) -> bool:
        """Whether :meth:`admit` reads the client's address (``limit-connections``)."""
        return self._config.connection_limit is not None

    def _hold(self, client: str, limit: int) -> Rejection | None:
        releases = _held.get()
        if releases is None:
            return None  # a front door that does not count (none at the edge)
        count = self._in_flight.get(client, 0)
        if count >= limit:
            return TOO_MANY_CONNECTIONS
        self._in_flight[client] = count + 1

        def release() -> None:
            left = self._in_flight.get(client, 1) - 1
            if left <= 0:
                self._in_flight.pop(client, None)
            else:
                self._in_flight[client] = left

        releases.append(release)
        return None

    def _cors_headers(self, request: Mapping[str, str]) -> list[tuple[str, str]] | None:
        cors = self._config.cors
        assert cors is not None
        if self._origins is None:
            origin = "*"
        else:
            origin = request.get("origin", "")
            if not any(p.fullmatch(origin) for p in self._origins):
                return None
        found = [("Access-Control-Allow-Origin", origin)]
        if cors.allow_credentials:
            found.append(("Access-Control-Allow-Credentials", "true"))
        found.append(("Access-Control-Allow-Methods", cors.allow_methods))
        found.append(("Access-Control-Allow-Headers", cors.allow_headers))
        if cors.expose_headers:
            found.append(("Access-Control-Expose-Headers", cors.expose_headers))
        found.append(("Access-Control-Max-Age", str(cors.max_age)))
        return found

    # --- forwarding ---------------------------------------------------------------------------

    def forward_path(self, path: str, forward_path: str) -> str:
        """The path sent upstream: ``rewrite-target`` with the pattern's groups (matched on
        the routing path, as nginx matches its normalized URI), else ``forward_path``."""
        target = self._config.rewrite_target
        if target is None:
            return forward_path
        groups: tuple[str | None, ...] = ()
        if self._pattern is not None:
            found = self._pattern.match(path)
            groups = () if found is None else found.groups()

        def group(match: re.Match[str]) -> str:
            index = int(match.group(1))
            value = groups[index - 1] if 0 < index <= len(groups) else None
            return value or ""

        rewritten = _GROUP.sub(group, target) if "$" in target else target
        rewritten = _SLASHES.sub("/", "/" + rewritten.lstrip("/"))
        if _UNSAFE.search(rewritten) is None:
            return rewritten
        # The groups come from the decoded path: encode again what must not travel raw.
        return quote(rewritten, safe=_SAFE)

    def backend(self, headers: Mapping[str, str], main: BackendTarget) -> BackendTarget:
        """``main``, or the canary's backend (by header first, else by weight)."""
        canary = self._config.canary
        if canary is None:
            return main
        if canary.header is not None:
            value = headers.get(canary.header)
            if value is not None:
                wanted = canary.header_value if canary.header_value is not None else "always"
                if value == wanted:
                    return _canary_target(canary)
                if value == "never" and canary.header_value is None:
                    return main
        if canary.weight and self._random() * canary.weight_total < canary.weight:
            return _canary_target(canary)
        return main

    def upstream_headers(self, headers: MutableMapping[str, str]) -> None:
        if self._config.upstream_vhost is not None:
            headers["Host"] = self._config.upstream_vhost

    def deadlines(self, current: Deadlines) -> Deadlines:
        """``current`` (the backend Service's policy's) with the annotations' timeouts:
        ``proxy-connect-timeout`` + ``proxy-read-timeout`` (nginx's 60 s when unset) bound the
        wait for the response headers, ``proxy-read-timeout`` each read after them."""
        connect, read = self._config.connect_timeout, self._config.read_timeout
        if connect is None and read is None:
            return current
        return Deadlines(
            request=current.request,
            attempt=(connect or 0.0) + (read if read is not None else 60.0),
            idle=read if read is not None else current.idle,
        )

    def hooks(self, inner: ResponseHooks, request_headers: Mapping[str, str]) -> ResponseHooks:
        """``inner`` plus the CORS headers of the response to an allowed origin."""
        found = None if self._config.cors is None else self._cors_headers(request_headers)
        if not found:
            return inner
        return FilteredHooks((HeaderEdits(set=tuple(found), add=(), remove=()),), inner)

    @property
    def protocol(self) -> str | None:
        """The upstream protocol ``backend-protocol`` asks for (None: the policy's)."""
        return "grpc" if self._config.backend_protocol in ("GRPC", "GRPCS") else None

    @property
    def upstream_tls(self) -> bool:
        """Whether the upstream is spoken to over TLS (``HTTPS``, ``GRPCS``)."""
        return self._config.backend_protocol in ("HTTPS", "GRPCS")

    def summary(self) -> dict[str, object]:
        found = self._config.model_dump(by_alias=True, exclude_none=True)
        found.pop("canary", None)
        canary = self._config.canary
        if canary is not None:
            found["canary"] = {
                "backend": f"{canary.namespace}/{canary.service}:{canary.port}",
                "ingress": canary.ingress,
                "weight": f"{canary.weight}/{canary.weight_total}",
                "header": canary.header,
            }
        if self._config.connection_limit is not None:
            found["clientsInFlight"] = len(self._in_flight)
        return found


def _canary_target(canary: NginxCanary) -> BackendTarget:
    return BackendTarget(
        ServicePortKey(canary.namespace, canary.service, canary.port), exists=canary.exists
    )


def _redirect(status: int, location: str) -> Rejection:
    return Rejection(
        status,
        {"Location": location, "Content-Type": "text/plain; charset=utf-8"},
        f"redirecting to {location}\n",
    )


def _hostname(host: str) -> str:
    """The host without its port: the redirect goes to HTTPS's own port."""
    if host.startswith("["):
        return host[: host.find("]") + 1] or host
    return host.rsplit(":", 1)[0] if host.count(":") == 1 else host


def _target(view: RequestView) -> str:
    query = "&".join(f"{k}={v}" for k, v in view.query.items()) if view.query else ""
    return view.raw_target or (view.path + (f"?{query}" if query else ""))
