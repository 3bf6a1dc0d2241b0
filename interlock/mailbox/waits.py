"""Which actor is waiting on which: the graph that turns a deadlocking ask into an error.

An actor handles one message at a time, so an actor blocked in ``ask`` cannot answer anyone.
If the target of a new ask is (directly or through other waiting actors) waiting on the asker,
the ask can never complete. Tracking the waits is cheap (asks are rare next to tells) and turns
a silent deadlock into an immediate ``AskCycle`` naming the chain.
"""

from __future__ import annotations


class WaitGraph:
    """Edges "asker waits on target", one per pending ask made from inside a handler."""

    def __init__(self) -> None:
        self._waits: dict[str, list[str]] = {}

    def chain(self, target: str, asker: str) -> list[str] | None:
        """The chain of waits from ``target`` back to ``asker`` (both included), if any."""
        stack: list[list[str]] = [[target]]
        seen: set[str] = set()
        while stack:
            path = stack.pop()
            node = path[-1]
            if node == asker:
                return path
            if node in seen:
                continue
            seen.add(node)
            for waited in self._waits.get(node, ()):
                stack.append([*path, waited])
        return None

    def add(self, asker: str, target: str) -> None:
        self._waits.setdefault(asker, []).append(target)

    def remove(self, asker: str, target: str) -> None:
        waits = self._waits[asker]
        waits.remove(target)
        if not waits:
            del self._waits[asker]
