"""Choose which causal chains to show: by object, by correlation id, by time."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from interlock.traceview.load import Message, TraceLog


@dataclass(frozen=True)
class Selection:
    """The roots to draw (oldest first) and every message under them."""

    roots: list[Message]
    messages: list[Message]


def object_matcher(spec: str) -> tuple[str, str]:
    """``KIND/NS/NAME`` (or ``KIND/NAME``) → (kind, "ns/name") for matching records."""
    parts = spec.split("/")
    if len(parts) not in (2, 3) or not all(parts):
        raise ValueError(f"--object {spec!r}: expected KIND/NAMESPACE/NAME or KIND/NAME")
    return parts[0].lower(), "/".join(parts[1:])


def _mentions(message: Message, kind: str, key: str) -> bool:
    summary = message.summary.lower()
    recipient = message.recipient.lower()
    key_l = key.lower()
    # Actor addresses are "<kind>/…/<ns>/<name>"; external events read "<Kind> <ns>/<name> …".
    in_address = recipient.startswith(kind) and recipient.endswith("/" + key_l)
    in_summary = f"{kind} {key_l}" in summary or f"{kind}:{key_l}" in summary
    return in_address or in_summary


def _root_of(message: Message, log: TraceLog) -> Message:
    seen: set[str] = set()
    while message.causation_id and message.causation_id in log.messages:
        if message.id in seen:
            break
        seen.add(message.id)
        message = log.messages[message.causation_id]
    return message


def _walk(message: Message) -> list[Message]:
    out: list[Message] = []
    stack = [message]
    while stack:
        current = stack.pop()
        out.append(current)
        stack.extend(reversed(current.children))
    return out


def select(
    log: TraceLog,
    *,
    object_spec: str | None = None,
    correlation: str | None = None,
    since: datetime | None = None,
) -> Selection:
    candidates = list(log.messages.values())
    if correlation is not None:
        candidates = [m for m in candidates if m.correlation_id.startswith(correlation)]
    if since is not None:
        candidates = [m for m in candidates if m.at >= since]
    if object_spec is not None:
        kind, key = object_matcher(object_spec)
        candidates = [m for m in candidates if _mentions(m, kind, key)]
    roots: dict[str, Message] = {}
    for message in candidates:
        root = _root_of(message, log)
        roots.setdefault(root.id, root)
    ordered = sorted(roots.values(), key=lambda m: m.at)
    messages: list[Message] = []
    for root in ordered:
        messages.extend(_walk(root))
    return Selection(roots=ordered, messages=messages)
