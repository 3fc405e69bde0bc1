"""The official pulsar-client (C++ based) against an in-process broker (memory managed ledger)."""

from __future__ import annotations

import pulsar

from broker.service import BrokerService
from tests.broker.conftest import client_for, in_thread


async def test_produce_and_consume_one_message(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            consumer = client.subscribe("t-basic", "sub", consumer_type=pulsar.ConsumerType.Exclusive)
            producer = client.create_producer("t-basic", batching_enabled=False)
            mid = producer.send(b"hello", properties={"k": "v"}, partition_key="key-1")
            msg = consumer.receive(timeout_millis=5000)
            assert msg.data() == b"hello"
            assert msg.properties() == {"k": "v"}
            assert msg.partition_key() == "key-1"
            assert msg.message_id() == mid
            consumer.acknowledge(msg)
        finally:
            client.close()

    await in_thread(work)
