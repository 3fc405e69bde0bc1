"""Broker-side message deduplication (Pulsar's MessageDeduplication).

For every producer name the topic tracks the highest sequence id *pushed* (accepted, being
persisted) and *persisted* (stored). A send whose sequence id is at or below the persisted one
is a duplicate (acknowledged, not stored); one between persisted and pushed is "unknown" (an
earlier copy may still fail), which the producer hears as an error and retries. The persisted
map is snapshotted into the properties of cursor ``pulsar.dedup`` every
``broker_deduplication_entries_interval`` entries and rebuilt after a restart from the
snapshot plus the entries written after it.
"""

from __future__ import annotations

import enum
import logging

from broker.entry_meta import parse_metadata
from managed_ledger import Position
from managed_ledger.interfaces import ManagedCursorView, ManagedLedgerView

log = logging.getLogger(__name__)

CURSOR_NAME = "pulsar.dedup"


class DupStatus(enum.Enum):
    NEW = "new"
    DUP = "dup"
    UNKNOWN = "unknown"


class Deduplication:
    def __init__(self, ml: ManagedLedgerView, entries_interval: int = 1000, max_producers: int = 10000) -> None:
        self.ml = ml
        self.entries_interval = max(1, entries_interval)
        self.max_producers = max_producers
        self.pushed: dict[str, int] = {}
        self.persisted: dict[str, int] = {}
        self.cursor: ManagedCursorView | None = None
        self._since_snapshot = 0

    async def recover(self) -> None:
        """Load the snapshot and replay the entries written after it."""
        self.cursor = await self.ml.open_cursor(CURSOR_NAME, initial_position="earliest")
        props = dict(self.cursor.properties or {})
        self.persisted = {k: int(v) for k, v in props.items()}
        replayed = 0
        while True:
            entries = await self.cursor.read_entries(500)
            if not entries:
                break
            for e in entries:
                md = parse_metadata(e.data)
                seq = max(md.sequence_id, md.highest_sequence_id)
                if seq > self.persisted.get(md.producer_name, -1):
                    self.persisted[md.producer_name] = seq
                replayed += 1
        self.pushed = dict(self.persisted)
        if replayed:
            await self.snapshot(self.ml.last_confirmed_entry)
        log.info("dedup state of %s rebuilt: %d producers, %d entries replayed", self.ml.name, len(self.persisted), replayed)

    def check(self, producer: str, sequence_id: int, highest_sequence_id: int) -> DupStatus:
        """A send carries ``[sequence_id, highest_sequence_id]`` (a batch; a single message has
        highest 0 or equal). It is a duplicate only when all of it is stored (highest <= persisted).
        A batch that is only partly stored (first id stored, highest not) is stored whole:
        dropping it would lose its new messages, which the producer took as acknowledged
        (Pulsar's Java client never builds such a batch; a re-sent batch cut differently does).
        A send overlapping ids still being persisted is UNKNOWN: the producer retries it."""
        highest = max(sequence_id, highest_sequence_id)
        persisted = self.persisted.get(producer, -1)
        if highest <= persisted:
            return DupStatus.DUP
        pushed = self.pushed.get(producer, -1)
        if pushed > persisted and sequence_id <= pushed:
            return DupStatus.UNKNOWN
        if sequence_id <= persisted:
            log.warning("%s: producer %s re-sent a batch of sequence ids %d..%d of which %d..%d are stored "
                        "already: stored whole (its later messages are new)", self.ml.name if self.ml else "?",
                        producer, sequence_id, highest, sequence_id, persisted)
        self.pushed[producer] = highest
        return DupStatus.NEW

    def last_sequence_id(self, producer: str) -> int:
        return self.persisted.get(producer, -1)

    def failed(self, producer: str) -> None:
        """A send failed to persist: later retries of it must not look like duplicates."""
        self.pushed[producer] = self.persisted.get(producer, -1)

    def persisted_ok(self, producer: str, sequence_id: int, highest_sequence_id: int) -> bool:
        """Record a stored send; True when a snapshot is due."""
        seq = max(sequence_id, highest_sequence_id)
        if seq > self.persisted.get(producer, -1):
            self.persisted[producer] = seq
        self._since_snapshot += 1
        return self._since_snapshot >= self.entries_interval

    async def snapshot(self, position: Position) -> None:
        self._since_snapshot = 0
        if self.cursor is None or position.entry_id < 0 or position <= self.cursor.mark_delete_position:
            return
        props = dict(list(self.persisted.items())[-self.max_producers:])
        await self.cursor.mark_delete(position, properties=props)
