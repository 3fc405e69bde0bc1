"""``quire cluster up`` starts a real multi-process cluster, serves the official client, shows in
``quire cluster-status`` and stops cleanly on Ctrl-C (SIGINT)."""

from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.e2e.conftest import new_client

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.skipif(shutil.which("java") is None, reason="ZooKeeper needs Java")


def test_cluster_up_serves_the_official_client_and_stops_on_ctrl_c(tmp_path: Path) -> None:
    log = tmp_path / "cluster-up.out"
    with open(log, "wb") as out:
        proc = subprocess.Popen(
            [sys.executable, "-m", "quire", "cluster", "up", "--bookies", "3", "--brokers", "2", "--zookeeper",
             "--data-dir", str(tmp_path / "data"), "--zookeeper-port", "0", "--bookie-port", "0",
             "--bookie-http-port", "0", "--broker-port", "0", "--web-port", "0", "--log-level", "WARNING"],
            stdout=out, stderr=subprocess.STDOUT, cwd=ROOT, start_new_session=True)
    try:
        deadline = time.monotonic() + 240
        while "cluster ready" not in log.read_text() and time.monotonic() < deadline:
            assert proc.poll() is None, log.read_text()
            time.sleep(0.5)
        text = log.read_text()
        m = re.search(r"service URL (pulsar://\S+)\s+admin (http://\S+)", text)
        assert m, text
        service_url, admin = m.groups()
        pids = [int(p) for p in re.findall(r"\(pid (\d+),", text)]
        assert len(pids) == 6  # zookeeper, 3 bookies, 2 brokers

        client = new_client(service_url)
        try:
            producer = client.create_producer("persistent://public/default/cluster-up")
            consumer = client.subscribe("persistent://public/default/cluster-up", "s")
            for i in range(20):
                producer.send(f"m{i}".encode())
            got = [consumer.receive(timeout_millis=20000).data() for _ in range(20)]
            assert got == [f"m{i}".encode() for i in range(20)]
        finally:
            client.close()

        status = subprocess.run([sys.executable, "-m", "quire", "cluster-status", "--json", "--admin-url", admin],
                                capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert status.returncode == 0, status.stderr
        view = json.loads(status.stdout)
        assert len(view["brokers"]) == 2
        assert [b["state"] for b in view["bookies"]] == ["writable"] * 3
        assert view["bundles"] and view["underReplicatedLedgers"] == []

        proc.send_signal(signal.SIGINT)
        assert proc.wait(90) == 0, log.read_text()
        text = log.read_text()
        assert "stopped broker-1 (exit 0)" in text and "stopped bookie-3 (exit 0)" in text
        assert "Traceback" not in text
        for pid in pids:
            with pytest.raises(ProcessLookupError):
                os.kill(pid, 0)
    finally:
        if proc.poll() is None:  # a failed test: the children have their own process groups
            for pid in [int(p) for p in re.findall(r"\(pid (\d+),", log.read_text())] + [proc.pid]:
                try:
                    os.killpg(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
