"""``interlock trace FILE``: read a message trace as a causal tree, a timeline or a diagram."""

from __future__ import annotations

import argparse
import re
import sys
from datetime import UTC, datetime, timedelta
from typing import Any

_RELATIVE = re.compile(r"^(\d+(?:\.\d+)?)(ms|s|m|h)$")
_UNIT_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_since(text: str, *, now: datetime | None = None) -> datetime:
    """An RFC 3339 time (``2026-11-30T01:00:00Z``) or a duration ago (``90s``, ``5m``, ``1h``)."""
    match = _RELATIVE.match(text)
    if match:
        seconds = float(match.group(1)) * _UNIT_SECONDS[match.group(2)]
        return (now or datetime.now(UTC)) - timedelta(seconds=seconds)
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"--since {text!r}: expected an RFC 3339 time or a duration such as 5m"
        ) from None
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "trace",
        help="show a message trace: causal tree, timeline, or sequence diagram",
        description=(
            "Read a trace written with --trace-file. By default prints, for each external event, "
            "the tree of messages it caused (what each did, outcome, time taken), then a "
            "timeline numbering the events. Actor start-up and retained-value deliveries are "
            "hidden unless --show-internal."
        ),
    )
    parser.add_argument("file", help="the JSON-lines trace file")
    parser.add_argument(
        "--object",
        dest="object_spec",
        metavar="KIND/NS/NAME",
        help="only chains that touch this object, e.g. HTTPRoute/default/web",
    )
    parser.add_argument(
        "--correlation",
        metavar="ID",
        help="only the chain with this correlation id (a prefix is enough)",
    )
    parser.add_argument(
        "--since",
        type=parse_since,
        metavar="T",
        help="only messages at or after T (RFC 3339, or a duration ago: 5m)",
    )
    parser.add_argument(
        "--format",
        choices=("text", "mermaid", "html"),
        default="text",
        help="text (default), mermaid sequence diagram, or self-contained HTML",
    )
    parser.add_argument(
        "--show-internal",
        action="store_true",
        help="also show actor start-up and the retained values an actor gets when it subscribes",
    )
    parser.add_argument(
        "-o", "--output", metavar="PATH", help="write to PATH instead of standard output"
    )
    parser.set_defaults(handler=run_trace)


def run_trace(args: argparse.Namespace) -> int:
    # Imported here, not with the command line: `interlock run` never reads a trace.
    from interlock.traceview import load_trace, render_timeline, render_tree, select
    from interlock.traceview.diagram import render_html, render_mermaid
    from interlock.traceview.select import without_internal

    try:
        log = load_trace(args.file)
    except OSError as exc:
        print(f"interlock trace: cannot read {args.file}: {exc.strerror}", file=sys.stderr)
        return 2
    try:
        selection = select(
            log, object_spec=args.object_spec, correlation=args.correlation, since=args.since
        )
    except ValueError as exc:
        print(f"interlock trace: {exc}", file=sys.stderr)
        return 2
    if not args.show_internal:
        selection = without_internal(selection)
    if args.format == "mermaid":
        output = render_mermaid(selection)
    elif args.format == "html":
        output = render_html(selection, title=f"interlock trace — {args.file}")
    else:
        output = render_tree(selection) + "\ntimeline\n" + render_timeline(selection)
    if log.bad_lines:
        print(
            f"interlock trace: skipped {log.bad_lines} lines that are not trace records",
            file=sys.stderr,
        )
    if args.output:
        with open(args.output, "w", encoding="utf-8") as f:
            f.write(output)
    else:
        sys.stdout.write(output)
    return 0
