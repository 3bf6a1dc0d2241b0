"""``Host`` values normalized once (``interlock.edge.steps._edge_hosts``): a cached value routes
as ``normalize_host`` reads it (case, port, final dot), and a client sending new hosts cannot
grow the cache past its bound."""

from __future__ import annotations

from multidict import CIMultiDict

from interlock.dataplane.request_stream import H2Request
from interlock.edge import steps
from interlock.edge.steps import Admitted, Refusal, decide_now
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
    assert steps._edge_hosts[f"{HOST.upper()}.:8080"] == HOST


async def test_new_hosts_do_not_grow_the_cache_past_its_bound(harness: EdgeHarness) -> None:
    front = harness.server.front
    for n in range(steps._EDGE_HOSTS_SIZE + 50):
        assert isinstance(decide_now(front, _get(f"h{n}.example"), None), Refusal)
    assert isinstance(decide_now(front, _get("x" * 300), None), Refusal)
    assert len(steps._edge_hosts) <= steps._EDGE_HOSTS_SIZE
    assert all(len(host) <= steps._EDGE_HOST_LENGTH for host in steps._edge_hosts)
