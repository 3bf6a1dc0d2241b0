"""Topic families: one name, one key type, and the two functions between them.

A topic is a string to the runtime (what ``subscribe`` and ``publish`` take). Made by f-string
at each publisher and taken apart by ``startswith``/``partition`` at each subscriber, the same
topic existed as three copies of one format that nothing checked against each other, and "where
does a Service change go" could be answered only by grepping a literal. A family names the
format once: ``family.topic(key)`` makes a topic, ``family.key_of(topic)`` gives its key back
(``None`` for a topic of another family), so a subscriber of several families tells them apart
by asking each, and its key arrives typed.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Generic, TypeVar

K = TypeVar("K")


class TopicFamily(Generic[K]):
    """The topics ``<name>:<encoded key>``; see the module docstring."""

    __slots__ = ("_decode", "_encode", "_prefix", "name")

    def __init__(
        self, name: str, *, encode: Callable[[K], str], decode: Callable[[str], K]
    ) -> None:
        """``encode`` writes a key after the prefix; ``decode`` reads it back (``decode(encode(
        key)) == key``)."""
        self.name = name
        self._prefix = f"{name}:"
        self._encode = encode
        self._decode = decode

    def topic(self, key: K) -> str:
        """The topic of ``key``."""
        return self._prefix + self._encode(key)

    def key_of(self, topic: str) -> K | None:
        """The key of ``topic``, or ``None`` when it belongs to another family."""
        if not topic.startswith(self._prefix):
            return None
        return self._decode(topic[len(self._prefix) :])

    def __contains__(self, topic: object) -> bool:
        return isinstance(topic, str) and topic.startswith(self._prefix)

    def __repr__(self) -> str:
        return f"TopicFamily({self.name!r})"
