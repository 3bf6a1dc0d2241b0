"""The access log's record of which upstream a request went to (``note_upstream``)."""

from __future__ import annotations

import contextvars

from interlock.dataplane import access_log
from interlock.dataplane.access_log import begin, note_upstream


def _named_upstreams() -> None:
    exchange = begin("edge", host="a.example", method="GET", path="/")
    for _ in range(2):  # the text of an address is kept for the next request
        note_upstream("10.0.0.7", 8080)
        assert exchange.upstream == "10.0.0.7:8080"
        note_upstream("fd00::7", 80)
        assert exchange.upstream == "[fd00::7]:80"


def _many_upstreams() -> None:
    exchange = begin("mesh", host="b.example", method="GET", path="/")
    for port in range(1, access_log._UPSTREAMS_MOST + 200):
        note_upstream("10.0.0.8", port)
        assert exchange.upstream == f"10.0.0.8:{port}"
    assert len(access_log._upstreams) <= access_log._UPSTREAMS_MOST


def test_the_upstream_is_named_host_colon_port_with_ipv6_in_brackets() -> None:
    # In a context of its own: the exchange begun here is no other test's current one.
    contextvars.copy_context().run(_named_upstreams)


def test_the_upstream_texts_kept_stay_within_their_bound() -> None:
    contextvars.copy_context().run(_many_upstreams)
