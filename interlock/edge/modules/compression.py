"""compression: the policy for when the server gzips a response.

The server does the gzipping (it owns the streams); this module decides *whether*, so the policy
is one documented, tested function: the client must accept gzip (``Accept-Encoding`` with a
non-zero q-value for ``gzip`` or ``*``), the response must not already be encoded, must not forbid
transformation (``Cache-Control: no-transform``), must be of a compressible type, and — when its
length is known — at least :data:`MIN_SIZE` bytes (smaller bodies grow or gain nothing).
"""

from __future__ import annotations

from collections.abc import Mapping

MIN_SIZE = 1024
"""Bodies with a known length below this many bytes are sent as they are."""

COMPRESSIBLE_TYPES = frozenset(
    {
        "application/javascript",
        "application/json",
        "application/ld+json",
        "application/manifest+json",
        "application/problem+json",
        "application/x-javascript",
        "application/x-ndjson",
        "application/xhtml+xml",
        "application/xml",
        "image/svg+xml",
    }
)
"""Media types compressed besides every ``text/*`` and any ``+json`` / ``+xml`` suffix."""


def accepts_gzip(accept_encoding: str | None) -> bool:
    """Whether an ``Accept-Encoding`` value allows gzip (RFC 9110 §12.5.3, q-values honoured)."""
    if not accept_encoding:
        return False
    gzip_q: float | None = None
    star_q: float | None = None
    for item in accept_encoding.split(","):
        coding, _, params = item.strip().partition(";")
        quality = _quality(params)
        name = coding.strip().lower()
        if name in ("gzip", "x-gzip"):
            gzip_q = quality
        elif name == "*":
            star_q = quality
    if gzip_q is not None:
        return gzip_q > 0
    return star_q is not None and star_q > 0


def _quality(params: str) -> float:
    for param in params.split(";"):
        key, _, value = param.strip().partition("=")
        if key.strip().lower() == "q":
            try:
                return float(value.strip())
            except ValueError:
                return 0.0
    return 1.0


def is_compressible_type(content_type: str | None) -> bool:
    if not content_type:
        return False
    media = content_type.split(";", 1)[0].strip().lower()
    return (
        media.startswith("text/")
        or media in COMPRESSIBLE_TYPES
        or media.endswith("+json")
        or media.endswith("+xml")
    )


def should_compress(
    request_headers: Mapping[str, str], response_headers: Mapping[str, str]
) -> bool:
    """Whether the server should gzip this response (headers must be case-insensitive)."""
    if not accepts_gzip(request_headers.get("Accept-Encoding")):
        return False
    encoding = response_headers.get("Content-Encoding", "").strip().lower()
    if encoding not in ("", "identity"):
        return False
    if "no-transform" in response_headers.get("Cache-Control", "").lower():
        return False
    if not is_compressible_type(response_headers.get("Content-Type")):
        return False
    length = response_headers.get("Content-Length")
    if length is not None:
        try:
            return int(length) >= MIN_SIZE
        except ValueError:
            return False
    return True
