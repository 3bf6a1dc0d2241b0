import subprocess
import sys

import pytest

from interlock import __version__
from interlock.cli import main


def test_version_flag_prints_version(capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--version"])
    assert exit_.value.code == 0
    assert __version__ in capsys.readouterr().out


def test_console_script_help_runs():
    out = subprocess.run(
        [sys.executable, "-m", "interlock", "--help"], capture_output=True, text=True, check=True
    )
    assert "interlock" in out.stdout
