"""Drop-in compatibility: the same application code runs with ``import pulsar`` and with
``import clients as pulsar`` and sees the same results."""

from __future__ import annotations

import threading
import types
import uuid

import pulsar as official_module
import pytest

import clients as quire_module
from tests.clients.conftest import Broker


def application(pulsar: types.ModuleType, url: str, topic: str) -> dict:
    """Typical user code written against the official package's API."""
    client = pulsar.Client(url, operation_timeout_seconds=15)
    try:
        consumer = client.subscribe(topic, "app-sub", consumer_type=pulsar.ConsumerType.Shared,
                                    initial_position=pulsar.InitialPosition.Earliest,
                                    negative_ack_redelivery_delay_ms=200)
        producer = client.create_producer(topic, batching_enabled=True, batching_max_publish_delay_ms=20,
                                          compression_type=pulsar.CompressionType.LZ4)
        acked = threading.Event()
        results = []

        def callback(res, msg_id):  # type: ignore[no-untyped-def]
            results.append(res == pulsar.Result.Ok)
            if len(results) == 5:
                acked.set()

        for i in range(5):
            producer.send_async(f"async-{i}".encode(), callback, properties={"n": str(i)})
        producer.flush()
        assert acked.wait(10)
        sync_id = producer.send(b"sync", partition_key="pk", event_timestamp=42, ordering_key="ok")
        received = []
        for _ in range(6):
            msg = consumer.receive(timeout_millis=5000)
            received.append((msg.data(), msg.properties(), msg.partition_key(), msg.event_timestamp(),
                             msg.ordering_key(), type(msg.publish_timestamp()), msg.redelivery_count(),
                             msg.schema_version(), msg.producer_name() == producer.producer_name()))
            if msg.data() == b"async-0":
                consumer.negative_acknowledge(msg)
            else:
                consumer.acknowledge(msg)
        again = consumer.receive(timeout_millis=5000)
        consumer.acknowledge(again)
        # Without batch-index acks the whole batch comes back (its other messages too).
        redelivered_rest = []
        while True:
            try:
                msg = consumer.receive(timeout_millis=700)
            except pulsar.Timeout:
                break
            redelivered_rest.append(msg.data())
            consumer.acknowledge(msg)
        stored = sync_id.serialize()
        restored = pulsar.MessageId.deserialize(stored)
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        first = reader.read_next(timeout_millis=5000).data()
        with pytest.raises(pulsar.ProducerBusy):
            client.create_producer(topic, producer_name=producer.producer_name())
        return {
            "callbacks": results,
            "received": sorted(received),
            "redelivered": (again.data(), again.redelivery_count()),
            "redelivered_rest": sorted(redelivered_rest),
            "restored": (restored.ledger_id(), restored.entry_id(), restored.partition()) ==
                        (sync_id.ledger_id(), sync_id.entry_id(), sync_id.partition()),
            "first": first,
        }
    finally:
        client.close()


def test_same_code_same_results(broker: Broker) -> None:
    base = f"persistent://public/default/dropin-{uuid.uuid4().hex[:8]}"
    official = application(official_module, broker.url, base + "-official")
    ours = application(quire_module, broker.url, base + "-quire")
    assert ours == official
    assert official["redelivered"] == (b"async-0", 1) and official["restored"]
    assert official["redelivered_rest"] == [b"async-%d" % i for i in range(1, 5)]


def test_names_and_enum_values_match_official() -> None:
    import inspect

    for name in ("ConsumerType", "CompressionType", "InitialPosition", "PartitionsRoutingMode",
                 "ProducerAccessMode", "RegexSubscriptionMode", "BatchingType", "Result"):
        theirs = {k: int(v) for k, v in getattr(official_module, name).__members__.items()}
        ours = {k: int(v) for k, v in getattr(quire_module, name).__members__.items()}
        assert ours == theirs, name
    exceptions = [n for n, o in vars(official_module.exceptions).items()
                  if inspect.isclass(o) and issubclass(o, Exception)]
    assert all(issubclass(getattr(quire_module, n), Exception) for n in exceptions)
    for cls in ("Client", "Producer", "Consumer", "Reader", "MessageId"):
        public = {m for m in dir(getattr(official_module, cls)) if not m.startswith("_")}
        public -= {"create_table_view", "get_service_info", "wrap"}  # table views, service-info providers, C++ wrapping
        assert all(hasattr(getattr(quire_module, cls), m) for m in public), cls
    assert all(hasattr(quire_module.Message, m) for m in dir(official_module.Message)
               if not m.startswith("_") and m != "encryption_context")  # no end-to-end encryption
    policy = quire_module.ConsumerBatchReceivePolicy(10, -1, 500)  # the official positional signature
    assert (policy.max_num_messages, policy.timeout_ms) == (10, 500)
