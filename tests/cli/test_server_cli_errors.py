"""Server commands fail fast and in one line when what they need is not there."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.fixtures.processes import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_broker_with_zookeeper_unreachable_fails_within_seconds() -> None:
    port = free_port()
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "quire", "broker", "--metadata-url", f"zk://127.0.0.1:{port}/q",
                          "--port", "0", "--web-port", "0"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert time.monotonic() - started < 10
    assert res.returncode == 1 and "Traceback" not in res.stderr
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("error:"))
    assert f"cannot connect to ZooKeeper at 127.0.0.1:{port}" in line and "is ZooKeeper running?" in line
    assert "Connection refused" not in res.stderr  # no kazoo retry warnings
