"""Sequence diagrams: Mermaid source, and a self-contained HTML page with inline SVGs.

The HTML draws its own SVG instead of loading Mermaid's JavaScript, so the file opens in a
browser with no network (clusters and laptops behind proxies often have none). It is laid out
for a person who asks "what happened?": an index of the external events first (one line each,
so the demo's first minute fits one screen), a legend, then one section and one diagram per
event, its arrows labelled with what each message did.
"""

from __future__ import annotations

import html
import re

from interlock.traceview.effects import correlation_name, effects, short_name
from interlock.traceview.load import Message
from interlock.traceview.select import Section, Selection, sections

EXTERNAL = "external"
_MERMAID_UNSAFE = re.compile(r"[;#<>{}\n\r]")
_LABEL_LIMIT = 64


def _participants(messages: list[Message]) -> list[str]:
    order: list[str] = []
    seen: set[str] = set()
    for message in messages:
        for name in (message.sender or EXTERNAL, message.recipient):
            if name not in seen:
                seen.add(name)
                order.append(name)
    return order


def _name(section: Section, labels: dict[str, str]) -> str:
    first = section.roots[0]
    return correlation_name(section.correlation_id, f"{labels[first.id]} → {first.recipient}")


def _failed(message: Message) -> bool:
    return message.outcome in ("failed", "dead_letter")


def _label(message: Message, effect: str) -> str:
    text = effect if len(effect) <= _LABEL_LIMIT else effect[: _LABEL_LIMIT - 1] + "…"
    if message.outcome == "handled" and message.duration_ms is not None:
        text += f" ({message.duration_ms:.2f} ms)"
    elif _failed(message):
        text += f" [{message.outcome}]"
    return text


def render_mermaid(selection: Selection) -> str:
    found = sections(selection)
    messages = [m for section in found for m in section.messages]
    labels = effects(messages)
    names = _participants(messages)
    alias = {name: f"p{index}" for index, name in enumerate(names)}
    lines = ["sequenceDiagram"]
    for name in names:
        lines.append(f"    participant {alias[name]} as {_MERMAID_UNSAFE.sub(' ', name)}")
    for section in found:
        first = alias[section.messages[0].sender or EXTERNAL]
        heading = _MERMAID_UNSAFE.sub(" ", _name(section, labels))
        lines.append(f"    Note over {first}: event {section.number} {heading}")
        for message in section.messages:
            arrow = "-x" if _failed(message) else "->>"
            sender = alias[message.sender or EXTERNAL]
            text = _MERMAID_UNSAFE.sub(" ", _label(message, labels[message.id]))
            lines.append(f"    {sender}{arrow}{alias[message.recipient]}: {text}")
    return "\n".join(lines) + "\n"


_COLUMN = 210
_ROW = 30
_TOP = 56


def _svg(section: Section, labels: dict[str, str]) -> str:
    messages = section.messages
    names = _participants(messages)
    column = {name: index for index, name in enumerate(names)}
    width = max(1, len(names)) * _COLUMN + 120
    height = _TOP + len(messages) * _ROW + 10
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" class="sequence" width="{width}" '
        f'height="{height}" viewBox="0 0 {width} {height}" font-family="sans-serif" '
        'font-size="12">',
        f'<defs><marker id="arrow-{section.number}" markerWidth="10" markerHeight="8" '
        'refX="9" refY="4" orient="auto"><path d="M0,0 L10,4 L0,8 z" fill="#333"/></marker>'
        f'<marker id="cross-{section.number}" markerWidth="10" markerHeight="10" refX="5" '
        'refY="5" orient="auto"><path d="M1,1 L9,9 M9,1 L1,9" stroke="#b00020" '
        'stroke-width="2"/></marker></defs>',
    ]
    for name, index in column.items():
        x = index * _COLUMN + _COLUMN // 2
        parts.append(
            f'<g class="participant"><title>{html.escape(name)}</title>'
            f'<rect x="{x - 98}" y="8" width="196" height="28" rx="4" fill="#e8eef7" '
            'stroke="#4a6fa5"/>'
            f'<text x="{x}" y="26" text-anchor="middle">{html.escape(short_name(name))}</text>'
            f'<line x1="{x}" y1="36" x2="{x}" y2="{height - 4}" stroke="#bbb" '
            'stroke-dasharray="4 3"/></g>'
        )
    for row, message in enumerate(messages):
        y = _TOP + row * _ROW + 12
        x1 = column[message.sender or EXTERNAL] * _COLUMN + _COLUMN // 2
        x2 = column[message.recipient] * _COLUMN + _COLUMN // 2
        failed = _failed(message)
        colour = "#b00020" if failed else "#333"
        marker = f"url(#{'cross' if failed else 'arrow'}-{section.number})"
        label = html.escape(_label(message, labels[message.id]))
        tip = html.escape(f"{message.type}: {message.summary}")
        outcome = "failed" if failed else "handled"
        if x1 == x2:
            parts.append(
                f'<g class="message {outcome}"><title>{tip}</title>'
                f'<path d="M{x1},{y - 8} h36 v14 h-36" fill="none" stroke="{colour}" '
                f'marker-end="{marker}"/>'
                f'<text class="label" x="{x1 + 42}" y="{y + 3}" fill="{colour}">{label}</text></g>'
            )
            continue
        anchor, text_x = ("start", min(x1, x2) + 6)
        parts.append(
            f'<g class="message {outcome}"><title>{tip}</title>'
            f'<line x1="{x1}" y1="{y}" x2="{x2}" y2="{y}" stroke="{colour}" '
            f'marker-end="{marker}"/>'
            f'<text class="label" x="{text_x}" y="{y - 5}" text-anchor="{anchor}" '
            f'fill="{colour}">{label}</text></g>'
        )
    parts.append("</svg>")
    return "".join(parts)


_LEGEND = """<section id="legend"><h2>How to read this</h2><ul>
<li>Each <b>event</b> is one external change (an object the informers saw, an HTTP request)
and every message it caused; the index links to its diagram.</li>
<li><svg width="40" height="10"><line x1="2" y1="5" x2="36" y2="5" stroke="#333"/>
<path d="M30,1 L38,5 L30,9 z" fill="#333"/></svg> a message, labelled with what it did and
how long its handler took; <span class="failed">red with ✕</span>: the handler failed or the
message was never delivered; a loop: an actor telling itself.</li>
<li>Participants are actor addresses, kind first (<code>route/…/default/web</code>); hover for
the full address, and over an arrow for the message's type and summary.</li>
<li>Times are when a message was sent; <code>#N</code> numbers the events in order.</li>
</ul></section>"""


def render_html(selection: Selection, *, title: str = "interlock trace") -> str:
    found = sections(selection)
    labels = effects([m for section in found for m in section.messages])
    total = sum(len(section.messages) for section in found)
    hidden = (
        f" {selection.hidden} start-up and retained-value deliveries are hidden "
        "(<code>--show-internal</code> shows them)."
        if selection.hidden
        else ""
    )
    rows = "".join(
        f'<tr><td><a href="#event-{s.number}">#{s.number}</a></td>'
        f"<td>{s.messages[0].at.strftime('%H:%M:%S.%f')[:-3]}</td>"
        f'<td><a href="#event-{s.number}">{html.escape(_name(s, labels))}</a>'
        f"</td><td>{len(s.messages)}</td>"
        f'<td class="{"failed" if s.failures else ""}">{s.failures or ""}</td></tr>'
        for s in found
    )
    blocks = "".join(
        f'<section class="event" id="event-{s.number}"><h2>#{s.number} '
        f"{html.escape(_name(s, labels))}</h2>"
        f'<p class="correlation">correlation <code>{html.escape(s.correlation_id)}</code>, '
        f"{s.messages[0].at.isoformat()}, {len(s.messages)} messages"
        f"{f', {s.failures} failed' if s.failures else ''} · "
        '<a href="#index">index</a></p>'
        f'<div class="scroll">{_svg(s, labels)}</div></section>'
        for s in found
    )
    mermaid = html.escape(render_mermaid(selection))
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font-family: sans-serif; margin: 1em 1.5em; color: #222; font-size: 14px; }}
h1 {{ font-size: 1.3em; margin: 0 0 .3em; }}
h2 {{ font-size: 1.1em; margin: 1em 0 .3em; }}
.top {{ display: flex; gap: 2em; align-items: flex-start; flex-wrap: wrap; }}
table.index {{ border-collapse: collapse; }}
table.index td, table.index th {{ padding: 1px 8px; text-align: left; }}
table.index td {{ border-bottom: 1px solid #eee; }}
#legend {{ max-width: 34em; font-size: 12px; color: #444; }}
#legend ul {{ padding-left: 1.2em; margin: 0; }}
.scroll {{ overflow: auto; border: 1px solid #ddd; }}
.failed {{ color: #b00020; }}
svg .label {{ paint-order: stroke; stroke: #fff; stroke-width: 3px; }}
.correlation {{ margin: 0 0 .4em; color: #555; font-size: 12px; }}
code {{ background: #f4f4f4; padding: 0 .2em; }}
</style></head>
<body>
<h1>{html.escape(title)}</h1>
<p>{len(found)} external events, {total} messages.{hidden}</p>
<div class="top">
<nav id="index"><table class="index"><thead><tr><th>#</th><th>time (UTC)</th><th>event</th>
<th>messages</th><th>failed</th></tr></thead><tbody>{rows}</tbody></table></nav>
{_LEGEND}
</div>
{blocks}
<details><summary>Mermaid source</summary><pre>{mermaid}</pre></details>
</body></html>
"""
