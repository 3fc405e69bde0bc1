"""The whole retention chain against ``quire standalone`` with the official client: broker
retention -> managed ledger deletes ledgers -> bookie GC + compaction -> disk back to about
the live data, and the kept data still reads back."""

from __future__ import annotations

import os
import time
from pathlib import Path

import httpx
import pulsar

from bookie import entry_log_format as elf
from bookie.entry_logger import list_log_ids
from bookie.ledger_index import EntryLocationIndex
from tests.e2e.conftest import start_standalone
from tests.fixtures.processes import free_port

N = int(os.environ.get("QUIRE_GC_E2E_MESSAGES", "1500"))
PAYLOAD = 1024


def _metric(text: str, name: str) -> float:
    for line in text.splitlines():
        if line.startswith(name + " "):
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_retention_gc_gives_disk_back(tmp_path: Path) -> None:
    conf = tmp_path / "quire.toml"
    conf.write_text(
        "managed_ledger_max_entries_per_ledger = 50\n"
        "retention_check_interval_in_seconds = 1\n"
        "[bookie]\n"
        "log_size_limit = 262144\n"
        "compaction_rate_by_entries = 0\n"
        "gc_wait_time_ms = 3600000\n"
    )
    bookie_http = free_port()
    node = start_standalone(tmp_path, "--conf", str(conf), "--bookie-http-port", str(bookie_http))
    try:
        admin = httpx.Client(base_url=node.admin, timeout=30)
        bk = httpx.Client(base_url=f"http://127.0.0.1:{bookie_http}", timeout=30)
        assert admin.put("/admin/v2/namespaces/public/gone").status_code == 204  # retention 0/0
        assert admin.put("/admin/v2/namespaces/public/kept").status_code == 204
        assert admin.post("/admin/v2/namespaces/public/kept/retention",
                          json={"retentionTimeInMinutes": -1, "retentionSizeInMB": -1}).status_code == 204
        client = node.client()
        gone_t, kept_t = "persistent://public/gone/t", "persistent://public/kept/t"
        consumer = client.subscribe(gone_t, "s")
        p_gone = client.create_producer(gone_t, batching_enabled=False, block_if_queue_full=True)
        p_kept = client.create_producer(kept_t, batching_enabled=False, block_if_queue_full=True)
        kept = []
        failures = []

        def _ok(res: pulsar.Result, _msg_id: object) -> None:
            if res != pulsar.Result.Ok:
                failures.append(res)

        for i in range(N):  # interleaved: every entry log holds both
            p_gone.send_async(os.urandom(PAYLOAD), _ok)
            data = i.to_bytes(4, "big") + os.urandom(PAYLOAD - 4)
            kept.append(data)
            p_kept.send_async(data, _ok)
        p_gone.flush()
        p_kept.flush()
        assert failures == []
        for _ in range(N):
            consumer.acknowledge(consumer.receive(timeout_millis=10000))
        consumer.close()
        p_gone.close()
        p_kept.close()
        # retention 0/0: the consumed ledgers go as the mark-delete position passes them
        t0 = time.monotonic()
        while len(admin.get("/admin/v2/persistent/public/gone/t/internalStats").json()["ledgers"]) > 1:
            assert time.monotonic() - t0 < 60, "retention did not trim the consumed ledgers"
            time.sleep(0.2)
        for ns in ("public/gone", "public/kept"):
            assert admin.put(f"/admin/v2/namespaces/{ns}/unload").status_code == 204
        cur = node.data_dir / "bookkeeper" / "ledgers" / "current"
        # GC until the consumed topic's ledgers are gone from the bookie too
        t0 = time.monotonic()
        deleted = -1.0
        while time.monotonic() - t0 < 90:
            r = bk.put("/api/v1/bookie/gc", json={"forceMajor": True})
            assert r.status_code == 200
            while bk.get("/api/v1/bookie/gc").json()["is_in_force_gc"] == "true":
                time.sleep(0.1)
            now = _metric(bk.get("/metrics").text, "bookie_gc_deleted_ledgers_total")
            if now == deleted:
                break
            deleted = now
            time.sleep(1.5)
        gc_seconds = time.monotonic() - t0
        details = bk.get("/api/v1/bookie/gc_details").json()
        assert details[0]["majorCompactionCounter"] >= 1
        # the kept topic reads back whole, in order
        reader = client.create_reader(kept_t, pulsar.MessageId.earliest)
        for i in range(N):
            assert reader.read_next(timeout_millis=10000).data() == kept[i]
        reader.close()
        client.close()
    finally:
        node.proc.terminate()
    after = sum(os.path.getsize(cur / elf.file_name(i)) for i in list_log_ids(cur))
    # live bytes: every record the location index still points at
    index = EntryLocationIndex(cur / "locations")
    live = sum(index.bytes_by_log().values())
    index.close()
    print(f"entry logs {after} bytes, live {live}, ratio {after / live:.2f}, gc {gc_seconds:.1f} s")
    assert after <= 1.3 * live
    assert live <= 1.5 * N * PAYLOAD  # the consumed topic's data is really gone
