"""The HTTP server's own logging goes through interlock's logger, at a level the
``--log-level`` flag controls, without header values (an oversized session cookie used to land
in an ERROR traceback on stderr, whatever the flag said)."""

from __future__ import annotations

import contextlib
import io
from collections.abc import Iterator

import pytest
from loguru import logger

from tests.kit.raw_http1 import send_raw

from .conftest import HOST, Edge, serve_host


@contextlib.contextmanager
def loguru_at(level: str) -> Iterator[io.StringIO]:
    """What interlock's logger writes at ``level`` and above, as ``--log-level`` would set."""
    out = io.StringIO()
    sink = logger.add(out, level=level, format="{level} {name} {message}")
    try:
        yield out
    finally:
        logger.remove(sink)


SECRET_COOKIE = "session=" + "s3cr3t-cookie-value-" * 600


@pytest.mark.parametrize(
    "request_bytes",
    [
        f"GET / HTTP/1.1\r\nHost: {HOST}\r\nCookie: {SECRET_COOKIE}\r\n\r\n".encode(),
        f"GET / HTTP/1.1\r\nHost: {HOST}\r\nX-Bad\x01: s3cr3t-cookie-value\r\n\r\n".encode(),
        b"NOT HTTP AT ALL s3cr3t-cookie-value\r\n\r\n",
    ],
    ids=["oversized header", "bad header name", "garbage"],
)
async def test_malformed_requests_log_through_interlock_without_header_values(
    edge: Edge,
    header_backend: tuple[str, int],
    capfd: pytest.CaptureFixture[str],
    request_bytes: bytes,
) -> None:
    await serve_host(edge, host=HOST, service="echo", address=header_backend)
    with loguru_at("DEBUG") as debug:
        answer = await send_raw(edge.address, request_bytes)
    assert 400 <= answer.status < 500
    _, stderr = capfd.readouterr()
    assert "Traceback" not in stderr and "Error handling request" not in stderr, stderr[-2000:]
    assert "s3cr3t-cookie-value" not in stderr
    logged = debug.getvalue()
    assert "s3cr3t-cookie-value" not in logged
    assert "interlock.dataplane.http1_server" in logged  # through interlock's logger, at DEBUG
    with loguru_at("INFO") as info:
        await send_raw(edge.address, request_bytes)
    assert "malformed" not in info.getvalue()  # --log-level INFO: not shown
