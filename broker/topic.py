"""PersistentTopic: one managed ledger, its producers and its subscriptions.

Publishing is pipelined and takes no task per message: each SEND is handed to the managed
ledger's ``async_add_entry`` (its position is taken at once, so entries keep the producer's
order) and the producer answers receipts in order from the add callbacks. A fenced managed ledger (another owner
took over) closes the topic: clients get CLOSE_PRODUCER / CLOSE_CONSUMER, look the topic up
again and resend what was not acknowledged.
"""

from __future__ import annotations

import functools

import itertools
import logging
import time
from collections import deque
from functools import partial
from typing import TYPE_CHECKING, Any, Callable

import trio

from broker import backlog_quota
from broker.consumer import Consumer
from broker.dedup import CURSOR_NAME as DEDUP_CURSOR
from broker.dedup import Deduplication, DupStatus
from broker.entry_meta import entry_info, parse_metadata
from broker.errors import (
    ConflictError,
    NotAllowedError,
    PersistenceError,
    ProducerBusyError,
    ProducerFencedError,
    ServiceNotReadyError,
    SubscriptionNotFoundError,
    TopicFencedError,
    TopicTerminatedError,
)
from broker.names import TopicName, check_subscription_name
from broker.producer import PendingSend, Producer
from broker.rates import Rates
from broker.subscription import Subscription
from managed_ledger import Entry, Position
from managed_ledger.interfaces import ManagedCursorView, ManagedLedgerView
from managed_ledger.errors import (
    InvalidPositionError,
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerTerminatedError,
)
from quire import hop_trace

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)

SHARED_MODE, EXCLUSIVE_MODE, WAIT_FOR_EXCLUSIVE, EXCLUSIVE_WITH_FENCING = 0, 1, 2, 3
INT64_MAX = (1 << 63) - 1
EARLIEST = Position(-1, -1)
LATEST = Position(INT64_MAX, INT64_MAX)
_reader_ids = itertools.count()


class PersistentTopic:
    def __init__(self, service: "BrokerService", name: TopicName, ml: ManagedLedgerView, policies: dict[str, Any]) -> None:
        self.service = service
        self.config = service.config
        self.name = name
        self.ml = ml
        self.policies = policies
        self.producers: dict[str, Producer] = {}
        self.subscriptions: dict[str, Subscription] = {}
        self.dedup: Deduplication | None = None
        self.topic_epoch = 0
        self.exclusive_producer: Producer | None = None
        self.waiting_exclusive: deque[tuple[Producer, trio.Event]] = deque()
        self.closed = False
        self.close_done = trio.Event()
        self.fenced = False
        self._last_entry: tuple[Position, bytes] | None = None
        # Durable subscriptions are created one at a time: two concurrent opens of the same
        # cursor would both write its node, and the second would look like a takeover.
        self._subscription_lock = trio.Lock()
        self._nursery: trio.Nursery | None = None
        self._scope: trio.CancelScope | None = None
        self.msg_in = 0
        self.bytes_in = 0
        self.publish_latency: Callable[[float], None] | None = None
        self.created_ms = int(time.time() * 1000)
        self.rates = Rates()

    def update_rates(self) -> None:
        self.rates.update({"msgRateIn": self.msg_in, "msgThroughputIn": self.bytes_in})
        for p in self.producers.values():
            p.update_rates()
        for sub in self.subscriptions.values():
            for c in sub.consumers:
                c.update_rates()

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with trio.CancelScope() as scope:
                self._scope = scope
                async with trio.open_nursery() as nursery:
                    self._nursery = nursery
                    task_status.started()
                    await trio.sleep_forever()
        except Exception as exc:
            # Error boundary: a bug in one of this topic's tasks (dispatch, ack persistence, an
            # add) must not end the broker. Logged once; the topic closes, its clients reconnect
            # and the next lookup loads it afresh.
            log.error("topic %s failed; closing it", self.name, exc_info=exc)
            if not self.closed:
                self.fenced = True
                self.service.spawn(self.close)

    async def initialize(self) -> None:
        """Load existing durable subscriptions and, when enabled, the dedup state."""
        cursors = self.ml.cursors
        items = cursors.values() if isinstance(cursors, dict) else cursors
        for cursor in list(items):
            if cursor.name == DEDUP_CURSOR or not getattr(cursor, "durable", True):
                continue
            await self._start_subscription(Subscription(self, cursor.name, cursor, durable=True))
        await self.apply_policies(self.policies)

    async def apply_policies(self, policies: dict[str, Any]) -> None:
        self.policies = policies
        enabled = policies.get("deduplicationEnabled")
        if enabled is None:
            enabled = self.config.broker_deduplication_enabled
        if enabled and self.dedup is None:
            dedup = Deduplication(
                self.ml,
                self.config.broker_deduplication_entries_interval,
                self.config.broker_deduplication_max_number_of_producers,
            )
            await dedup.recover()
            self.dedup = dedup
        elif not enabled and self.dedup is not None:
            self.dedup = None
            try:
                await self.ml.delete_cursor(DEDUP_CURSOR)
            except ManagedLedgerError:
                pass
        if hasattr(self.ml, "set_config"):
            # retention applies at the next trim, persistence (E/WQ/AQ) to the next ledger
            cfg = self.service.ml_config(policies)
            wanted = {k: getattr(cfg, k) for k in ("retention_time_minutes", "retention_size_mb", "ensemble_size",
                                                   "write_quorum", "ack_quorum", "throttle_mark_delete")}
            current = getattr(self.ml, "config", None)
            # only a real change: set_config schedules a trim, and a topic being loaded must not
            # trim before its first rollover (the ledger it was opened with was set up from cfg)
            changes = {k: v for k, v in wanted.items() if getattr(current, k, None) != v}
            try:
                if changes:
                    self.ml.set_config(**changes)
            except (TypeError, ValueError, ManagedLedgerError) as exc:
                log.warning("cannot apply the policies of %s: %r", self.name, exc)

    async def _start_subscription(self, sub: Subscription) -> Subscription:
        assert self._nursery is not None
        self.subscriptions[sub.name] = sub
        await self._nursery.start(sub.run)
        return sub

    async def close(self, disconnect_clients: bool = True, reason: str = "closed") -> None:
        """Close the topic (unload, shutdown, fencing): clients reconnect elsewhere/later.
        ``reason`` is for the operator's log line."""
        if self.closed:
            return
        self.closed = True
        log.info("unloading topic %s: %s (%d producers, %d subscriptions)", self.name, reason, len(self.producers),
                 len(self.subscriptions))
        for p in list(self.producers.values()):
            if disconnect_clients:
                p.peer.send_close_producer(p.producer_id)
            p.closed = True
        self.producers.clear()
        for _, ev in self.waiting_exclusive:
            ev.set()
        for sub in list(self.subscriptions.values()):
            with trio.move_on_after(5):
                await sub.close(disconnect=disconnect_clients)
        try:
            with trio.move_on_after(10):
                await self.ml.close()
        except ManagedLedgerError as exc:
            log.warning("closing managed ledger %s: %r", self.ml.name, exc)
        if self._scope is not None:
            self._scope.cancel()
        self.service.forget_topic(self)
        self.close_done.set()

    def available(self) -> bool:
        """Whether new producers and consumers may attach. A managed ledger closed under the
        topic (its close cut short elsewhere) unloads the topic here, so the next load opens
        it afresh instead of every attach meeting ManagedLedgerClosedError for good."""
        if not (self.closed or self.fenced) and self.ml.closing:
            self._fenced(ManagedLedgerClosedError(self.ml.name))
        return not (self.closed or self.fenced)

    def _check_available(self) -> None:
        if not self.available():
            raise TopicFencedError("Topic is temporarily unavailable")

    def fence(self, exc: BaseException) -> None:
        """The managed ledger says another broker owns the topic (or a write failed): close it
        here, so its clients look it up again."""
        self._fenced(exc)

    def _fenced(self, exc: BaseException) -> None:
        if self.fenced:
            return
        self.fenced = True
        log.warning("topic %s fenced: %r; closing it", self.name, exc)
        self.service.spawn(functools.partial(self.close, reason=f"fenced ({type(exc).__name__})"))

    # -- producers -------------------------------------------------------------------------

    async def add_producer(self, producer: Producer, topic_epoch: int | None) -> trio.Event | None:
        """Attach a producer; returns an Event to wait on for WaitForExclusive, else None."""
        await backlog_quota.check_new_producer(self)  # may read an entry: checks below see its outcome
        self._check_available()
        if producer.name in self.producers:
            raise ProducerBusyError(f"Producer with name '{producer.name}' is already connected to topic")
        mode = producer.access_mode
        if topic_epoch is not None and topic_epoch < self.topic_epoch:
            raise ProducerFencedError(f"Topic epoch {topic_epoch} is older than the current {self.topic_epoch}")
        ex = self.exclusive_producer
        if mode == SHARED_MODE:
            if ex is not None or self.waiting_exclusive:
                raise ProducerBusyError(f"Topic has an existing exclusive producer: {ex.name if ex else ''}")
        elif mode == EXCLUSIVE_MODE:
            if ex is not None:
                raise ProducerFencedError(f"Topic has an existing exclusive producer: {ex.name}")
            if self.producers:
                raise ProducerFencedError("Topic has existing shared producers")
        elif mode == EXCLUSIVE_WITH_FENCING:
            for other in list(self.producers.values()):
                other.peer.send_close_producer(other.producer_id)
                self.remove_producer(other, grant=False)
            self.topic_epoch += 1
        elif mode == WAIT_FOR_EXCLUSIVE:
            if ex is not None or self.producers:
                ev = trio.Event()
                self.waiting_exclusive.append((producer, ev))
                return ev
        self._attach(producer)
        return None

    def _attach(self, producer: Producer) -> None:
        if producer.access_mode in (EXCLUSIVE_MODE, EXCLUSIVE_WITH_FENCING, WAIT_FOR_EXCLUSIVE):
            self.exclusive_producer = producer
            if producer.access_mode != EXCLUSIVE_WITH_FENCING:
                self.topic_epoch += 1
        producer.epoch = self.topic_epoch
        self.producers[producer.name] = producer

    def remove_producer(self, producer: Producer, grant: bool = True) -> None:
        producer.closed = True
        if self.producers.get(producer.name) is producer:
            del self.producers[producer.name]
        self.waiting_exclusive = deque((p, e) for p, e in self.waiting_exclusive if p is not producer)
        if self.exclusive_producer is producer:
            self.exclusive_producer = None
        if grant and not self.producers and self.waiting_exclusive:
            nxt, ev = self.waiting_exclusive.popleft()
            self._attach(nxt)
            ev.set()

    def last_sequence_id(self, producer_name: str) -> int:
        return self.dedup.last_sequence_id(producer_name) if self.dedup else -1

    def publish(self, producer: Producer, slot: PendingSend, data: bytes, on_done: Callable[[], None]) -> None:
        """Persist one SEND; the receipt goes out (in order) when it is stored. No task per
        message: the managed ledger takes the entry's position now (SENDs keep their order)
        and calls back once it is stored. Nothing is stored once this broker's metadata session
        is stale (it may have lost the bundle to another broker)."""
        if self.closed or self.fenced or not self.service.session_fresh():
            if not (self.closed or self.fenced):
                # Close the topic, not only refuse this SEND: the session may look fresh again
                # (a late answer of the store) before the watchdog gives the bundles up, and a
                # later SEND stored then would precede the producer's re-send of this one.
                self._fenced(ServiceNotReadyError("the metadata session may have expired"))
            producer.complete(slot, -1, -1, ServiceNotReadyError("Topic is closing"))
            on_done()
            return
        dedup = self.dedup
        if dedup is not None:
            status = dedup.check(producer.name, slot.sequence_id, slot.highest_sequence_id)
            if status is DupStatus.DUP:
                producer.complete(slot, -1, -1)
                on_done()
                return
            if status is DupStatus.UNKNOWN:
                producer.complete(slot, -1, -1, PersistenceError("Cannot determine whether the message is a duplicate at this time"))
                on_done()
                return
        if hop_trace.ENABLED:
            hop_trace.mark("b.send", slot.sequence_id)
        done = partial(self._add_done, producer, slot, data, on_done, time.perf_counter())
        try:
            self.ml.async_add_entry(data, done)
        except ManagedLedgerError as exc:
            done(None, exc)

    def _add_done(self, producer: Producer, slot: PendingSend, data: bytes, on_done: Callable[[], None],
                  start: float, pos: Position | None, exc: ManagedLedgerError | None) -> None:
        on_done()
        if exc is not None:
            if isinstance(exc, ManagedLedgerFencedError):
                producer.complete(slot, -1, -1, ServiceNotReadyError("Topic is fenced"))
                self._fenced(exc)
                if self.dedup:
                    self.dedup.failed(producer.name)
            elif isinstance(exc, ManagedLedgerTerminatedError):
                producer.complete(slot, -1, -1, TopicTerminatedError("Topic was terminated"))
            else:
                log.warning("add to %s failed: %r", self.name, exc)
                if self.dedup:
                    self.dedup.failed(producer.name)
                producer.complete(slot, -1, -1, PersistenceError(f"Failed to persist: {exc}"))
                # Close the topic at once (no SEND after this one is stored): a producer re-sends
                # from its first failed message after reconnecting, and a later message stored now
                # would make deduplication take that re-send for a duplicate, acknowledged unstored.
                self._fenced(exc)
            return
        assert pos is not None
        self._last_entry = (pos, data)
        self.msg_in += slot.num_messages
        self.bytes_in += len(data)
        if self.publish_latency is not None:
            self.publish_latency(time.perf_counter() - start)
        if hop_trace.ENABLED:
            hop_trace.mark("b.receipt", slot.sequence_id, pos.ledger_id << 32 | pos.entry_id)
        producer.complete(slot, pos.ledger_id, pos.entry_id)
        for sub in self.subscriptions.values():
            sub.notify()
        dedup = self.dedup
        if dedup is not None and dedup.persisted_ok(producer.name, slot.sequence_id, slot.highest_sequence_id):
            assert self._nursery is not None
            self._nursery.start_soon(self._dedup_snapshot, dedup, pos)

    async def _dedup_snapshot(self, dedup: Deduplication, pos: Position) -> None:
        try:
            await dedup.snapshot(pos)
        except ManagedLedgerError as exc:
            log.warning("dedup snapshot of %s failed: %r", self.name, exc)

    # -- subscriptions ---------------------------------------------------------------------

    async def subscribe(
        self,
        consumer: Consumer,
        sub_name: str,
        *,
        durable: bool = True,
        initial_position: str = "latest",
        start: Position | None = None,
        key_shared_mode: int = 0,
    ) -> Subscription:
        self._check_available()
        check_subscription_name(sub_name)
        if durable:
            sub = self.subscriptions.get(sub_name)
            if sub is None or sub.closed:
                async with self._subscription_lock:
                    sub = self.subscriptions.get(sub_name)
                    if sub is None or sub.closed:
                        cursor = await self.ml.open_cursor(sub_name, initial_position=initial_position)
                        sub = await self._start_subscription(Subscription(self, sub_name, cursor, True))
                        log.info("subscription %s opened on %s (durable, new ones start at the %s message)",
                                 sub_name, self.name, initial_position)
        else:
            sub = self.subscriptions.get(sub_name)
            if sub is not None and not sub.durable and not sub.consumers and not sub.closed:
                pass  # a reader reconnecting after a seek: the reset cursor is kept
            else:
                cursor = await self._non_durable_cursor(start if start is not None else (
                    EARLIEST if initial_position == "earliest" else LATEST))
                name = sub_name
                if name in self.subscriptions:
                    name = f"{name}-{next(_reader_ids)}"
                sub = await self._start_subscription(Subscription(self, name, cursor, durable=False))
        consumer.subscription = sub
        await sub.add_consumer(consumer, key_shared_mode)
        return sub

    async def _non_durable_cursor(self, start: Position) -> Any:
        if start == LATEST or start > self.ml.last_confirmed_entry:
            return self.ml.open_non_durable_cursor(None)
        return self.ml.open_non_durable_cursor(start, inclusive=True)

    async def create_subscription(self, name: str, start: Position) -> Subscription:
        """Admin: create a durable subscription positioned at ``start`` (EARLIEST/LATEST/id)."""
        check_subscription_name(name)
        async with self._subscription_lock:
            if name in self.subscriptions:
                raise ConflictError(f"Subscription {name} already exists")
            cursor = await self.ml.open_cursor(name, initial_position="earliest" if start == EARLIEST else "latest")
            sub = await self._start_subscription(Subscription(self, name, cursor, True))
        log.info("subscription %s created on %s (admin)", name, self.name)
        if start not in (EARLIEST, LATEST):
            await sub.reset(start)
        return sub

    def drop_subscription(self, sub: Subscription) -> None:
        """A non-durable subscription lost its last consumer."""
        if self.subscriptions.get(sub.name) is sub:
            del self.subscriptions[sub.name]
        self.service.spawn(self._close_subscription, sub)

    async def _close_subscription(self, sub: Subscription) -> None:
        await sub.close(disconnect=False)
        try:
            await sub.cursor.close()
        except ManagedLedgerError:
            pass

    async def delete_subscription(self, name: str, force: bool = False) -> None:
        # Under the creation lock: a subscribe arriving meanwhile must not pick up the cursor
        # that is being deleted.
        async with self._subscription_lock:
            sub = self.subscriptions.get(name)
            if sub is None:
                raise SubscriptionNotFoundError(f"Subscription {name} not found")
            if sub.consumers and not force:
                raise NotAllowedError(f"Subscription {name} has active consumers")
            del self.subscriptions[name]
            await sub.close(disconnect=True)
            if sub.durable:
                await self.ml.delete_cursor(name)
        log.info("subscription %s deleted from %s", name, self.name)

    def subscription(self, name: str) -> Subscription:
        sub = self.subscriptions.get(name)
        if sub is None:
            raise SubscriptionNotFoundError(f"Subscription {name} not found")
        return sub

    # -- reading helpers (positions, time, last id) ----------------------------------------

    async def read_positions(self, positions: list[Position]) -> list[Entry]:
        """Read specific entries (replays): each run of consecutive ids in one range read."""
        out: list[Entry] = []
        runs: list[list[Position]] = []
        for p in sorted(set(positions)):
            if runs and runs[-1][-1].ledger_id == p.ledger_id and runs[-1][-1].entry_id + 1 == p.entry_id:
                runs[-1].append(p)
            else:
                runs.append([p])
        for run in runs:
            if not (self.ml.has_position(run[0]) and self.ml.has_position(run[-1])):
                run = [p for p in run if self.ml.has_position(p)]  # trimmed meanwhile
                if not run:
                    continue
                out.extend([await self.ml.read_entry(p) for p in run])
                continue
            out.extend(await self.ml.read_range(run[0].ledger_id, run[0].entry_id, run[-1].entry_id))
        return out

    async def position_for_timestamp(self, cursor: ManagedCursorView, timestamp_ms: int) -> Position:
        """The first entry published at or after ``timestamp_ms`` (LATEST if none)."""
        newest_before = await cursor.find_newest_matching(
            lambda e: parse_metadata(e.data).publish_time < timestamp_ms, all_entries=True)
        if newest_before is None:
            return EARLIEST
        nxt = self.ml.next_valid_position(newest_before)
        return LATEST if nxt > self.ml.last_confirmed_entry else nxt

    async def reset_cursor(self, cursor: ManagedCursorView, target: Position) -> None:
        """Make ``target`` the next entry the cursor delivers (EARLIEST/LATEST allowed)."""
        await cursor.reset_cursor(target)

    async def last_message_id(self) -> tuple[Position, int]:
        """(position of the last entry, batch index of its last message or -1)."""
        last = self.ml.last_confirmed_entry
        if last.entry_id < 0:
            return last, -1
        if self._last_entry is not None and self._last_entry[0] == last:
            data = self._last_entry[1]
        else:
            # Retention may have deleted the last entry's ledger (a new, empty one is current):
            # nothing is left to read, and Pulsar answers MessageId.earliest then.
            if not self.ml.has_position(last):
                return EARLIEST, -1
            try:
                data = (await self.ml.read_entry(last)).data
            except InvalidPositionError:
                if not self.ml.has_position(last):  # trimmed during the read
                    return EARLIEST, -1
                raise
            self._last_entry = (last, data)
        info = entry_info(data)
        return last, (info.num_messages - 1 if info.is_batch else -1)

    # -- stats -----------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        subs = {name: s.stats() for name, s in self.subscriptions.items()}
        rate_out = sum(s["msgRateOut"] for s in subs.values())
        tput_out = sum(s["msgThroughputOut"] for s in subs.values())
        msg_out = sum(s["msgOutCounter"] for s in subs.values())
        bytes_out = sum(s["bytesOutCounter"] for s in subs.values())
        return {
            "msgRateIn": self.rates.get("msgRateIn"),
            "msgThroughputIn": self.rates.get("msgThroughputIn"),
            "msgRateOut": rate_out,
            "msgThroughputOut": tput_out,
            "bytesInCounter": self.bytes_in,
            "msgInCounter": self.msg_in,
            "bytesOutCounter": bytes_out,
            "msgOutCounter": msg_out,
            "averageMsgSize": (self.bytes_in / self.msg_in) if self.msg_in else 0.0,
            "msgChunkPublished": False,
            "storageSize": self.ml.total_size,
            "backlogSize": max((st["backlogSize"] for name, st in subs.items()
                                if self.subscriptions[name].durable), default=0),
            "offloadedStorageSize": 0,
            "earliestMsgPublishTimeInBacklogs": 0,
            "publishers": [p.stats() for p in self.producers.values()],
            "waitingPublishers": len(self.waiting_exclusive),
            "subscriptions": subs,
            "replication": {},
            "deduplicationStatus": "Enabled" if self.dedup else "Disabled",
            "topicEpoch": self.topic_epoch,
            "nonContiguousDeletedMessagesRanges": 0,
            "nonContiguousDeletedMessagesRangesSerializedSize": 0,
            "ownerBroker": self.service.broker_id,
        }

    def internal_stats(self) -> dict[str, Any]:
        stats = dict(self.ml.internal_stats())
        stats.setdefault("numberOfEntries", self.ml.number_of_entries)
        stats.setdefault("totalSize", self.ml.total_size)
        stats.setdefault("lastConfirmedEntry", str(self.ml.last_confirmed_entry))
        cursors = stats.setdefault("cursors", {})
        for name, sub in self.subscriptions.items():
            c = sub.cursor
            cursors.setdefault(name, {
                "markDeletePosition": str(c.mark_delete_position),
                "readPosition": str(c.read_position),
                "numberOfEntriesSinceFirstNotAckedMessage": c.number_of_entries_in_backlog,
                "individuallyDeletedMessages": "[" + ", ".join(
                    f"({a}..{b}]" for a, b in (getattr(c, "individually_deleted_ranges", None) or [])) + "]",
                "state": "Open",
                "properties": dict(getattr(c, "properties", {}) or {}),
            })
        return stats
