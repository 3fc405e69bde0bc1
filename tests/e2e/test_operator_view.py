"""What an operator sees of a running standalone: INFO log lines for producers, consumers and
subscriptions (with the client's address), topic load/unload with the reason, ledger rollover
and deletion, bookie GC runs, the admin access log; the bookie's BookKeeper-style HTTP routes
(/heartbeat, list_bookies, ledger list/metadata, bytes per ledger dir); bookie-shell's reading
commands on the running bookie."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.conftest import Standalone, start_standalone

ROOT = Path(__file__).resolve().parents[2]
TOPIC = "persistent://public/default/ops-logs"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    base = tmp_path_factory.mktemp("operator")
    conf = base / "quire.toml"
    conf.write_text("[broker]\nmanaged_ledger_max_entries_per_ledger = 5\nretention_check_interval_in_seconds = 1\n"
                    "\n[bookie]\ngc_wait_time_ms = 1000\n")
    n = start_standalone(base, "--conf", str(conf), "--log-level", "INFO", "--access-log")
    try:
        yield n
    finally:
        n.proc.terminate()


def get(url: str) -> tuple[int, bytes]:
    with urllib.request.urlopen(url, timeout=10) as resp:
        return resp.status, resp.read()


def wait_for_lines(node: Standalone, patterns: list[str], timeout: float = 60) -> str:
    deadline = time.monotonic() + timeout
    while True:
        text = node.proc.log_text()
        missing = [p for p in patterns if not re.search(p, text)]
        if not missing:
            return text
        if time.monotonic() > deadline:
            raise AssertionError(f"log lines missing: {missing}\n{text[-4000:]}")
        time.sleep(0.5)


def test_operator_log_lines(node: Standalone) -> None:
    client = node.client()
    try:
        producer = client.create_producer(TOPIC, producer_name="ops-producer", batching_enabled=False)
        consumer = client.subscribe(TOPIC, "ops-sub", consumer_name="ops-consumer")
        for i in range(12):
            producer.send(f"m{i}".encode())
        for _ in range(12):
            consumer.acknowledge(consumer.receive(timeout_millis=20000))
        consumer.close()
        producer.close()
    finally:
        client.close()
    req = urllib.request.Request(f"{node.admin}/admin/v2/{TOPIC.replace('://', '/')}/unload", method="PUT")
    urllib.request.urlopen(req, timeout=30).close()
    topic = re.escape(TOPIC)
    wait_for_lines(node, [
        rf"loaded topic {topic}",
        r"ownership: pulsar://\S+ acquired bundle public/default/0x[0-9a-f]+_0x[0-9a-f]+",
        rf"producer ops-producer opened on {topic} from 127\.0\.0\.1:\d+",
        rf"producer ops-producer closed on {topic} from 127\.0\.0\.1:\d+",
        rf"subscription ops-sub opened on {topic}",
        rf"consumer ops-consumer opened on {topic} subscription ops-sub \(Exclusive\) from 127\.0\.0\.1:\d+",
        rf"consumer ops-consumer closed on {topic} subscription ops-sub from 127\.0\.0\.1:\d+",
        r"public/default/persistent/ops-logs: rolled over from ledger \d+ \(5 entries\) to ledger \d+",
        r"public/default/persistent/ops-logs: deleted ledgers \[",
        rf"unloading topic {topic}: unload requested \(admin\)",
        r"GC run \d+ on .*: \d+ deleted ledgers, \d+ bytes reclaimed",
        r"broker\.admin\.access: .*PUT /admin/v2/persistent/public/default/ops-logs/unload",
    ])


def test_bookie_http_routes_and_bookie_shell_on_the_running_bookie(node: Standalone) -> None:
    status = json.loads(subprocess.run([sys.executable, "-m", "quire", "cluster-status", "--json", "--admin-url",
                                        node.admin], capture_output=True, text=True, check=True, cwd=ROOT).stdout)
    bookie = status["bookies"][0]
    http = f"http://127.0.0.1:{bookie['info']['http_port']}"
    assert get(f"{http}/heartbeat") == (200, b"OK\n")
    assert json.loads(get(f"{http}/api/v1/bookie/list_bookies")[1]) == {bookie["id"]: None}
    assert json.loads(get(f"{http}/api/v1/bookie/list_bookies?type=ro")[1]) == {}
    client = node.client()
    try:
        client.create_producer("persistent://public/default/ops-http").send(b"x")
    finally:
        client.close()
    ledgers = json.loads(get(f"{http}/api/v1/ledger/list")[1])
    assert ledgers and all(v is None for v in ledgers.values())
    lid = max(int(k) for k in ledgers)
    md = json.loads(get(f"{http}/api/v1/ledger/metadata?ledger_id={lid}")[1])[str(lid)]
    assert md["ensembleSize"] == 1 and md["allEnsembles"]["0"] == [bookie["id"]]
    with pytest.raises(urllib.error.HTTPError) as err:
        get(f"{http}/api/v1/ledger/metadata?ledger_id=999999999")
    assert err.value.code == 404
    metrics = get(f"{http}/metrics")[1].decode()
    sizes = [float(v) for v in re.findall(r'^bookie_ledger_dir_bytes\{dir="[^"]+"\} (\S+)$', metrics, re.M)]
    assert sizes and sizes[0] > 0

    ledger_dirs = str(node.data_dir / "bookkeeper" / "ledgers")
    for args in (["list-ledgers"], ["list-entry-logs"], ["last-mark"]):
        res = subprocess.run([sys.executable, "-m", "quire", "bookie-shell", *args, "--ledger-dirs", ledger_dirs],
                             capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert res.returncode == 0 and "Traceback" not in res.stderr, f"{args}: {res.stderr}"
    listed = subprocess.run([sys.executable, "-m", "quire", "bookie-shell", "list-ledgers", "--ledger-dirs",
                             ledger_dirs], capture_output=True, text=True, timeout=60, cwd=ROOT).stdout
    rows = [json.loads(line) for line in listed.splitlines()]
    assert rows and all("ledger" in r for r in rows)
