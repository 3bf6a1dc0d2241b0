"""The answers the data plane makes itself, and the one format they all share.

A client (or the person reading its logs) has to tell "your route has no backend yet" from "the
backend is down" from "the upstream was too slow" without access to the controller. Every
answer interlock's data plane makes itself — not relayed from a backend — therefore carries a
stable *reason* token in the ``X-Interlock-Reason`` header and a short text body
``<reason>: <sentence>``. The table of reasons is in ``docs/answers.md``; tests and clients may
rely on the tokens, not on the sentences.

The sentence given to a client is generic where the detail names cluster internals (namespaces,
Service names) that an internet client must not learn; the detail goes to the debug log, and a
front door that serves only cluster clients (the mesh listener) may show it.

Pure: no aiohttp here (``interlock.dataplane.wire`` renders an :class:`Answer`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

REASON_HEADER: Final = "X-Interlock-Reason"
"""The response header naming why the data plane answered itself."""

UNKNOWN_HOST: Final = "unknown-host"
NO_ROUTE: Final = "no-route"
BAD_REQUEST: Final = "bad-request"
NO_BACKEND_ATTACHED: Final = "no-backend-attached"
BACKEND_NOT_FOUND: Final = "backend-not-found"
NO_BACKEND_WEIGHT: Final = "no-backend-weight"
ENDPOINTS_UNKNOWN: Final = "endpoints-unknown"
NO_READY_ENDPOINTS: Final = "no-ready-endpoints"
ENDPOINTS_FAILING: Final = "endpoints-failing"
UPSTREAM_TIMEOUT: Final = "upstream-timeout"
UPSTREAM_UNREACHABLE: Final = "upstream-unreachable"
UPSTREAM_FAILED: Final = "upstream-failed"
UPGRADE_NOT_ASKED: Final = "upgrade-not-asked"
BODY_TIMEOUT: Final = "body-timeout"
HEADER_TIMEOUT: Final = "header-timeout"
INTERNAL_ERROR: Final = "internal-error"
BODY_TOO_LARGE: Final = "body-too-large"
REDIRECT: Final = "redirect"
CORS_PREFLIGHT: Final = "cors-preflight"
MODULE: Final = "module"
NOT_A_TUNNEL: Final = "not-a-tunnel"
NO_SNI_MATCH: Final = "no-sni-match"
CONNECT_NOT_SERVED: Final = "connect-not-served"
TOO_MANY_UPGRADES: Final = "too-many-upgrades"
UPGRADES_FULL: Final = "upgrades-full"
MISDIRECTED: Final = "misdirected-request"

REASONS: Final[dict[str, tuple[int, str]]] = {
    UNKNOWN_HOST: (404, "no edge or Service is known by this host"),
    NO_ROUTE: (404, "no route matches this request"),
    BAD_REQUEST: (400, "the request cannot be routed safely"),
    NO_BACKEND_ATTACHED: (503, "this route has no backend attached"),
    BACKEND_NOT_FOUND: (500, "the backend of this route cannot be used"),
    NO_BACKEND_WEIGHT: (500, "every backend of the matching rule has weight 0"),
    ENDPOINTS_UNKNOWN: (503, "the backend's endpoints are not known yet"),
    NO_READY_ENDPOINTS: (503, "the backend has no ready endpoint"),
    ENDPOINTS_FAILING: (503, "every endpoint of the backend is failing"),
    UPSTREAM_TIMEOUT: (504, "the upstream did not answer in time"),
    UPSTREAM_UNREACHABLE: (502, "the upstream cannot be reached"),
    UPSTREAM_FAILED: (502, "the upstream failed"),
    UPGRADE_NOT_ASKED: (502, "the upstream switched protocols, which was not asked for"),
    BODY_TIMEOUT: (408, "the request body took too long"),
    HEADER_TIMEOUT: (408, "the request headers took too long"),
    INTERNAL_ERROR: (500, "the data plane failed to handle this request"),
    BODY_TOO_LARGE: (413, "the request body is too large for this route"),
    REDIRECT: (302, "redirected by the route"),
    CORS_PREFLIGHT: (200, "answered by the route's CORS filter"),
    MODULE: (403, "refused by a module of this route"),
    NOT_A_TUNNEL: (405, "this Service port is routed by HTTP routes: send requests, not CONNECT"),
    NO_SNI_MATCH: (404, "no TLSRoute of this Service port matches the TLS server name"),
    CONNECT_NOT_SERVED: (405, "CONNECT is not served over HTTP/2; tunnels are HTTP/1.1"),
    TOO_MANY_UPGRADES: (429, "too many upgraded connections (WebSockets) from this client"),
    UPGRADES_FULL: (503, "too many upgraded connections (WebSockets) open"),
    MISDIRECTED: (
        421,
        "this connection's TLS server name belongs to another listener than the Host",
    ),
}
"""Every reason: its usual status and the sentence a client gets (``docs/answers.md``)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Answer:
    """An answer the data plane makes itself instead of forwarding.

    ``detail`` says what exactly happened, naming objects (for logs and cluster clients);
    ``headers`` are extra response headers (a redirect's ``Location``).
    """

    status: int
    reason: str
    detail: str = ""
    headers: tuple[tuple[str, str], ...] = ()

    @property
    def sentence(self) -> str:
        """What any client may read: the reason's fixed sentence."""
        return REASONS[self.reason][1] if self.reason in REASONS else self.reason

    def body(self, *, with_detail: bool) -> str:
        """``<reason>: <sentence or detail>`` and a newline."""
        text = self.detail if with_detail and self.detail else self.sentence
        return f"{self.reason}: {text}\n"


def answer(reason: str, detail: str = "", *, status: int | None = None) -> Answer:
    """The :class:`Answer` for ``reason`` with its usual status (or ``status``)."""
    return Answer(
        status=REASONS[reason][0] if status is None else status, reason=reason, detail=detail
    )
