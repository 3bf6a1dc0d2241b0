"""Load: a burst of 50,000 events while 5,000 policy watches are open.

The scenario is ``tests/kit/load_scenario.py``'s (its docstring says what is loaded and
measured); ``tests/reliability/test_reliability_load.py`` runs it at a small scale on every CI
run, this script at full size:

    .venv/bin/python benchmarks/load.py [--services 2500] [--routes 1000] [--events 50000]

It prints the figures (copy them into docs/reliability.md).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import platform
import sys
from dataclasses import asdict
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path[:0] = [str(ROOT)]

from tests.kit.load_scenario import Scale, run_load  # noqa: E402


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--services", type=int, default=2500, help="2 watched ports each")
    parser.add_argument("--routes", type=int, default=1000)
    parser.add_argument("--backends", type=int, default=200)
    parser.add_argument("--events", type=int, default=50_000)
    parser.add_argument("--seed", type=int, default=1)
    args = parser.parse_args()
    scale = Scale(args.services, args.routes, args.backends, args.events, args.seed)
    result = asyncio.run(run_load(scale))
    print(
        f"machine: {platform.machine()}, {os.cpu_count()} cores, Python {platform.python_version()}"
    )
    print(json.dumps(asdict(result), indent=2))


if __name__ == "__main__":
    main()
