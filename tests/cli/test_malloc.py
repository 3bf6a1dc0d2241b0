"""glibc's mmap threshold pinned for the serving subcommands (interlock/cli/malloc.py)."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from interlock.cli.malloc import ENV, malloc_statistics

# In a process of its own (the threshold is process-wide and only ever raised): a freed 8 MiB
# block raises glibc's dynamic threshold to 8 MiB, after which a 1 MiB buffer comes out of the
# heap — unless the threshold was pinned, when it gets its own mmap, given back on free.
PROBE = """
import sys
from interlock.cli.malloc import malloc_statistics, pin_mmap_threshold
if sys.argv[1] == "pin":
    assert pin_mmap_threshold()
big = bytearray(8 << 20)
del big
before = malloc_statistics()["mmapped"]
block = bytearray(1 << 20)
print(malloc_statistics()["mmapped"] - before >= 1 << 20)
"""


def _large_block_mmapped(mode: str) -> bool:
    env = {k: v for k, v in os.environ.items() if k != ENV}
    out = subprocess.run(
        [sys.executable, "-c", PROBE, mode], env=env, capture_output=True, text=True, check=True
    )
    return out.stdout.strip() == "True"


@pytest.mark.skipif(not malloc_statistics(), reason="not glibc >= 2.33")
def test_a_large_buffer_stays_out_of_the_heap_once_the_threshold_is_pinned() -> None:
    assert _large_block_mmapped("pin")
    # Without the pin glibc's own adjustment puts it in the heap (what the soak saw grow).
    assert not _large_block_mmapped("leave")


def test_an_operator_setting_is_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    from interlock.cli.malloc import pin_mmap_threshold

    monkeypatch.setenv(ENV, "65536")
    assert pin_mmap_threshold() is False
