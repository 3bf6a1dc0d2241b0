"""Pub/sub with retained values: snapshot on subscribe, never a lost update, whatever the order."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from interlock.mailbox import (
    Actor,
    ActorNotFound,
    ActorSystem,
    Published,
    SupervisionPolicy,
    Unpublished,
)
from interlock.mailbox.testing import ManualSleep, RecordingActor, wait_idle, wait_until


@dataclass(frozen=True)
class Join:
    topic: str


@dataclass(frozen=True)
class Leave:
    topic: str


class View(Actor):
    """Keeps the latest value per key of the topics it follows, as a subscriber should."""

    def __init__(self) -> None:
        self.view: dict[str, object] = {}
        self.notifications = 0

    async def receive(self, message: object) -> None:
        if isinstance(message, Join):
            self.subscribe(message.topic)
        elif isinstance(message, Leave):
            self.unsubscribe(message.topic)
            self.view.clear()
        elif message == "crash":
            raise RuntimeError("crash")
        elif isinstance(message, Published):
            self.notifications += 1
            self.view[message.key] = message.value
        elif isinstance(message, Unpublished):
            self.notifications += 1
            self.view.pop(message.key, None)


async def test_subscribing_after_a_publish_receives_the_retained_value(
    system: ActorSystem,
) -> None:
    views: dict[str, View] = {}
    system.publish("service:default/web", "service", {"ports": [80]})
    system.spawn("route/default/web", lambda: views.setdefault("r", View()))
    system.subscribe("service:default/web", "route/default/web")
    await wait_until(lambda: views["r"].view == {"service": {"ports": [80]}})


async def test_publish_reaches_every_subscriber_and_unpublish_removes(
    system: ActorSystem,
) -> None:
    views = [View() for _ in range(3)]
    for n, view in enumerate(views):
        system.spawn(f"v/{n}", lambda view=view: view)  # type: ignore[misc]
        system.subscribe("t", f"v/{n}")
    system.publish("t", "a", 1)
    system.publish("t", "b", 2)
    system.unpublish("t", "a")
    system.unpublish("t", "missing")  # nothing retained: nothing sent
    await wait_idle(system)
    assert [view.view for view in views] == [{"b": 2}] * 3
    assert system.retained("t") == {"b": 2}
    assert system.subscribers("t") == ["v/0", "v/1", "v/2"]


async def test_pending_notifications_coalesce_per_key(system: ActorSystem) -> None:
    view = View()
    system.spawn("v", lambda: view)
    system.subscribe("t", "v")
    for n in range(100):
        system.publish("t", "k", n)
    system.unpublish("t", "other")
    await wait_idle(system)
    assert view.view == {"k": 99}
    assert view.notifications == 1


async def test_unsubscribe_drops_pending_notifications(system: ActorSystem) -> None:
    view = View()
    system.spawn("v", lambda: view)
    system.subscribe("t", "v")
    system.publish("t", "k", 1)
    system.unsubscribe("t", "v")
    system.publish("t", "k", 2)
    await wait_idle(system)
    assert view.notifications == 0
    assert system.subscribers("t") == []


async def test_subscriptions_end_when_the_actor_stops(system: ActorSystem) -> None:
    system.spawn("v", View)
    system.subscribe("t", "v")
    system.stop("v")
    assert system.subscribers("t") == []
    system.publish("t", "k", 1)
    assert system.statistics().dead_letters == 0


async def test_subscribing_a_missing_actor_is_an_error(system: ActorSystem) -> None:
    with pytest.raises(ActorNotFound, match="ghost: no such actor \\(subscribe to t\\)"):
        system.subscribe("t", "ghost")


async def test_fan_out_to_many_subscribers(system: ActorSystem) -> None:
    views = [View() for _ in range(2000)]
    for n, view in enumerate(views):
        system.spawn(f"v/{n}", lambda view=view: view)  # type: ignore[misc]
        system.subscribe("t", f"v/{n}")
    system.publish("t", "k", "v1")
    await wait_idle(system)
    assert all(view.view == {"k": "v1"} for view in views)


# ---- a publish racing a subscribe is never lost, whatever the interleaving ----

KEYS = st.sampled_from(["a", "b", "c"])
STEPS = st.lists(
    st.one_of(
        st.tuples(st.just("publish"), KEYS, st.integers(0, 9)),
        st.tuples(st.just("unpublish"), KEYS),
        st.tuples(st.just("join")),
        st.tuples(st.just("leave")),
        st.tuples(st.just("subscribe")),
        st.tuples(st.just("run"), st.integers(1, 3)),
        st.tuples(st.just("publisher"), KEYS, st.integers(0, 9)),
        st.tuples(st.just("crash")),
    ),
    max_size=30,
)


class Publisher(Actor):
    async def receive(self, message: object) -> None:
        assert isinstance(message, tuple)
        key, value = message
        self.publish("t", key, value)


async def _scenario(steps: list[tuple[object, ...]]) -> None:
    # A crash replaces the View by a fresh, empty one: the retained values rebuild it.
    system = ActorSystem(sleep=ManualSleep())
    views: list[View] = []

    def fresh_view() -> View:
        views.append(View())
        return views[-1]

    system.spawn("view", fresh_view, supervision=SupervisionPolicy(max_restarts=1000))
    system.spawn("publisher", Publisher)
    for step in steps:
        match step:
            case ("publish", key, value):
                system.publish("t", str(key), value)
            case ("unpublish", key):
                system.unpublish("t", str(key))
            case ("join",):
                system.tell("view", Join("t"))
            case ("leave",):
                system.tell("view", Leave("t"))
            case ("subscribe",):
                system.subscribe("t", "view")
            case ("run", turns):
                for _ in range(int(str(turns))):
                    await asyncio.sleep(0)
            case ("publisher", key, value):
                system.tell("publisher", (key, value))
            case ("crash",):
                system.tell("view", "crash")
    await wait_idle(system)
    view = views[-1]
    if "view" in system.subscribers("t"):
        assert view.view == system.retained("t")
    else:
        # never subscribed, or the last Leave cleared it and no notification came after
        assert view.view == {}
    await system.shutdown()


@settings(max_examples=200, deadline=None)
@given(STEPS)
def test_the_subscriber_view_always_converges_to_the_retained_state(
    steps: list[tuple[object, ...]],
) -> None:
    asyncio.run(_scenario(steps))


async def test_subscribe_returns_the_retained_values_it_queues(system: ActorSystem) -> None:
    """The one way to read a topic's current value on subscribe: the values come back now, and
    the notifications queued for them carry the very same objects (a subscriber that took the
    values can tell a queued notification from a change by identity)."""
    log: list[object] = []
    system.spawn("late", lambda: RecordingActor(log))
    first, second = {"n": 1}, {"n": 2}
    system.publish("t", "a", first)
    system.publish("t", "b", second)
    values = system.subscribe("t", "late")
    assert values == {"a": first, "b": second}
    values.clear()  # a copy: the topic keeps its values
    assert system.retained("t") == {"a": first, "b": second}
    await wait_idle(system)
    queued = {m.key: m.value for m in log if isinstance(m, Published)}
    assert queued["a"] is first and queued["b"] is second
    assert system.subscribe("nothing-here", "late") == {}
