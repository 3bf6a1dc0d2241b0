"""``without_hop_by_hop`` drops every ``Proxy-*`` header, listed or not, in any case, whether or
not the message has a ``Connection`` header (its two paths), and keeps names that only start
like one."""

from __future__ import annotations

import pytest
from multidict import CIMultiDict

from interlock.dataplane.proxy import without_hop_by_hop


@pytest.mark.parametrize("connection", [None, "close", "X-Listed"])
def test_every_proxy_header_is_dropped(connection: str | None) -> None:
    headers = CIMultiDict(
        [
            ("Host", "a.example"),
            ("PROXY-Custom", "1"),
            ("proxy-status", "2"),
            ("Proxy-Authorization", "Basic Zm9vOmJhcg=="),
            ("Proxyish", "kept"),
            ("X-Proxy-Name", "kept"),
            ("X-Listed", "gone" if connection == "X-Listed" else "kept"),
        ]
    )
    if connection is not None:
        headers["Connection"] = connection
    kept = without_hop_by_hop(headers)
    assert sorted(kept.items()) == sorted(
        [("Host", "a.example"), ("Proxyish", "kept"), ("X-Proxy-Name", "kept")]
        + ([] if connection == "X-Listed" else [("X-Listed", "kept")])
    )
