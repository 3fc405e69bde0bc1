"""Ctrl-C typed at a terminal (a pty: the terminal driver sends SIGINT to the foreground process
group, as a person's Ctrl-C does) is a normal end: `consume -n 0`, `read --follow`, `perf` and
`standalone` stop cleanly with exit 0 and print their summary, also when started with SIGINT
ignored (as a background job of a script)."""

from __future__ import annotations

import os
import pty
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from tests.e2e.conftest import Standalone, standalone  # noqa: F401  (fixture)
from tests.fixtures.processes import free_port

ROOT = Path(__file__).resolve().parents[2]


def ctrl_c_in_a_pty(args: list[str], ready: bytes | None, wait_s: float = 0.0, timeout: float = 60,
                    sigint_ignored: bool = False) -> tuple[int, str]:
    """Run `quire ARGS` on a pty; once ``ready`` was printed (and ``wait_s`` passed) type Ctrl-C;
    return the exit code and everything it printed. ``sigint_ignored``: start it with SIGINT
    ignored, as a shell without job control (a script, a CI step) starts ``quire ... &``. A
    child still running at ``timeout`` is killed and fails the test."""
    pid, fd = pty.fork()
    if pid == 0:  # the child: its controlling terminal is the pty
        os.chdir(ROOT)
        if sigint_ignored:
            signal.signal(signal.SIGINT, signal.SIG_IGN)  # an ignored signal stays ignored across exec
        os.execv(sys.executable, [sys.executable, "-m", "quire", *args])
    out = b""
    sent = False
    deadline = time.monotonic() + timeout
    seen_at = None
    try:
        while time.monotonic() < deadline:
            if not sent and (ready is None or ready in out):
                seen_at = seen_at or time.monotonic()
                if time.monotonic() - seen_at >= wait_s:
                    os.write(fd, b"\x03")  # Ctrl-C
                    sent = True
            r, _, _ = select.select([fd], [], [], 0.2)
            if r:
                try:
                    chunk = os.read(fd, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                out += chunk
        while True:  # (the terminal closes a moment before the process ends)
            ended, status = os.waitpid(pid, os.WNOHANG)
            if ended or time.monotonic() > deadline:
                break
            time.sleep(0.05)
        if not ended:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            raise AssertionError(f"quire {' '.join(args)} still ran {timeout:.0f} s after its start (Ctrl-C typed: "
                                 f"{sent}):\n{out.decode(errors='replace')}")
    finally:
        os.close(fd)
    assert sent, f"never saw {ready!r}:\n{out.decode(errors='replace')}"
    return os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def test_ctrl_c_ends_consume_read_and_perf_with_their_summary(standalone: Standalone) -> None:
    url = ["--url", standalone.url]
    subprocess.run([sys.executable, "-m", "quire", "produce", "pty-topic", "-m", "m", "-n", "5", *url], check=True,
                   capture_output=True, cwd=ROOT, timeout=60)
    code, out = ctrl_c_in_a_pty(["consume", "pty-topic", "-s", "pty-sub", "--earliest", "-n", "0", *url],
                                b"content:m\r\nkey:[null], properties:[], publishTime:[", wait_s=2)
    assert code == 0 and out.count("content:m") == 5 and "5 messages successfully consumed (interrupted)" in out, out
    code, out = ctrl_c_in_a_pty(["read", "pty-topic", "--follow", *url], b"content:m", wait_s=2)
    assert code == 0 and out.count("content:m") == 5 and "5 messages read (interrupted)" in out, out
    code, out = ctrl_c_in_a_pty(["perf", "produce", "pty-perf", "-t", "600", "-r", "100", "--no-progress", *url],
                                b"msg/s", wait_s=2)
    assert code == 0 and "Aggregated throughput stats" in out and '"mode": "produce"' in out, out
    assert "Traceback" not in out


def test_ctrl_c_ends_client_commands_that_inherited_sigint_ignored(standalone: Standalone) -> None:
    # Started with SIGINT ignored (`quire consume ... &` from a script), Python installs no SIGINT
    # handler and trio then none either: Ctrl-C was ignored and `consume -n 0` ran on forever.
    url = ["--url", standalone.url]
    subprocess.run([sys.executable, "-m", "quire", "produce", "pty-ignored", "-m", "m", "-n", "3", *url], check=True,
                   capture_output=True, cwd=ROOT, timeout=60)
    runs = [(["consume", "pty-ignored", "-s", "pty-ignored-sub", "--earliest", "-n", "0", *url], b"content:m",
             "messages successfully consumed (interrupted)"),
            (["read", "pty-ignored", "--follow", *url], b"content:m", "messages read (interrupted)"),
            (["perf", "produce", "pty-ignored-perf", "-t", "600", "-r", "100", "--no-progress", *url], b"msg/s",
             "Aggregated throughput stats")]
    for args, ready, summary in runs:
        code, out = ctrl_c_in_a_pty(args, ready, wait_s=1, timeout=45, sigint_ignored=True)
        assert code == 0 and summary in out and "Traceback" not in out, out


def test_ctrl_c_stops_a_standalone_cleanly(tmp_path: Path) -> None:
    code, out = ctrl_c_in_a_pty(["standalone", "--data-dir", str(tmp_path / "data"), "--port", str(free_port()),
                                 "--web-port", str(free_port()), "--bookie-port", "0", "--bookie-http-port", "0"],
                                b"broker serving", wait_s=0.5, timeout=90)
    assert code == 0, out
    assert "signal SIGINT: shutting down" in out and "Traceback" not in out
