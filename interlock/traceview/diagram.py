"""Sequence diagrams: Mermaid source, and a self-contained HTML page with an inline SVG.

The HTML draws its own SVG instead of loading Mermaid's JavaScript, so the file opens in a
browser with no network (clusters and laptops behind proxies often have none).
"""

from __future__ import annotations

import html
import re

from interlock.traceview.load import Message
from interlock.traceview.select import Selection

EXTERNAL = "external"
_MERMAID_UNSAFE = re.compile(r"[;#<>{}\n\r]")


def _participants(messages: list[Message]) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()
    for message in messages:
        for name in (message.sender or EXTERNAL, message.recipient):
            if name not in seen:
                seen.add(name)
                order.append(name)
    return order


def _label(message: Message) -> str:
    text = message.type
    if message.summary and message.summary != message.type:
        text = f"{text} {message.summary}"
    if len(text) > 80:
        text = text[:79] + "…"
    if message.outcome == "handled" and message.duration_ms is not None:
        text += f" ({message.duration_ms:.2f} ms)"
    elif message.outcome in ("failed", "dead_letter"):
        text += f" [{message.outcome}]"
    return text


def _ordered(selection: Selection) -> list[Message]:
    return sorted(selection.messages, key=lambda m: m.at)


def render_mermaid(selection: Selection) -> str:
    messages = _ordered(selection)
    names = _participants(messages)
    alias = {name: f"p{index}" for index, name in enumerate(names)}
    lines = ["sequenceDiagram"]
    for name in names:
        lines.append(f"    participant {alias[name]} as {_MERMAID_UNSAFE.sub(' ', name)}")
    for message in messages:
        arrow = "-x" if message.outcome in ("failed", "dead_letter") else "->>"
        sender = alias[message.sender or EXTERNAL]
        text = _MERMAID_UNSAFE.sub(" ", _label(message))
        lines.append(f"    {sender}{arrow}{alias[message.recipient]}: {text}")
    return "\n".join(lines) + "\n"


_COLUMN = 220
_ROW = 34
_TOP = 70


def _svg(messages: list[Message], names: list[str]) -> str:
    column = {name: index for index, name in enumerate(names)}
    width = max(1, len(names)) * _COLUMN
    height = _TOP + (len(messages) + 1) * _ROW
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" id="sequence" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" '
        'font-size="12">',
        '<defs><marker id="arrow" markerWidth="10" markerHeight="8" refX="9" refY="4" '
        'orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker></defs>',
    ]
    for name, index in column.items():
        x = index * _COLUMN + _COLUMN // 2
        short = name if len(name) <= 30 else "…" + name[-29:]
        parts.append(
            f'<g class="participant"><rect x="{x - 100}" y="10" width="200" height="30" '
            'rx="4" fill="#e8eef7" stroke="#4a6fa5"/>'
            f'<text x="{x}" y="30" text-anchor="middle"><title>{html.escape(name)}</title>'
            f"{html.escape(short)}</text>"
            f'<line x1="{x}" y1="40" x2="{x}" y2="{height - 10}" stroke="#bbb" '
            'stroke-dasharray="4 3"/></g>'
        )
    for row, message in enumerate(messages):
        y = _TOP + row * _ROW + 20
        x1 = column[message.sender or EXTERNAL] * _COLUMN + _COLUMN // 2
        x2 = column[message.recipient] * _COLUMN + _COLUMN // 2
        colour = "#b00020" if message.outcome in ("failed", "dead_letter") else "#333"
        label = html.escape(_label(message))
        if x1 == x2:
            parts.append(
                f'<path class="message" d="M{x1},{y - 8} h40 v16 h-40" fill="none" '
                f'stroke="{colour}" marker-end="url(#arrow)"/>'
                f'<text x="{x1 + 46}" y="{y + 4}" fill="{colour}">{label}</text>'
            )
            continue
        parts.append(
            f'<line class="message" x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{colour}" '
            'marker-end="url(#arrow)"/>'
            f'<text x="{(x1 + x2) // 2}" y="{y - 5}" text-anchor="middle" fill="{colour}">'
            f"{label}</text>"
        )
    parts.append("</svg>")
    return "".join(parts)


def render_html(selection: Selection, *, title: str = "interlock trace") -> str:
    messages = _ordered(selection)
    names = _participants(messages)
    mermaid = html.escape(render_mermaid(selection))
    roots = "".join(
        f"<li><code>{html.escape(root.correlation_id)}</code> — "
        f"{html.escape(root.type)} {html.escape(root.summary)} → "
        f"{html.escape(root.recipient)}</li>"
        for root in selection.roots
    )
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1.5em; color: #222; }}
.scroll {{ overflow: auto; border: 1px solid #ddd; }}
code {{ background: #f4f4f4; padding: 0 .2em; }}
</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p>{len(messages)} messages between {len(names)} participants, from {len(selection.roots)}
external events.</p>
<ul>{roots}</ul>
<div class="scroll">{_svg(messages, names)}</div>
<details><summary>Mermaid source</summary><pre>{mermaid}</pre></details>
</body></html>
"""
