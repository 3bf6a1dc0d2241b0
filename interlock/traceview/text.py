"""Plain-text renderings: the causal tree per external event, and a timeline.

Both number the external events (``#1``, ``#2`` … in the order they happened) and label each
message with its effect (:mod:`interlock.traceview.effects`), so a timeline line says which
event it belongs to and what it did, not the repr of the message.
"""

from __future__ import annotations

from interlock.traceview.effects import correlation_name, effects
from interlock.traceview.load import Message
from interlock.traceview.select import Section, Selection, sections


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


def _name(section: Section, labels: dict[str, str]) -> str:
    first = section.roots[0]
    return correlation_name(section.correlation_id, f"{labels[first.id]} → {first.recipient}")


def _hidden_note(selection: Selection) -> str:
    if not selection.hidden:
        return ""
    return (
        f"({selection.hidden} start-up and retained-value deliveries hidden; "
        "--show-internal shows them)\n"
    )


def render_tree(selection: Selection) -> str:
    """One block per external event: the event, then every message it caused, nested."""
    labels = effects(selection.messages)

    def line(message: Message) -> str:
        return (
            f"{labels[message.id]} → {message.recipient}  [{_outcome(message)}{_waited(message)}]"
        )

    lines: list[str] = []
    for section in sections(selection):
        first = section.roots[0]
        origin = "external event" if first.external else f"from {first.sender}"
        lines.append(
            f"#{section.number}  {first.at.isoformat()}  {_name(section, labels)}"
            f"  correlation {section.correlation_id}  ({origin})"
        )
        for root in section.roots:
            lines.append(f"  {line(root)}")

            def walk(message: Message, prefix: str) -> None:
                for index, child in enumerate(message.children):
                    last = index == len(message.children) - 1
                    lines.append(f"  {prefix}{'└─ ' if last else '├─ '}{line(child)}")
                    walk(child, prefix + ("   " if last else "│  "))

            walk(root, "")
        lines.append("")
    if not lines:
        return "no messages match\n" + _hidden_note(selection)
    return "\n".join(lines) + _hidden_note(selection)


def render_timeline(selection: Selection) -> str:
    """Every selected message in the order it was sent, with the number of its event."""
    found = sections(selection)
    number = {m.id: section.number for section in found for m in section.messages}
    rows = sorted(selection.messages, key=lambda m: m.at)
    if not rows:
        return "no messages match\n"
    labels = effects(rows)
    start = rows[0].at
    width = len(f"#{len(found)}")
    lines = [f"{f'#{section.number}':>{width}} = {_name(section, labels)}" for section in found]
    for message in rows:
        offset_ms = (message.at - start).total_seconds() * 1000.0
        sender = message.sender or "external"
        event = f"#{number.get(message.id, 0)}"
        lines.append(
            f"+{offset_ms:10.3f} ms  {event:>{width}}  {sender} → {message.recipient}  "
            f"{labels[message.id]}  [{_outcome(message)}]"
        )
    return "\n".join(lines) + "\n"
