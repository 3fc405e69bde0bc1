"""Client wire behaviour against a scripted fake broker: ack grouping, permit refills, re-sends
after a connection loss, chunk layout, batch metadata. Fast: no broker process."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest
import trio

import clients
from clients import AsyncClient
from clients.protocol import batch, frames
from clients.protocol import commands as cmds
from clients.protocol.pulsar_api_pb2 import BaseCommand
from tests.clients.fake_broker import FakeBroker

T = BaseCommand.Type
TOPIC = "persistent://public/default/fake"


async def test_acks_are_grouped(fake: FakeBroker) -> None:
    async with AsyncClient(fake.url) as client:
        consumer = await client.subscribe(TOPIC, "sub")
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        for i in range(20):
            await producer.send(b"%d" % i)
        for _ in range(20):
            await consumer.acknowledge(await consumer.receive(5000))
        await trio.sleep(0.35)
        acks = fake.commands(T.ACK)
        assert 1 <= len(acks) <= 3  # one ACK per 100 ms group, not one per message
        ids = [mid for ack in acks for mid in ack.message_id]
        assert sorted(m.entryId for m in ids) == list(range(20))
        # The official client never sends batch_index or partition in acks.
        assert not any(m.HasField("batch_index") or m.HasField("partition") for m in ids)


async def test_flow_refills_at_half_the_queue(fake: FakeBroker) -> None:
    async with AsyncClient(fake.url) as client:
        consumer = await client.subscribe(TOPIC, "sub", receiver_queue_size=10)
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        for i in range(30):
            await producer.send(b"%d" % i)
        for _ in range(30):
            await consumer.receive(5000)
        await trio.sleep(0.1)
        assert [f.messagePermits for f in fake.commands(T.FLOW)][:5] == [10, 5, 5, 5, 5]


async def test_blocking_consumer_returns_permits_from_the_receiving_thread(fake: FakeBroker) -> None:
    """The blocking ``receive`` grants permits back itself once half the queue was taken: a
    loop thread that is busy (here: held) must not keep the broker without permits."""

    def body() -> list[int]:
        client = clients.Client(fake.url)
        try:
            producer = client.create_producer(TOPIC, batching_enabled=False)
            for i in range(10):
                producer.send(b"%d" % i)
            consumer = client.subscribe(TOPIC, "sub", receiver_queue_size=10,
                                        initial_position=clients.InitialPosition.Earliest)
            deadline = time.monotonic() + 5
            while len(consumer._c._queue) < 10 and time.monotonic() < deadline:
                time.sleep(0.01)
            release = threading.Event()
            client._loop.run_sync_soon(lambda: release.wait(10))  # the loop thread is held from here
            try:
                for _ in range(5):
                    consumer.receive(1000)
                deadline = time.monotonic() + 3
                while len(fake.commands(T.FLOW)) < 2 and time.monotonic() < deadline:
                    time.sleep(0.01)
                return [f.messagePermits for f in fake.commands(T.FLOW)]
            finally:
                release.set()
        finally:
            client.close()

    assert await trio.to_thread.run_sync(body) == [10, 5]


async def test_sync_and_async_sends_share_a_connection(fake: FakeBroker) -> None:
    """Synchronous sends (written from the caller's thread) interleaved with another producer's
    ``send_async`` and the creation of a third on the same connection: all settle, in order."""

    def body() -> tuple[list[Any], list[Any], list[Any]]:
        client = clients.Client(fake.url)
        try:
            sync_producer = client.create_producer(TOPIC, batching_enabled=False)
            other = client.create_producer(TOPIC + "-other", batching_enabled=False)
            settled: list[Any] = []
            sync_ids: list[Any] = []
            for i in range(200):
                sync_ids.append(sync_producer.send(b"s%d" % i))
                if i % 10 == 0:
                    other.send_async(b"o%d" % i, lambda res, mid: settled.append((res, mid)))
                if i == 100:
                    third = client.create_producer(TOPIC + "-third", batching_enabled=False)
                    third.send(b"t")
            other.flush()
            return sync_ids, settled, fake.commands(T.SEND)
        finally:
            client.close()

    sync_ids, settled, _ = await trio.to_thread.run_sync(body)
    assert len(sync_ids) == 200 and len({(m.ledger_id(), m.entry_id()) for m in sync_ids}) == 200
    assert [res for res, _ in settled] == [clients.Result.Ok] * 20
    entries = [mid.entry_id() for _, mid in settled]
    assert entries == sorted(entries)


async def test_blocking_sends_survive_a_connection_loss(fake: FakeBroker) -> None:
    """A connection lost while a synchronous send waits for its receipt: the send is re-sent
    after the reconnect and every send returns (nothing acknowledged is lost)."""

    token = trio.lowlevel.current_trio_token()

    def drop() -> None:
        fake.hold_receipts = False
        fake.drop_connections()

    def body() -> int:
        client = clients.Client(fake.url)
        try:
            producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=0)
            for i in range(50):
                if i in (10, 30):  # this send's receipt is held, then its connection lost
                    fake.hold_receipts = True
                    threading.Timer(0.2, lambda: trio.from_thread.run_sync(drop, trio_token=token)).start()
                producer.send(b"%d" % i)
            return 50
        finally:
            client.close()

    with trio.fail_after(30):
        assert await trio.to_thread.run_sync(body) == 50
    seqs = [s.sequence_id for s in fake.commands(T.SEND)]
    assert sorted(set(seqs)) == list(range(50))
    assert seqs.count(10) >= 2 and seqs.count(30) >= 2  # re-sent after each loss


@pytest.mark.parametrize("partition", [None, 0])
async def test_blocking_sync_sends_go_direct_and_their_receipts_are_hand_decoded(
        fake: FakeBroker, monkeypatch: pytest.MonkeyPatch, partition: int | None) -> None:
    """One send at a time: every SEND is written from the caller's thread, and every receipt
    is read by the lone-receipt decoder; a receipt of another shape (here with a partition)
    takes the general decoder, with the same ids."""
    from clients import connection as connection_module
    from clients.connection import ClientConnection

    fake.receipt_partition = partition
    decoded: list[Any] = []
    direct: list[bool] = []

    decode = connection_module.decode_lone_receipt

    def recording(data: bytes) -> Any:
        got = decode(data)
        if data[8:11] == b"\x08\x07\x3a":  # a SEND_RECEIPT frame, of whatever shape
            decoded.append(got)
        return got

    monkeypatch.setattr(connection_module, "decode_lone_receipt", recording)
    write_direct = ClientConnection.write_direct

    def counting(self: ClientConnection, data: bytes) -> Any:
        rest = write_direct(self, data)
        direct.append(rest is not None)
        return rest

    monkeypatch.setattr(ClientConnection, "write_direct", counting)

    def body() -> list[int]:
        client = clients.Client(fake.url)
        try:
            producer = client.create_producer(TOPIC, batching_enabled=False)
            return [producer.send(b"%d" % i).entry_id() for i in range(30)]
        finally:
            client.close()

    with trio.fail_after(30):
        assert await trio.to_thread.run_sync(body) == list(range(30))
    assert direct == [True] * 30
    if partition is None:
        assert [got[1:] for got in decoded] == [(seq, 1, seq) for seq in range(30)]
    else:
        assert len(decoded) >= 30 and set(decoded) == {None}  # (a borrower's read, then the loop's)


async def test_blocking_sync_sends_read_their_own_receipts(fake: FakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """One send at a time: after the first, the caller's thread reads its receipts itself (the
    connection lends its socket); a read holding more than the receipt (here a PING with it)
    goes back to the loop thread whole and in order (the PING answered, that send settled there)
    and the next sends borrow again; the ids are the broker's."""
    from clients.producer import Producer

    settle = Producer._settle_direct
    settled_in: list[str] = []

    def recording(self: Producer, *args: Any) -> bool:
        ok = settle(self, *args)
        settled_in.append(threading.current_thread().name if ok else "refused")
        return ok

    monkeypatch.setattr(Producer, "_settle_direct", recording)
    fake.after_receipt = {10: frames.encode_command(cmds.ping()), 20: frames.encode_command(cmds.ping())}

    def body() -> list[int]:
        threading.current_thread().name = "caller"
        client = clients.Client(fake.url)
        try:
            producer = client.create_producer(TOPIC, batching_enabled=False)
            return [producer.send(b"%d" % i).entry_id() for i in range(40)]
        finally:
            client.close()

    with trio.fail_after(30):
        assert await trio.to_thread.run_sync(body) == list(range(40))
    assert len(fake.commands(T.PONG)) == 2
    assert settled_in.count("caller") >= 30  # all but the first sends after each hand-back
    assert set(settled_in) <= {"caller"}  # a read with more than the receipt is never settled by a borrower


async def test_a_sync_send_on_a_connection_with_a_consumer_waits_without_polling(
        fake: FakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """A connection with a consumer never lends its socket: a synchronous send asks once and
    then waits for the loop thread (it used to ask again every millisecond until its receipt
    came, here 30 ms later)."""
    from clients.connection import ClientConnection

    read_own = ClientConnection.read_own
    asked: list[bool | None] = []

    def counting(self: ClientConnection, done: Any) -> bool | None:
        asked.append(result := read_own(self, done))
        return result

    monkeypatch.setattr(ClientConnection, "read_own", counting)

    def body() -> list[int]:
        client = clients.Client(fake.url)
        try:
            consumer = client.subscribe(TOPIC, "sub")
            producer = client.create_producer(TOPIC, batching_enabled=False)
            fake.reply_delay = 0.03
            ids = [producer.send(b"%d" % i).entry_id() for i in range(3)]
            consumer.close()
            return ids
        finally:
            client.close()

    with trio.fail_after(30):
        assert await trio.to_thread.run_sync(body) == [0, 1, 2]
    assert len(asked) == 3 and set(asked) == {None}, asked[:5]


async def test_pending_sends_resent_in_order_after_connection_loss(fake: FakeBroker) -> None:
    async with AsyncClient(fake.url) as client:
        producer = await client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=0)
        fake.hold_receipts = True
        futures = [await producer.send_async(b"%d" % i) for i in range(5)]
        await trio.sleep(0.2)
        assert not any(f.done() for f in futures)
        fake.hold_receipts = False
        fake.drop_connections()
        with trio.fail_after(10):
            ids = [await f.wait() for f in futures]
        seqs = [s.sequence_id for s in fake.commands(T.SEND)]
        assert seqs == [0, 1, 2, 3, 4, 0, 1, 2, 3, 4]
        assert [m.entry_id() for m in ids] == [5, 6, 7, 8, 9]  # receipts of the re-sent copies
        producers = fake.commands(T.PRODUCER)
        # The re-created producer keeps the name the broker assigned (dedup relies on it).
        assert len(producers) == 2 and not producers[0].HasField("producer_name")
        assert producers[1].producer_name == "fake-1" and producers[1].producer_id == producers[0].producer_id
        assert not producers[1].user_provided_producer_name


async def test_chunk_layout(fake: FakeBroker) -> None:
    fake.max_message_size = 2048
    async with AsyncClient(fake.url) as client:
        consumer = await client.subscribe(TOPIC, "sub")
        producer = await client.create_producer(TOPIC, chunking_enabled=True, batching_enabled=False)
        body = bytes(range(256)) * 20  # 5120 bytes
        mid = await producer.send(body, properties={"k": "v"})
        sends = [cmd for cmd in fake.received if cmd.type == T.SEND]
        assert len(sends) == 3 and all(s.send.is_chunk for s in sends)
        metas = [frames.parse_entry(e).metadata for e in fake.entries]
        assert [m.chunk_id for m in metas] == [0, 1, 2]
        assert {m.uuid for m in metas} == {metas[0].uuid} and all(m.num_chunks_from_msg == 3 for m in metas)
        assert all(m.total_chunk_msg_size == len(body) for m in metas)
        assert not any(m.HasField("num_messages_in_batch") for m in metas)
        assert b"".join(bytes(frames.parse_entry(e).payload) for e in fake.entries) == body
        msg = await consumer.receive(5000)
        assert msg.data() == body and msg.properties() == {"k": "v"} and msg.message_id() == mid
        assert msg.message_id().chunk_ids == ((1, 0), (1, 1), (1, 2))


async def test_batch_metadata(fake: FakeBroker) -> None:
    async with AsyncClient(fake.url) as client:
        producer = await client.create_producer(TOPIC, batching_max_publish_delay_ms=200)
        futures = [await producer.send_async(b"m%d" % i, partition_key=f"k{i}") for i in range(3)]
        await producer.flush()
        (send,) = fake.commands(T.SEND)
        assert send.num_messages == 3 and send.sequence_id == 0 and send.highest_sequence_id == 2
        parsed = frames.parse_entry(fake.entries[0])
        assert parsed.metadata.num_messages_in_batch == 3 and parsed.metadata.highest_sequence_id == 2
        items = batch.parse_batch(parsed.payload, 3)
        assert [(m.sequence_id, m.partition_key, bytes(p)) for m, p in items] == [
            (0, "k0", b"m0"), (1, "k1", b"m1"), (2, "k2", b"m2")]
        assert [(await f.wait()).batch_index() for f in futures] == [0, 1, 2]


async def test_lookup_redirect_and_connection_pool(fake: FakeBroker, nursery: trio.Nursery) -> None:
    owner = FakeBroker()
    await nursery.start(owner.run)
    fake.redirect_to = owner.url
    async with AsyncClient(fake.url) as client:
        p1 = await client.create_producer(TOPIC)
        p2 = await client.create_producer(TOPIC + "-2")
        await p1.send(b"x")
        assert len(owner.entries) == 1 and not fake.entries  # served by the broker redirected to
        assert p1._cnx is p2._cnx and p1._cnx.url == owner.url  # one pooled connection per broker
        lookups = fake.commands(T.LOOKUP) + owner.commands(T.LOOKUP)
        assert [lk.authoritative for lk in lookups] == [False, False, True, True]
    owner.stop()


async def test_corrupt_message_is_discarded_and_acked_with_validation_error(fake: FakeBroker) -> None:
    from clients.protocol.pulsar_api_pb2 import CommandAck

    fake.corrupt_entries = {1}
    async with AsyncClient(fake.url) as client:
        consumer = await client.subscribe(TOPIC, "sub")
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        for i in range(3):
            await producer.send(b"m%d" % i)
        got = [(await consumer.receive(5000)).data() for _ in range(2)]
        assert got == [b"m0", b"m2"]  # the corrupted entry never reaches the application
        (ack,) = [a for a in fake.commands(T.ACK) if a.HasField("validation_error")]
        assert ack.validation_error == CommandAck.ChecksumMismatch and ack.message_id[0].entryId == 1


async def test_service_url_falls_through_dead_hosts(fake: FakeBroker) -> None:
    from tests.fixtures.processes import free_port

    dead = free_port()  # nothing listens there
    async with AsyncClient(f"pulsar://127.0.0.1:{dead},127.0.0.1:{fake.port}") as client:
        producer = await client.create_producer(TOPIC)
        await producer.send(b"x")
    assert len(fake.entries) == 1


async def test_batches_close_by_count_bytes_and_delay(fake: FakeBroker) -> None:
    async with AsyncClient(fake.url) as client:
        by_count = await client.create_producer(TOPIC, batching_max_messages=5, batching_max_publish_delay_ms=60_000)
        futures = [await by_count.send_async(b"c%d" % i) for i in range(12)]
        with trio.fail_after(10):
            for f in futures[:10]:  # two full batches went out without a flush or the timer
                await f.wait()
        assert not futures[10].done()
        await by_count.flush()
        assert [s.num_messages for s in fake.commands(T.SEND)] == [5, 5, 2]

        by_bytes = await client.create_producer(TOPIC, batching_max_allowed_size_in_bytes=1000,
                                                batching_max_publish_delay_ms=60_000)
        futures = [await by_bytes.send_async(bytes(300)) for _ in range(7)]
        await by_bytes.flush()
        assert [s.num_messages for s in fake.commands(T.SEND)[3:]] == [3, 3, 1]  # 4 x 300 B > 1000 B

        by_delay = await client.create_producer(TOPIC, batching_max_publish_delay_ms=50)
        lone = await by_delay.send_async(b"lone")
        with trio.fail_after(10):
            assert (await lone.wait()).batch_index() == 0  # the timer sent it: no flush, no send()
        assert fake.commands(T.SEND)[-1].num_messages == 1


async def test_batches_leave_room_in_the_pending_window(fake: FakeBroker) -> None:
    """With the defaults (1,000 pending, batches of up to 1,000) a batch closes at a quarter of
    the window, so several are in flight: a full window is four SENDs before any receipt, not
    one batch whose receipt the producer must wait for before it can add a message."""
    fake.hold_receipts = True
    async with AsyncClient(fake.url) as client:
        producer = await client.create_producer(TOPIC, batching_max_publish_delay_ms=60_000)
        for i in range(1000):
            await producer.send_async(b"%d" % i)
        with trio.fail_after(10):
            while len(fake.commands(T.SEND)) < 4:
                await trio.sleep(0.01)
        assert [s.num_messages for s in fake.commands(T.SEND)] == [250] * 4
        # A window too small to split keeps batching_max_messages (and its batch indexes).
        small = await client.create_producer(TOPIC + "-small", max_pending_messages=40,
                                             batching_max_publish_delay_ms=100)
        for i in range(40):
            await small.send_async(b"%d" % i)
        with trio.fail_after(10):
            while len(fake.commands(T.SEND)) < 5:
                await trio.sleep(0.01)
        assert fake.commands(T.SEND)[4].num_messages == 40


async def test_send_timeout_fails_pending_sends(fake: FakeBroker) -> None:
    from clients import Timeout

    fake.hold_receipts = True
    async with AsyncClient(fake.url) as client:
        producer = await client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=300)
        futures = [await producer.send_async(b"%d" % i) for i in range(3)]
        with trio.fail_after(10):
            for f in futures:
                with pytest.raises(Timeout):
                    await f.wait()
            with pytest.raises(Timeout):
                await producer.send(b"late")


async def test_key_based_batches_hold_one_key(fake: FakeBroker) -> None:
    from clients import BatchingType

    async with AsyncClient(fake.url) as client:
        producer = await client.create_producer(TOPIC, batching_type=BatchingType.KeyBased,
                                                batching_max_publish_delay_ms=60_000)
        for key in ("a", "a", "b", "b", "a"):
            await producer.send_async(b"m", partition_key=key)
        await producer.flush()
        sends = fake.commands(T.SEND)
        assert [s.num_messages for s in sends] == [2, 2, 1]
        assert [s.sequence_id for s in sends] == [0, 2, 4]  # still in send order (dedup-safe)
        keys = [{m.partition_key for m, _ in batch.parse_batch(frames.parse_entry(e).payload, s.num_messages)}
                for e, s in zip(fake.entries, sends, strict=True)]
        assert keys == [{"a"}, {"b"}, {"a"}]


async def test_blocking_send_from_the_callers_thread_is_resent_and_times_out(fake: FakeBroker) -> None:
    """The blocking ``send`` writes its frame from the caller's thread when nothing else is
    pending: such a send is still re-sent after a connection loss, and still fails with
    ``Timeout`` after ``send_timeout_millis`` when no receipt comes."""
    import threading

    import clients
    from clients import Timeout

    def scenario() -> tuple[list[int], int, float]:
        client = clients.Client(fake.url)
        try:
            producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=0)
            ids = [producer.send(b"%d" % i).entry_id() for i in range(3)]  # direct sends
            fake.hold_receipts = True
            got: list[int] = []
            sender = threading.Thread(target=lambda: got.append(producer.send(b"held").entry_id()))
            sender.start()
            deadline = time.monotonic() + 10
            while len(fake.commands(T.SEND)) < 4 and time.monotonic() < deadline:
                time.sleep(0.01)
            fake.hold_receipts = False
            trio.from_thread.run_sync(fake.drop_connections)  # on the fake broker's trio thread
            sender.join(10)
            ids += got
            producer.close()
            fake.hold_receipts = True
            timed = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=300)
            t0 = time.monotonic()
            with pytest.raises(Timeout):
                timed.send(b"never acknowledged")
            return ids, len(fake.commands(T.PRODUCER)), time.monotonic() - t0
        finally:
            client.close()

    ids, producers, waited = await trio.to_thread.run_sync(scenario)
    seqs = [s.sequence_id for s in fake.commands(T.SEND)]
    assert seqs[:5] == [0, 1, 2, 3, 3]  # the held send went out again after the reconnect
    assert ids == [0, 1, 2, 4]  # its receipt is the re-sent copy's
    assert producers == 3  # first, re-created after the drop, the timed one
    assert 0.2 < waited < 8



def _kill_after_reply(monkeypatch: pytest.MonkeyPatch, kind: int, nth: int) -> None:
    """The ``nth`` request of ``kind`` gets its reply, then its connection is closed and fully
    shut down (its producers and consumers told) before the requester resumes, as when the
    broker answers and the connection dies in the same scheduling round."""
    from clients.connection import ClientConnection

    original = ClientConnection.request
    seen = 0

    async def request(self: ClientConnection, command: BaseCommand, request_id: int, timeout: float | None = None) -> BaseCommand:
        nonlocal seen
        reply = await original(self, command, request_id, timeout)
        if command.type == kind:
            seen += 1
            if seen == nth:
                self.close("test: closed right after the reply")
                await self.closed.wait()
                while self._producers or self._consumers:  # not yet told of the loss
                    await trio.sleep(0.001)
                await trio.sleep(0.01)
        return reply

    monkeypatch.setattr(ClientConnection, "request", request)


async def test_producer_reconnects_when_connection_dies_right_after_producer_success(
    fake: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression (chaos run): the re-created producer's connection closed between its
    PRODUCER_SUCCESS and the re-send of its pending frames; the re-send raised NotConnected with
    the dead connection already installed, so the producer never reconnected and every later
    send timed out."""
    _kill_after_reply(monkeypatch, T.PRODUCER, 2)
    async with AsyncClient(fake.url) as client:
        producer = await client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=0)
        fake.hold_receipts = True
        futures = [await producer.send_async(b"%d" % i) for i in range(5)]
        await trio.sleep(0.2)
        fake.hold_receipts = False
        fake.drop_connections()
        with trio.fail_after(10):
            await producer.send(b"later")  # sent (and acknowledged) after the reconnect
            ids = [await f.wait() for f in futures]
        assert len(fake.commands(T.PRODUCER)) == 3
        assert len({(m.ledger_id(), m.entry_id()) for m in ids}) == 5


async def test_consumer_resubscribes_when_connection_dies_right_after_subscribe(
    fake: FakeBroker, monkeypatch: pytest.MonkeyPatch
) -> None:
    """As above for a consumer: its FLOW after the SUBSCRIBE reply must not leave it on the dead
    connection."""
    _kill_after_reply(monkeypatch, T.SUBSCRIBE, 2)
    async with AsyncClient(fake.url) as client:
        consumer = await client.subscribe(TOPIC, "sub")
        fake.drop_connections()
        await trio.sleep(0.5)  # the resubscribe whose connection dies, and the next one
        producer = await client.create_producer(TOPIC, batching_enabled=False)
        await producer.send(b"after")
        with trio.fail_after(10):
            msg = await consumer.receive(10_000)
        assert msg.data() == b"after"
        assert len(fake.commands(T.SUBSCRIBE)) == 3


async def test_a_lent_socket_comes_back_for_what_the_loop_sends(fake: FakeBroker, monkeypatch: pytest.MonkeyPatch) -> None:
    """With the reader's periodic take-back out of the way (a 60 s check), the socket a
    synchronous sender borrowed still comes back at once when the loop writes a frame: async
    sends' receipts, a new producer's request and a subscription's messages arrive while no
    caller reads."""
    from clients import connection as connection_module

    monkeypatch.setattr(connection_module, "LEND_CHECK_S", 60.0)

    def body() -> list[bytes]:
        client = clients.Client(fake.url, operation_timeout_seconds=10)
        try:
            producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=10_000)
            for i in range(10):
                producer.send(b"s%d" % i)  # the socket is lent after the first
            settled: list[Any] = []
            for i in range(5):
                producer.send_async(b"a%d" % i, lambda res, _mid: settled.append(res))
            producer.flush()
            assert settled == [clients.Result.Ok] * 5
            producer.send(b"s10")  # lent again
            other = client.create_producer(TOPIC + "-other", batching_enabled=False)
            other.send(b"o")
            producer.send(b"s11")
            consumer = client.subscribe(TOPIC, "sub", initial_position=clients.InitialPosition.Earliest)
            got = [consumer.receive(10_000).data() for _ in range(3)]
            producer.send(b"s12")
            return got
        finally:
            client.close()

    with trio.fail_after(30):
        assert await trio.to_thread.run_sync(body) == [b"s0", b"s1", b"s2"]


@pytest.mark.parametrize("where", ["poll", "after_read"])
async def test_ctrl_c_while_a_sender_reads_its_receipt(
        fake: FakeBroker, monkeypatch: pytest.MonkeyPatch, where: str) -> None:
    """A KeyboardInterrupt in the caller's thread while it reads its own receipt: waiting in
    poll (nothing read: the socket goes back to the reader) or after a read it did not handle
    (the bytes are gone: the connection closes and the producer re-sends on a new one). Either
    way the interrupt reaches the caller, later sends still return and close does not hang."""
    from clients import connection as connection_module

    decode = connection_module.decode_lone_receipt
    fired: list[str] = []
    armed: list[bool] = []

    def interrupting(data: bytes) -> Any:
        if threading.current_thread().name == "caller" and armed and not fired and where == "after_read":
            fired.append(where)
            raise KeyboardInterrupt
        return decode(data)

    monkeypatch.setattr(connection_module, "decode_lone_receipt", interrupting)

    real_poll = connection_module.select.poll

    class InterruptingPoll:
        def __init__(self) -> None:
            self._poll = real_poll()

        def register(self, fd: int, events: int) -> None:
            self._poll.register(fd, events)

        def poll(self, timeout: float) -> Any:
            if where == "poll" and armed and not fired:
                fired.append(where)
                raise KeyboardInterrupt
            return self._poll.poll(timeout)

    monkeypatch.setattr(connection_module.select, "poll", InterruptingPoll, raising=True)

    def body() -> tuple[list[int], bool]:
        threading.current_thread().name = "caller"
        client = clients.Client(fake.url)
        try:
            producer = client.create_producer(TOPIC, batching_enabled=False, send_timeout_millis=0)
            ids = [producer.send(b"%d" % i).entry_id() for i in range(5)]
            interrupted = False
            armed.append(True)
            try:
                producer.send(b"x")
            except KeyboardInterrupt:
                interrupted = True
            ids += [producer.send(b"%d" % i).entry_id() for i in range(5, 10)]
            return ids, interrupted
        finally:
            client.close()

    with trio.fail_after(30):
        ids, interrupted = await trio.to_thread.run_sync(body)
    assert interrupted and fired == [where]
    assert ids[:5] == list(range(5)) and len(set(ids)) == 10
    sent = [bytes(e[-1:]) for e in fake.entries]
    assert b"x" in sent  # the interrupted send itself went out (at least once)


async def test_a_full_window_sends_the_open_batch(fake: FakeBroker) -> None:
    """send_async that finds the window full (block_if_queue_full) sends the open batch at once
    rather than leave it to the batch timer (here a minute): nothing more can join it until
    receipts free room. 40 messages through a window of 8 go in batches of up to 8."""

    def body() -> list[Any]:
        client = clients.Client(fake.url)
        try:
            producer = client.create_producer(
                TOPIC, batching_enabled=True, max_pending_messages=8, block_if_queue_full=True,
                batching_max_publish_delay_ms=60_000, batching_max_messages=1000)
            settled: list[Any] = []
            for i in range(40):
                producer.send_async(b"%d" % i, lambda res, _mid: settled.append(res))
            producer.flush()
            return settled
        finally:
            client.close()

    with trio.fail_after(20):  # (abandoned on failure: a blocked send_async would hold the test)
        assert await trio.to_thread.run_sync(body, abandon_on_cancel=True) == [clients.Result.Ok] * 40
    sends = fake.commands(T.SEND)
    assert sum(s.num_messages for s in sends) == 40 and max(s.num_messages for s in sends) <= 8
