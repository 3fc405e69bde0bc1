"""A topic whose managed ledger was closed under it unloads itself, so clients recover.

The chaos finding (30-minute cluster run, seed 21, on 65c4c2f): a fenced topic's close of its
managed ledger was cut short, the factory kept the closed ledger, and the topic loaded again
on it. Its adds, PRODUCERs and SUBSCRIBEs then failed with ManagedLedgerClosedError for the
rest of the run (25 minutes) while the topic stayed loaded. The factory half is in
tests/managed_ledger/test_reopen_after_close.py; this is the broker half: whatever closes the
ledger, the topic on it must not stay loaded.
"""

from __future__ import annotations

import pulsar
import trio

from broker.names import TopicName
from broker.service import BrokerService
from tests.broker.conftest import client_for, in_thread

TOPIC = "persistent://public/default/closed-under"


async def test_a_topic_on_a_closed_ledger_reloads_and_serves(broker: BrokerService) -> None:
    client = client_for(broker)
    try:
        producer = await in_thread(lambda: client.create_producer(TOPIC, send_timeout_millis=30_000, batching_enabled=False))
        await in_thread(lambda: producer.send(b"a"))
        await in_thread(producer.close)
        topic = broker.topics[str(TopicName.parse(TOPIC))]
        await topic.ml.close()  # the ledger closes under the loaded topic, no add to notice it
        consumer = await in_thread(lambda: client.subscribe(
            TOPIC, "s", initial_position=pulsar.InitialPosition.Earliest))
        assert broker.topics[str(TopicName.parse(TOPIC))] is not topic  # reloaded
        producer = await in_thread(lambda: client.create_producer(TOPIC, send_timeout_millis=30_000, batching_enabled=False))
        await in_thread(lambda: producer.send(b"b"))
        got = [await in_thread(lambda: consumer.receive(10_000).data()) for _ in range(2)]
        assert got == [b"a", b"b"]
    finally:
        await in_thread(client.close)
