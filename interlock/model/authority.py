"""Which Service port a mesh request names — pure functions, no I/O.

The mesh listener is an outbound proxy for clients that have no sidecar: they reach a Service
through it by its cluster DNS name, either in the ``Host`` header (a client pointed at the
listener directly) or in the absolute-form request-target an ``HTTP_PROXY`` client sends
(``GET http://web.shop.svc:8080/cart``, RFC 9112 §3.2.2, where the target's authority wins over
``Host``). The names Kubernetes' DNS answers for a Service are the forms accepted here:

* ``NAME.NAMESPACE.svc.CLUSTER-DOMAIN`` (``cluster.local`` unless configured), optionally with
  the final dot of a fully qualified name;
* ``NAME.NAMESPACE.svc``;
* ``NAME.NAMESPACE`` (what a Pod's DNS search path completes);

each with ``:PORT`` or, without one, port 80 (the default port of ``http``). Anything else — an
IP address, one label, a name under another domain, a label Kubernetes would refuse — names no
Service: the listener answers 404 with :attr:`NotAService.reason`, and never guesses, because a
guessed Service would send a request to a backend its client did not name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from interlock.model.service import ServicePortKey

DEFAULT_CLUSTER_DOMAIN = "cluster.local"
DEFAULT_PORT = 80

_DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?")
"""An RFC 1123 label, as Kubernetes requires of a namespace name."""
_SERVICE_NAME = re.compile(r"[a-z]([-a-z0-9]{0,61}[a-z0-9])?")
"""An RFC 1035 label, as Kubernetes requires of a Service name (it starts with a letter)."""


@dataclass(frozen=True, slots=True)
class NotAService:
    """An authority that names no Service, and why (a sentence naming the authority)."""

    reason: str


@dataclass(frozen=True, slots=True)
class MeshTarget:
    """What a mesh request asks for: the authority it names and the origin-form target
    (``/path?query``, still percent-encoded) to send on."""

    authority: ServicePortKey | NotAService
    target: str


def validate_cluster_domain(value: str) -> str:
    """The cluster domain in canonical form (lower case, no leading or final dot); raises
    ValueError naming the value when a label is not a DNS label."""
    domain = value.strip().strip(".").lower()
    if not domain or not all(_DNS_LABEL.fullmatch(label) for label in domain.split(".")):
        raise ValueError(f"--cluster-domain: {value[:100]!r} must be DNS labels separated by dots")
    return domain


def parse_namespace(value: str, *, flag: str) -> str:
    """``value`` if it is a namespace name (an RFC 1123 label); raises ValueError naming the
    flag."""
    if not _DNS_LABEL.fullmatch(value):
        raise ValueError(f"{flag}: {value[:70]!r} is not a namespace name (an RFC 1123 label)")
    return value


def parse_authority(
    authority: str, *, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> ServicePortKey | NotAService:
    """The Service port ``authority`` (``host[:port]``) names, or why it names none.

    ``cluster_domain`` must be canonical (:func:`validate_cluster_domain`).
    """
    shown = authority[:200]
    host, port_text = _split_port(authority.strip())
    if host is None:
        return NotAService(f"authority {shown!r}: an IP address names no Service")
    port = DEFAULT_PORT
    if port_text is not None:
        if not port_text.isdigit() or not 0 < int(port_text) <= 65535 or len(port_text) > 5:
            return NotAService(f"authority {shown!r}: port {port_text[:20]!r} is not 1-65535")
        port = int(port_text)
    labels = host.lower().removesuffix(".").split(".")
    suffixes = (("svc", *cluster_domain.split(".")), ("svc",), ())
    for suffix in suffixes:
        if len(labels) == 2 + len(suffix) and tuple(labels[2:]) == suffix:
            name, namespace = labels[0], labels[1]
            if not _SERVICE_NAME.fullmatch(name):
                return NotAService(
                    f"authority {shown!r}: {name[:70]!r} is not a Service name "
                    "(a DNS label starting with a letter)"
                )
            if not _DNS_LABEL.fullmatch(namespace):
                return NotAService(
                    f"authority {shown!r}: {namespace[:70]!r} is not a namespace name"
                )
            return ServicePortKey(namespace=namespace, name=name, port=port)
    return NotAService(
        f"authority {shown!r} names no Service: expected NAME.NAMESPACE, NAME.NAMESPACE.svc "
        f"or NAME.NAMESPACE.svc.{cluster_domain} (with an optional :PORT)"
    )


def _split_port(authority: str) -> tuple[str | None, str | None]:
    """(host, port text or None); host None for an IP literal (IPv6 in brackets, or IPv4)."""
    if authority.startswith("["):
        return None, None
    host, sep, port = authority.rpartition(":")
    if not sep:
        host, port_text = authority, None
    else:
        port_text = port
    if host.replace(".", "").isdigit():
        return None, None
    return host, port_text


def mesh_target(
    request_target: str, *, host: str | None, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> MeshTarget:
    """The authority and origin-form target of a request, from its request-target and its
    ``Host`` header.

    An absolute-form target (``http://web.shop.svc:8080/x``) names the authority itself and
    ``Host`` is ignored, as RFC 9112 §3.2.2 requires; only ``http`` is proxied (an ``https``
    client tunnels with CONNECT instead: :func:`connect_target`). An origin-form target
    (``/x``) takes the authority from ``Host``.
    """
    if request_target.startswith("/"):
        if not host:
            return MeshTarget(NotAService("the request has no Host header"), request_target)
        return MeshTarget(parse_authority(host, cluster_domain=cluster_domain), request_target)
    scheme, sep, rest = request_target.partition("://")
    if not sep or scheme.lower() not in ("http", "https"):
        return MeshTarget(
            NotAService(f"request-target {request_target[:200]!r} is neither a path nor a URL"),
            "/",
        )
    if scheme.lower() != "http":
        return MeshTarget(
            NotAService(f"request-target {request_target[:200]!r}: only http:// is proxied"), "/"
        )
    end = min((i for i in (rest.find("/"), rest.find("?")) if i != -1), default=len(rest))
    authority, target = rest[:end], rest[end:]
    if "@" in authority:
        return MeshTarget(
            NotAService(f"request-target {request_target[:200]!r}: user info is not allowed"),
            "/",
        )
    if not target.startswith("/"):
        target = "/" + target
    return MeshTarget(parse_authority(authority, cluster_domain=cluster_domain), target)


def connect_target(
    request_target: str, *, cluster_domain: str = DEFAULT_CLUSTER_DOMAIN
) -> ServicePortKey | NotAService:
    """The Service port a ``CONNECT`` request names: its request-target is the authority form
    ``HOST:PORT`` (RFC 9110 §9.3.6), a port required — a tunnel has no scheme to default one."""
    host, port = _split_port(request_target.strip())
    if host is not None and port is None:
        return NotAService(
            f"CONNECT {request_target[:200]!r}: the target needs a port (NAME.NAMESPACE:PORT)"
        )
    return parse_authority(request_target, cluster_domain=cluster_domain)
