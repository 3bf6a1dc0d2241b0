"""Route filters as they act on one request: header edits, URL rewrites, redirects — pure.

The Gateway API defines each filter precisely, and the differences matter to users: a
``ReplacePrefixMatch`` replaces the *matched prefix* by whole path segments (``/foo`` matched on
``/foo/bar`` with ``/xyz`` gives ``/xyz/bar``; with ``/`` gives ``/bar``), a redirect's port is
left out of ``Location`` when it is the scheme's default, and a redirect with a new scheme but
no port goes to that scheme's well-known port. Keeping these rules here, free of aiohttp and
compiled once per policy (:func:`compile_filters`), lets them be tested alone and keeps the
per-request work to a few tuple walks.

Order of application (``docs/design.md``, "One engine, two front doors"): a rule's filters, then
the chosen backend's; within a header modifier ``set``, then ``add``, then ``remove``. A CORS
filter answers preflights itself and adds its headers to the responses of allowed origins.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, MutableMapping
from dataclasses import dataclass
from typing import Final

from multidict import CIMultiDict

from interlock.model.gateway import (
    HTTPCORSFilter,
    HTTPHeaderFilter,
    HTTPPathModifier,
    HTTPRequestRedirectFilter,
    HTTPRouteMatch,
    HTTPURLRewriteFilter,
)
from interlock.model.outbound import RouteFilter

DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, slots=True)
class HeaderEdits:
    """One RequestHeaderModifier or ResponseHeaderModifier, ready to apply."""

    set: tuple[tuple[str, str], ...]
    add: tuple[tuple[str, str], ...]
    remove: tuple[str, ...]

    @classmethod
    def of(cls, config: HTTPHeaderFilter) -> HeaderEdits:
        return cls(
            set=tuple((h.name, h.value) for h in config.set),
            add=tuple((h.name, h.value) for h in config.add),
            remove=config.remove,
        )

    def apply(self, headers: CIMultiDict[str]) -> None:
        """``set`` replaces every value of the header, ``add`` appends one more line (its
        existing values are kept), ``remove`` drops every value."""
        for name, value in self.set:
            headers[name] = value
        for name, value in self.add:
            headers.add(name, value)
        for name in self.remove:
            headers.popall(name, None)


@dataclass(frozen=True, slots=True)
class CorsPlan:
    """A CORS filter (GEP-1767) ready to answer preflights and decorate responses.

    An allowed origin gets itself back in ``Access-Control-Allow-Origin`` (``*`` only when
    the filter allows every origin without credentials); ``*`` in methods or headers is sent as
    ``*`` without credentials and as what the preflight asked for with them (browsers do not
    read ``*`` literally on credentialed requests).
    """

    origins: tuple[re.Pattern[str], ...]
    any_origin: bool
    credentials: bool
    methods: tuple[str, ...]
    headers: tuple[str, ...]
    expose: tuple[str, ...]
    max_age: int

    @classmethod
    def of(cls, config: HTTPCORSFilter) -> CorsPlan:
        return cls(
            origins=tuple(
                re.compile(re.escape(o).replace(r"\*", "[^/]*"), re.IGNORECASE)
                for o in config.allow_origins
                if o != "*"
            ),
            any_origin="*" in config.allow_origins,
            credentials=bool(config.allow_credentials),
            methods=tuple(config.allow_methods),
            headers=tuple(config.allow_headers),
            expose=tuple(config.expose_headers),
            max_age=config.max_age,
        )

    def allows(self, origin: str) -> bool:
        return self.any_origin or any(p.fullmatch(origin) for p in self.origins)

    def _origin(self, origin: str) -> list[tuple[str, str]]:
        found = [
            (
                "Access-Control-Allow-Origin",
                "*" if self.any_origin and not self.credentials else origin,
            )
        ]
        if self.credentials:
            found.append(("Access-Control-Allow-Credentials", "true"))
        return found

    def preflight(self, request_headers: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
        """The headers of the answer to a preflight (empty when the origin is not allowed)."""
        origin = request_headers.get("origin", "")
        if not self.allows(origin):
            return ()
        found = self._origin(origin)
        asked_method = request_headers.get("access-control-request-method", "")
        methods = (
            (asked_method if self.credentials else "*")
            if "*" in self.methods
            else ", ".join(self.methods)
        )
        if methods:
            found.append(("Access-Control-Allow-Methods", methods))
        asked_headers = request_headers.get("access-control-request-headers", "")
        headers = (
            (asked_headers if self.credentials else "*")
            if "*" in self.headers
            else ", ".join(self.headers)
        )
        if headers:
            found.append(("Access-Control-Allow-Headers", headers))
        if self.expose:
            # Also on the preflight, as the Gateway API's conformance suite expects.
            found.append(("Access-Control-Expose-Headers", ", ".join(self.expose)))
        found.append(("Access-Control-Max-Age", str(self.max_age)))
        found.append(("Vary", "Origin"))
        return tuple(found)

    def response(self, origin: str) -> HeaderEdits | None:
        """What an actual (not preflight) response from an allowed origin gets."""
        if not self.allows(origin):
            return None
        found = self._origin(origin)
        if self.expose:
            found.append(("Access-Control-Expose-Headers", ", ".join(self.expose)))
        return HeaderEdits(set=tuple(found), add=(("Vary", "Origin"),), remove=())


@dataclass(frozen=True, slots=True)
class FilterPlan:
    """The filters of one rule, or of one rule and one backend, sorted by what they act on."""

    request_headers: tuple[HeaderEdits, ...] = ()
    response_headers: tuple[HeaderEdits, ...] = ()
    redirect: HTTPRequestRedirectFilter | None = None
    rewrite: HTTPURLRewriteFilter | None = None
    cors: CorsPlan | None = None

    def then(self, later: FilterPlan) -> FilterPlan:
        """This plan followed by ``later`` (a backend's after its rule's): header edits in
        order; ``later``'s redirect, rewrite or CORS replaces this one's."""
        return FilterPlan(
            request_headers=self.request_headers + later.request_headers,
            response_headers=self.response_headers + later.response_headers,
            redirect=later.redirect or self.redirect,
            rewrite=later.rewrite or self.rewrite,
            cors=later.cors or self.cors,
        )

    @property
    def edits_request(self) -> bool:
        return bool(self.request_headers) or self.rewrite is not None


EMPTY_FILTERS: Final = FilterPlan()


def compile_filters(filters: Iterable[RouteFilter]) -> FilterPlan:
    """A :class:`FilterPlan` from a rule's or backend's filters (the control plane refuses the
    types no data plane acts on: RequestMirror, ExtensionRef)."""
    request: list[HeaderEdits] = []
    response: list[HeaderEdits] = []
    redirect: HTTPRequestRedirectFilter | None = None
    rewrite: HTTPURLRewriteFilter | None = None
    cors: CorsPlan | None = None
    for f in filters:
        if f.type == "RequestHeaderModifier" and f.request_header_modifier is not None:
            request.append(HeaderEdits.of(f.request_header_modifier))
        elif f.type == "ResponseHeaderModifier" and f.response_header_modifier is not None:
            response.append(HeaderEdits.of(f.response_header_modifier))
        elif f.type == "RequestRedirect":
            redirect = getattr(f, "request_redirect", None)
        elif f.type == "URLRewrite":
            rewrite = getattr(f, "url_rewrite", None)
        elif f.type == "CORS":
            config = getattr(f, "cors", None)
            cors = None if config is None else CorsPlan.of(config)
    if not (request or response or redirect or rewrite or cors):
        return EMPTY_FILTERS
    return FilterPlan(
        request_headers=tuple(request),
        response_headers=tuple(response),
        redirect=redirect,
        rewrite=rewrite,
        cors=cors,
    )


def apply_all(edits: Iterable[HeaderEdits], headers: CIMultiDict[str]) -> None:
    for edit in edits:
        edit.apply(headers)


def _segments(path: str) -> list[str]:
    return path.split("/")[1:]


def replace_prefix(path: str, *, prefix: str, replacement: str) -> str:
    """``path`` with its first segments — those of the matched ``prefix`` — replaced.

    ``path`` is the (still percent-encoded) path to forward; ``prefix`` the PathPrefix value that
    matched it. Segments count the same in both (the edge refuses encoded slashes), so this
    works on the encoded path. ``replace_prefix("/foo/bar", prefix="/foo", replacement="/xyz")``
    is ``/xyz/bar``; with ``replacement="/"`` it is ``/bar``; ``/foo`` alone gives the
    replacement itself.
    """
    stripped = prefix.strip("/")
    count = len(stripped.split("/")) if stripped else 0
    segments = _segments(path) if path != "/" else []
    rest = segments[count:]
    base = replacement.rstrip("/")
    if not rest:
        return replacement or "/"
    joined = base + "/" + "/".join(rest)
    return joined if joined.startswith("/") else "/" + joined


def modified_path(modifier: HTTPPathModifier, *, path: str, match: HTTPRouteMatch) -> str:
    """The path a URLRewrite or RequestRedirect ``path`` makes of ``path``."""
    if modifier.type == "ReplaceFullPath":
        return modifier.replace_full_path or "/"
    replacement = modifier.replace_prefix_match or "/"
    if match.path.type != "PathPrefix":
        # The CRD allows ReplacePrefixMatch only with a PathPrefix match; the policy's
        # matches are checked, so this only guards against a hand-built policy.
        return replacement
    return replace_prefix(path, prefix=match.path.value, replacement=replacement)


def split_host(host_header: str) -> tuple[str, int | None]:
    """``example.com:8080`` → (``example.com``, 8080); ``[::1]`` → (``[::1]``, None)."""
    host = host_header.strip()
    if host.startswith("["):
        end = host.find("]")
        if end != -1:
            port_text = host[end + 2 :] if host[end + 1 : end + 2] == ":" else ""
            return host[: end + 1], int(port_text) if port_text.isdigit() else None
    name, sep, port_text = host.rpartition(":")
    if sep and name and port_text.isdigit() and ":" not in name:
        return name, int(port_text)
    return host, None


def redirect_location(
    redirect: HTTPRequestRedirectFilter,
    *,
    scheme: str,
    host: str,
    path: str,
    query: str,
    match: HTTPRouteMatch,
) -> str:
    """The ``Location`` of a RequestRedirect for a request to ``scheme://host{path}?{query}``.

    The Gateway API's rules: an unset scheme or hostname keeps the request's; an unset port is
    the new scheme's well-known port when the scheme is set, else the port the client used
    (``host``'s, else its scheme's default); a scheme's default port is left out. The query
    string is kept.
    """
    request_host, request_port = split_host(host)
    new_scheme = redirect.scheme or scheme
    hostname = redirect.hostname or request_host
    if redirect.port is not None:
        port: int | None = redirect.port
    elif redirect.scheme is not None:
        port = DEFAULT_PORTS.get(redirect.scheme)
    else:
        port = request_port if request_port is not None else DEFAULT_PORTS.get(scheme)
    authority = (
        hostname
        if port is None or port == DEFAULT_PORTS.get(new_scheme)
        else (f"{hostname}:{port}")
    )
    new_path = (
        path if redirect.path is None else modified_path(redirect.path, path=path, match=match)
    )
    location = f"{new_scheme}://{authority}{new_path}"
    return f"{location}?{query}" if query else location


def set_host(headers: MutableMapping[str, str], hostname: str) -> None:
    """A URLRewrite's hostname: the ``Host`` the backend sees."""
    headers["Host"] = hostname
