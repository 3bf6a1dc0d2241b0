"""A trace recorded from the real runtime: an external event fanning out, one handler failing."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from interlock.mailbox import Actor, ActorSystem, Tracer
from interlock.mailbox.testing import wait_idle


@dataclass(frozen=True)
class ServiceChanged:
    namespace: str
    name: str

    def trace_summary(self) -> str:
        return f"Service {self.namespace}/{self.name}"


@dataclass(frozen=True)
class Recompute:
    route: str


class Directory(Actor):
    async def receive(self, message: object) -> None:
        assert isinstance(message, ServiceChanged)
        self.tell("route/default/web", Recompute(route="default/web"))
        self.tell("route/default/api", Recompute(route="default/api"))


class Route(Actor):
    async def receive(self, message: object) -> None:
        if isinstance(message, Recompute) and message.route == "default/api":
            raise RuntimeError("boom")


async def record_trace(path: Path) -> None:
    tracer = Tracer.to_file(path)
    system = ActorSystem(tracer=tracer)
    system.spawn("services", Directory)
    system.spawn("route/default/web", Route)
    system.spawn("route/default/api", Route)
    system.tell("services", ServiceChanged("default", "db"), correlation_id="corr-one")
    await wait_idle(system)
    system.tell("services", ServiceChanged("default", "cache"), correlation_id="corr-two")
    await wait_idle(system)
    await system.shutdown(1.0)
    tracer.close()


@pytest.fixture
async def trace_file(tmp_path: Path) -> Path:
    path = tmp_path / "trace.jsonl"
    await record_trace(path)
    with path.open("a") as f:
        f.write("not json\n")
    return path


@pytest.fixture
def recorder():
    return record_trace
