"""An ``argparse`` parser that helps a person who mistyped.

Plain ``argparse`` answers ``interlock run --polcy-addr …`` with the top-level usage and
"unrecognized arguments", and ``interlock rnu`` with the whole list of commands. This parser
suggests the nearest flag or command (``did you mean --policy-addr?``) and, for an unknown flag,
prints the usage of the subcommand it was given to, which is where the right flag is listed.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Iterable, Sequence
from typing import NoReturn

_INVALID_CHOICE = re.compile(r"invalid choice: '([^']*)' \(choose from (.*)\)")


def nearest(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate closest to ``word``, if one is close enough to be a typo of it."""
    import difflib  # only for a mistyped command line: not imported by one that parses

    matches = difflib.get_close_matches(word, list(candidates), n=1, cutoff=0.6)
    return matches[0] if matches else None


class Parser(argparse.ArgumentParser):
    """``ArgumentParser`` with suggestions; subparsers made from it are of this class too."""

    def error(self, message: str) -> NoReturn:
        choice = _INVALID_CHOICE.search(message)
        if choice is not None:
            suggestion = nearest(choice[1], re.findall(r"'([^']*)'", choice[2]))
            if suggestion is not None:
                message += f"; did you mean {suggestion!r}?"
        self.print_usage(sys.stderr)
        self.exit(2, f"{self.prog}: error: {message}\n")

    def unrecognized(self, extras: Sequence[str]) -> NoReturn:
        """Refuse ``extras`` (what no flag of this parser took), suggesting the nearest flags."""
        flags = [option for action in self._actions for option in action.option_strings]
        hints = []
        for extra in extras:
            if extra.startswith("-"):
                suggestion = nearest(extra.split("=", 1)[0], flags)
                if suggestion is not None:
                    hints.append(f"did you mean {suggestion}?")
        message = f"unrecognized arguments: {' '.join(extras)}"
        self.error(message + (f" ({'; '.join(hints)})" if hints else ""))


def chosen_parser(parser: argparse.ArgumentParser, args: argparse.Namespace) -> Parser:
    """The innermost subcommand parser that ``args`` went through (``interlock policy watch``
    → the ``watch`` parser)."""
    current = parser
    while True:
        subparsers = [
            action for action in current._actions if isinstance(action, argparse._SubParsersAction)
        ]
        if not subparsers:
            break
        name = getattr(args, subparsers[0].dest, None)
        if name is None or name not in subparsers[0].choices:
            break
        current = subparsers[0].choices[name]
    assert isinstance(current, Parser)
    return current
