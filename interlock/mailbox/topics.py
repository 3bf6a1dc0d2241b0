"""The bookkeeping of pub/sub: retained values and subscribers per topic.

Kept apart from delivery (which is the actor system's job) so that the invariants are easy to
see: a topic exists while it has a retained value or a subscriber, and an actor's list of
topics mirrors the topics' subscriber lists, so stopping an actor ends all its subscriptions.
"""

from __future__ import annotations

from typing import Any

from interlock.mailbox.cell import Cell

_NONE_YET: dict[str, Any] = {}
"""What a topic holds until its first retained value or subscriber: never written to (most
topics have only one of the two, a parent's resolved routes or a kind's attachments with no
reader, and a fresh empty dict is 64 bytes)."""


class Topic:
    """One topic: the latest value per publisher key, and its subscribers in order."""

    __slots__ = ("retained", "subscribers")

    def __init__(self) -> None:
        self.retained: dict[str, object] = _NONE_YET
        self.subscribers: dict[str, Cell] = _NONE_YET

    def retain(self, key: str, value: object) -> None:
        if self.retained is _NONE_YET:
            self.retained = {}
        self.retained[key] = value


class Topics:
    """All topics by name."""

    def __init__(self) -> None:
        self._topics: dict[str, Topic] = {}

    def get(self, name: str) -> Topic | None:
        return self._topics.get(name)

    def setdefault(self, name: str) -> Topic:
        topic = self._topics.get(name)
        if topic is None:
            topic = self._topics[name] = Topic()
        return topic

    def add_subscriber(self, name: str, cell: Cell) -> Topic:
        topic = self.setdefault(name)
        if topic.subscribers is _NONE_YET:
            topic.subscribers = {}
        topic.subscribers[cell.address] = cell
        if cell.topics is None:
            cell.topics = {}
        cell.topics[name] = None
        return topic

    def remove_subscriber(self, name: str, cell: Cell) -> bool:
        """End ``cell``'s subscription; ``False`` if it was not subscribed."""
        topic = self._topics.get(name)
        if topic is not None and topic.subscribers.get(cell.address) is cell:
            del topic.subscribers[cell.address]
            self.forget_if_unused(name, topic)
        if cell.topics is None or name not in cell.topics:
            return False
        del cell.topics[name]
        return True

    def remove_all(self, cell: Cell) -> None:
        """End every subscription of ``cell`` (it is stopping)."""
        for name in list(cell.topics or ()):
            self.remove_subscriber(name, cell)
        cell.topics = None

    def forget_if_unused(self, name: str, topic: Topic) -> None:
        if not topic.subscribers and not topic.retained:
            self._topics.pop(name, None)
