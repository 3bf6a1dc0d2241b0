"""Choose which causal chains to show: by object, by correlation id, by time."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from datetime import datetime

from interlock.traceview.effects import is_internal
from interlock.traceview.load import Message, TraceLog


@dataclass(frozen=True)
class Selection:
    """The roots to draw (oldest first) and every message under them."""

    roots: list[Message]
    messages: list[Message]
    hidden: int = 0
    """Start-up and retained-value deliveries left out (:func:`without_internal`)."""


def without_internal(selection: Selection) -> Selection:
    """The selection without actor start-up and retained-value deliveries (see
    :func:`~interlock.traceview.effects.is_internal`): what they caused is kept, under the
    nearest message that is shown. A root is kept (it is the external event) unless it is an
    actor starting by itself (at start-up): that chain is left out whole."""
    roots: list[Message] = []
    messages: list[Message] = []
    hidden = 0

    def keep(message: Message) -> list[Message]:
        """``message``'s visible copy (or, when hidden, its visible descendants)."""
        nonlocal hidden
        children = sorted((kept for child in message.children for kept in keep(child)), key=_at)
        if is_internal(message):
            hidden += 1
            return children
        return [dataclasses.replace(message, children=children)]

    for root in selection.roots:
        if is_internal(root):
            # An actor starting by itself (at start-up, not because of an event): all of it.
            hidden += len(_walk(root))
            continue
        children = sorted((kept for child in root.children for kept in keep(child)), key=_at)
        shown = dataclasses.replace(root, children=children)
        roots.append(shown)
        messages.extend(_walk(shown))
    return Selection(roots=roots, messages=messages, hidden=selection.hidden + hidden)


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


def _at(message: Message) -> datetime:
    return message.at


@dataclass(frozen=True)
class Section:
    """Everything one external event caused: the viewer's unit (one heading, one diagram)."""

    number: int
    """1, 2, … in the order the events happened: the short name the timeline uses (``#3``)."""
    correlation_id: str
    roots: list[Message]
    messages: list[Message]
    """Every message of the section, in the order they were sent."""

    @property
    def failures(self) -> int:
        return sum(1 for m in self.messages if m.outcome in ("failed", "dead_letter"))


def sections(selection: Selection) -> list[Section]:
    """The selection grouped by correlation (roots sharing one are one event), oldest first."""
    grouped: dict[str, list[Message]] = {}
    for root in selection.roots:
        grouped.setdefault(root.correlation_id, []).append(root)
    found: list[Section] = []
    for number, (correlation, roots) in enumerate(grouped.items(), start=1):
        messages = sorted((m for root in roots for m in _walk(root)), key=_at)
        found.append(Section(number, correlation, roots, messages))
    return found
