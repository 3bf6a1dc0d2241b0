"""Load at a small scale: a burst of events while policy watches are open
(``docs/reliability.md``, "Load").

``benchmarks/load.py`` is the full-size run (50,000 events, 5,000 watches; figures in
docs/reliability.md). Here the same code runs with 2,000 events and 200 watches so that every CI
run checks what the figures rest on: nothing is lost (every watch ends on the model's policy for
the final objects), no message is dead-lettered, no actor restarts, and the mailboxes coalesce
(far fewer messages wait at once than events arrived).
"""

from __future__ import annotations

import asyncio
import importlib.util
import sys
from pathlib import Path
from types import ModuleType

LOAD = Path(__file__).resolve().parents[2] / "benchmarks" / "load.py"


def load_benchmark() -> ModuleType:
    spec = importlib.util.spec_from_file_location("interlock_benchmark_load", LOAD)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses resolve their module by name
    spec.loader.exec_module(module)
    return module


def test_a_burst_of_events_loses_nothing_and_queues_little() -> None:
    load = load_benchmark()
    scale = load.Scale(services=100, routes=60, backends=20, events=2000)
    result = asyncio.run(load.run_load(scale))
    assert result.watches == 200
    assert result.differences == 0
    assert result.dead_letters == 0 and result.restarts == 0
    assert result.max_queued_messages < scale.events / 4
