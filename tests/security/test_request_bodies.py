"""Request bodies reach the backend byte for byte, whatever their Content-Encoding.

The edge must not decode a request body: decoded and forwarded with the client's
``Content-Encoding`` and ``Content-Length`` it arrived corrupted or truncated, an undecodable
body hung the request, and a gzip bomb was inflated toward the backend.
"""

from __future__ import annotations

import gzip
import hashlib
import os

import pytest

from tests.kit.raw_http1 import send_raw

from .conftest import BodyBackend, Edge, json_body, serve_host

HOST = "upload.example.com"


def _post(body: bytes, *, encoding: str | None, chunked: bool = False) -> bytes:
    lines = ["POST /upload HTTP/1.1", f"Host: {HOST}", "Connection: close"]
    if encoding is not None:
        lines.append(f"Content-Encoding: {encoding}")
    if chunked:
        lines.append("Transfer-Encoding: chunked")
        payload = f"{len(body):x}\r\n".encode() + body + b"\r\n0\r\n\r\n"
    else:
        lines.append(f"Content-Length: {len(body)}")
        payload = body
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + payload


@pytest.mark.parametrize(
    ("name", "body", "encoding"),
    [
        ("gzip upload", gzip.compress(b"a file worth compressing " * 4000), "gzip"),
        ("undecodable body labelled gzip", os.urandom(200_000), "gzip"),
        ("gzip bomb", gzip.compress(b"\0" * 20_000_000), "gzip"),
        ("deflate upload", b"x\x9c" + os.urandom(1000), "deflate"),
        ("plain body", os.urandom(100_000), None),
    ],
)
@pytest.mark.parametrize("chunked", [False, True])
async def test_request_bodies_are_forwarded_byte_for_byte(
    edge: Edge,
    body_backend: BodyBackend,
    name: str,
    body: bytes,
    encoding: str | None,
    chunked: bool,
) -> None:
    await serve_host(edge, host=HOST, service="upload", address=body_backend.address)
    answer = await send_raw(edge.address, _post(body, encoding=encoding, chunked=chunked))
    assert answer.status == 200, (name, answer.status, answer.body[:200])
    seen = json_body(answer)
    assert seen == {
        "size": len(body),
        "sha256": hashlib.sha256(body).hexdigest(),
        "encoding": encoding,
    }, name
