"""A SIGKILLed standalone keeps every acknowledged message and every subscription position."""

from __future__ import annotations

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
        # Wait until the broker has the acks (the client groups them for 100 ms); every
        # mark-delete is persisted as it happens, so a moment later the position is durable.
        stats_url = f"{node.admin}/admin/v2/persistent/public/default/durable/stats"
        deadline = time.monotonic() + 10
        while httpx.get(stats_url).json()["subscriptions"]["keep"]["unackedMessages"] != 200:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        time.sleep(0.3)
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
