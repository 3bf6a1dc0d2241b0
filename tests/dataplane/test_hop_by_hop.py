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


def test_names_seen_end_to_end_before_do_not_let_a_hop_by_hop_one_through() -> None:
    # The end-to-end names of earlier messages are remembered (checked once); a message that
    # also holds a hop-by-hop name, in any case, still loses it.
    seen = CIMultiDict([("Host", "a.example"), ("X-Seen", "1"), ("Te", "trailers")])
    for _ in range(2):
        assert sorted(without_hop_by_hop(seen)) == ["Host", "X-Seen"]
    for dropped in ("TE", "te", "Keep-Alive", "Upgrade", "Proxy-X", "PROXY-Connection"):
        headers = CIMultiDict([("Host", "a.example"), ("X-Seen", "1"), (dropped, "v")])
        assert sorted(without_hop_by_hop(headers)) == ["Host", "X-Seen"], dropped
    listed = CIMultiDict([("Host", "a.example"), ("X-Seen", "1"), ("Connection", "X-Seen")])
    assert list(without_hop_by_hop(listed)) == ["Host"]


def test_the_names_remembered_stay_within_their_bounds() -> None:
    from interlock.dataplane import proxy

    for batch in range(40):
        names = [f"X-Name-{batch}-{i}" for i in range(10)] + ["X-" + "a" * 100]
        headers = CIMultiDict([(name, "v") for name in names])
        assert list(without_hop_by_hop(headers)) == names
    assert len(proxy._CHECKED_NAMES) <= proxy._CHECKED_MOST
    assert all(len(name) <= proxy._CHECKED_LONGEST for name in proxy._CHECKED_NAMES)
