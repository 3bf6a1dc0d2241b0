"""The message trace: correlation and causation chains, the format, and redaction."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

from loguru import logger
from pydantic import BaseModel, Field

from interlock.mailbox import Actor, ActorSystem, Published, Tracer, summarize
from interlock.mailbox.testing import ManualSleep, capture_trace, wait_idle
from interlock.model.moduleset import Secret

RFC3339_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


class Relay(Actor):
    """Forwards every message to ``target`` (if any) and publishes it."""

    def __init__(self, target: str | None) -> None:
        self.target = target

    async def receive(self, message: object) -> None:
        if self.target is not None:
            self.tell(self.target, message)
        else:
            self.publish("out", "k", message)


async def test_a_chain_shares_the_correlation_and_names_each_cause() -> None:
    with capture_trace() as trace:
        system = ActorSystem(tracer=trace.tracer)
        system.spawn("a", lambda: Relay("b"))
        system.spawn("b", lambda: Relay(None))
        system.spawn("watcher", lambda: Relay("sink"))
        system.spawn("sink", lambda: Relay("nowhere"))
        system.subscribe("out", "watcher")
        system.tell("a", "event-1", correlation_id="informer:Service default/web rv=7")
        await wait_idle(system)
        await system.shutdown()
    delivered = trace.events("deliver", correlation_id="informer:Service default/web rv=7")
    hops = [(r["sender"], r["recipient"]) for r in delivered]
    assert hops == [("external", "a"), ("a", "b"), ("b", "watcher"), ("watcher", "sink")]
    by_recipient = {r["recipient"]: r for r in delivered}
    assert by_recipient["a"]["causation_id"] is None
    assert by_recipient["b"]["causation_id"] == by_recipient["a"]["id"]
    assert by_recipient["watcher"]["causation_id"] == by_recipient["b"]["id"]
    assert by_recipient["sink"]["causation_id"] == by_recipient["watcher"]["id"]
    assert by_recipient["watcher"]["type"] == "Published"
    # the last hop's tell went to an unknown address: a dead letter in the same chain
    (dead,) = trace.events("dead_letter")
    assert (dead["recipient"], dead["reason"]) == ("nowhere", "unknown")
    assert dead["correlation_id"] == "informer:Service default/web rv=7"
    handled = trace.events("handled", recipient="b")
    assert handled[0]["duration_ms"] >= 0 and handled[0]["depth"] == 0


async def test_a_new_correlation_starts_at_its_first_message(system: ActorSystem) -> None:
    with capture_trace(system) as trace:
        system.spawn("a", lambda: Relay(None))
        system.tell("a", "x")
        await wait_idle(system)
    (deliver,) = trace.events("deliver")
    assert deliver["correlation_id"] == deliver["id"]
    assert deliver["sender"] == "external"


async def test_every_record_has_the_common_fields(system: ActorSystem) -> None:
    class Failing(Actor):
        async def receive(self, message: object) -> None:
            raise ValueError("no good")

    with capture_trace(system) as trace:
        system.spawn("f", Failing)
        system.tell("f", "x")
        await wait_idle(system)
        system.stop("f")
    events = {r["event"] for r in trace.records}
    assert {"spawned", "deliver", "failed", "restart", "stopped"} <= events
    for record in trace.records:
        assert RFC3339_UTC.match(record["ts"]), record
        for name in (
            "event",
            "id",
            "correlation_id",
            "causation_id",
            "sender",
            "recipient",
            "type",
            "summary",
        ):
            assert name in record, (name, record)
    (failed,) = trace.events("failed")
    assert (failed["error_type"], failed["error"]) == ("ValueError", "no good")


@dataclass(frozen=True)
class Credentials:
    __trace_redact__ = frozenset({"password"})
    user: str
    password: str
    token: str = field(default="tok-SECRET-3", repr=False)


class SecretModel(BaseModel):
    name: str
    data: dict[str, str] = Field(repr=False)


class OpaqueSecret:
    def __repr__(self) -> str:
        return "OpaqueSecret(SECRET-5)"


@dataclass(frozen=True)
class Envelope:
    creds: Credentials
    model: SecretModel
    blob: bytes
    opaque: OpaqueSecret


async def test_redacted_fields_never_reach_the_trace(tmp_path: Path) -> None:
    path = tmp_path / "trace.jsonl"
    tracer = Tracer.to_file(path)
    message = Envelope(
        creds=Credentials(user="alice", password="pw-SECRET-1"),
        model=SecretModel(name="users", data={"htpasswd": "SECRET-2"}),
        blob=b"SECRET-4",
        opaque=OpaqueSecret(),
    )

    class Fails(Actor):
        async def receive(self, message: object) -> None:
            raise RuntimeError("failed")

    system = ActorSystem(tracer=tracer, sleep=ManualSleep())
    system.spawn("sink", Fails)
    system.tell("sink", message)
    system.publish("secrets", "users", message)
    system.subscribe("secrets", "sink")
    await wait_idle(system)
    await system.shutdown()
    tracer.close()
    text = path.read_text()
    lines = [json.loads(line) for line in text.splitlines()]
    assert {r["event"] for r in lines} >= {"deliver", "failed", "restart"}
    assert "SECRET" not in text
    assert "alice" in text  # the summary still says what the message was about


def test_summaries_are_short_and_name_the_type() -> None:
    assert summarize(Published("t", "k", 5)) == "Published(topic='t', key='k', value=5)"
    long = summarize({"x": "y" * 1000, "list": list(range(1000))})
    assert len(long) <= 200
    assert summarize(b"raw") == "<bytes>"

    class Custom:
        def trace_summary(self) -> str:
            return "custom!"

    assert summarize(Custom()) == "custom!"


@dataclass(frozen=True)
class Snapshot:
    name: str
    version: int

    @property
    def coalesce_key(self) -> str:
        return self.name


async def test_a_coalesced_delivery_names_the_message_it_replaced(system: ActorSystem) -> None:
    class Blocked(Actor):
        async def receive(self, message: object) -> None:
            return None

    with capture_trace(system) as trace:
        system.spawn("s", Blocked)
        system.tell("s", Snapshot("a", 1))
        system.tell("s", Snapshot("a", 2))
        await wait_idle(system)
    first, second = trace.events("deliver")
    assert second["coalesced"] == first["id"]
    (handled,) = trace.events("handled", type="Snapshot")
    assert handled["id"] == second["id"]
    assert "version=2" in handled["summary"]


async def test_spawn_and_started_sends_belong_to_the_spawning_chain(system: ActorSystem) -> None:
    class Child(Actor):
        async def started(self) -> None:
            self.tell("log", "child ready")

        async def receive(self, message: object) -> None:
            return None

    class Parent(Actor):
        async def receive(self, message: object) -> None:
            self.system.spawn("child", Child)

    with capture_trace(system) as trace:
        system.spawn("log", lambda: Relay(None))
        system.spawn("parent", Parent)
        system.tell("parent", "make a child", correlation_id="request-1")
        await wait_idle(system)
    (order,) = trace.events("deliver", recipient="parent")
    (spawned,) = trace.events("spawned", recipient="child")
    assert spawned["causation_id"] == order["id"]
    assert spawned["correlation_id"] == "request-1"
    (ready,) = trace.events("deliver", recipient="log")
    assert (ready["sender"], ready["causation_id"]) == ("child", spawned["id"])
    assert ready["correlation_id"] == "request-1"


async def test_tracing_can_be_turned_off_while_running(system: ActorSystem) -> None:
    with capture_trace(system) as trace:
        system.spawn("a", lambda: Relay(None))
        system.set_tracer(None)
        system.tell("a", "x")
        await wait_idle(system)
    assert [r["event"] for r in trace.records] == ["spawned"]


def test_a_stream_tracer_writes_complete_lines_by_close(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with path.open("w") as stream:
        tracer = Tracer.to_stream(stream)
        tracer.stopped("route/a", reason="requested", actor_type="Route")
        tracer.close()
        record = json.loads(path.read_text())
    assert record["event"] == "stopped" and record["recipient"] == "route/a"


async def test_a_trace_that_cannot_be_written_does_not_fail_the_sender(tmp_path: Path) -> None:
    tracer = Tracer.to_file(tmp_path / "t.jsonl")
    tracer.close()  # every later write fails
    system = ActorSystem(tracer=tracer)
    system.spawn("a", lambda: Relay(None))
    system.tell("a", "still delivered")
    await wait_idle(system)
    assert system.retained("out") == {"k": "still delivered"}
    await system.shutdown()


async def test_the_controllers_secret_model_never_reaches_the_trace(system: ActorSystem) -> None:
    secret = Secret.model_validate(
        {
            "metadata": {"name": "users", "namespace": "default"},
            "data": {"htpasswd": "c2VjcmV0LWJhc2U2NA=="},
            "stringData": {"token": "plain-SECRET"},
        }
    )
    with capture_trace(system) as trace:
        system.spawn("edge/example.com", lambda: Relay(None))
        system.subscribe("secret:default/users", "edge/example.com")
        system.publish("secret:default/users", "users", secret)
        system.tell("edge/example.com", secret)
        await wait_idle(system)
    text = trace.text()
    assert "c2VjcmV0LWJhc2U2NA" not in text and "SECRET" not in text
    (published,) = trace.events("deliver", type="Published")
    assert "Secret(metadata=ObjectMeta(name='users', namespace='default'" in published["summary"]


def test_nested_summaries_skip_unset_fields_and_show_times() -> None:
    @dataclass(frozen=True)
    class Inner:
        name: str
        note: str = ""
        tags: tuple[str, ...] = ()
        at: datetime | None = None

    @dataclass(frozen=True)
    class Outer:
        inner: Inner
        count: int = 0

    summary = summarize(Outer(Inner("a", at=datetime(2026, 1, 2, tzinfo=UTC))))
    assert summary == "Outer(inner=Inner(name='a', at=2026-01-02T00:00:00+00:00), count=0)"


async def test_a_loguru_tracer_gives_a_filtering_sink_pure_json_lines() -> None:
    lines: list[str] = []
    sink = logger.add(
        lambda message: lines.append(str(message)),
        level="DEBUG",
        format="{message}",
        filter=lambda record: bool(record["extra"].get("interlock_trace")),
    )
    try:
        system = ActorSystem(tracer=Tracer.to_loguru())
        system.spawn("a", lambda: Relay(None))
        system.tell("a", "x")
        await wait_idle(system)
        await system.shutdown()
    finally:
        logger.remove(sink)
    events = [json.loads(line)["event"] for line in "".join(lines).splitlines()]
    assert events[:3] == ["spawned", "deliver", "handled"]
