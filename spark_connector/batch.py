"""Batch read: plan one input partition per topic-partition range, read each on an executor."""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterator

import pyarrow as pa
from pyspark.sql.datasource import DataSourceReader, InputPartition

from .options import PulsarOptions
from .positions import Pos
from .pump import FetchChain
from .task_trace import trace_planning, traced

if TYPE_CHECKING:
    from .planner import PartitionInfo


class RangePartition(InputPartition):
    """``[start, end)`` of one topic-partition (positions as ``"L:E[:B]"`` strings: plain pickles)."""

    def __init__(self, topic: str, start: str, end: str, ledgers: tuple = ()) -> None:
        super().__init__((topic, start, end))
        self.topic, self.start, self.end = topic, start, end
        self.ledgers = ledgers  # for readMode=direct: ((ledger_id, entries, size), ...)


class PackedPartition(InputPartition):
    """Several small ranges read one after another by one task (see ``planner.pack_ranges``)."""

    def __init__(self, parts: tuple[RangePartition, ...]) -> None:
        super().__init__(tuple(p.value for p in parts))
        self.parts = parts


def plan_batch(opts: PulsarOptions) -> list[RangePartition | PackedPartition]:
    # imported here: executors unpickle this module but never plan (the admin client loads httpx)
    from .admin import AdminClient
    from .planner import advance, check_data_loss, entries_between, even_packs, pack_ranges, packs_fit, partition_infos, \
        range_bytes, resolve_end, resolve_start, resolve_topics, split_ranges, topic_partitions

    admin = AdminClient.for_options(opts)
    ranges: list[tuple[PartitionInfo, Pos, Pos]] = []
    sizes: list[tuple[int, int]] = []
    known = True
    for tp, info in partition_infos(admin, topic_partitions(resolve_topics(opts, admin), admin)).items():
        end = resolve_end(opts.ending_offsets, tp, info)
        if end is None:
            continue
        start = check_data_loss(info, resolve_start(opts.starting_offsets, tp, info), opts.fail_on_data_loss)
        for lo, hi in split_ranges(info, start, end, opts.entries_per_partition, opts.bytes_per_partition):
            ranges.append((info, lo, hi))
            size = range_bytes(info, lo, hi)
            known = known and size > 0
            # a range of unknown size is a task of its own
            sizes.append((size or opts.bytes_per_partition, entries_between(info, lo, hi)))
    packs = pack_ranges(sizes, opts.bytes_per_partition, opts.entries_per_partition, opts.min_partitions)
    tasks = [[(i, 0, sizes[i][1]) for i in p] for p in packs]
    if known and 1 < len(packs) < len(ranges):
        # ranges were packed: as many tasks, but of equal bytes (cut inside a range if need be)
        even = even_packs(sizes, len(packs), max(1, sum(n for _, n in sizes) // len(packs) // 32))
        if len(even) == len(packs) and packs_fit(even, sizes, opts.bytes_per_partition, opts.entries_per_partition):
            tasks = even

    def piece(i: int, first: int, stop: int) -> RangePartition:
        info, lo, hi = ranges[i]
        if stop < sizes[i][1]:
            hi = info.normalize(advance(info, lo, stop, hi))
        if first > 0:
            lo = info.normalize(advance(info, lo, first, hi))
        return RangePartition(info.topic, str(lo), str(hi), info.ledgers)

    parts = [[piece(*p) for p in t] for t in tasks]
    return [p[0] if len(p) == 1 else PackedPartition(tuple(p)) for p in parts]


def read_partition(opts: PulsarOptions, part: RangePartition, *, starting_time: int | None = None,
                   ending_time: int | None = None, chain: FetchChain | None = None) -> Iterator[pa.RecordBatch]:
    start, end = Pos.parse(part.start), Pos.parse(part.end)
    if opts.read_mode == "direct":
        from .direct_read import read_range_direct
        return read_range_direct(opts.metadata_url or "", part.topic, start, end, part.ledgers,
                                 batch_rows=opts.record_batch_size, starting_time=starting_time,
                                 ending_time=ending_time, value_schema=opts.value_schema, chain=chain)
    from .broker_read import read_range
    return read_range(opts.service_url or "", part.topic, start, end, poll_timeout_ms=opts.poll_timeout_ms,
                      batch_rows=opts.record_batch_size, starting_time=starting_time, ending_time=ending_time,
                      client_conf=opts.client_conf, reader_conf=opts.reader_conf, value_schema=opts.value_schema,
                      chain=chain)


class PulsarBatchReader(DataSourceReader):
    def __init__(self, opts: PulsarOptions) -> None:
        self.opts = opts

    def partitions(self) -> list[RangePartition | PackedPartition]:
        return trace_planning(lambda: plan_batch(self.opts))

    def read(self, partition: InputPartition) -> Iterator[pa.RecordBatch]:
        if isinstance(partition, PackedPartition):
            parts = partition.parts
        elif isinstance(partition, RangePartition):
            parts = (partition,)
        else:
            return  # no partitions planned: Spark still runs one task with a bare InputPartition
        yield from traced(self._read_parts(parts), parts[0].topic)

    def _read_parts(self, parts: tuple[RangePartition, ...]) -> Iterator[pa.RecordBatch]:
        if len(parts) == 1:
            yield from read_partition(self.opts, parts[0], starting_time=self.opts.starting_time,
                                      ending_time=self.opts.ending_time)
            return
        # the ranges' fetchers chained: each range's connect and first reads overlap the
        # decoding of the one before (otherwise 17-50 ms per range from connect to first chunk)
        chain = FetchChain()
        try:
            reads = [read_partition(self.opts, part, starting_time=self.opts.starting_time,
                                    ending_time=self.opts.ending_time, chain=chain) for part in parts]
            for batches in reads:
                yield from batches
        finally:
            chain.close()
