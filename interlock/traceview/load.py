"""Parse a JSON-lines trace into messages: one per envelope, its records merged.

A message is delivered once and handled (or failed, or dead-lettered) once; the viewer wants both
in one place — when it was sent, how long it waited, how long it took, how it ended.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

_OUTCOMES = ("handled", "failed", "dead_letter")


def parse_ts(text: str) -> datetime:
    """RFC 3339 (the tracer writes ``…Z``) to an aware datetime."""
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass
class Message:
    """One envelope as the trace saw it."""

    id: str
    correlation_id: str
    causation_id: str | None
    sender: str | None
    recipient: str
    type: str
    summary: str
    sent_at: datetime | None = None
    ended_at: datetime | None = None
    outcome: str | None = None
    duration_ms: float | None = None
    depth: int | None = None
    error: str | None = None
    children: list[Message] = field(default_factory=list)

    @property
    def at(self) -> datetime:
        moment = self.sent_at or self.ended_at
        assert moment is not None, "a message is built from at least one timestamped record"
        return moment

    @property
    def external(self) -> bool:
        return self.sender in (None, "external")


@dataclass
class TraceLog:
    messages: dict[str, Message]
    lifecycle: list[dict[str, Any]]
    """spawned / stopped / restart records, for the timeline."""
    bad_lines: int = 0


def _merge(message: Message, record: dict[str, Any], when: datetime) -> None:
    event = record["event"]
    if event == "deliver":
        message.sent_at = when
        message.depth = record.get("depth", message.depth)
    elif event in _OUTCOMES:
        message.ended_at = when
        message.outcome = event
        message.duration_ms = record.get("duration_ms")
        if event == "failed":
            message.error = f"{record.get('error_type', 'Error')}: {record.get('error', '')}"
        elif event == "dead_letter":
            message.error = str(record.get("reason", ""))


def build(records: Iterable[dict[str, Any]], *, bad_lines: int = 0) -> TraceLog:
    messages: dict[str, Message] = {}
    lifecycle: list[dict[str, Any]] = []
    for record in records:
        event = record.get("event")
        msg_id = record.get("id")
        if event not in ("deliver", *_OUTCOMES) or msg_id is None:
            lifecycle.append(record)
            continue
        when = parse_ts(record["ts"])
        message = messages.get(msg_id)
        if message is None:
            message = messages[msg_id] = Message(
                id=msg_id,
                correlation_id=record.get("correlation_id") or msg_id,
                causation_id=record.get("causation_id"),
                sender=record.get("sender"),
                recipient=record.get("recipient") or "",
                type=record.get("type") or "",
                summary=record.get("summary") or "",
            )
        _merge(message, record, when)
    for message in messages.values():
        parent = messages.get(message.causation_id) if message.causation_id else None
        if parent is not None:
            parent.children.append(message)
    for message in messages.values():
        message.children.sort(key=lambda child: child.at)
    return TraceLog(messages=messages, lifecycle=lifecycle, bad_lines=bad_lines)


def load_trace(path: str | Path) -> TraceLog:
    """Read a trace file; lines that are not trace records are counted, not fatal."""
    records: list[dict[str, Any]] = []
    bad = 0
    with open(path, encoding="utf-8") as f:
        for line in f:
            if not line.strip():
                continue
            try:
                record = json.loads(line)
                parse_ts(record["ts"])
            except (ValueError, KeyError, TypeError, AttributeError):
                bad += 1
                continue
            if isinstance(record, dict) and "event" in record:
                records.append(record)
            else:
                bad += 1
    return build(records, bad_lines=bad)
