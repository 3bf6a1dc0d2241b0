"""The one way ``interlock`` subcommands read ``INTERLOCK_<FLAG>`` environment variables.

A Deployment sets flags as environment variables (``--policy-addr`` → ``INTERLOCK_POLICY_ADDR``);
every subcommand reads them through :class:`EnvDefaults`, so each flag's variable is named the
same way, parsed the same way and shown the same way in ``--help``. Without this module each
subcommand read the environment its own way, and some flags ignored it.
"""

from __future__ import annotations

import argparse
import os
from typing import Any

_TRUE = {"1", "true", "yes", "on"}
_FALSE = {"0", "false", "no", "off", ""}


def env_name(flag: str) -> str:
    """``--policy-addr`` → ``INTERLOCK_POLICY_ADDR``."""
    return "INTERLOCK_" + flag.lstrip("-").replace("-", "_").upper()


def env_bool(flag: str) -> bool:
    """The boolean ``INTERLOCK_<FLAG>`` holds (unset or empty: false)."""
    raw = os.environ.get(env_name(flag), "").strip().lower()
    if raw in _TRUE:
        return True
    if raw in _FALSE:
        return False
    raise SystemExit(f"{env_name(flag)}: {raw!r} is not a boolean (true/false)")


def env_list(flag: str) -> list[str]:
    """The comma-separated values ``INTERLOCK_<FLAG>`` holds (unset: none)."""
    raw = os.environ.get(env_name(flag), "")
    return [part.strip() for part in raw.split(",") if part.strip()]


def seconds(text: str) -> float:
    """A flag's length of time: a number of seconds (``15``, ``2.5``) or a duration (``15s``,
    ``500ms``, ``1m30s``); ``argparse`` names the flag in the error."""
    from interlock.model.durations import InvalidDuration, duration_seconds

    try:
        value = float(text)
    except ValueError:
        try:
            value = duration_seconds(text.strip())
        except InvalidDuration:
            raise argparse.ArgumentTypeError(
                f"{text!r} is not a duration (for example 15s, 500ms, 1m30s, or 2.5 for seconds)"
            ) from None
    if value < 0:
        raise argparse.ArgumentTypeError(f"{text!r} is negative")
    return value


def format_seconds(value: float) -> str:
    """``15.0`` → ``15s``, ``0.25`` → ``250ms``, ``90`` → ``1m30s``: how ``--help`` shows it."""
    if 0 < value < 1:
        return f"{value * 1000:g}ms"
    minutes, rest = divmod(value, 60)
    if minutes and value < 3600:
        return f"{minutes:g}m" + (f"{rest:g}s" if rest else "")
    return f"{value:g}s"


def _env_and_default(flag: str, default: str | None) -> str:
    if default is None or default == "":
        return f"env {env_name(flag)}"
    return f"env {env_name(flag)}; default: {default}"


class EnvDefaults:
    """Adds flags whose default comes from ``INTERLOCK_<FLAG>`` and says so in ``--help``."""

    def __init__(self, parser: argparse.ArgumentParser) -> None:
        self.parser = parser

    @classmethod
    def subcommand(cls, subparsers: Any, name: str, *, help: str, description: str) -> EnvDefaults:
        """The flags of a new subcommand ``name`` (its parser is :attr:`parser`)."""
        parser: argparse.ArgumentParser = subparsers.add_parser(
            name, help=help, description=description
        )
        return cls(parser)

    def value(
        self,
        flag: str,
        *,
        default: str | None,
        help: str,
        shown: str | None = None,
        **kw: Any,
    ) -> None:
        """A flag with a value; ``shown`` words the default in ``--help`` when the value itself
        would not read well (``None``, or a default computed at start)."""
        env = os.environ.get(env_name(flag))
        self.parser.add_argument(
            flag,
            default=env if env is not None else default,
            help=f"{help} ({_env_and_default(flag, shown if shown is not None else default)})",
            **kw,
        )

    def number(self, flag: str, *, default: float, help: str) -> None:
        """A length of time: seconds (``15``, ``2.5``) or a duration (``15s``, ``1m30s``)."""
        env = os.environ.get(env_name(flag))
        self.parser.add_argument(
            flag,
            type=seconds,
            default=seconds(env) if env is not None else default,
            metavar="DURATION",
            help=f"{help} ({_env_and_default(flag, format_seconds(default))})",
        )

    def switch(self, flag: str, *, help: str) -> None:
        self.parser.add_argument(
            flag,
            action="store_true",
            default=env_bool(flag),
            help=f"{help} (env {env_name(flag)}=true; default: off)",
        )

    def logging(self, *, level: str = "INFO") -> None:
        """``--log-level`` and ``--log-format``, the same on every subcommand that logs."""
        from interlock.logs import LOG_FORMATS, LOG_LEVELS

        self.value(
            "--log-level",
            default=level,
            metavar="LEVEL",
            help="DEBUG, INFO, WARNING or ERROR (any case)",
            choices=LOG_LEVELS,
            type=str.upper,
        )
        self.value(
            "--log-format",
            default="text",
            metavar="FORMAT",
            help="text (for people) or json (one object a line, controller-runtime's keys)",
            choices=LOG_FORMATS,
            type=str.lower,
        )

    def repeated(self, flag: str, *, help: str, metavar: str) -> None:
        """A repeatable flag; when it is not given, :func:`env_list` supplies the values."""
        self.parser.add_argument(
            flag,
            action="append",
            default=None,
            metavar=metavar,
            help=f"{help}; repeatable (env {env_name(flag)}, comma-separated)",
        )
