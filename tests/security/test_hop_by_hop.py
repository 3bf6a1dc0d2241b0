"""``Connection`` may name hop-by-hop headers, never the ``Host`` the edge routed."""

from __future__ import annotations

from .conftest import HOST, Edge, headers_seen, serve_host


async def test_connection_host_does_not_drop_the_host_header(
    edge: Edge, header_backend: tuple[str, int]
) -> None:
    await serve_host(edge, host=HOST, service="echo", address=header_backend)
    seen = await headers_seen(edge, "Connection: Host, X-Drop\r\nX-Drop: 1\r\n")
    assert seen["host"] == [HOST]
    assert "x-drop" not in seen  # what Connection lists is still dropped
