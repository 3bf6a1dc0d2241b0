"""Plain-text renderings: the causal tree per external event, and a timeline."""

from __future__ import annotations

from interlock.traceview.load import Message
from interlock.traceview.select import Selection


def _outcome(message: Message) -> str:
    if message.outcome == "handled":
        took = f"{message.duration_ms:.2f} ms" if message.duration_ms is not None else "?"
        return f"handled in {took}"
    if message.outcome == "failed":
        return f"FAILED ({message.error})"
    if message.outcome == "dead_letter":
        return f"dead letter ({message.error})"
    return "not handled yet"


def _waited(message: Message) -> str:
    if message.sent_at is None or message.ended_at is None or message.duration_ms is None:
        return ""
    total_ms = (message.ended_at - message.sent_at).total_seconds() * 1000.0
    queued = max(0.0, total_ms - message.duration_ms)
    return f", queued {queued:.2f} ms" if queued >= 0.01 else ""


def _line(message: Message) -> str:
    summary = f" {message.summary}" if message.summary and message.summary != message.type else ""
    return f"{message.type}{summary} → {message.recipient}  [{_outcome(message)}{_waited(message)}]"


def render_tree(selection: Selection) -> str:
    """One block per root: the external event, then every message it caused, nested."""
    lines: list[str] = []
    for root in selection.roots:
        origin = "external event" if root.external else f"from {root.sender}"
        lines.append(f"{root.at.isoformat()}  correlation {root.correlation_id}  ({origin})")
        lines.append(f"  {_line(root)}")

        def walk(message: Message, prefix: str) -> None:
            for index, child in enumerate(message.children):
                last = index == len(message.children) - 1
                lines.append(f"  {prefix}{'└─ ' if last else '├─ '}{_line(child)}")
                walk(child, prefix + ("   " if last else "│  "))

        walk(root, "")
        lines.append("")
    if not lines:
        return "no messages match\n"
    return "\n".join(lines)


def render_timeline(selection: Selection) -> str:
    """Every selected message in the order it was sent."""
    rows = sorted(selection.messages, key=lambda m: m.at)
    if not rows:
        return "no messages match\n"
    start = rows[0].at
    lines = []
    for message in rows:
        offset_ms = (message.at - start).total_seconds() * 1000.0
        sender = message.sender or "external"
        lines.append(
            f"+{offset_ms:10.3f} ms  {sender} → {message.recipient}  {message.type}"
            f"  [{_outcome(message)}]  corr={message.correlation_id[:8]}"
        )
    return "\n".join(lines) + "\n"
