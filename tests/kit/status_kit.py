"""What the StatusWriter tests (``test_status_writer.py``, ``test_edge_status_writer.py``)
share: the part of a test sink that records what the writer told it to forget, and a writer
that crashes once on demand (to show a crash loses no pending status)."""

from __future__ import annotations

from interlock.actors.status_writer import StatusWriter
from interlock.mailbox import Published


class ForgetRecorder:
    """The ``forget`` half of a StatusSink: records each ``(kind, namespace, name)``."""

    def __init__(self) -> None:
        self.forgotten: list[tuple[str, str, str]] = []

    def forget(self, *, kind: str, namespace: str, name: str) -> None:
        self.forgotten.append((kind, namespace, name))


class CrashingStatusWriter(StatusWriter):
    """Raises while handling the next published status once ``armed`` is set (once)."""

    armed = False

    async def receive(self, message: object) -> object | None:
        if CrashingStatusWriter.armed and isinstance(message, Published):
            CrashingStatusWriter.armed = False
            raise RuntimeError("injected crash")
        return await super().receive(message)
