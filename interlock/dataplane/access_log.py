"""One record per request through either front door: the access log line and its metrics.

An operator asking "what happened to this request" needs the host it named, the route that
took it, the status and size of the answer, how long it took, which upstream answered and how
often it was retried — the fields ingress controllers' access logs have. Each front door
creates an :class:`Exchange` when a request arrives and finishes it when the answer is written;
the engine notes the upstream and the retries on the exchange of the request it is working for
(:func:`note_upstream`, :func:`note_retry`, through a context variable, so no signature between
the front doors and the engine changes).

The log is off by default (``--access-log``): a line per request is too much for some
clusters. When on, each line is a JSON object logged through the project's logger (logger
``access``), so ``--log-format json`` nests it in the usual envelope and ``text`` shows it as is.
What a line never holds: any header value (``Authorization``, ``Cookie`` and the rest may carry
credentials) and the query string (tokens travel there too) — the path only.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Final, Literal

from interlock.logs import module_logger

# Not loguru's logger itself: this module is compiled (interlock.logs.module_logger).
logger = module_logger(__name__)

Front = Literal["edge", "mesh"]

REASON_HEADER = "X-Interlock-Reason"
"""Where an answer the data plane made itself names its reason (``docs/answers.md``)."""

_current: ContextVar[Exchange | None] = ContextVar("interlock_exchange", default=None)


@dataclass(slots=True)
class Exchange:
    """What is known of one request, filled in as it goes through the data plane."""

    front: Front
    host: str
    """The authority the client named (``Host``, or an absolute-form target's)."""
    method: str
    path: str
    started: float
    target: str = ""
    """What the request was for: the edge's host, or the mesh's ``namespace/service:port``."""
    route: str = ""
    """The route that took it (the edge's route id, the mesh policy's route), if any."""
    upstream: str = ""
    """The last upstream address tried (``host:port``)."""
    retries: int = 0
    status: int = 0
    bytes: int = 0
    received: int = 0
    """Bytes from the client through a tunnel (a ``CONNECT``); 0 for requests."""
    tunnel: bool = False
    """A mesh ``CONNECT`` (counted in the tunnel metrics, not the request latency's)."""
    duration: float = 0.0
    reason: str = ""
    """The data plane's reason when it answered itself (``X-Interlock-Reason``), else ''."""

    # The dataclass's __init__ written out (the decorator keeps it): compiled (setup.py), a
    # dataclass's generated methods stay interpreted, and one is made per request.
    def __init__(
        self,
        front: Front,
        host: str,
        method: str,
        path: str,
        started: float,
        target: str = "",
        route: str = "",
        upstream: str = "",
        retries: int = 0,
        status: int = 0,
        bytes: int = 0,
        received: int = 0,
        tunnel: bool = False,
        duration: float = 0.0,
        reason: str = "",
    ) -> None:
        self.front = front
        self.host = host
        self.method = method
        self.path = path
        self.started = started
        self.target = target
        self.route = route
        self.upstream = upstream
        self.retries = retries
        self.status = status
        self.bytes = bytes
        self.received = received
        self.tunnel = tunnel
        self.duration = duration
        self.reason = reason

    def to_json(self) -> dict[str, object]:
        return {
            "front": self.front,
            "host": self.host,
            "target": self.target,
            "route": self.route,
            "method": self.method,
            "path": self.path,
            "status": self.status,
            "bytes": self.bytes,
            "bytesReceived": self.received,
            "durationMs": round(self.duration * 1000, 3),
            "upstream": self.upstream,
            "retries": self.retries,
            "reason": self.reason,
        }


def begin(
    front: Front, *, host: str, method: str, path: str, clock: Callable[[], float] = time.monotonic
) -> Exchange:
    """A new exchange, current for the rest of this request's task."""
    # Positional (front, host, method, path, started): keywords to a class cost a dict each.
    exchange = Exchange(front, host[:256], method[:16], path[:2048], clock())
    _current.set(exchange)
    return exchange


resume = _current.set
"""Make an exchange current again, in the task that goes on with its request: one the express
path began without a task (``Exchange`` made as :func:`begin` makes it, not made current: the
callbacks' context is not the request's). The context variable's own ``set``: no Python call."""


def current() -> Exchange | None:
    """The exchange of the request being handled in this task, if any."""
    return _current.get()


_UPSTREAMS_MOST: Final = 1024
_upstreams: Final[dict[tuple[str, int], str]] = {}
"""An upstream address -> its text in the log: the same few addresses take every request.
Bounded (past it an address is formatted per request, as before): addresses come from
endpoints and the edge's configuration, not from clients, but endpoints change over time."""


def note_upstream(host: str, port: int) -> None:
    """The engine is sending the current request to ``host:port``."""
    exchange = _current.get()
    if exchange is not None:
        exchange.upstream = upstream_text(host, port)


class _LastUpstream:
    """The address :func:`upstream_text` named last (its host, that very string), and its
    text (:data:`_last_upstream`)."""

    __slots__ = ("host", "port", "text")

    def __init__(self) -> None:
        self.host = ""
        self.port = -1  # no address's
        self.text = ""


_last_upstream: Final = _LastUpstream()
"""Looked at before :data:`_upstreams`: most requests go where the last one went, and the same
host string (an endpoint's, kept by the resolver) and port cost a pointer and an int compared,
where a look-up made a tuple of them and hashed it (~700 instructions a request, compiled)."""


def upstream_text(host: str, port: int) -> str:
    """How the access log names the upstream ``host:port``."""
    last = _last_upstream
    if host is last.host and port == last.port:
        return last.text
    text = _upstreams.get((host, port))
    if text is None:
        port_text = str(port)  # not formatted in the f-string: int.__format__ costs more
        text = f"[{host}]:{port_text}" if ":" in host else f"{host}:{port_text}"
        if len(_upstreams) < _UPSTREAMS_MOST:
            _upstreams[(host, port)] = text
    last.host, last.port, last.text = host, port, text
    return text


def note_retry() -> None:
    """The engine is sending the current request again."""
    exchange = _current.get()
    if exchange is not None:
        exchange.retries += 1


def log_line(exchange: Exchange, *, worker: int | None = None) -> None:
    """Write ``exchange`` as one JSON line through the project's logger; ``worker``: the edge
    worker that served it (``"worker": N``, from 1), None: the only data plane (no field)."""
    entry = exchange.to_json()
    if worker is not None:
        entry["worker"] = worker
    logger.bind(logger="access").info(json.dumps(entry, ensure_ascii=False, separators=(",", ":")))
