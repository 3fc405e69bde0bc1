"""A SEND the broker fails is never overtaken by a later SEND of the same producer.

The producer re-sends from its first failed message after reconnecting, so once one SEND
fails nothing sent after it may be stored before that re-send (deduplication off: an
order violation; on: the re-send taken for a duplicate and acknowledged unstored).

The chaos finding: a 30-minute cluster run (seed 21, topic chaos-excl-nodedup partition 1,
Exclusive subscription, deduplication off, on the code before the synchronous add path)
stored sequence id 1336 at 183:0, the first entry of the ledger the rollover after a failed
write created, ahead of 1330, 1332 and 1334, which had failed together with that write (the
broker log: three failed adds in one millisecond, then the topic fenced) and were stored at
194:0-2 after the client re-sent them. The test of the SEND arriving as the bookies fail the
adds in flight is that interleaving; the other tests are paths to the same result that were
still open once it was gone (a SEND arriving while a rollover whose ledger creation failed
closes the old ledger; a SEND refused for a stale metadata session) and a guard.

The broker is in this process and spoken to with raw frames, so that each SEND arrives at
a chosen moment; the managed ledger is the real one over the fake ledger client.
"""

from __future__ import annotations

import itertools
from contextlib import asynccontextmanager
from typing import Any, AsyncIterator, Callable

import pytest
import trio
import trio.testing

from broker.config import BrokerConfig
from broker.service import BrokerService
from broker.topic import PersistentTopic
from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory
from metadata import open_store
from tests.broker.conftest import start_broker
from tests.broker.test_error_boundary import TrioRawConnection
from tests.managed_ledger.fake_bk import FakeBookies
from tests.managed_ledger.fake_store import FakeMetadataServer

T = pb.BaseCommand
TOPIC = "persistent://public/default/t-order"
_ids = itertools.count()


async def _until(check: Callable[[], bool]) -> None:
    with trio.fail_after(10):
        while not check():
            await trio.sleep(0.002)


class Producer:
    """One producer over a raw connection: SENDs and the broker's answers, by sequence id."""

    def __init__(self, conn: TrioRawConnection, producer_id: int, topic: str) -> None:
        self.conn = conn
        self.topic = topic
        self.producer_id = producer_id
        self.answers: dict[int, str] = {}  # sequence id -> "receipt" | "error"
        self.closed_by_broker = False

    @classmethod
    async def create(cls, conn: TrioRawConnection, producer_id: int, topic: str = TOPIC) -> "Producer":
        """PRODUCER, again while the broker says the name is busy (it has not yet seen the
        client's previous connection end)."""
        with trio.fail_after(10):
            for request_id in itertools.count(100):
                await conn.send(C.producer(topic, producer_id, request_id, producer_name="p"))
                while True:
                    data = await conn.stream.receive_some(65536)
                    assert data, "connection closed"
                    conn.received.extend(conn.decoder.feed(data))
                    kinds = [f.command.type for f in conn.received]
                    if T.PRODUCER_SUCCESS in kinds or T.ERROR in kinds:
                        break
                if T.PRODUCER_SUCCESS in kinds:
                    conn.received.clear()
                    return cls(conn, producer_id, topic)
                conn.received.clear()
                await trio.sleep(0.05)
        raise AssertionError("unreachable")

    async def send(self, seq: int) -> None:
        meta = C.message_metadata("p", seq, 1, uncompressed_size=4)
        await self.conn.stream.send_all(
            frames.encode_payload_command(C.send(self.producer_id, seq), meta, b"m%03d" % seq))

    def _take(self) -> None:
        keep = []
        for f in self.conn.received:
            cmd = f.command
            if cmd.type == T.SEND_RECEIPT and cmd.send_receipt.producer_id == self.producer_id:
                self.answers[cmd.send_receipt.sequence_id] = "receipt"
            elif cmd.type == T.SEND_ERROR and cmd.send_error.producer_id == self.producer_id:
                self.answers[cmd.send_error.sequence_id] = "error"
            elif cmd.type == T.CLOSE_PRODUCER and cmd.close_producer.producer_id == self.producer_id:
                self.closed_by_broker = True
            else:
                keep.append(f)
        self.conn.received = keep

    async def wait_answer(self, seq: int) -> str:
        with trio.fail_after(10):
            while True:
                self._take()
                if seq in self.answers:
                    return self.answers[seq]
                data = await self.conn.stream.receive_some(65536)
                assert data, "connection closed"
                self.conn.received.extend(self.conn.decoder.feed(data))

    async def settle(self, seconds: float = 0.3) -> None:
        """Read what the broker says for a while (answers, a CLOSE_PRODUCER)."""
        with trio.move_on_after(seconds):
            while True:
                self._take()
                data = await self.conn.stream.receive_some(65536)
                if not data:
                    return
                self.conn.received.extend(self.conn.decoder.feed(data))
        self._take()


async def _resend_unacknowledged(broker: BrokerService, first: Producer, sent: list[int]) -> None:
    """What the official client does after a SEND_ERROR: close the connection, connect again,
    re-create the producer (the topic is loaded again if it was closed) and send again, in
    order, whatever got no receipt."""
    await first.conn.stream.aclose()
    again = await Producer.create(await TrioRawConnection.open(broker.port), 1, first.topic)
    pending = [s for s in sent if first.answers.get(s) != "receipt"]
    for seq in pending:
        await again.send(seq)
    for seq in pending:
        assert await again.wait_answer(seq) == "receipt"


def _sequence_ids(entries: list[bytes]) -> list[int]:
    return [frames.parse_entry(e).metadata.sequence_id for e in entries]


@asynccontextmanager
async def fake_bk_broker(max_entries_per_ledger: int) -> AsyncIterator[tuple[BrokerService, FakeBookies]]:
    """A broker on the real managed ledger over the fake ledger client, infinite retention
    (no ledger trimmed)."""
    meta, bookies = FakeMetadataServer(), FakeBookies()
    ml_config = ManagedLedgerConfig(ensemble_size=1, write_quorum=1, ack_quorum=1,
                                    retention_check_interval_seconds=3600)
    store = await open_store(f"memory://send-order-{next(_ids)}")
    config = BrokerConfig(broker_service_port=0, web_service_port=0, advertised_address="127.0.0.1",
                          bind_address="127.0.0.1", managed_ledger_max_entries_per_ledger=max_entries_per_ledger,
                          managed_ledger_default_ensemble_size=1, managed_ledger_default_write_quorum=1,
                          managed_ledger_default_ack_quorum=1, default_retention_time_in_minutes=-1,
                          default_retention_size_in_mb=-1)
    async with ManagedLedgerFactory(meta.client(), bookies.client(), ml_config) as factory:
        async with trio.open_nursery() as nursery:
            service = BrokerService(config, store, factory)
            await nursery.start(service.run)
            yield service, bookies
            nursery.cancel_scope.cancel()


def _slow_close(topic: PersistentTopic, monkeypatch: pytest.MonkeyPatch) -> trio.Event:
    """Closing the topic after a failure takes a while (in the chaos run: its subscriptions'
    consumers and acks); here until the returned event is set."""
    answered = trio.Event()
    close = topic.close

    async def slow_close(*args: Any, **kwargs: Any) -> None:
        await answered.wait()
        await close(*args, **kwargs)

    monkeypatch.setattr(topic, "close", slow_close)
    return answered


async def test_a_send_arriving_while_a_failed_rollover_closes_the_ledger_is_not_stored_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    async with fake_bk_broker(max_entries_per_ledger=1) as (broker, bookies):  # every add rolls over
        conn = await TrioRawConnection.open(broker.port)
        producer = await Producer.create(conn, 1)
        topic = broker.topics[TOPIC]
        ml: Any = topic.ml
        answered = _slow_close(topic, monkeypatch)
        bookies.fail_creates = 1  # the rollover after the next add cannot create its ledger
        bookies.create_gate = trio.Event()
        bookies.close_gate = trio.Event()  # ... and then closes the old ledger slowly
        await producer.send(0)
        assert await producer.wait_answer(0) == "receipt"  # the ledger is full: the rollover runs
        await producer.send(1)  # waits for the rollover, fails with it
        await _until(lambda: ml.pending_add_entries == 1)
        await trio.testing.wait_all_tasks_blocked()  # it waits for the rollover
        bookies.create_gate.set()
        await _until(lambda: ml.state.name == "CLOSED_LEDGER")
        await producer.send(2)  # arrives while the old ledger closes
        await _until(lambda: ml.pending_add_entries == 2)
        bookies.close_gate.set()
        assert await producer.wait_answer(1) == "error"
        await producer.wait_answer(2)
        answered.set()
        await _until(topic.close_done.is_set)
        await producer.settle(0.1)
        await _resend_unacknowledged(broker, producer, [0, 1, 2])
        stored = [e for _, ledger in sorted(bookies.ledgers.items()) for e in ledger.entries]
        assert _sequence_ids(stored) == [0, 1, 2], f"answers before the re-send: {producer.answers}"


async def test_sends_in_flight_behind_a_failed_write_and_one_arriving_after_it_are_not_stored_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Add 1 fails at the bookies while 2 and 3 are in flight on the same ledger; 4 arrives
    after the broker answered 1's failure, before the topic is closed."""
    async with fake_bk_broker(max_entries_per_ledger=1000) as (broker, bookies):
        conn = await TrioRawConnection.open(broker.port)
        producer = await Producer.create(conn, 1)
        topic = broker.topics[TOPIC]
        answered = _slow_close(topic, monkeypatch)
        await producer.send(0)
        assert await producer.wait_answer(0) == "receipt"
        bookies.add_delay = 0.05
        bookies.fail_adds = 1
        for seq in (1, 2, 3):
            await producer.send(seq)
        assert await producer.wait_answer(1) == "error"
        await producer.send(4)
        for seq in (2, 3, 4):
            await producer.wait_answer(seq)
        bookies.add_delay = 0.0
        answered.set()
        await _until(topic.close_done.is_set)
        await producer.settle(0.1)
        await _resend_unacknowledged(broker, producer, [0, 1, 2, 3, 4])
        stored = [e for _, ledger in sorted(bookies.ledgers.items()) for e in ledger.entries]
        assert _sequence_ids(stored) == [0, 1, 2, 3, 4], f"answers before the re-send: {producer.answers}"


async def test_a_send_arriving_as_the_bookies_fail_the_adds_in_flight_is_not_stored_first(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed-21 finding itself: adds 1-3 are in flight when the bookies fail them, and SEND 4
    reaches the broker in the same scheduling pass as their failure. Before the synchronous add
    path, the topic checked SEND 4 (not fenced yet) and started a task to add it; the failed
    add's task then bumped the write epoch, started the rollover and fenced the topic, and SEND
    4's task, running after it, queued behind the rollover and was stored first in the new
    ledger (1336 at 183:0; 1330-1334, failed together, re-sent to 194:0-2). Which of those tasks
    ran first was trio's choice, so the scenario is repeated."""
    async with fake_bk_broker(max_entries_per_ledger=1000) as (broker, bookies):
        for trial in range(12):
            topic_name = f"{TOPIC}-{trial}"
            producer = await Producer.create(await TrioRawConnection.open(broker.port), 1, topic_name)
            topic = broker.topics[topic_name]
            ml: Any = topic.ml
            answered = _slow_close(topic, monkeypatch)
            await producer.send(0)
            assert await producer.wait_answer(0) == "receipt"
            bookies.add_gate = trio.Event()
            bookies.fail_at_gate = True
            for seq in (1, 2, 3):
                await producer.send(seq)
            await _until(lambda: ml.pending_add_entries == 3)
            await trio.testing.wait_all_tasks_blocked()  # the three wait for the bookies
            bookies.add_gate.set()  # the bookies fail 1, 2 and 3 ...
            await producer.send(4)  # ... and SEND 4 is on its way
            for seq in (1, 2, 3, 4):
                await producer.wait_answer(seq)
            answered.set()
            await _until(topic.close_done.is_set)
            await producer.settle(0.05)
            await _resend_unacknowledged(broker, producer, [0, 1, 2, 3, 4])
            ledger_ids = [li.ledger_id for li in (await broker.factory.open(topic.name.managed_ledger_name)).ledgers]
            stored = [e for lid in ledger_ids for e in bookies.ledgers[lid].entries]
            assert _sequence_ids(stored) == [0, 1, 2, 3, 4], (
                f"trial {trial}: answers before the re-send: {producer.answers}")


async def test_a_send_after_one_refused_for_a_stale_session_is_not_stored_first(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = await start_broker(nursery)
    conn = await TrioRawConnection.open(broker.port)
    producer = await Producer.create(conn, 1)
    await producer.send(0)
    assert await producer.wait_answer(0) == "receipt"
    # the metadata store has not answered for a session timeout; the watchdog has not acted yet
    monkeypatch.setattr(broker, "session_fresh", lambda: False)
    await producer.send(1)
    assert await producer.wait_answer(1) == "error"
    monkeypatch.undo()  # a late answer of the store: the session looks fresh again
    await producer.send(2)
    await producer.settle()
    await _resend_unacknowledged(broker, producer, [0, 1, 2])
    ml: Any = broker.factory.ledgers["public/default/persistent/t-order"]  # type: ignore[attr-defined]
    assert _sequence_ids(ml.entries) == [0, 1, 2], f"answers before the re-send: {producer.answers}"
