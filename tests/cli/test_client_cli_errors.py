"""The client-side commands fail in one line and stop cleanly (produce/consume/read/perf/admin).

Errors: one line that says what to do, exit 1 (2 for usage errors), no traceback unless
``--debug`` / ``QUIRE_DEBUG=1``. Ctrl-C is the normal end of ``consume -n 0``, ``read --follow``
and ``perf``: they print their summary and exit 0. ``quire read | head`` ends quietly.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import Standalone, standalone  # noqa: F401  (fixture)
from tests.fixtures.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
QUIRE = [sys.executable, "-m", "quire"]


def quire(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run([*QUIRE, *args], capture_output=True, text=True, timeout=60, cwd=ROOT,
                          env={**os.environ, **(env or {})})


def test_unreachable_broker_and_admin_are_one_line_errors() -> None:
    port = free_port()  # nothing listens there
    for args in (["produce", "t", "-m", "x", "--url", f"pulsar://localhost:{port}"],
                 ["consume", "t", "-s", "s", "-t", "key_shared", "--url", f"pulsar://localhost:{port}"],
                 ["admin", "--admin-url", f"http://localhost:{port}", "tenants", "list"]):
        res = quire(*args)
        assert res.returncode == 1, res.stderr
        assert "Traceback" not in res.stderr and "ExceptionGroup" not in res.stderr
        first = res.stderr.strip().splitlines()[0]
        assert f"cannot connect to localhost:{port}" in first and "is `quire standalone` running?" in first


def test_debug_shows_the_traceback_and_usage_errors_exit_2() -> None:
    port = free_port()
    for extra, env in ((["--debug"], None), ([], {"QUIRE_DEBUG": "1"})):
        res = quire("produce", "t", "-m", "x", "--url", f"pulsar://localhost:{port}", *extra, env=env)
        assert res.returncode == 1 and "Traceback" in res.stderr
    bad = quire("consume", "t", "-s", "s", "-t", "bogus")
    assert bad.returncode == 2 and "bogus" in bad.stderr and "Traceback" not in bad.stderr


def test_read_into_head_ends_quietly_and_ctrl_c_stops_cleanly(standalone: Standalone) -> None:
    url = ["--url", standalone.url]
    assert quire("produce", "cli-sigint", "-m", "m", "-n", "2000", *url).returncode == 0
    head = subprocess.run(f"{sys.executable} -m quire read cli-sigint --url {standalone.url} | head -1; "
                          "echo rc=${PIPESTATUS[0]}", shell=True, executable="/bin/bash", capture_output=True,
                          text=True, timeout=60, cwd=ROOT)
    assert "rc=0" in head.stdout and "Traceback" not in head.stderr and "Broken pipe" not in head.stderr
    runs = {
        "consume": (["consume", "cli-sigint", "-s", "sigint-sub", "--earliest", "-n", "0", *url],
                    "2000 messages successfully consumed (interrupted)"),
        "read": (["read", "cli-sigint", "--follow", *url], "2000 messages read (interrupted)"),
        "perf": (["perf", "produce", "cli-sigint-perf", "-t", "600", "-r", "200", "--no-progress", *url],
                 "Aggregated throughput stats"),
    }
    for name, (args, summary) in runs.items():
        proc = subprocess.Popen([*QUIRE, *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, cwd=ROOT)
        deadline = time.monotonic() + 30
        lines = 0
        while name != "perf" and lines < 2000 and time.monotonic() < deadline:
            line = proc.stdout.readline()  # type: ignore[union-attr]
            lines += bool(line)
        if name == "perf":
            time.sleep(4)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
        assert proc.returncode == 0, f"{name}: exit {proc.returncode}\n{err}"
        assert summary in err and "Traceback" not in err, f"{name}: {err}"
        if name == "perf":
            assert '"mode": "produce"' in out


@pytest.mark.parametrize("spelling", ["Key_Shared", "key_shared", "KeyShared", "shared", "FAILOVER"])
def test_subscription_types_as_pulsar_client_spells_them(spelling: str) -> None:
    from quire.cli_types import SubscriptionType

    assert SubscriptionType().convert(spelling, None, None) in {"KeyShared", "Shared", "Failover"}
