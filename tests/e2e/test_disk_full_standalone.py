"""A standalone whose disk fills up: producers get an error within their send timeout, nothing
acknowledged is lost, and once some space is freed (12 MB, as in the issue) the node restarts
and serves everything it acknowledged.

The data dir is a real 48 MB tmpfs (mounting needs root; skipped where not allowed).
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pulsar
import pytest

from tests.e2e.conftest import new_client, start_standalone
from tests.fixtures.small_disk import mounted_tmpfs

TOPIC = "persistent://public/default/disk-full"


def test_producers_get_an_error_and_nothing_acknowledged_is_lost(tmp_path: Path) -> None:
    with mounted_tmpfs(tmp_path / "disk", 48) as disk:
        filler = disk / "filler"
        filler.write_bytes(b"\0" * (12 << 20))  # what the operator frees later
        conf = tmp_path / "quire.toml"  # checkpoints often, so the journal is not a second copy of everything
        conf.write_text("[bookie]\nflush_interval_ms = 200\ndb_storage_write_cache_max_size_mb = 4\n"
                        "journal_max_size_mb = 4\njournal_max_backups = 1\njournal_pre_alloc_size_mb = 1\n")
        node = start_standalone(disk, "--conf", str(conf))
        try:
            client = new_client(node.url)
            producer = client.create_producer(TOPIC, send_timeout_millis=5000, batching_enabled=False)
            payloads: list[bytes] = []
            failed_after = None
            for i in range(2000):
                payload = i.to_bytes(4, "big") + os.urandom(64 * 1024)
                started = time.monotonic()
                try:
                    producer.send(payload)
                except pulsar.PulsarException:
                    failed_after = time.monotonic() - started
                    break
                payloads.append(payload)
            assert failed_after is not None, "the disk never filled"
            assert failed_after < 10, f"the failing send took {failed_after:.1f} s (send timeout 5 s)"
            assert len(payloads) > 50 and node.proc.is_running
            client.close()
            node.proc.kill()
            filler.unlink()
            node = start_standalone(disk, "--conf", str(conf))
            client = new_client(node.url)
            reader = client.create_reader(TOPIC, pulsar.MessageId.earliest)
            got = [reader.read_next(timeout_millis=10000).data() for _ in payloads]
            assert got == payloads
            client.close()
        finally:
            print(node.proc.log_tail(40))
            node.proc.kill()
