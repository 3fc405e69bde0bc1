"""Streaming read: offsets are ``{"subscription": name, "offsets": {topic-partition: "L:E"}}``.

An offset position is the next entry to read (ranges ``[start, end)`` at entry granularity).
``commit(end)`` moves one durable subscription per topic-partition to ``end`` (reset cursor), so
retention keeps exactly what the query may still replay and the backlog drains. ``latestOffset(start)``
commits ``start`` too: Spark calls it once every batch before ``start`` is in the sink, so a
caught-up query has a backlog of 0 (Spark's own commit of a batch waits for the next batch). The
subscription name is part of the checkpointed offsets: a restarted query keeps moving the same
one. The subscription is created when the query starts (at its start positions) so nothing the
query needs can be trimmed before its first commit; it stays after ``stop()`` (a restart needs
it), delete it with the admin API when the query is retired.
"""

from __future__ import annotations

import logging
import uuid
from typing import Any, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceStreamReader

from .admin import AdminClient
from .batch import RangePartition, read_partition
from .options import PulsarOptions
from .planner import PartitionInfo, advance, check_data_loss, concurrently, partition_info, partition_infos, \
    resolve_start, resolve_topics, split_ranges, topic_partitions
from .positions import EARLIEST, Pos

try:  # Spark >= 4.2: read limits and Trigger.AvailableNow for Python sources
    from pyspark.sql.streaming.datasource import ReadAllAvailable, ReadLimit, ReadMaxBytes, ReadMaxRows, \
        SupportsTriggerAvailableNow
except ImportError:  # pragma: no cover - Spark 4.0/4.1
    ReadAllAvailable = ReadLimit = ReadMaxBytes = ReadMaxRows = None  # type: ignore[assignment,misc]
    SupportsTriggerAvailableNow = object  # type: ignore[assignment,misc]

log = logging.getLogger(__name__)


class PulsarStreamReader(DataSourceStreamReader, SupportsTriggerAvailableNow):
    def __init__(self, opts: PulsarOptions) -> None:
        self.opts = opts
        self.subscription = opts.predefined_subscription or \
            f"{opts.subscription_prefix or 'spark-pulsar'}-{uuid.uuid4().hex[:12]}"
        self._infos: dict[str, PartitionInfo] = {}
        self._target: dict[str, Pos] | None = None  # Trigger.AvailableNow: never read past this
        self._subscribed: set[tuple[str, str]] = set()  # (subscription, topic-partition)
        self._committed: dict[tuple[str, str], Pos] = {}  # where commit() last moved each cursor

    # -- driver ---------------------------------------------------------------------------

    def _admin(self) -> AdminClient:
        return AdminClient.for_options(self.opts)

    def _refresh(self) -> dict[str, PartitionInfo]:
        admin = self._admin()
        self._infos = partition_infos(admin, topic_partitions(resolve_topics(self.opts, admin), admin))
        return self._infos

    def _subscribe(self, sub: str, tp: str, at: Pos) -> None:
        if (sub, tp) in self._subscribed:
            return
        self._admin().create_subscription(tp, sub, at.ledger_id, at.entry_id)
        self._subscribed.add((sub, tp))

    def initialOffset(self) -> dict:
        offsets = {}
        for tp, info in self._refresh().items():
            pos = resolve_start(self.opts.starting_offsets, tp, info)
            offsets[tp] = pos
            self._subscribe(self.subscription, tp, pos)  # holds retention from the start on
        return {"subscription": self.subscription, "offsets": {tp: str(p) for tp, p in sorted(offsets.items())}}

    def prepareForTriggerAvailableNow(self) -> None:
        self._target = {tp: info.end or EARLIEST for tp, info in self._refresh().items()}

    def getDefaultReadLimit(self) -> Any:
        if self.opts.max_entries_per_trigger and ReadMaxRows is not None:
            return ReadMaxRows(self.opts.max_entries_per_trigger)
        if self.opts.max_bytes_per_trigger and ReadMaxBytes is not None:
            return ReadMaxBytes(self.opts.max_bytes_per_trigger)
        return ReadAllAvailable() if ReadAllAvailable is not None else None

    def latestOffset(self, start: dict | None = None, limit: Any = None) -> dict:
        if start is None:  # Spark 4.0/4.1 call latestOffset() without arguments
            start = getattr(self, "_last", None) or self.initialOffset()
            limit = self.getDefaultReadLimit()
        else:
            # Spark asks for the next batch's end only once every batch before ``start`` is
            # written to the sink and its commit log: release everything before ``start`` now.
            # (Spark's own commit(end) of a batch comes when it plans the batch after it, which
            # would leave the subscription one micro-batch behind for as long as no data comes.)
            self.commit(start)
        sub = start.get("subscription", self.subscription)
        begin = {tp: Pos.parse(p) for tp, p in start.get("offsets", {}).items()}
        infos = self._refresh()
        ends: dict[str, Pos] = dict(begin)
        backlog: dict[str, tuple[Pos, Pos]] = {}
        for tp, info in infos.items():
            b = begin.get(tp, EARLIEST)  # a new partition / newly matching topic: from its start
            e = info.end or b
            if self._target is not None:
                e = min(e, self._target.get(tp, b))
            if e > b:
                backlog[tp] = (b, e)
            else:
                ends[tp] = b
        budget = self._entry_budget(limit, backlog)
        for tp, (b, e) in backlog.items():
            ends[tp] = infos[tp].normalize(e if budget is None else advance(infos[tp], b, budget[tp], e))
        end = {"subscription": sub, "offsets": {tp: str(p) for tp, p in sorted(ends.items())}}
        self._last = end
        return end

    def _entry_budget(self, limit: Any, backlog: dict[str, tuple[Pos, Pos]]) -> dict[str, int] | None:
        if not backlog or limit is None or (ReadAllAvailable is not None and isinstance(limit, ReadAllAvailable)):
            return None
        per = max(1, len(backlog))
        if ReadMaxRows is not None and isinstance(limit, ReadMaxRows):
            return {tp: max(1, limit.max_rows // per) for tp in backlog}
        if ReadMaxBytes is not None and isinstance(limit, ReadMaxBytes):
            out = {}
            for tp in backlog:
                ledgers = self._infos[tp].ledgers
                entries = sum(n for _, n, _ in ledgers) or 1
                avg = max(1, sum(s for _, _, s in ledgers) // entries)
                out[tp] = max(1, limit.max_bytes // per // avg)
            return out
        return None

    def partitions(self, start: dict, end: dict) -> list[RangePartition]:
        begin = {tp: Pos.parse(p) for tp, p in start.get("offsets", {}).items()}
        infos = self._infos or self._refresh()
        parts = []
        for tp, text in end.get("offsets", {}).items():
            e = Pos.parse(text)
            b = begin.get(tp, EARLIEST)
            if b >= e:
                continue
            info = infos.get(tp) or partition_info(self._admin(), tp)
            b = check_data_loss(info, b, self.opts.fail_on_data_loss, start.get("subscription", self.subscription))
            for lo, hi in split_ranges(info, b, e, self.opts.entries_per_partition, self.opts.bytes_per_partition):
                parts.append(RangePartition(tp, str(lo), str(hi), info.ledgers))
        return parts

    def commit(self, end: dict) -> None:
        """Move the subscription of every topic-partition to exactly ``end`` (the next entry the
        query reads), so its backlog is what the query has not processed yet."""
        sub = end.get("subscription", self.subscription)
        admin = self._admin()
        moves = [(tp, pos) for tp, pos in ((tp, Pos.parse(text)) for tp, text in end.get("offsets", {}).items())
                 if pos != EARLIEST and self._committed.get((sub, tp)) != pos]

        def move(item: tuple[str, Pos]) -> None:
            tp, pos = item
            self._subscribe(sub, tp, EARLIEST)
            admin.reset_cursor(tp, sub, pos.ledger_id, pos.entry_id)
            self._committed[(sub, tp)] = pos

        concurrently(move, moves)  # each partition's subscription on its own: all at once

    def stop(self) -> None:
        pass  # the subscription outlives the query run on purpose (see the module docstring)

    # -- executors ------------------------------------------------------------------------

    def read(self, partition: RangePartition) -> Iterator[pa.RecordBatch]:  # type: ignore[override]
        if not isinstance(partition, RangePartition):
            return
        yield from read_partition(self.opts, partition)
