"""The `quire` entry point: the console script runs and lists its commands."""

import subprocess
import sys


def test_quire_help_lists_commands() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "quire", "--help"], capture_output=True, text=True, check=True
    ).stdout
    assert "Usage: quire" in out


def test_unknown_command_fails_cleanly() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "quire", "no-such-command"], capture_output=True, text=True
    )
    assert proc.returncode == 2
    assert "No such command" in proc.stderr
