"""A subscription: one cursor, its consumers, acks, redelivery and the dispatch loop.

The dispatch loop (one trio task per subscription, owned by the topic) reads entries from the
cursor only while some consumer has permits, routes them with the type's router
(``router_single_active`` / ``router_shared`` / ``router_key_shared``) and hands
the stored bytes to the consumers' connections untouched. Entries to deliver again (negative
acks, closed consumers, held-back Key_Shared entries, due delayed messages) wait in a replay
set that is served first, in position order. Acks update the consumers at once (so dispatch
resumes) and are persisted to the cursor by a second task in batches.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING, Any, Callable

import trio

from broker.consumer import SUB_TYPES, Consumer, Delivery
from broker.delayed_delivery import DelayedDeliveryTracker
from broker.router_key_shared import KeySharedRouter, sticky_hash
from broker.router_shared import SharedRouter
from broker.router_single_active import FAILOVER, SingleActiveRouter
from broker.entry_meta import dispatch_info, metadata_key, parse_metadata
from broker.errors import BrokerError, ConsumerBusyError, NotAllowedError, PersistenceError
from clients.protocol.errors import ProtocolError
from managed_ledger import Position
from managed_ledger.errors import ManagedLedgerError, ManagedLedgerFencedError
from managed_ledger.interfaces import ManagedCursorView
from quire import hop_trace

if TYPE_CHECKING:
    from broker.topic import PersistentTopic

log = logging.getLogger(__name__)

EXCLUSIVE, SHARED, KEY_SHARED = 0, 1, 3
REPLAY_LIMIT = 10_000  # held-back Key_Shared entries before reading new ones pauses

AckCallback = Callable[[BaseException | None], None]


def _popcount(words: list[int]) -> int:
    return sum((w & 0xFFFFFFFFFFFFFFFF).bit_count() for w in words)


class Subscription:
    def __init__(self, topic: "PersistentTopic", name: str, cursor: ManagedCursorView, durable: bool = True) -> None:
        self.topic = topic
        self.config = topic.config
        self.name = name
        self.cursor = cursor
        self.durable = durable
        self.sub_type: int | None = None
        self.router: SingleActiveRouter | SharedRouter | KeySharedRouter | None = None
        self.consumers: list[Consumer] = []
        self.replay: dict[Position, int] = {}  # position -> sticky hash
        self.redelivery_counts: dict[Position, int] = {}
        # Partly acked batches (set bits = still unacked), restored from the cursor.
        self.batch_ack_sets: dict[Position, list[int]] = dict(getattr(cursor, "batch_deleted_indexes", {}) or {})
        self.delayed = DelayedDeliveryTracker(self.config.delayed_delivery_tick_time_millis)
        # Means over the entries read so far (a moving average): they turn permits into a number
        # of entries to read and bound reads by bytes. Unknown until the first entry is read:
        # that read takes one entry, so a consumer of batches is not sent a whole read of
        # them (100 entries of 126 messages against 1,000 permits was 13 MB at once).
        self.avg_messages_per_entry = 1.0
        self.avg_entry_bytes = 1024.0  # bounds a read by dispatcher_max_read_size_bytes
        self._sized = False  # the averages hold an entry read, not the guesses above
        # Exclusive/Failover do not track what is pending (a reader may never ack); they
        # redeliver by rewinding the cursor to the mark-delete position, as Pulsar does.
        self._rewind = False
        self.lock = trio.Lock()  # cursor moves (dispatch reads, seek, skip) one at a time
        self.closed = False
        self._wake = trio.Event()
        self._ack_wake = trio.Event()
        self._ack_individual: list[Position] = []
        self._ack_cumulative: Position | None = None
        self._ack_sets: dict[Position, list[int]] = {}
        self._ack_callbacks: list[AckCallback] = []
        self._skipped: set[Position] = set()  # undecodable entries acked, not yet persisted
        self._scope: trio.CancelScope | None = None
        self.last_consumed_ms = 0
        self.last_acked_ms = 0
        self.msg_expired = 0
        # Counters of consumers that left: the subscription's totals never go backwards.
        self.msg_out_closed = 0
        self.bytes_out_closed = 0

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Dispatch and ack-persisting tasks; run in the topic's nursery until close()."""
        with trio.CancelScope() as scope:
            self._scope = scope
            task_status.started()
            async with trio.open_nursery() as nursery:
                nursery.start_soon(self._dispatch_loop)
                nursery.start_soon(self._ack_loop)

    def notify(self) -> None:
        """Something changed (new entry, permits, acks, redelivery): re-check dispatch."""
        self._wake.set()

    async def close(self, disconnect: bool = True) -> None:
        self.closed = True
        if disconnect:
            for c in list(self.consumers):
                c.peer.send_close_consumer(c.consumer_id)
                self._detach(c, redeliver=False)
        await self._flush_acks()
        if self._scope is not None:
            self._scope.cancel()

    # -- consumers -------------------------------------------------------------------------

    def _make_router(self, sub_type: int, key_shared_mode: int) -> Any:
        if sub_type in (EXCLUSIVE, FAILOVER):
            return SingleActiveRouter(sub_type, self.topic.name.partition_index)
        if sub_type == SHARED:
            return SharedRouter(self.config.dispatcher_max_round_robin_batch_size)
        return KeySharedRouter(key_shared_mode)

    async def add_consumer(self, consumer: Consumer, key_shared_mode: int = 0) -> None:
        async with self.lock:
            if self.closed:
                raise BrokerError("Subscription is closed")
            if self.sub_type is None or not self.consumers:
                if self.sub_type != consumer.sub_type or self.router is None or (
                    consumer.sub_type == KEY_SHARED and getattr(self.router, "mode", 0) != key_shared_mode
                ):
                    self.sub_type = consumer.sub_type
                    self.router = self._make_router(consumer.sub_type, key_shared_mode)
            elif self.sub_type != consumer.sub_type:
                raise ConsumerBusyError(
                    f"Subscription {self.name} is of type {SUB_TYPES[self.sub_type]}, not {SUB_TYPES[consumer.sub_type]}"
                )
            assert self.router is not None
            if consumer.sub_type in (SHARED, KEY_SHARED):
                consumer.max_unacked = self.config.max_unacked_messages_per_consumer
            else:
                consumer.max_unacked = 0
            self.router.add_consumer(consumer)
            self.consumers.append(consumer)
            self._update_active()
        self.notify()

    def remove_consumer(self, consumer: Consumer) -> None:
        """Detach a consumer whose client closed it or went away; its unacked entries return."""
        self._detach(consumer, redeliver=True)
        if not self.consumers and not self.durable and not self.closed:
            self.topic.drop_subscription(self)

    def _detach(self, consumer: Consumer, redeliver: bool) -> None:
        if consumer not in self.consumers:
            return
        consumer.closed = True
        self.consumers.remove(consumer)
        self.msg_out_closed += consumer.msg_out
        self.bytes_out_closed += consumer.bytes_out
        assert self.router is not None
        self.router.remove_consumer(consumer)
        was_active = isinstance(self.router, SingleActiveRouter) and self.router.active is consumer
        pending = consumer.take_pending()
        if redeliver:
            for pos, h in pending:
                self.replay[pos] = h
                self.redelivery_counts[pos] = self.redelivery_counts.get(pos, 0) + 1
            if was_active:
                self._rewind = True
        self._update_active()
        self.notify()

    def _update_active(self) -> None:
        router = self.router
        if not isinstance(router, SingleActiveRouter):
            return
        old, new = router.pick_active()
        if old is new:
            return
        if old is not None:
            self._rewind = True  # the new active consumer gets everything not yet acked
        if self.sub_type == FAILOVER:
            for c in self.consumers:
                c.peer.send_active_consumer_change(c.consumer_id, c is new)

    def on_flow(self, consumer: Consumer, permits: int) -> None:
        consumer.add_permits(permits)
        if hop_trace.ENABLED:
            hop_trace.mark("d.flow", permits, consumer.permits)
        self.notify()

    @property
    def unacked_messages(self) -> int:
        return sum(c.unacked_messages for c in self.consumers)

    # -- dispatch --------------------------------------------------------------------------

    async def _dispatch_loop(self) -> None:
        while True:
            wake = trio.Event()
            self._wake = wake
            try:
                async with self.lock:
                    progressed = await self._dispatch_once()
            except (ManagedLedgerError, BrokerError) as exc:
                log.warning("dispatch on %s/%s failed: %r", self.topic.name, self.name, exc)
                if isinstance(exc, ManagedLedgerFencedError):
                    # another broker owns the topic now: close it here so the clients look it
                    # up again (retrying reads on a fenced ledger would stall them for good)
                    self.topic.fence(exc)
                progressed = False
                await trio.sleep(0.2)
            if progressed:
                await trio.lowlevel.checkpoint()
                continue
            # The delayed-delivery timer only matters while someone could take the messages;
            # otherwise new permits wake us (and a due timer would spin).
            due = self.delayed.next_due_ms() if self._budget() > 0 else None
            if due is None:
                if hop_trace.ENABLED:
                    hop_trace.mark("d.idle", self._budget())
                await wake.wait()
            else:
                with trio.move_on_after(max(0.0, (due - time.time() * 1000) / 1000)):
                    await wake.wait()

    def _budget(self) -> int:
        router = self.router
        if router is None or not self.consumers:
            return 0
        budget = router.budget()
        if self.sub_type in (SHARED, KEY_SHARED):
            limit = self.config.max_unacked_messages_per_subscription
            if limit > 0:
                budget = min(budget, limit - self.unacked_messages)
        return budget

    async def _dispatch_once(self) -> bool:
        router = self.router
        budget = self._budget()
        if router is None or budget <= 0:
            return False
        max_read = self.config.dispatcher_max_read_batch_size
        progressed = False
        if self._rewind:
            # Exclusive/Failover: the active consumer gets everything after the mark-delete
            # again, from the start and in order; nothing read ahead for an earlier consumer
            # may be served before it (a cumulative ack would cover what it never received).
            self._rewind = False
            self.replay.clear()
            await self.cursor.seek(self.cursor.mark_delete_position)
        if len(self.delayed):
            for pos, h in self.delayed.pop_due(int(time.time() * 1000)):
                self.replay[pos] = h
        if self.replay:
            eligible = sorted(p for p, h in self.replay.items() if router.consumer_for_hash(h) is not None)[:max_read]
            if eligible:
                for p in eligible:
                    del self.replay[p]
                try:
                    entries = await self.topic.read_positions(eligible)
                except BaseException:
                    for p in eligible:
                        self.replay.setdefault(p, -1)
                    raise
                deliveries = [self._delivery(e.position, e.data, replayed=True) for e in entries]
                progressed = await self._route([d for d in deliveries if d is not None], replayed=True) > 0
                budget = self._budget()
        if budget <= 0 or (self.sub_type == KEY_SHARED and len(self.replay) >= REPLAY_LIMIT):
            return progressed
        if self._sized:
            n = max(1, min(max_read, int(budget / max(1.0, self.avg_messages_per_entry)),
                           int(self.config.dispatcher_max_read_size_bytes / max(1.0, self.avg_entry_bytes))))
        else:
            n = 1
        started = time.perf_counter()
        if hop_trace.ENABLED:
            hop_trace.mark("d.read", n, budget)
        entries = await self.cursor.read_entries(n)
        if hop_trace.ENABLED:
            hop_trace.mark("d.got", len(entries), sum(len(e.data) for e in entries))
        if not entries:
            return progressed
        if self._rewind:
            return True  # the active consumer changed during the read: re-read from the rewind
        out: list[Delivery] = []
        for e in entries:
            d = self._delivery(e.position, e.data, replayed=False)
            if d is not None:
                out.append(d)
        # A reader far behind: the next ranges come from the bookies while this one is sent,
        # dispatcher_read_ahead_max_bytes of them (few, large range reads: each costs a trip
        # to the bookie's disk thread and a wake-up of this loop, whatever its size), counted
        # at the mean size including the entries just read.
        ahead = self.config.dispatcher_read_ahead_max_bytes
        if ahead > 0:
            self.cursor.read_ahead(max(n, int(ahead / max(1.0, self.avg_entry_bytes))))
        await self._route(out)
        if hop_trace.ENABLED:
            hop_trace.mark("d.sent", len(out))
        self.last_consumed_ms = int(time.time() * 1000)
        self.topic.service.metrics.dispatch_latency.observe(time.perf_counter() - started)
        return True

    def _delivery(self, pos: Position, data: bytes, replayed: bool) -> Delivery | None:
        try:
            md, n = dispatch_info(data)
        except ProtocolError as exc:
            self._skip_undecodable(pos, exc)
            return None
        if not replayed:
            if self._sized:
                self.avg_messages_per_entry = 0.9 * self.avg_messages_per_entry + 0.1 * n
                self.avg_entry_bytes = 0.9 * self.avg_entry_bytes + 0.1 * len(data)
            else:
                self.avg_messages_per_entry, self.avg_entry_bytes, self._sized = float(n), float(len(data)), True
        h = sticky_hash(metadata_key(md)) if self.sub_type == KEY_SHARED else -1
        if (
            not replayed
            and self.sub_type in (SHARED, KEY_SHARED)
            and md.deliver_at_time
            and self.config.delayed_delivery_enabled
            and md.deliver_at_time > time.time() * 1000
            and self.delayed.add(pos, md.deliver_at_time, h)
        ):
            return None
        ack_set = self.batch_ack_sets.get(pos)
        if ack_set is not None:
            n = _popcount(ack_set)
        count = self.redelivery_counts.get(pos, 0) if self.config.subscription_redelivery_tracker_enabled else 0
        return Delivery(pos, data, n, count, ack_set, h)

    def _skip_undecodable(self, pos: Position, exc: ProtocolError) -> None:
        """No client could decode the entry: acknowledge it (as Pulsar does), so that it is
        met, counted and logged once instead of stopping dispatch at every read."""
        if pos not in self._skipped:  # a rewind before the ack is persisted meets it again
            self._skipped.add(pos)
            log.error("skipping undecodable entry %s on %s/%s: %s", pos, self.topic.name, self.name, exc)
            self.topic.service.metrics.undecodable_entries.inc()
        for c in self.consumers:
            c.release(pos)
        self.replay.pop(pos, None)
        self.redelivery_counts.pop(pos, None)
        self._ack_individual.append(pos)
        self._ack_wake.set()

    async def _route(self, deliveries: list[Delivery], replayed: bool = False) -> int:
        """Hand entries to consumers; the rest wait in the replay set. Returns how many
        entries were delivered."""
        if not deliveries:
            return 0
        router = self.router
        assert router is not None
        held: set[Consumer] = set()
        # New Key_Shared entries must not overtake older entries of the same consumer that
        # wait in the replay set; replayed entries are those older ones, so they go first.
        if self.sub_type == KEY_SHARED and self.replay and not replayed:
            for h in set(self.replay.values()):
                c = router.owner(h)  # type: ignore[union-attr]
                if c is not None:
                    held.add(c)
        elif self.sub_type == KEY_SHARED and self.replay:
            # Replayed entries were taken out of the replay set before the read; a consumer
            # that closed meanwhile may have returned older entries of the same key.
            earliest: dict[int, Position] = {}
            for p, h in self.replay.items():
                if h not in earliest or p < earliest[h]:
                    earliest[h] = p
            for d in deliveries:
                e = earliest.get(d.sticky_hash)
                if e is not None and e < d.position:
                    c = router.owner(d.sticky_hash)  # type: ignore[union-attr]
                    if c is not None:
                        held.add(c)
        assigned, leftovers = router.assign(deliveries, held)
        if isinstance(router, SingleActiveRouter):
            # No active consumer to take them: the next one gets them through a rewind.
            if leftovers:
                self._rewind = True
        else:
            for d in leftovers:
                self.replay[d.position] = d.sticky_hash
        partition = self.topic.name.partition_index
        track = self.sub_type in (SHARED, KEY_SHARED)
        delivered = len(deliveries) - len(leftovers)
        for consumer, ds in assigned.items():
            if consumer.closed and track:
                # Closed while an earlier consumer's frames were written: its take_pending()
                # has run already, so these go back to the replay set, not to its pending map.
                for d in ds:
                    self.replay[d.position] = d.sticky_hash
                delivered -= len(ds)
                continue
            await consumer.deliver(ds, partition, track)
        return delivered

    # -- acks ------------------------------------------------------------------------------

    def on_ack(
        self,
        consumer: Consumer,
        cumulative: bool,
        ids: list[tuple[Position, list[int] | None]],
        callback: AckCallback | None = None,
    ) -> None:
        if cumulative:
            if self.sub_type in (SHARED, KEY_SHARED):
                if callback:
                    callback(NotAllowedError("Cumulative ack is not supported for Shared subscription"))
                return
            pos = max(p for p, _ in ids)
            for c in self.consumers:
                c.acked_up_to(pos)
            for d in (self.replay, self.redelivery_counts, self.batch_ack_sets):
                for p in [p for p in d if p <= pos]:
                    del d[p]
            if self._ack_cumulative is None or pos > self._ack_cumulative:
                self._ack_cumulative = pos
        else:
            batch_level = self.config.acknowledgment_at_batch_index_level_enabled
            for pos, ack_set in ids:
                if ack_set and batch_level:
                    prev = self.batch_ack_sets.get(pos)
                    merged = list(ack_set) if prev is None else [a & b for a, b in zip(prev, ack_set)]
                    remaining = _popcount(merged)
                    if remaining:
                        self.batch_ack_sets[pos] = merged
                        consumer.partly_acked(pos, remaining)
                        self._ack_sets[pos] = merged
                        self._ack_individual.append(pos)
                        continue
                if consumer.release(pos) is None:
                    for c in self.consumers:
                        if c.release(pos) is not None:
                            break
                self.replay.pop(pos, None)
                self.redelivery_counts.pop(pos, None)
                self.batch_ack_sets.pop(pos, None)
                self.delayed.remove(pos)
                self._ack_sets.pop(pos, None)
                self._ack_individual.append(pos)
        self.last_acked_ms = int(time.time() * 1000)
        if callback is not None:
            self._ack_callbacks.append(callback)
        self._ack_wake.set()
        self.notify()

    async def _ack_loop(self) -> None:
        while True:
            await self._ack_wake.wait()
            self._ack_wake = trio.Event()
            await self._flush_acks()

    async def _flush_acks(self) -> None:
        individual, self._ack_individual = self._ack_individual, []
        cumulative, self._ack_cumulative = self._ack_cumulative, None
        callbacks, self._ack_callbacks = self._ack_callbacks, []
        ack_sets, self._ack_sets = self._ack_sets, {}
        error: BaseException | None = None
        try:
            if cumulative is not None and cumulative > self.cursor.mark_delete_position:
                await self.cursor.mark_delete(cumulative)
            md = self.cursor.mark_delete_position
            individual = sorted(p for p in set(individual) if p > md)
            if individual:
                await self.cursor.delete(individual, ack_sets or None)
            if self._skipped:
                self._skipped = {p for p in self._skipped if p > self.cursor.mark_delete_position}
        except ManagedLedgerError as exc:
            log.warning("persisting acks on %s/%s failed: %r", self.topic.name, self.name, exc)
            if isinstance(exc, ManagedLedgerFencedError):
                self.topic.fence(exc)  # another owner: the clients must reconnect there
            error = PersistenceError(str(exc))
        for cb in callbacks:
            cb(error)

    def on_redeliver(self, consumer: Consumer, positions: list[Position] | None) -> None:
        """Negative acks (ids) or redeliver-all (no ids): back into the replay set."""
        if self.sub_type in (EXCLUSIVE, FAILOVER):
            # Only the active consumer may rewind (as Pulsar): a standby's request would send
            # the active one earlier messages after later ones it may already have acked.
            if isinstance(self.router, SingleActiveRouter) and self.router.active is consumer:
                self._rewind = True
                self.notify()
            return
        if positions is None:
            taken = consumer.take_pending()
        else:
            taken = []
            for p in positions:
                h = consumer.release(p)
                if h is not None:
                    taken.append((p, h))
        for pos, h in taken:
            self.replay[pos] = h
            self.redelivery_counts[pos] = self.redelivery_counts.get(pos, 0) + 1
        self.notify()

    # -- cursor moves ----------------------------------------------------------------------

    def _forget_state(self) -> None:
        self._rewind = False
        self.replay.clear()
        self.redelivery_counts.clear()
        self.batch_ack_sets.clear()
        self.delayed.clear()
        self._ack_individual.clear()
        self._ack_sets.clear()
        self._ack_cumulative = None

    async def reset(self, position: Position | None = None, timestamp_ms: int | None = None) -> None:
        """Seek: disconnect the consumers, move the cursor, forget pending state (Pulsar's
        resetCursor). The clients reconnect and receive from the new position."""
        async with self.lock:
            for c in list(self.consumers):
                c.peer.send_close_consumer(c.consumer_id)
                self._detach(c, redeliver=False)
            await self._flush_acks()
            self._forget_state()
            if timestamp_ms is not None:
                position = await self.topic.position_for_timestamp(self.cursor, timestamp_ms)
            assert position is not None
            await self.topic.reset_cursor(self.cursor, position)
        self.notify()

    async def expire_before(self, cutoff_ms: int) -> bool:
        """Acknowledge every entry published before ``cutoff_ms`` (message TTL, the message_age
        backlog quota); True when the mark-delete moved."""
        async with self.lock:
            newest = await self.cursor.find_newest_matching(
                lambda e: parse_metadata(e.data).publish_time < cutoff_ms)
            if newest is None or newest <= self.cursor.mark_delete_position:
                return False
            await self.cursor.mark_delete(newest)
        self.notify()
        return True

    async def skip(self, n: int) -> None:
        async with self.lock:
            await self._flush_acks()
            if n < 0:
                await self.cursor.clear_backlog()
                for c in self.consumers:
                    c.take_pending()
            else:
                await self.cursor.skip_entries(n)
            self._forget_state()
        self.notify()

    # -- stats -----------------------------------------------------------------------------

    def backlog_size(self, backlog_entries: int) -> int:
        """Estimated bytes of the backlog (entries times the topic's average entry size, as
        Pulsar estimates it from ledger sizes)."""
        ml = self.topic.ml
        return int(backlog_entries * ml.total_size / ml.number_of_entries) if ml.number_of_entries else 0

    def stats(self) -> dict[str, Any]:
        backlog = self.cursor.number_of_entries_in_backlog
        active = self.router.active if isinstance(self.router, SingleActiveRouter) else None
        consumers = [c.stats() for c in self.consumers]
        return {
            "msgRateOut": sum(c["msgRateOut"] for c in consumers),
            "msgThroughputOut": sum(c["msgThroughputOut"] for c in consumers),
            "bytesOutCounter": self.bytes_out_closed + sum(c.bytes_out for c in self.consumers),
            "msgOutCounter": self.msg_out_closed + sum(c.msg_out for c in self.consumers),
            "msgRateRedeliver": sum(c["msgRateRedeliver"] for c in consumers),
            "msgBacklog": backlog,
            "msgBacklogNoDelayed": max(0, backlog - len(self.delayed)),
            "msgDelayed": len(self.delayed),
            "backlogSize": self.backlog_size(backlog),
            "unackedMessages": self.unacked_messages,
            "type": SUB_TYPES.get(self.sub_type if self.sub_type is not None else 0, "Exclusive"),
            "activeConsumerName": active.name if active else None,
            "msgRateExpired": 0.0,
            "totalMsgExpired": self.msg_expired,
            "lastAckedTimestamp": self.last_acked_ms,
            "lastConsumedTimestamp": self.last_consumed_ms,
            "lastMarkDeleteAdvancedTimestamp": self.last_acked_ms,
            "blockedSubscriptionOnUnackedMsgs": self.sub_type in (SHARED, KEY_SHARED)
            and self.config.max_unacked_messages_per_subscription > 0
            and self.unacked_messages >= self.config.max_unacked_messages_per_subscription,
            "consumers": consumers,
            "isDurable": self.durable,
            "durable": self.durable,
            "replicated": False,
            "nonContiguousDeletedMessagesRanges": len(getattr(self.cursor, "individually_deleted_ranges", []) or []),
            "nonContiguousDeletedMessagesRangesSerializedSize": 0,
        }
