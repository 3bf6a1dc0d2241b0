"""Reading a request's ``Host`` and request-target as a backend will — pure functions, no I/O.

Every front door (the edge, the mesh listener) routes on what it reads here, and a backend acts
on what it reads itself: where the two readings differ, a request is matched to one route and
served as another (``/public/../admin`` matched as ``/public``, served as ``/admin``, past the
modules of the ``/admin`` route). So the host and path are read once, here, the way the
strictest backend would, and a request-target that backends read differently is refused
(``docs/modules.md``, "Which path a request names").
"""

from __future__ import annotations

import re
from typing import Final
from urllib.parse import unquote


def normalize_host(value: str) -> str:
    """The edge key of a ``Host`` header or an Ingress host: lower case, no port, no final dot.

    ``Example.COM:8080`` → ``example.com``; ``[::1]:80`` → ``[::1]``.
    """
    host = value.strip().lower()
    if host.startswith("["):
        end = host.find("]")
        if end != -1:
            return host[: end + 1]
    elif host.count(":") == 1:
        host = host.split(":", 1)[0]
    return host.rstrip(".")


AMBIGUOUS_ENCODINGS = ("%2f", "%5c", "%00", "%23", "%3f", "%25", "%3b")
"""Percent-encoded bytes in a path that backends read differently: a slash or backslash that
one server decodes into a separator and another does not, NUL, ``#`` and ``?`` that a server
decoding before splitting reads as a fragment or a query, ``%`` itself (decoded twice, ``%252F``
becomes a slash) and ``;`` (a path parameter to Tomcat). The edge cannot know which reading its
backend applies, so it refuses them (the list Traefik refuses by default)."""

_AMBIGUOUS_RAW: Final = re.compile(r"[\\#\x00-\x20\x7f]")
"""Raw characters with the same problem: a backslash is a separator to WHATWG URL parsers
(Node, browsers) and to IIS; a ``#`` starts a fragment that gunicorn, werkzeug and Express drop
from the path (a request-target never carries one, RFC 9112 §3.2); controls and spaces are
never valid in a request-target."""


def clean_path(raw_path: str) -> tuple[str, str]:
    """``(path to route on, path to forward)`` for a raw request path (no query string).

    The edge routes on the path the backend will act on, or refuses the request (the server
    answers 400) when backends disagree on what it names — see ``docs/modules.md``, "Which path
    a request names":

    * a path that is not absolute is refused;
    * ambiguous bytes are refused: :data:`AMBIGUOUS_ENCODINGS` and :data:`_AMBIGUOUS_RAW`;
    * dot segments are removed (RFC 3986 §5.2.4, percent-encoded dots included) before routing
      and from what is forwarded: otherwise ``/public/../admin`` would be matched as ``/public``
      here and served as ``/admin`` by the upstream, past the modules of the ``/admin`` route;
      a dot segment with path parameters (``..;x``, which Tomcat reads as ``..``) is refused;
    * repeated slashes are merged (as nginx does), so ``//host/x`` never reads as a host;
    * the routing path is percent-decoded (``%61dmin`` is ``admin``); what is forwarded keeps
      the client's encoding.
    """
    if not raw_path.startswith("/"):
        raise ValueError(f"request path {raw_path[:100]!r} must start with '/'")
    if "%" in raw_path:
        lowered = raw_path.lower()
        for encoded in AMBIGUOUS_ENCODINGS:
            if encoded in lowered:
                raise ValueError(
                    f"request path {raw_path[:100]!r}: {encoded.upper()} is ambiguous "
                    "(backends decode it differently)"
                )
    found = _AMBIGUOUS_RAW.search(raw_path)
    if found is not None:
        raise ValueError(
            f"request path {raw_path[:100]!r}: {found.group()!r} is ambiguous "
            "(backends read it differently)"
        )
    if "%" not in raw_path and "/." not in raw_path and "//" not in raw_path:
        return raw_path, raw_path  # the common case: nothing to decode or remove
    parts = raw_path.split("/")[1:]
    kept: list[str] = []
    for index, segment in enumerate(parts):
        decoded = unquote(segment)
        if segment == "" and index < len(parts) - 1:
            continue
        if decoded.split(";", 1)[0] in (".", "..") and ";" in decoded:
            raise ValueError(f"request path {raw_path[:100]!r} hides a dot segment")
        if decoded in (".", ".."):
            if decoded == ".." and kept:
                kept.pop()
            if index == len(parts) - 1:
                kept.append("")
            continue
        kept.append(segment)
    forward = "/" + "/".join(kept)
    return unquote(forward), forward


_SPLIT_MOST: Final = 256
"""Most request-targets :data:`_split` keeps (emptied when full); :data:`_SPLIT_LENGTH` the
longest one kept."""
_SPLIT_LENGTH: Final = 512

_split: Final[dict[str, tuple[str, str, str]]] = {}
"""A request-target as sent -> what :func:`split_target` answered for it: the same few targets
come on every request of a connection and across them, and reading one again was seven
searches, a partition and a method call (~1,700 instructions a request, compiled). Keyed by the
exact target, so a target reads as it did; only answers are kept, so a refused target is read,
and refused, every time; only targets without a query (tokens travel there: it is kept nowhere,
as the access log leaves it out); bounded in count (emptied when full: a client sending new
paths pays the reading as before) and length."""


def split_target(target: str) -> tuple[str, str, str]:
    """A request-target ``/path?query`` → (the path to route on, the path to forward, the raw
    query); ValueError, as :func:`clean_path`, when it is ambiguous or carries a fragment."""
    found = _split.get(target)
    if found is not None:
        return found
    split = _read_target(target)
    if not split[2] and len(target) <= _SPLIT_LENGTH:
        if len(_split) >= _SPLIT_MOST:
            _split.clear()
        _split[target] = split
    return split


def _read_target(target: str) -> tuple[str, str, str]:
    """:func:`split_target`'s answer, read (not looked up)."""
    raw_path, _, query = target.partition("?")
    if "#" in query:
        raise ValueError("a request-target never carries a #fragment")
    if (
        raw_path[:1] == "/"
        and "%" not in raw_path
        and "/." not in raw_path
        and "//" not in raw_path
        and (
            # What _AMBIGUOUS_RAW looks for cannot be in a printable path without a space, a
            # backslash or a #: three look-ups and a method, cheaper than the search's call.
            # Any other path is searched.
            (
                raw_path.isprintable()
                and " " not in raw_path
                and "\\" not in raw_path
                and "#" not in raw_path
            )
            or _AMBIGUOUS_RAW.search(raw_path) is None
        )
    ):
        # clean_path's common case (nothing to refuse, decode or remove), without its call:
        # what it answers for such a path (tests/edge/test_routing.py holds them
        # to it).
        return raw_path, raw_path, query
    path, forward_path = clean_path(raw_path)
    return path, forward_path, query
