"""statistics().reconciles: the same totals by what the actors keep up to date
(``Actor.reconciles``), across address prefixes, beside the per-prefix kinds."""

from __future__ import annotations

from interlock.mailbox import Actor, ActorSystem
from interlock.mailbox.testing import wait_idle


class Route(Actor):
    def __init__(self, kind: str) -> None:
        self.reconciles = kind

    async def receive(self, message: object) -> None:
        if message == "bad":
            raise ValueError("bad")


class Plain(Actor):
    async def receive(self, message: object) -> None:
        return None


async def test_reconciles_split_one_prefix_by_kind_and_keep_the_prefix_totals() -> None:
    system = ActorSystem()
    system.spawn("route/http/a", lambda: Route("HTTPRoute"))
    system.spawn("route/http/b", lambda: Route("HTTPRoute"))
    system.spawn("route/grpc/a", lambda: Route("GRPCRoute"))
    system.spawn("plain", Plain)
    for address in ("route/http/a", "route/http/b", "route/grpc/a", "plain"):
        system.tell(address, "ok")
    system.tell("route/grpc/a", "bad")
    await wait_idle(system)

    stats = system.statistics()
    assert set(stats.reconciles) == {"HTTPRoute", "GRPCRoute"}
    http, grpc = stats.reconciles["HTTPRoute"], stats.reconciles["GRPCRoute"]
    assert (http.actors, http.processed, http.failed) == (2, 2, 0)
    assert (grpc.actors, grpc.processed, grpc.failed, grpc.restarts) == (1, 1, 1, 1)
    assert sum(http.handling_buckets) == 2
    route = stats.kinds["route"]
    assert (route.actors, route.processed, route.failed) == (3, 3, 1)
    assert sum(route.handling_buckets) == 4
    assert stats.kinds["plain"].processed == 1
    await system.shutdown()
