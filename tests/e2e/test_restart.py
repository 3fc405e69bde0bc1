"""A SIGKILLed standalone keeps every acknowledged message and every subscription position."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import httpx
import pulsar

from tests.e2e.conftest import start_standalone


def test_sigkill_and_restart_keeps_data_and_cursors(tmp_path: Path) -> None:
    node = start_standalone(tmp_path)
    try:
        client = node.client()
        t = "persistent://public/default/durable"
        # batch-index acks: a partly acknowledged batch keeps exactly its unacked messages
        consumer = client.subscribe(t, "keep", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True)
        client.subscribe(t, "untouched").close()
        producer = client.create_producer(t, batching_enabled=True, batching_max_publish_delay_ms=5)
        for i in range(300):
            producer.send_async(f"m{i}".encode(), None)
        producer.flush()
        # broker-side deduplication on: its state must survive the SIGKILL too
        assert httpx.post(f"{node.admin}/admin/v2/namespaces/public/default/deduplication", json=True).status_code == 204
        dedup_topic = "persistent://public/default/dedup-restart"
        client.subscribe(dedup_topic, "keep-d").close()  # retention: data is kept for a subscription
        dp = client.create_producer(dedup_topic, producer_name="dp", batching_enabled=False)
        for seq in range(5):
            dp.send(f"d{seq}".encode(), sequence_id=seq)
        acked = 0
        for _ in range(100):
            m = consumer.receive(timeout_millis=5000)
            consumer.acknowledge(m)
            acked += 1
        # Wait until the broker has the acks (the client groups them for 100 ms) ...
        stats_url = f"{node.admin}/admin/v2/persistent/public/default/durable/stats"
        deadline = time.monotonic() + 10
        while httpx.get(stats_url).json()["subscriptions"]["keep"]["unackedMessages"] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        # ... and their cursor-ledger writes are done (its last entry stopped moving)
        internal = stats_url.replace("/stats", "/internalStats")
        last, stable_since = None, time.monotonic()
        while time.monotonic() - stable_since < 1.0:
            assert time.monotonic() < deadline + 10
            entry = httpx.get(internal).json()["cursors"]["keep"]["cursorLedgerLastEntry"]
            if entry != last:
                last, stable_since = entry, time.monotonic()
            time.sleep(0.1)
        node.proc.kill()
        try:
            client.close()
        except pulsar.PulsarException:
            pass  # closing producers of a dead broker may fail with NotConnected: nothing to verify here

        node.proc.start()
        node.proc.wait_ready(60)
        client = node.client()
        consumer = client.subscribe(t, "keep", consumer_type=pulsar.ConsumerType.Shared, batch_index_ack_enabled=True)
        rest = []
        while True:
            try:
                rest.append(consumer.receive(timeout_millis=2000))
            except pulsar.Timeout:
                break
        # the subscription resumes exactly where it was: nothing acknowledged comes back,
        # nothing unacknowledged is lost
        assert sorted(m.data() for m in rest) == sorted(f"m{i}".encode() for i in range(100, 300))
        untouched = client.subscribe(t, "untouched")
        all_msgs = []
        while True:
            try:
                all_msgs.append(untouched.receive(timeout_millis=2000))
            except pulsar.Timeout:
                break
        assert [m.data() for m in all_msgs] == [f"m{i}".encode() for i in range(300)]
        dp = client.create_producer(dedup_topic, producer_name="dp", batching_enabled=False)
        assert dp.last_sequence_id() == 4
        for seq in (3, 4, 5):
            dp.send(f"d{seq}".encode(), sequence_id=seq)
        dconsumer = client.subscribe(dedup_topic, "keep-d")
        seen = []
        while True:
            try:
                seen.append(dconsumer.receive(timeout_millis=1500).data())
            except pulsar.Timeout:
                break
        assert seen == [f"d{i}".encode() for i in range(6)]
        # the namespace, the topic and its subscriptions survived in the metadata store
        p2 = client.create_producer(t)
        p2.send(b"after-restart")
        assert untouched.receive(timeout_millis=5000).data() == b"after-restart"
        client.close()
        # SIGTERM is an orderly shutdown (broker, then bookie) with exit status 0, and the
        # node comes back with the same data.
        assert node.proc.terminate() == 0
        node.proc.start()
        node.proc.wait_ready(60)
        client = node.client()
        reader = client.create_reader(t, pulsar.MessageId.earliest)
        count = 0
        while reader.has_message_available():
            reader.read_next(timeout_millis=5000)
            count += 1
        assert count == 301
        client.close()
    finally:
        node.proc.kill()


def test_sigkill_mid_stream_loses_no_acknowledged_message(tmp_path: Path) -> None:
    """SIGKILL while producers are sending: every message whose send was acknowledged is
    there after the restart, in order per producer."""
    node = start_standalone(tmp_path)
    try:
        client = node.client()
        t = "persistent://public/default/mid-stream"
        client.subscribe(t, "keep").close()  # retention: a durable subscription holds the data
        acked: dict[str, list[int]] = {"batched": [], "single": []}
        lock = threading.Lock()
        stop = threading.Event()

        def produce(kind: str) -> None:
            producer = client.create_producer(t, producer_name=kind, batching_enabled=kind == "batched",
                                              batching_max_publish_delay_ms=2, block_if_queue_full=True)

            def done(res: pulsar.Result, _mid: object, i: int) -> None:
                if res == pulsar.Result.Ok:
                    with lock:
                        acked[kind].append(i)

            i = 0
            while not stop.is_set():
                try:
                    producer.send_async(f"{kind}-{i}".encode(), lambda r, m, i=i: done(r, m, i))
                except (pulsar.PulsarException, RuntimeError):
                    return  # the broker is gone or the client closed
                i += 1
                if i % 50 == 0:
                    time.sleep(0.005)

        threads = [threading.Thread(target=produce, args=(k,)) for k in acked]
        for th in threads:
            th.start()
        deadline = time.monotonic() + 20
        while min(len(v) for v in acked.values()) < 500:  # well into the stream
            assert time.monotonic() < deadline
            time.sleep(0.05)
        node.proc.kill()
        stop.set()
        client.close()  # fails what is pending and unblocks senders waiting for queue room
        for th in threads:
            th.join(15)
        with lock:
            confirmed = {k: list(v) for k, v in acked.items()}

        node.proc.start()
        node.proc.wait_ready(60)
        client = node.client()
        reader = client.create_reader(t, pulsar.MessageId.earliest)
        stored: dict[str, list[int]] = {"batched": [], "single": []}
        while reader.has_message_available():
            kind, i = reader.read_next(timeout_millis=10000).data().decode().rsplit("-", 1)
            stored[kind].append(int(i))
        client.close()
        for kind, ids in confirmed.items():
            assert set(ids) <= set(stored[kind]), kind
            assert stored[kind] == sorted(stored[kind]), kind  # per-producer order kept
    finally:
        node.proc.kill()
