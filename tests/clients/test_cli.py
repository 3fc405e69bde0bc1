"""``quire produce|consume|read|perf|admin`` end to end as subprocesses against a real broker."""

from __future__ import annotations

import json
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

from tests.clients.conftest import Broker
from tests.fixtures.processes import REPO_ROOT


def _env(broker: Broker) -> dict[str, str]:
    return {"QUIRE_SERVICE_URL": broker.url, "QUIRE_ADMIN_URL": broker.admin_url, "PYTHONPATH": str(REPO_ROOT),
            "PATH": "/usr/bin:/bin"}


def quire(broker: Broker, *args: str, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    proc = subprocess.run([sys.executable, "-m", "quire", *args], capture_output=True, text=True,
                          timeout=timeout, env=_env(broker), cwd=REPO_ROOT)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def test_produce_consume_read(broker: Broker, tmp_path: Path) -> None:
    topic = f"cli-{uuid.uuid4().hex[:8]}"
    body = tmp_path / "body.bin"
    body.write_bytes(b"from-a-file")
    out = quire(broker, "produce", topic, "-m", "hello", "-m", "world", "-n", "2", "-p", "k=v", "-f", str(body)).stdout
    assert "6 messages successfully produced" in out
    consumed = quire(broker, "consume", topic, "-s", "cli-sub", "--earliest", "-n", "6", "-t", "Shared").stdout
    # pulsar-client's lines: key:[...], properties:[...], publishTime:[...], id:[(l,e,p,b)], content:...
    bodies = [line.split(", content:", 1)[1] for line in consumed.splitlines()]
    assert bodies == ["hello", "world", "from-a-file"] * 2
    assert all(line.startswith("key:[null], properties:[k=v], publishTime:[") for line in consumed.splitlines())
    read = quire(broker, "read", topic, "--start", "earliest").stdout.splitlines()
    assert [line.split(", content:", 1)[1] for line in read] == bodies
    first_id = read[0].split("id:[", 1)[1].split("]", 1)[0].strip("()").split(",")
    from_second = quire(broker, "read", topic, "--start", f"{first_id[0]}:{first_id[1]}:-1:0").stdout.splitlines()
    assert len(from_second) == 5
    assert quire(broker, "read", topic, "--start", "latest").stdout == ""


def test_produce_rate_limit(broker: Broker, client) -> None:  # type: ignore[no-untyped-def]
    import clients

    topic = f"persistent://public/default/cli-rate-{uuid.uuid4().hex[:8]}"
    quire(broker, "produce", topic, "-m", "tick", "-n", "10", "-r", "20")
    reader = client.create_reader(topic, clients.MessageId.earliest)
    stamps = [reader.read_next(5000).publish_timestamp() for _ in range(10)]
    assert stamps[-1] - stamps[0] >= 400  # 10 messages at 20/s span at least 9 intervals of 50 ms


def test_perf_produce_and_consume(broker: Broker, tmp_path: Path) -> None:
    topic = f"cli-perf-{uuid.uuid4().hex[:8]}"
    out = tmp_path / "perf.json"
    result = quire(broker, "perf", "produce", topic, "-m", "2000", "-t", "0", "-s", "100", "--no-progress",
                   "--json-out", str(out))
    summary = json.loads(result.stdout.strip().splitlines()[-1])
    assert summary["messages"] == 2000 and summary["errors"] == 0 and summary["client"] == "quire"
    assert summary["latency_ms"]["p99"] >= summary["latency_ms"]["p50"] > 0 and summary["cpu_us_per_msg"] > 0
    assert json.loads(out.read_text()) == summary
    consumed = quire(broker, "perf", "consume", topic, "--earliest", "-m", "2000", "-t", "30", "--no-progress")
    assert json.loads(consumed.stdout.strip().splitlines()[-1])["messages"] == 2000
    official = quire(broker, "perf", "produce", topic, "--client", "official", "-m", "500", "-t", "0",
                     "--no-progress")
    assert json.loads(official.stdout.strip().splitlines()[-1])["messages"] == 500
    # Rate limiting: 100 messages at 200 msg/s cannot finish in under ~0.5 s.
    paced = quire(broker, "perf", "produce", topic, "-r", "200", "-m", "100", "-t", "0", "--no-progress")
    summary = json.loads(paced.stdout.strip().splitlines()[-1])
    assert summary["messages"] == 100 and summary["duration_s"] >= 0.45


def test_perf_live_progress_on_a_terminal(broker: Broker) -> None:
    import os
    import pty
    import select
    import time

    master, slave = pty.openpty()
    proc = subprocess.Popen([sys.executable, "-m", "quire", "perf", "produce", f"cli-live-{uuid.uuid4().hex[:8]}",
                             "-r", "400", "-m", "1000", "-t", "0", "-s", "10"],
                            stdout=subprocess.PIPE, stderr=slave, env=_env(broker), cwd=REPO_ROOT)
    os.close(slave)
    screen = b""
    deadline = time.monotonic() + 60
    try:
        while time.monotonic() < deadline:
            if select.select([master], [], [], 0.5)[0]:
                try:
                    chunk = os.read(master, 65536)
                except OSError:  # EIO: the child closed the terminal
                    break
                if not chunk:
                    break
                screen += chunk
            elif proc.poll() is not None:
                break
        stdout, _ = proc.communicate(timeout=30)
    finally:
        os.close(master)
        if proc.poll() is None:
            proc.kill()
    assert proc.returncode == 0
    text = screen.decode(errors="replace")
    # 1000 messages at 400/s take >= 2.5 s: the table is drawn, then redrawn in place every second.
    assert "produce[quire]" in text and text.count("msg/s") >= 3 and "\x1b[" in text
    assert json.loads(stdout.decode().strip().splitlines()[-1])["messages"] == 1000


def admin(broker: Broker, *args: str) -> Any:
    """``quire admin ...`` in-process (click's runner) against the broker's real REST API: the
    same code as the subprocess, without paying an interpreter start per command."""
    from click.testing import CliRunner

    from quire.admin_cli import admin as admin_group

    result = CliRunner().invoke(admin_group, ["--admin-url", broker.admin_url, *args])
    assert result.exit_code == 0, result.output
    return result


def test_admin(broker: Broker) -> None:
    tenant = f"t{uuid.uuid4().hex[:6]}"
    quire(broker, "admin", "tenants", "create", tenant)  # the real `quire admin` entry point once
    assert tenant in json.loads(admin(broker, "tenants", "list").stdout)
    ns = f"{tenant}/ns"
    admin(broker, "namespaces", "create", ns)
    assert ns in json.loads(admin(broker, "namespaces", "list", tenant).stdout)
    admin(broker, "namespaces", "set-retention", ns, "--size", "100", "--time", "60")
    assert json.loads(admin(broker, "namespaces", "get-retention", ns).stdout) == {
        "retentionSizeInMB": 100, "retentionTimeInMinutes": 60}
    topic = f"persistent://{ns}/part"
    admin(broker, "topics", "create-partitioned-topic", topic, "-p", "3")
    meta = json.loads(admin(broker, "topics", "get-partitioned-topic-metadata", topic).stdout)
    assert meta["partitions"] == 3
    admin(broker, "topics", "update-partitioned-topic", topic, "-p", "4")
    assert json.loads(admin(broker, "topics", "get-partitioned-topic-metadata", topic).stdout)["partitions"] == 4
    plain = f"persistent://{ns}/plain"
    admin(broker, "topics", "create", plain)
    admin(broker, "topics", "create-subscription", plain, "-s", "sub1")
    assert json.loads(admin(broker, "topics", "subscriptions", plain).stdout) == ["sub1"]
    quire(broker, "produce", plain, "-m", "x", "-n", "3")
    stats = json.loads(admin(broker, "topics", "stats", plain).stdout)
    assert stats["subscriptions"]["sub1"]["msgBacklog"] >= 1  # entries: the 3 messages may share a batch
    assert "ledgers" in json.loads(admin(broker, "topics", "stats-internal", plain).stdout)
    admin(broker, "topics", "skip-all", plain, "-s", "sub1")
    assert json.loads(admin(broker, "topics", "stats", plain).stdout)["subscriptions"]["sub1"]["msgBacklog"] == 0
    admin(broker, "topics", "unload", plain)
    admin(broker, "topics", "unsubscribe", plain, "-s", "sub1")
    admin(broker, "topics", "delete", plain)
    bad = subprocess.run([sys.executable, "-m", "quire", "admin", "--admin-url", broker.admin_url, "topics", "stats",
                          f"persistent://{ns}/missing"], capture_output=True, text=True, cwd=REPO_ROOT,
                         env={"PYTHONPATH": str(REPO_ROOT), "PATH": "/usr/bin:/bin"})
    assert bad.returncode != 0 and "404" in bad.stderr
