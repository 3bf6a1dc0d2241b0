"""Where interlock's log lines go and what they look like: one logger, two formats.

Every subcommand configures logging through :func:`configure_logging`, so the process writes one
kind of line to stderr whichever subcommand runs and whichever library logs:

- ``text`` for people: ``2026-12-01T09:07:38.123Z WARN  kube.discovery  message  kind=… name=…``
  (UTC, the level, the module without the ``interlock.`` prefix, the message, then the object's
  fields). No Python reprs and no source positions: a line reads like a sentence.
- ``json`` for machines: one object a line with the keys controller-runtime's JSON logs use —
  ``level`` (``debug``/``info``/``warn``/``error``), ``ts`` (RFC 3339, UTC), ``logger``,
  ``msg``, the object's ``kind``/``namespace``/``name`` when the line concerns one, ``caller``,
  and ``stacktrace`` for a logged exception — so a log pipeline built for Kubernetes
  controllers can filter by object without parsing messages.

The object's fields come from ``logger.bind(kind=…, namespace=…, name=…)``, or else from a
message that starts the project's way, ``HTTPRoute default/web: …`` (see ``CONVENTIONS.md``: an
error names its object first), so every existing line gets them without being rewritten.

The standard library's ``logging`` (aiohttp, kubernetes-asyncio, h2, hpack) is routed into the
same logger, so their lines have the same format and level — but never below INFO, whatever
``--log-level`` says: libraries write what they handle at DEBUG (kubernetes-asyncio whole response
bodies, Secrets among them; hpack every decoded header, ``Authorization`` and ``Cookie`` among
them), and no one reviews a library's debug lines for secrets. interlock's own DEBUG lines are
loguru's, written to say what happened without the data. ``diagnose=False`` everywhere: loguru
would otherwise print every local variable of a failing frame, which can hold Secret data.

A module that the compiled build compiles (``setup.py``'s ``COMPILED``) logs through
:func:`module_logger`, not loguru's ``logger`` itself: loguru names a record after the Python frame
that called it, and a compiled function has none, so its lines would carry its caller's module
(``interlock.dataplane.http2_server`` for ``http1_server``'s) and function and line.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable
from datetime import UTC
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TextIO

if TYPE_CHECKING:
    from loguru import Logger, Message, Record

LogFormat = Literal["text", "json"]
LOG_FORMATS: tuple[LogFormat, ...] = ("text", "json")
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")

OBJECT_FIELDS = ("kind", "namespace", "name")

LIBRARY_FLOOR = logging.INFO
"""The lowest level a library's (a non-``interlock``) stdlib logger reaches the log at."""

# "HTTPRoute default/web: …", "Lease default/interlock: …", "IngressClass /interlock: …"
_OBJECT_PREFIX = re.compile(
    r"^(?P<kind>[A-Z][A-Za-z]+) (?P<namespace>[a-z0-9][-a-z0-9.]*)?/(?P<name>[a-z0-9][-a-z0-9.]*)"
    r"(?=[:;, ]|$)"
)

_LEVEL_NAMES = {
    "TRACE": "debug",
    "DEBUG": "debug",
    "INFO": "info",
    "SUCCESS": "info",
    "WARNING": "warn",
    "ERROR": "error",
    "CRITICAL": "error",
}


def object_fields(record: Record) -> dict[str, str]:
    """The ``kind``/``namespace``/``name`` a log record concerns: bound, or read from the
    message's ``Kind namespace/name:`` prefix; empty when it concerns no one object."""
    extra = record["extra"]
    if "kind" in extra or "name" in extra:
        return {key: str(extra[key]) for key in OBJECT_FIELDS if extra.get(key) is not None}
    match = _OBJECT_PREFIX.match(record["message"])
    if match is None:
        return {}
    return {key: value for key, value in match.groupdict().items() if value}


_ROOT = Path(__file__).resolve().parent.parent
"""The directory ``interlock/`` is in (this module is never compiled)."""


def module_logger(name: str) -> Logger:
    """loguru's logger for the module ``name`` (its ``__name__``), whose records carry that
    module's name even when it runs compiled: loguru reads a record's ``name``, ``function``
    and ``line`` from the nearest Python frame, which for a compiled function is its caller's.
    Such a record gets ``name``, ``module`` and ``file`` from ``name``, and ``function`` ``""``
    and ``line`` 0 (a compiled function's are not known at run time). Interpreted, the frame is
    the module's own and the record is left as loguru made it. Costs nothing for a line below
    the level logged: loguru drops it before the patch runs."""
    from loguru import logger

    module = name.rpartition(".")[2]
    path = _ROOT.joinpath(*name.split(".")).with_suffix(".py")

    def own_name(record: Record) -> None:
        if record["name"] == name:
            return
        record["name"] = name
        record["module"] = module
        file = record["file"]  # made for this record: loguru's RecordFile(name, path)
        file.name = path.name
        file.path = str(path)
        record["function"] = ""
        record["line"] = 0

    return logger.patch(own_name)


def _caller(record: Record) -> str:
    """``file.py:line``, or the file alone when the line is not known (a compiled module's)."""
    line = record["line"]
    return f"{record['file'].name}:{line}" if line else record["file"].name


def _logger_name(record: Record) -> str:
    name = str(record["extra"].get("logger") or record["name"] or "")
    return name.removeprefix("interlock.")


def _timestamp(record: Record) -> str:
    return record["time"].astimezone(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _stacktrace(record: Record) -> str | None:
    exception = record["exception"]
    if exception is None or exception.type is None:
        return None
    import traceback

    return "".join(traceback.format_exception(exception.type, exception.value, exception.traceback))


def json_line(record: Record) -> str:
    """One controller-runtime-like JSON object for ``record`` (no trailing newline)."""
    entry: dict[str, Any] = {
        "level": _LEVEL_NAMES.get(record["level"].name, record["level"].name.lower()),
        "ts": _timestamp(record),
        "logger": _logger_name(record),
        "msg": record["message"],
    }
    entry.update(object_fields(record))
    entry["caller"] = record["extra"].get("caller") or _caller(record)
    stacktrace = _stacktrace(record)
    if stacktrace is not None:
        entry["stacktrace"] = stacktrace
    return json.dumps(entry, ensure_ascii=False, default=str)


def text_line(record: Record) -> str:
    """One line for a person: time (UTC), level, logger, message, the object's fields."""
    level = _LEVEL_NAMES.get(record["level"].name, record["level"].name.lower()).upper()
    fields = object_fields(record)
    line = f"{_timestamp(record)} {level:<5} {_logger_name(record)}  {record['message']}"
    if fields:
        line += "  " + " ".join(f"{key}={value}" for key, value in fields.items())
    stacktrace = _stacktrace(record)
    if stacktrace is not None:
        line += "\n" + stacktrace.rstrip("\n")
    return line


def _sink(render: Callable[[Record], str], stream: TextIO) -> Callable[[Message], None]:
    def write(message: Message) -> None:
        stream.write(render(message.record) + "\n")
        stream.flush()

    return write


def _ours_or_at_least_info(record: logging.LogRecord) -> bool:
    # A filter on the handler, not only a level on the root logger: a library that sets its own
    # logger's level (or a test that does) must not let its DEBUG lines through.
    return record.levelno >= LIBRARY_FLOOR or record.name.startswith("interlock.")


class _ToLoguru(logging.Handler):
    """A stdlib ``logging`` handler that hands each record to loguru, keeping its logger name;
    a library's records below :data:`LIBRARY_FLOOR` are dropped."""

    def __init__(self) -> None:
        super().__init__()
        self.addFilter(_ours_or_at_least_info)

    def emit(self, record: logging.LogRecord) -> None:
        from loguru import logger

        try:
            level: str | int = logger.level(record.levelname).name
        except ValueError:
            level = record.levelno
        caller = f"{record.filename}:{record.lineno}"
        logger.bind(logger=record.name, caller=caller).opt(exception=record.exc_info or None).log(
            level, record.getMessage()
        )


def configure_logging(
    level: str, *, format: LogFormat = "text", stream: TextIO | None = None
) -> None:
    """Log lines at ``level`` and above to ``stream`` (default stderr) in ``format``; the
    standard library's loggers go through the same sink, a library's at INFO and above."""
    from loguru import logger

    if format not in LOG_FORMATS:
        raise ValueError(f"--log-format: {format!r} is not one of {', '.join(LOG_FORMATS)}")
    level = level.upper()
    render = json_line if format == "json" else text_line
    logger.remove()
    logger.add(
        _sink(render, stream if stream is not None else sys.stderr),
        level=level,
        diagnose=False,
        backtrace=False,
    )
    # The root level spares libraries formatting DEBUG records that would be dropped anyway.
    stdlib_level = max(logging.getLevelName(level), LIBRARY_FLOOR)
    logging.basicConfig(handlers=[_ToLoguru()], level=stdlib_level, force=True)
