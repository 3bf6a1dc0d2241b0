"""The serving subcommands' event loop: uvloop by default, asyncio's with ``--no-uvloop``."""

from __future__ import annotations

import asyncio

import pytest
import uvloop

from interlock.cli import build_parser
from interlock.cli.loop import run_on_loop


async def _loop_type() -> type[asyncio.AbstractEventLoop]:
    return type(asyncio.get_running_loop())


def test_runs_on_uvloop_unless_asked_not_to() -> None:
    assert run_on_loop(_loop_type()) is uvloop.Loop
    assert not issubclass(run_on_loop(_loop_type(), uvloop=False), uvloop.Loop)


@pytest.mark.parametrize("command", ["run", "edge", "demo"])
def test_every_serving_subcommand_has_the_flag_and_its_variable(
    command: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert build_parser().parse_args([command]).no_uvloop is False
    assert build_parser().parse_args([command, "--no-uvloop"]).no_uvloop is True
    monkeypatch.setenv("INTERLOCK_NO_UVLOOP", "true")
    assert build_parser().parse_args([command]).no_uvloop is True
