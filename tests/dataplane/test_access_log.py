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


def test_the_last_upstream_named_is_named_again_only_for_that_host_and_port() -> None:
    # upstream_text keeps the last address it named: the same host string and port only.
    host = "".join(["10.0.0.", "9"])  # a string of its own, as an endpoint's
    assert access_log.upstream_text(host, 81) == "10.0.0.9:81"
    assert access_log.upstream_text(host, 81) == "10.0.0.9:81"
    assert access_log.upstream_text(host, 82) == "10.0.0.9:82"  # that host, another port
    assert access_log.upstream_text("".join(["10.0.0.", "10"]), 82) == "10.0.0.10:82"
    assert access_log.upstream_text("".join(["fd00::", "9"]), 82) == "[fd00::9]:82"
    assert access_log.upstream_text(host, 82) == "10.0.0.9:82"  # an equal host named before
