"""``benchmarks/edge.py --paced``: the latency table at one offered rate, from numbers.

Nothing is run or timed here: the wrk script that paces the connections and the table's
medians and ratios against nginx are checked from given results.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).resolve().parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # edge.py imports its neighbours (bench_report, bottleneck)

# By path, under a name of its own: `import edge` would find whichever `edge` was imported
# first in this session (tests/edge is a package too).
_spec = importlib.util.spec_from_file_location("benchmarks_edge", BENCHMARKS / "edge.py")
assert _spec is not None and _spec.loader is not None
edge = importlib.util.module_from_spec(_spec)
sys.modules["benchmarks_edge"] = edge  # dataclasses look their module up while being built
_spec.loader.exec_module(edge)


def _result(p50: float, p99: float, rps: float = 3000.0) -> edge.Result:
    return edge.Result(rps=rps, p99_ms=p99, errors=0, p50_ms=p50)


def test_each_connection_waits_its_share_of_the_offered_rate() -> None:
    # 32 connections offering 4,000 req/s together: each waits 8 ms on average, 0 to 16.
    script = edge.PACE_SCRIPT.format(twice_ms=16)
    assert script == "function delay()\n  return math.random(0, 16)\nend\n"


def test_the_table_gives_medians_and_ratios_to_nginx_round_by_round() -> None:
    args = argparse.Namespace(paced=4000.0, connections=32, seconds=4, paced_seconds=10)
    paced = {
        "interlock edge": [_result(2.0, 4.0), _result(3.0, 9.0), _result(2.5, 5.0)],
        "nginx 1.22.1": [_result(1.0, 2.0), _result(1.0, 3.0), _result(1.0, 2.5)],
    }
    table = edge.render_paced(paced, args=args)
    assert "waits a random 0 to 16 ms, 8 ms on average" in table
    assert "again for 10 s with `wrk`'s 32 connections paced" in table
    rows = {line.split(" | ")[0]: line for line in table.splitlines() if line.startswith("| ")}
    # p50 ratios per round 2.0, 3.0, 2.5 (median 2.5); p99 ratios 2.0, 3.0, 2.0 (median 2.0).
    assert rows["| interlock edge"].endswith("| 2.500 (2.000 to 3.000) | 5.000 (4.000 to 9.000) "
                                             "| 0 | 2.5x | 2.0x |")  # fmt: skip
    assert rows["| nginx 1.22.1"].endswith("| 1.0x | 1.0x |")


def test_the_command_line_names_the_paced_length_only_when_it_differs() -> None:
    def flags(**given: float) -> str:
        text: str = edge._paced_flags(argparse.Namespace(**{"seconds": 4, **given}))
        return text

    assert flags(paced=0.0, paced_seconds=4) == ""
    assert flags(paced=4000.0, paced_seconds=4) == " --paced 4000"
    assert flags(paced=4000.0, paced_seconds=10) == " --paced 4000 --paced-seconds 10"
