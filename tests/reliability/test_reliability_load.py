"""Load at a small scale: a burst of events while policy watches are open
(``docs/reliability.md``, "Load").

``benchmarks/load.py`` is the full-size run of the same scenario (``load_scenario.py``: 50,000
events, 5,000 watches; figures in docs/reliability.md). Here it runs with 2,000 events and 200
watches so that every CI run checks what the figures rest on: nothing is lost (every watch ends
on the model's policy for the final objects), no message is dead-lettered, no actor restarts,
and the mailboxes coalesce (far fewer messages wait at once than events arrived).
"""

from __future__ import annotations

import asyncio

from tests.kit.load_scenario import Scale, run_load


def test_a_burst_of_events_loses_nothing_and_queues_little() -> None:
    scale = Scale(services=100, routes=60, backends=20, events=2000)
    result = asyncio.run(run_load(scale))
    assert result.watches == 200
    assert result.differences == 0
    assert result.dead_letters == 0 and result.restarts == 0
    assert result.max_queued_messages < scale.events / 4
