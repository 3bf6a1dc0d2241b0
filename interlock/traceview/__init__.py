"""Reading message traces back: the causal tree, the timeline and sequence diagrams.

The runtime writes one JSON line per delivery and handling (``docs/tracing.md``). A raw log is
precise but unreadable once a few hundred messages flow; this package answers the question a
person actually has — *why did this change?* — by grouping records by correlation (the external
event that started a chain) and nesting each message under the message that caused it.
"""

from interlock.traceview.load import Message, TraceLog, load_trace
from interlock.traceview.select import Selection, select
from interlock.traceview.text import render_timeline, render_tree

__all__ = [
    "Message",
    "Selection",
    "TraceLog",
    "load_trace",
    "render_timeline",
    "render_tree",
    "select",
]
