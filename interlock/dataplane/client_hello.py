"""The server name (SNI) a TLS client asks for, read from its first record — pure.

A TLSRoute chooses its backends by the name a client puts in its ClientHello (RFC 6066 §3),
and the mesh listener must forward the connection without terminating TLS: it never holds the
backend's key, and the client verifies the backend's certificate end to end. So the listener
reads the client's first TLS record, finds the ``server_name`` extension in it, chooses the
route, and forwards that same record unchanged. This module is the reading half: bytes in, a
name (or why there is none) out, no I/O.

Only the first record is read (a ClientHello longer than one record, 16 KiB, is parsed as far as
it goes: its server name comes early, before the large key shares). A client that sends
anything else than a TLS handshake is :data:`NOT_TLS`.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

RECORD_HEADER: Final = 5
"""Content type (1), legacy version (2), length (2)."""
MAX_RECORD: Final = 16384 + 2048
"""The largest TLS record a peer may send (RFC 8446 §5.2: plaintext 2^14, plus expansion)."""

_HANDSHAKE: Final = 22
_CLIENT_HELLO: Final = 1
_SERVER_NAME: Final = 0
_HOST_NAME: Final = 0


@dataclass(frozen=True, slots=True)
class NotTls:
    """The bytes are not a TLS ClientHello; ``reason`` says what is wrong."""

    reason: str


NOT_TLS: Final = NotTls("the first bytes are not a TLS handshake record")


def record_length(header: bytes) -> int | NotTls:
    """The length of the whole first record (header included), from its first 5 bytes."""
    if len(header) < RECORD_HEADER or header[0] != _HANDSHAKE or header[1] != 3:
        return NOT_TLS
    length = int.from_bytes(header[3:5], "big")
    if not 0 < length <= MAX_RECORD:
        return NotTls(f"a TLS record of {length} bytes")
    return RECORD_HEADER + length


def server_name(record: bytes) -> str | NotTls | None:
    """The host name of the ``server_name`` extension of the ClientHello in ``record`` (a
    whole first record, :func:`record_length`), lower case without a final dot; None when
    the client sent none."""
    length = record_length(record[:RECORD_HEADER])
    if isinstance(length, NotTls):
        return length
    body = memoryview(record)[RECORD_HEADER:length]
    if len(body) < 4 or body[0] != _CLIENT_HELLO:
        return NotTls("the first handshake message is not a ClientHello")
    hello = body[4 : 4 + int.from_bytes(body[1:4], "big")]
    try:
        at = 2 + 32  # legacy_version, random
        at = _skip(hello, at, 1)  # legacy_session_id
        at = _skip(hello, at, 2)  # cipher_suites
        at = _skip(hello, at, 1)  # legacy_compression_methods
        if at == len(hello):
            return None  # no extensions at all
        end = min(len(hello), at + 2 + _number(hello, at, 2))
        at += 2
        while at + 4 <= end:
            kind, size = _number(hello, at, 2), _number(hello, at + 2, 2)
            if kind == _SERVER_NAME:
                return _host_name(hello[at + 4 : at + 4 + size])
            at += 4 + size
    except IndexError:
        pass  # cut short by the record's end: no server name seen
    return None


def _number(data: memoryview, at: int, size: int) -> int:
    if at + size > len(data):
        raise IndexError(at)
    return int.from_bytes(data[at : at + size], "big")


def _skip(data: memoryview, at: int, size: int) -> int:
    """The position after a vector whose length takes ``size`` bytes at ``at``."""
    return at + size + _number(data, at, size)


def _host_name(extension: memoryview) -> str | NotTls | None:
    # ServerNameList: a 2-byte length, then (name_type, 2-byte length, name) entries.
    at = 2
    while at + 3 <= len(extension):
        kind, size = extension[at], _number(extension, at + 1, 2)
        name = bytes(extension[at + 3 : at + 3 + size])
        if kind == _HOST_NAME:
            try:
                return name.decode("ascii").lower().removesuffix(".")
            except UnicodeDecodeError:
                return NotTls("the server name is not ASCII")
        at += 3 + size
    return None
