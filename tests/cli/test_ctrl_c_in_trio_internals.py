"""Ctrl-C that lands inside trio's own bookkeeping still ends a client command cleanly.

trio raises KeyboardInterrupt wherever unprotected code runs when SIGINT arrives, and
``nursery.start_soon`` is such code: an interrupt between its adding the child to the nursery
and scheduling it leaves a child that never runs, so the nursery (a connection's, then the
client's) waits for it forever. ``quire consume`` pressed Ctrl-C while it connected hung idle
that way. The command here runs in a child process against the scripted fake broker (a hang
must not take the test run with it), and SIGINT is raised exactly there: inside the scheduling of
a new connection's writer task.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

SCRIPT = r"""
import signal, sys, threading
import trio
from trio._core._run import Runner
from quire.cli_errors import listen_to_ctrl_c
from tests.clients.fake_broker import FakeBroker

broker, ready = FakeBroker(), threading.Event()
async def serve():
    async with trio.open_nursery() as nursery:
        await nursery.start(broker.run)
        ready.set()
threading.Thread(target=trio.run, args=(serve,), daemon=True).start()
ready.wait()

fired = []
schedule = Runner.reschedule
def reschedule(self, task, *args):
    # the first scheduling of a new connection's writer task, on the command's (main) thread
    if not fired and args == (None,) and task.name.endswith("ClientConnection._writer") and (
            threading.current_thread() is threading.main_thread()):
        fired.append(task.name)
        signal.raise_signal(signal.SIGINT)
    return schedule(self, task, *args)
Runner.reschedule = reschedule

listen_to_ctrl_c()  # (a test run started in the background inherits SIGINT ignored)
from quire.cli import cli
from quire.cli_errors import run
sys.argv = ["quire", *sys.argv[1:], "--url", broker.url]
try:
    run(cli)
finally:
    print("interrupt raised in", fired, file=sys.stderr)
"""


def test_ctrl_c_while_a_connection_starts_its_tasks_ends_consume_and_read() -> None:
    for args, summary in ((["consume", "t", "-s", "s", "-n", "0"], "0 messages successfully consumed (interrupted)"),
                          (["read", "t", "--follow"], "0 messages read (interrupted)")):
        proc = subprocess.Popen([sys.executable, "-c", SCRIPT, *args], stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)})
        try:
            _, err = proc.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
            raise AssertionError(f"quire {' '.join(args)} still ran 30 s after Ctrl-C:\n{err}") from None
        assert "ClientConnection._writer" in err, err  # the interrupt came where it was meant to
        assert proc.returncode == 0 and summary in err, err
