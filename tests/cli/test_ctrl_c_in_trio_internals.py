"""Ctrl-C that lands inside trio's own bookkeeping still ends a client command cleanly.

trio raises KeyboardInterrupt wherever unprotected code runs when SIGINT arrives, and
``nursery.start_soon`` is such code: an interrupt between its adding the child to the nursery
and scheduling it leaves a child that never runs, so the nursery (a connection's, then the
client's) waits for it forever. ``quire consume`` given Ctrl-C while it connected hung idle that
way. tests/clients/ki_injection.py raises SIGINT exactly there, in a child process.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def run_interrupted(*args: str, expect: str = "ClientConnection._writer") -> tuple[int, str]:
    """Exit code and stderr of ``python -m tests.clients.ki_injection ARGS``."""
    proc = subprocess.Popen([sys.executable, "-m", "tests.clients.ki_injection", *args], stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
    try:
        _, err = proc.communicate(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        _, err = proc.communicate()
        raise AssertionError(f"{' '.join(args)}: still running 30 s after Ctrl-C:\n{err}") from None
    fired = [line for line in err.splitlines() if line.startswith("interrupt raised in")]
    assert fired and expect in fired[0], err  # it came where it was meant to
    return proc.returncode, err


def test_ctrl_c_while_a_connection_starts_its_tasks_ends_consume_and_read() -> None:
    for args, summary in ((["consume", "t", "-s", "s", "-n", "0"], "0 messages successfully consumed (interrupted)"),
                          (["read", "t", "--follow"], "0 messages read (interrupted)")):
        code, err = run_interrupted("cli", *args)
        assert code == 0 and summary in err, err
