"""The lines a subcommand prints on stdout, in the format its logs have.

``interlock run`` prints where it listens (``policy API listening on …``, ``embedded API server
at …``; port 0 picks a free port, and these lines are how a person or a script learns which) and
why it stops (``received SIGTERM: stopping …``). Its logs go to stderr in ``--log-format``. In a
container both streams land in one log, so with ``--log-format json`` a plain-text line on stdout
is a line a collector cannot parse: it would be dropped, or break the stream it is in. So with
``json`` each announcement is one JSON object with the keys the logs use (``level``, ``ts``,
``logger``, ``msg``) and, when the line names an address, that ``url`` as a field of its own;
with ``text`` it is the line as it always was.
"""

from __future__ import annotations

import json
import re
import sys
from collections.abc import Callable
from datetime import UTC, datetime

from interlock.logs import LogFormat

Announce = Callable[[str], None]
"""Prints one announcement line on stdout."""

_URL = re.compile(r"\b(?:https?|grpc)://\S+$")


def announcement_json(line: str, *, logger: str, now: datetime | None = None) -> str:
    """``line`` as one JSON object (no trailing newline), the logs' keys and the URL it names."""
    stamp = (now or datetime.now(UTC)).astimezone(UTC)
    entry: dict[str, str] = {
        "level": "info",
        "ts": stamp.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
        "logger": logger,
        "msg": line,
    }
    url = _URL.search(line)
    if url is not None:
        entry["url"] = url.group(0)
    return json.dumps(entry, ensure_ascii=False)


def announcer(format: LogFormat, *, logger: str) -> Announce:
    """What prints announcements on stdout for ``--log-format format``; ``logger`` names the
    subcommand in JSON lines (``cli.run``)."""
    if format == "json":

        def say_json(line: str) -> None:
            print(announcement_json(line, logger=logger), file=sys.stdout, flush=True)

        return say_json

    def say_text(line: str) -> None:
        print(line, file=sys.stdout, flush=True)

    return say_text
