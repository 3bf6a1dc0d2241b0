"""``Host`` values normalized once (``interlock.edge.steps._edge_hosts``): a cached value routes
as ``normalize_host`` reads it (case, port, final dot), its log prefix and ``X-Forwarded-*``
lines kept there are the ones made anew, and a client sending new hosts cannot grow the cache
past its bound."""

from __future__ import annotations

import dataclasses

from multidict import CIMultiDict

from interlock.dataplane.http1 import request_head
from interlock.dataplane.plan import known_head
from interlock.dataplane.request_stream import H2Request
from interlock.edge import steps
from interlock.edge.steps import Admitted, EdgeFront, Refusal, decide_now
from tests.kit.http1_parsing import parsed_requests
from tests.kit.request_bodies import EMPTY

from .conftest import HOST, EdgeHarness


def _get(host: str) -> H2Request:
    return H2Request("GET", "http", host, "/", CIMultiDict(Host=host), "1.2.3.4", EMPTY)


async def test_a_cached_host_routes_as_it_did(harness: EdgeHarness) -> None:
    await harness.serve()
    front = harness.server.front
    for host in (HOST, f"{HOST.upper()}.:8080", f"{HOST.upper()}.:8080", "other.example"):
        first = decide_now(front, _get(host), None)
        again = decide_now(front, _get(host), None)
        assert type(first) is type(again)
        assert isinstance(first, Refusal if host == "other.example" else Admitted), host
    assert steps._edge_hosts[f"{HOST.upper()}.:8080"].edge_host == HOST


def _where(front: EdgeFront, request: H2Request) -> str:
    decided = decide_now(front, request, None)
    assert isinstance(decided, Admitted)
    return decided.where


async def test_a_kept_log_prefix_names_the_host_as_sent_and_the_wire(harness: EdgeHarness) -> None:
    await harness.serve()
    front = harness.server.front
    for host in (HOST, f"{HOST.upper()}:8080"):
        for version, suffix in (("1.1", ""), ("2", " (HTTP/2)"), ("1.1", "")):
            request = dataclasses.replace(_get(host), version=version)
            assert _where(front, request) == f"edge {host} route root{suffix}"
    assert steps._edge_hosts[HOST].wheres["root"] == f"edge {HOST} route root"


async def test_kept_forwarded_lines_name_each_peer_and_scheme(harness: EdgeHarness) -> None:
    """The lines kept for one peer and scheme are not another's (the head sent as received)."""
    await harness.serve()
    front = harness.server.front
    data = f"GET / HTTP/1.1\r\nHost: {HOST}\r\n\r\n".encode()
    for peer, scheme in [("10.0.0.1", "http"), ("10.0.0.2", "http"), ("10.0.0.1", "https")] * 2:
        (parsed,) = await parsed_requests(data)
        request = dataclasses.replace(parsed, peer=peer, scheme=scheme)
        decided = decide_now(front, request, None)
        assert isinstance(decided, Admitted)
        assert known_head(decided.headers, "GET", "/") is not None
        sent, _ = request_head("GET", "/", decided.headers, None, ("10.0.0.7", 80))
        assert sent.endswith(
            f"X-Forwarded-For: {peer}\r\nX-Forwarded-Proto: {scheme}\r\n"
            f"X-Forwarded-Host: {HOST}\r\n\r\n".encode()
        )
    seen = steps._edge_hosts[HOST]
    for peer, scheme in [("10.0.0.1", "http"), ("10.0.0.2", "http"), ("10.0.0.1", "https")]:
        kept = seen.http if scheme == "http" else seen.https
        assert kept[peer].startswith(f"X-Forwarded-For: {peer}\r\n".encode())


async def test_new_hosts_do_not_grow_the_cache_past_its_bound(harness: EdgeHarness) -> None:
    front = harness.server.front
    for n in range(steps._EDGE_HOSTS_SIZE + 50):
        assert isinstance(decide_now(front, _get(f"h{n}.example"), None), Refusal)
    assert isinstance(decide_now(front, _get("x" * 300), None), Refusal)
    assert len(steps._edge_hosts) <= steps._EDGE_HOSTS_SIZE
    assert all(len(host) <= steps._EDGE_HOST_LENGTH for host in steps._edge_hosts)
