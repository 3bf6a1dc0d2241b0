"""The program asks frozenlist for its pure-Python class, sparing libstdc++ (issue 29, item 5).

Each check runs in a fresh interpreter: whether frozenlist's extension loads is decided when
frozenlist is first imported, and this test process has imported aiohttp already.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

CHECK = """
import json, os, sys
from interlock.__main__ import frozenlist_python
chosen = frozenlist_python.prefer()
import aiohttp, frozenlist
with open("/proc/self/maps") as maps:
    mapped = maps.read()
print(json.dumps({
    "chosen": chosen,
    "class": frozenlist.FrozenList is frozenlist.PyFrozenList,
    "extension imported": "frozenlist._frozenlist" in sys.modules,
    "libstdc++ mapped": "libstdc++" in mapped,
}))
"""

ENTRY = """
import os, sys
from interlock.__main__ import main
sys.argv = ["interlock", "--version"]
try:
    main()
except SystemExit:
    pass
print(repr(os.environ.get("FROZENLIST_NO_EXTENSIONS")))
"""


def _python(code: str, **variables: str) -> str:
    env = {k: v for k, v in os.environ.items() if k != "FROZENLIST_NO_EXTENSIONS"} | variables
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=120, env=env
    )
    assert out.returncode == 0, out.stderr
    return out.stdout.strip().splitlines()[-1]


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps (Linux)")
def test_aiohttp_imported_after_the_entry_point_uses_the_pure_python_frozenlist() -> None:
    assert json.loads(_python(CHECK)) == {
        "chosen": True,
        "class": True,
        "extension imported": False,
        "libstdc++ mapped": False,
    }


@pytest.mark.skipif(not os.path.exists("/proc/self/maps"), reason="reads /proc/self/maps (Linux)")
def test_an_operators_setting_is_kept_and_the_extension_then_loads() -> None:
    # An empty value is frozenlist's "extensions on"; with it the check above fails, so it can.
    assert json.loads(_python(CHECK, FROZENLIST_NO_EXTENSIONS="")) == {
        "chosen": False,
        "class": False,
        "extension imported": True,
        "libstdc++ mapped": True,
    }


def test_the_program_sets_the_switch_before_running_the_command_line() -> None:
    assert _python(ENTRY) == "'1'"
    assert _python(ENTRY, FROZENLIST_NO_EXTENSIONS="") == "''"
