"""Property test: consumer churn on every subscription type (issue 10, item 1).

Hypothesis draws a schedule of consumer arrivals, closes, dropped connections, flow permits,
individual and cumulative acks, negative acks, redeliver-all requests and publishes; a model
client speaks the Pulsar protocol to an in-process broker (one raw connection per consumer,
so commands of different consumers race with each other and with dispatch, as real clients
do) and checks after every step:

- a cumulative ack never covers a message that is not acknowledged yet and was never
  delivered to the acking consumer (the client only acks what it received; the broker must
  have delivered everything before it, in order);
- the cursor (mark-delete + individually deleted) acknowledges nothing the model did not ack;
- Exclusive/Failover deliver in position order between two rewinds the consumer can see
  (its own redelivery request, which bumps its epoch, or becoming active again);
- Key_Shared delivers each key in order to a consumer, redeliveries some consumer asked
  for (negative acks) aside;
- at the end a fresh consumer receives every message not acknowledged (nothing is stuck).

Default: a short fixed-seed run per subscription type; ``QUIRE_CHURN_EXAMPLES=500`` for more
(random seeds).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from broker.service import BrokerService
from tests.broker.conftest import start_broker, start_real_broker
from clients.connection import ClientConnection, ConnectionConfig
from clients.protocol import commands as cmds
from clients.protocol import frames
from clients.protocol.pulsar_api_pb2 import CommandSubscribe
from managed_ledger import Position

EXCLUSIVE, SHARED, FAILOVER, KEY_SHARED = 0, 1, 2, 3
KEYS = ["k0", "k1", "k2"]
EXAMPLES = int(os.environ.get("QUIRE_CHURN_EXAMPLES", "0"))

_who = st.integers(0, 7)  # index into the open consumers (modulo)
_which = st.integers(0, 63)  # index into a consumer's received messages (modulo)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("open"), st.integers(0, 1), st.integers(0, 30)),  # priority, permits
        st.tuples(st.just("close"), _who),
        st.tuples(st.just("flow"), _who, st.integers(1, 30)),
        st.tuples(st.just("ack"), _who, _which),
        st.tuples(st.just("ack_cumulative"), _who, _which),
        st.tuples(st.just("nack"), _who, _which),
        st.tuples(st.just("redeliver_all"), _who),
        st.tuples(st.just("publish"), st.integers(1, 10)),
        st.tuples(st.just("settle"),),
        st.tuples(st.just("yield"), st.integers(1, 20)),  # let dispatch run a few steps
        st.tuples(st.just("drop"), _who),  # the connection goes away without CLOSE_CONSUMER
    ),
    min_size=4,
    max_size=40,
)


class Violation(AssertionError):
    pass


@dataclass(eq=False)
class ModelConsumer:
    model: "Model"
    cid: int
    cnx: ClientConnection
    epoch: int = 0
    open: bool = True
    received: set[Position] = field(default_factory=set)  # every message delivered to it
    unacked: list[Position] = field(default_factory=list)  # delivered, not acked by it
    segment_last: Position | None = None  # Exclusive/Failover: last position since a rewind
    key_last: dict[str, Position] = field(default_factory=dict)

    # -- ConsumerHandler (called by ClientConnection's reader) ---------------------------------
    def _on_message(self, cnx: ClientConnection, message: Any, frame: frames.Frame) -> None:
        if not self.open:
            return  # in flight when it closed: the client drops it, it was not delivered
        if message.HasField("consumer_epoch") and message.consumer_epoch < self.epoch:
            return  # sent before its redelivery request: dropped, as the official client does
        mid = message.message_id
        pos = Position(cmds.signed64(mid.ledgerId), cmds.signed64(mid.entryId))
        self.model.delivered(self, pos, frame.metadata().partition_key)

    def _on_disconnected(self, cnx: ClientConnection) -> None:
        self.open = False

    def _on_active_change(self, active: bool) -> None:
        if active:
            self.segment_last = None  # becoming active again rewinds to the mark-delete

    def _on_end_of_topic(self) -> None:
        pass


class Model:
    def __init__(self, broker: BrokerService, nursery: trio.Nursery, sub_type: int, topic: str) -> None:
        self.broker = broker
        self.nursery = nursery
        self.sub_type = sub_type
        self.topic = topic
        self.published: list[Position] = []
        self.keys: dict[Position, str] = {}
        self.acked: set[Position] = set()  # acknowledged by the model (individually or covered)
        # Negatively acked or asked again by some consumer: a redelivery may come out of order.
        self.asked_again: set[Position] = set()
        self.consumers: list[ModelConsumer] = []
        self.connections: list[ClientConnection] = []
        self.ids = iter(range(1, 1 << 30))
        self.producer: ClientConnection | None = None
        self.receipts: list[Position] = []
        self.sequence = 0
        self.violations: list[str] = []
        self.trace: list[tuple] = []  # the operations run so far, for the failure message

    @property
    def single_active(self) -> bool:
        return self.sub_type in (EXCLUSIVE, FAILOVER)

    def fail(self, what: str) -> None:
        self.violations.append(f"{what} (after {self.trace[-12:]})")

    # -- checks at delivery ----------------------------------------------------------------------
    def delivered(self, c: ModelConsumer, pos: Position, key: str) -> None:
        if self.single_active:
            if c.segment_last is not None and pos <= c.segment_last:
                self.fail(f"consumer {c.cid} got {pos} after {c.segment_last} without a rewind")
            c.segment_last = pos
        if self.sub_type == KEY_SHARED and pos not in self.asked_again:
            last = c.key_last.get(key)
            if last is not None and pos <= last:
                again = " again" if pos in c.received else ""
                self.fail(f"consumer {c.cid} got {pos} of key {key}{again} after {last}")
            c.key_last[key] = max(pos, last) if last is not None else pos
        c.received.add(pos)
        if pos not in c.unacked:
            c.unacked.append(pos)

    # -- connections -----------------------------------------------------------------------------
    async def connect(self) -> ClientConnection:
        stream = await trio.open_tcp_stream("127.0.0.1", self.broker.port)
        cnx = ClientConnection("pulsar://127.0.0.1", stream, ConnectionConfig(operation_timeout_s=10))
        await cnx.handshake()
        self.nursery.start_soon(cnx.run)
        self.connections.append(cnx)
        return cnx

    async def publish(self, n: int) -> None:
        if self.producer is None:
            self.producer = await self.connect()
            self.producer.register_producer(1, self)  # type: ignore[arg-type]
            rid = next(self.ids)
            await self.producer.request(cmds.producer(self.topic, 1, rid), rid)
        want = len(self.receipts) + n
        for _ in range(n):
            key = KEYS[self.sequence % len(KEYS)]
            md = cmds.message_metadata("model", self.sequence, 1, partition_key=key)
            self.producer.write(frames.encode_payload_command(cmds.send(1, self.sequence), md, b"m"))
            self.sequence += 1
        with trio.fail_after(10):
            while len(self.receipts) < want:
                await trio.sleep(0.001)

    def _on_receipt(self, cnx: ClientConnection, receipt: Any) -> None:
        mid = receipt.message_id
        pos = Position(cmds.signed64(mid.ledgerId), cmds.signed64(mid.entryId))
        self.receipts.append(pos)
        self.published.append(pos)
        self.keys[pos] = KEYS[receipt.sequence_id % len(KEYS)]

    def _on_send_error(self, cnx: ClientConnection, error: Any) -> None:
        self.fail(f"send error {error}")

    def _on_disconnected(self, cnx: ClientConnection) -> None:
        pass

    # -- operations ------------------------------------------------------------------------------
    def _pick(self, i: int) -> ModelConsumer | None:
        live = [c for c in self.consumers if c.open]
        return live[i % len(live)] if live else None

    async def open(self, priority: int, permits: int) -> ModelConsumer | None:
        cnx = await self.connect()
        c = ModelConsumer(self, next(self.ids), cnx)
        cnx.register_consumer(c.cid, c)
        rid = next(self.ids)
        cmd = cmds.subscribe(self.topic, "s", self.sub_type, c.cid, rid, priority_level=priority,
                             initial_position=CommandSubscribe.Earliest, consumer_epoch=0,
                             key_shared_mode=0 if self.sub_type == KEY_SHARED else None)
        try:
            await cnx.request(cmd, rid)
        except Exception as exc:  # Exclusive with a consumer already there: ConsumerBusy
            if self.sub_type != EXCLUSIVE:
                self.fail(f"subscribe failed: {exc!r}")
            cnx.close()
            return None
        self.consumers.append(c)
        if permits:
            cnx.send(cmds.flow(c.cid, permits))
        return c

    async def close(self, c: ModelConsumer) -> None:
        rid = next(self.ids)
        c.open = False
        await c.cnx.request(cmds.close_consumer(c.cid, rid), rid)

    def drop(self, c: ModelConsumer) -> None:
        c.open = False
        c.cnx.close()

    def ack(self, c: ModelConsumer, pos: Position) -> None:
        c.cnx.send(cmds.ack(c.cid, [cmds.message_id(pos.ledger_id, pos.entry_id)]))
        self.acked.add(pos)
        c.unacked = [p for p in c.unacked if p != pos]

    def ack_cumulative(self, c: ModelConsumer, pos: Position) -> None:
        covered = {p for p in self.published if p <= pos and p not in self.acked}
        never = sorted(covered - c.received)
        if never:
            self.fail(f"consumer {c.cid}'s cumulative ack on {pos} covers {len(never)} messages it never "
                      f"received, first {never[0]}")
        c.cnx.send(cmds.ack(c.cid, [cmds.message_id(pos.ledger_id, pos.entry_id)], cumulative=True))
        self.acked |= covered
        c.unacked = [p for p in c.unacked if p > pos]

    def nack(self, c: ModelConsumer, pos: Position) -> None:
        if self.single_active:
            self.redeliver_all(c)  # what the official client does for Exclusive/Failover
            return
        c.unacked = [p for p in c.unacked if p != pos]
        self.asked_again.add(pos)
        c.cnx.send(cmds.redeliver_unacknowledged(c.cid, [cmds.message_id(pos.ledger_id, pos.entry_id)]))

    def redeliver_all(self, c: ModelConsumer) -> None:
        c.epoch += 1
        self.asked_again |= set(c.unacked)
        c.unacked = []
        c.segment_last = None
        c.cnx.send(cmds.redeliver_unacknowledged(c.cid, consumer_epoch=c.epoch))

    async def step(self, op: tuple) -> None:
        self.trace.append(op)
        kind = op[0]
        if kind == "open":
            await self.open(op[1], op[2])
        elif kind == "publish":
            await self.publish(op[1])
        elif kind == "settle":
            await self.settle()
        elif kind == "yield":
            for _ in range(op[1]):
                await trio.lowlevel.checkpoint()
        else:
            c = self._pick(op[1])
            if c is None:
                return
            if kind == "close":
                await self.close(c)
            elif kind == "drop":
                self.drop(c)
            elif kind == "flow":
                c.cnx.send(cmds.flow(c.cid, op[2]))
            elif kind == "redeliver_all":
                self.redeliver_all(c)
            elif c.unacked:
                pos = c.unacked[op[2] % len(c.unacked)]
                if kind == "ack":
                    self.ack(c, pos)
                elif kind == "nack":
                    self.nack(c, pos)
                elif self.single_active:
                    self.ack_cumulative(c, pos)

    async def settle(self) -> None:
        await trio.sleep(0.02)
        self.check_cursor()

    def check_cursor(self) -> None:
        topic = self.broker.topics.get(self.topic)
        sub = topic.subscriptions.get("s") if topic is not None else None
        if sub is None:
            return
        cursor = sub.cursor
        md = cursor.mark_delete_position
        ranges = cursor.individually_deleted_ranges
        for p in self.published:
            if p <= md:
                acked = True
            elif hasattr(ranges, "range_containing"):
                acked = ranges.range_containing(p.as_tuple()) is not None
            else:
                acked = any(a < p <= b for a, b in ranges)
            if acked and p not in self.acked:
                self.fail(f"cursor acknowledges {p} (mark-delete {md}), which no consumer acked")

    async def finish(self) -> None:
        """Everyone leaves; a fresh consumer must receive every message not acknowledged."""
        for c in list(self.consumers):
            if c.open:
                await self.close(c)
        await self.settle()
        last = await self.open(0, 10_000)
        assert last is not None
        want = set(self.published) - self.acked
        with trio.move_on_after(10):
            while not want <= last.received:
                await trio.sleep(0.005)
        missing = sorted(want - last.received)
        if missing:
            self.fail(f"{len(missing)} unacknowledged messages never delivered to the last consumer, "
                      f"first {missing[0]}")
        for p in sorted(last.received):
            if p not in self.acked:
                self.ack(last, p)
        await self.settle()

    async def close_all(self) -> None:
        """Close consumers and the producer before their connections, so that no socket is
        reset with frames in flight."""
        with trio.move_on_after(5):
            for c in self.consumers:
                if c.open and not c.cnx.is_closed:
                    await self.close(c)
            if self.producer is not None and not self.producer.is_closed:
                rid = next(self.ids)
                await self.producer.request(cmds.close_producer(1, rid), rid)
            await trio.sleep(0.01)
        for cnx in self.connections:
            cnx.close()


async def run_schedule(broker: BrokerService, sub_type: int, ops: list[tuple], n: int) -> list[str]:
    topic = f"persistent://public/default/churn-{sub_type}-{n}"
    async with trio.open_nursery() as nursery:
        model = Model(broker, nursery, sub_type, topic)
        try:
            await model.publish(20)
            for op in ops:
                await model.step(op)
                if model.violations:
                    break
            if not model.violations:
                await model.finish()
        finally:
            await model.close_all()
    return model.violations


@pytest.fixture(params=["memory-ml", "real-ml"])
async def broker(request: pytest.FixtureRequest, nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[BrokerService]:
    # Small reads: a consumer's messages go out over many dispatch rounds, so closes, acks
    # and redelivery requests land between them (as with a large backlog).
    small = {"dispatcher_max_read_batch_size": 3}
    if request.param == "memory-ml":
        yield await start_broker(nursery, **small)
    else:
        yield await start_real_broker(nursery, tmp_path / "node", **small)
    nursery.cancel_scope.cancel()


@pytest.mark.parametrize("sub_type", [EXCLUSIVE, FAILOVER, SHARED, KEY_SHARED],
                         ids=["exclusive", "failover", "shared", "key_shared"])
async def test_consumer_churn_never_acks_undelivered_messages(broker: BrokerService, sub_type: int,
                                                              request: pytest.FixtureRequest) -> None:
    real = "real-ml" in request.node.callspec.id
    examples = EXAMPLES or (8 if real else 30)
    counter = iter(range(1 << 30))
    token = trio.lowlevel.current_trio_token()

    @settings(max_examples=examples, deadline=None, derandomize=not EXAMPLES, database=None,
              suppress_health_check=list(HealthCheck))
    @given(OPS)
    def check(ops: list[tuple]) -> None:
        violations = trio.from_thread.run(run_schedule, broker, sub_type, ops, next(counter), trio_token=token)
        if violations:
            raise Violation("; ".join(violations[:3]))

    await trio.to_thread.run_sync(check)


async def test_key_shared_replayed_entries_do_not_overtake_entries_returned_during_their_read(
        nursery: trio.Nursery, tmp_path: Path) -> None:
    """Found by the property test on the real managed ledger: entries taken from the replay
    set were read from the bookie while a closing consumer returned older entries of the same
    key; the replayed ones then reached the key's new owner first. 20 rounds of the schedule
    (it failed about 1 round in 5)."""
    broker = await start_real_broker(nursery, tmp_path / "node", dispatcher_max_read_batch_size=3)
    ops: list[tuple] = [("open", 0, 0), ("open", 0, 0), ("open", 0, 0), ("open", 0, 4), ("open", 0, 0),
                        ("open", 0, 4)]
    for n in range(20):
        assert await run_schedule(broker, KEY_SHARED, ops, n) == []
    nursery.cancel_scope.cancel()
