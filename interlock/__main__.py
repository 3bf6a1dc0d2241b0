"""The ``interlock`` program: ``python -m interlock`` and the ``interlock`` console script.

What must happen before anything imports interlock's models happens here, not in
``interlock.cli`` (importing that package imports the subcommands and, through them, the
models): pydantic's plugins are turned off (:mod:`interlock.pydantic_plugins`), and frozenlist
is asked for its pure-Python class before aiohttp imports it (:mod:`interlock.frozenlist_python`).
"""

from __future__ import annotations

from interlock import frozenlist_python, pydantic_plugins


def main() -> int:
    """Run the command line (``interlock.cli.main``) as the program."""
    pydantic_plugins.disable()
    frozenlist_python.prefer()
    from interlock.cli import main as run_command_line

    return run_command_line()


if __name__ == "__main__":
    raise SystemExit(main())
