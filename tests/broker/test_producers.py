"""Producers: access modes, names, schemas and broker-side deduplication."""

from __future__ import annotations

import threading
import time

import pulsar
import pytest
from pulsar.schema import JsonSchema, Record, String, StringSchema

from broker.names import NamespaceName, TopicName
from broker.service import BrokerService
from tests.broker.conftest import client_for, in_thread

AM = pulsar.ProducerAccessMode


async def test_exclusive_access_modes(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            first = client.create_producer("t-am", access_mode=AM.Exclusive)
            with pytest.raises(pulsar.ProducerFenced):
                client.create_producer("t-am", access_mode=AM.Exclusive)
            with pytest.raises(pulsar.ProducerBusy):
                client.create_producer("t-am", access_mode=AM.Shared)
            got: list[pulsar.Producer] = []
            waiter = threading.Thread(target=lambda: got.append(
                client.create_producer("t-am", access_mode=AM.WaitForExclusive)))
            waiter.start()
            time.sleep(0.5)
            assert not got  # queued behind the exclusive producer
            first.close()
            waiter.join(10)
            assert got and got[0].send(b"x") is not None
        finally:
            client.close()

    await in_thread(work)


async def test_exclusive_with_fencing_takes_over(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            old = client.create_producer("t-fence", access_mode=AM.Exclusive, batching_enabled=False)
            old.send(b"before")
            new = client.create_producer("t-fence", access_mode=AM.ExclusiveWithFencing, batching_enabled=False)
            new.send(b"after")
            with pytest.raises(pulsar.PulsarException):
                old.send(b"fenced")
        finally:
            try:
                client.close()
            except pulsar.AlreadyClosed:
                pass  # the fenced producer is already closed on the client side

    await in_thread(work)
    topic = broker.topics["persistent://public/default/t-fence"]
    assert topic.topic_epoch >= 2  # the fencing producer bumped the epoch


async def test_duplicate_producer_name_is_busy(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            client.create_producer("t-name", producer_name="same")
            with pytest.raises(pulsar.ProducerBusy):
                client.create_producer("t-name", producer_name="same")
            generated = client.create_producer("t-name")
            assert generated.producer_name().startswith("standalone-")
        finally:
            client.close()

    await in_thread(work)


class User(Record):
    name = String()


async def test_schemas_are_stored_and_checked(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            p = client.create_producer("t-schema", schema=JsonSchema(User))
            c = client.subscribe("t-schema", "s", schema=JsonSchema(User))
            p.send(User(name="ann"))
            assert c.receive(timeout_millis=5000).value().name == "ann"
            with pytest.raises(pulsar.IncompatibleSchema):
                client.create_producer("t-schema", schema=StringSchema())
        finally:
            client.close()

    await in_thread(work)
    versions = await broker.schemas.versions(TopicName.parse("t-schema"))
    assert len(versions) == 1 and versions[0]["type"] == 2  # JSON


async def test_deduplication_survives_topic_reload(broker: BrokerService) -> None:
    ns = NamespaceName("public", "default")
    await broker.namespaces.set_policy(ns, "deduplicationEnabled", True)

    def produce(seqs: list[int]) -> None:
        client = client_for(broker)
        try:
            client.subscribe("t-dedup", "keep").close()  # retention: keep the data for a subscription
            p = client.create_producer("t-dedup", producer_name="dp", batching_enabled=False)
            for s in seqs:
                p.send(f"m{s}".encode(), sequence_id=s)
        finally:
            client.close()

    await in_thread(lambda: produce([0, 1, 2]))
    topic = broker.topics["persistent://public/default/t-dedup"]
    assert topic.dedup is not None and topic.dedup.last_sequence_id("dp") == 2
    await topic.close()
    await in_thread(lambda: produce([1, 2, 3]))
    reloaded = broker.topics["persistent://public/default/t-dedup"]
    assert reloaded is not topic
    # 1 and 2 were duplicates: 0, 1, 2, 3 stored
    assert reloaded.subscriptions["keep"].cursor.number_of_entries_in_backlog == 4


async def test_get_last_message_id(broker: BrokerService) -> None:
    def work() -> None:
        client = client_for(broker)
        try:
            c = client.subscribe("t-last", "s")
            p = client.create_producer("t-last", batching_enabled=False)
            ids = [p.send(b"x") for _ in range(3)]
            last = c.get_last_message_id()
            assert (last.ledger_id(), last.entry_id()) == (ids[-1].ledger_id(), ids[-1].entry_id())
        finally:
            client.close()

    await in_thread(work)


async def test_last_message_id_after_retention_deleted_its_ledger(nursery, tmp_path) -> None:
    """The last entry's ledger trimmed (a reload made a new, empty ledger current and no
    subscription keeps the old one): GET_LAST_MESSAGE_ID answers earliest, as Pulsar, not an
    error, and a reader from the start has nothing available."""
    from broker.names import TopicName
    from tests.broker.conftest import start_real_broker

    broker = await start_real_broker(nursery, tmp_path / "node")
    topic = "persistent://public/default/t-last-trimmed"

    def produce() -> None:
        client = client_for(broker)
        try:
            p = client.create_producer(topic, batching_enabled=False)
            for _ in range(3):
                p.send(b"x")
        finally:
            client.close()

    await in_thread(produce)
    name = TopicName.parse(topic)
    await broker.unload_topic(name)
    reloaded = await broker.get_topic(name)
    await reloaded.ml.trim()
    assert not reloaded.ml.has_position(reloaded.ml.last_confirmed_entry)  # the case under test

    def read() -> None:
        client = client_for(broker)
        try:
            c = client.subscribe(topic, "late", initial_position=pulsar.InitialPosition.Earliest)
            last = c.get_last_message_id()
            assert (last.ledger_id(), last.entry_id()) == (-1, -1)
            r = client.create_reader(topic, pulsar.MessageId.earliest)
            assert not r.has_message_available()
        finally:
            client.close()

    await in_thread(read)
    nursery.cancel_scope.cancel()
