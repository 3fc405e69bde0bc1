"""Driver-side planning: which topic-partitions, what each holds, how to split it into ranges.

Everything here asks the admin API (partition counts, namespace topics, ``internalStats``:
the ledger list and the last confirmed entry); executors never call it.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import TypeVar

from .admin import PARTITION_SUFFIX, AdminClient, full_topic_name
from .errors import PulsarAdminError, PulsarDataLossError
from .options import PulsarOptions
from .positions import EARLIEST, LATEST, Pos, after

log = logging.getLogger(__name__)

# Admin requests of one planning step in flight at once: a topic of many partitions is planned
# in the time of a few round trips, not one per partition (the driver repeats it every
# micro-batch of a stream).
PLANNING_CONCURRENCY = 8

_T = TypeVar("_T")
_R = TypeVar("_R")


def concurrently(fn: "Callable[[_T], _R]", items: "Sequence[_T]") -> list[_R]:
    """``[fn(x) for x in items]`` with up to PLANNING_CONCURRENCY calls at once (in order; the
    first error is raised, as the loop would). The admin client's ``httpx.Client`` is shared
    between the threads, which it allows."""
    if len(items) <= 1:
        return [fn(x) for x in items]
    with ThreadPoolExecutor(min(PLANNING_CONCURRENCY, len(items)), thread_name_prefix="quire-plan") as pool:
        return list(pool.map(fn, items))


@dataclass(frozen=True)
class PartitionInfo:
    """What one topic-partition held when planned: ledgers ``[(ledger_id, entries, size)]`` and
    the position after its last entry (``None`` when it holds nothing)."""

    topic: str
    ledgers: tuple[tuple[int, int, int], ...]
    end: Pos | None
    mark_deletes: tuple[tuple[str, Pos], ...] = ()  # (subscription, mark-delete position)

    def mark_delete(self, subscription: str) -> Pos | None:
        return next((p for name, p in self.mark_deletes if name == subscription), None)

    def normalize(self, pos: Pos) -> Pos:
        """``(L, n)`` just past the last entry of a closed ledger ``L`` is the same place as the
        next ledger's ``(L', 0)``: offsets say the latter, which stays valid once ``L`` is deleted."""
        if pos.batch_index >= 0:
            return pos
        for (lid, entries, _), nxt in zip(self.ledgers, self.ledgers[1:]):
            if lid == pos.ledger_id and pos.entry_id >= entries:
                return Pos(nxt[0], 0)
        return pos

    @property
    def first(self) -> Pos | None:
        for lid, entries, _ in self.ledgers:
            if entries > 0:
                return Pos(lid, 0)
        return None


def resolve_topics(opts: PulsarOptions, admin: AdminClient) -> list[str]:
    """Base topic names (full) selected by topic / topics / topicsPattern."""
    if opts.topic:
        return [full_topic_name(opts.topic)]
    if opts.topics:
        return [full_topic_name(t) for t in opts.topics]
    assert opts.topics_pattern
    pattern = full_topic_name(opts.topics_pattern) if "/" in opts.topics_pattern or "://" in opts.topics_pattern \
        else "persistent://public/default/" + opts.topics_pattern
    namespace = pattern.split("://", 1)[1].rsplit("/", 1)[0]
    regex = re.compile(pattern)
    names = set()
    for t in admin.namespace_topics(namespace):
        base = t.split(PARTITION_SUFFIX)[0] if re.search(PARTITION_SUFFIX + r"\d+$", t) else t
        if regex.fullmatch(base):
            names.add(base)
    return sorted(names)


def topic_partitions(topics: list[str], admin: AdminClient) -> list[str]:
    out: list[str] = []
    for t, n in zip(topics, concurrently(admin.partitions, topics)):
        out.extend([f"{t}{PARTITION_SUFFIX}{i}" for i in range(n)] if n > 0 else [t])
    return out


def partition_infos(admin: AdminClient, tps: list[str]) -> dict[str, PartitionInfo]:
    """:func:`partition_info` of each topic-partition, asked concurrently (in ``tps``'s order)."""
    return dict(zip(tps, concurrently(lambda tp: partition_info(admin, tp), tps)))


def partition_info(admin: AdminClient, tp: str) -> PartitionInfo:
    try:
        stats = admin.internal_stats(tp)
    except PulsarAdminError as exc:
        if exc.status == 404 and PARTITION_SUFFIX in tp:
            return PartitionInfo(tp, (), None)  # a partition nobody has used yet holds nothing
        raise
    ledgers = tuple((int(li["ledgerId"]), int(li["entries"]), int(li.get("size", 0))) for li in stats["ledgers"])
    marks = tuple((name, Pos.parse(c["markDeletePosition"])) for name, c in (stats.get("cursors") or {}).items()
                  if c.get("markDeletePosition"))
    lac = Pos.parse(stats["lastConfirmedEntry"])
    if lac.entry_id >= 0:
        end: Pos | None = after(lac)
    else:
        # the current ledger is empty: the end is after the last entry of an earlier ledger
        earlier = [(lid, n) for lid, n, _ in ledgers if n > 0 and lid <= lac.ledger_id]
        end = after(Pos(earlier[-1][0], earlier[-1][1] - 1)) if earlier else None
    return PartitionInfo(tp, ledgers, end, marks)


def entries_between(info: PartitionInfo, start: Pos, end: Pos) -> int:
    n = 0
    for lid, entries, _ in info.ledgers:
        lo = max(Pos(lid, 0), Pos(start.ledger_id, start.entry_id))
        hi = min(Pos(lid, entries), Pos(end.ledger_id, end.entry_id))
        if lo.ledger_id == lid and hi.ledger_id == lid and hi.entry_id > lo.entry_id:
            n += hi.entry_id - lo.entry_id
        elif hi.ledger_id > lid >= lo.ledger_id and lo.ledger_id == lid:
            n += entries - lo.entry_id
    return n


def advance(info: PartitionInfo, start: Pos, max_entries: int, end: Pos) -> Pos:
    """The position ``max_entries`` entries after ``start`` (at most ``end``)."""
    left = max_entries
    for lid, entries, _ in info.ledgers:
        if entries <= 0 or Pos(lid, entries) <= Pos(start.ledger_id, start.entry_id):
            continue
        first = start.entry_id if lid == start.ledger_id else 0
        if lid < start.ledger_id:
            continue
        room = entries - max(first, 0)
        if room >= left:
            return min(Pos(lid, max(first, 0) + left), end)
        left -= room
    return end


def check_data_loss(info: PartitionInfo, start: Pos, fail: bool, subscription: str | None = None) -> Pos:
    """A start before the first stored entry (retention deleted it) is data loss, unless the
    query's own subscription had acknowledged exactly up to ``start``: the ledger was deleted
    because that cursor consumed all of it, so it ended at ``start`` (an end-of-ledger offset)."""
    first = info.first
    if start == EARLIEST or first is None or start >= first:
        return start
    if subscription is not None and start.batch_index < 0 and \
            info.mark_delete(subscription) == Pos(start.ledger_id, start.entry_id - 1):
        return first
    if not any(lid == start.ledger_id for lid, _, _ in info.ledgers):
        msg = (f"{info.topic}: position {start} was already deleted (first stored entry is {first}); "
               "set failOnDataLoss=false to continue from there")
        if fail:
            raise PulsarDataLossError(msg)
        log.warning("%s", msg)
        return first
    return start


def split_ranges(info: PartitionInfo, start: Pos, end: Pos, per_partition: int,
                 bytes_per_partition: int | None = None) -> list[tuple[Pos, Pos]]:
    """``[start, end)`` cut at ledger boundaries into pieces of about ``per_partition`` entries or
    ``bytes_per_partition`` bytes (a batched entry holds many messages: bytes measure the work)."""
    if info.end is None or start >= end:
        return []
    end = min(end, info.end) if end.batch_index < 0 else end
    pieces: list[tuple[Pos, Pos]] = []
    cur_start, count, size = start, 0, 0
    for lid, entries, ledger_bytes in info.ledgers:
        if entries <= 0:
            continue
        n = entries_between(info, max(cur_start, Pos(lid, 0)), min(end, Pos(lid, entries)))
        count += n
        size += ledger_bytes * n // entries
        full = count >= per_partition or (bytes_per_partition is not None and size >= bytes_per_partition)
        if full and Pos(lid, entries) < end:
            boundary = Pos(lid, entries)
            if boundary > cur_start:
                pieces.append((cur_start, boundary))
                cur_start, count, size = boundary, 0, 0
    if cur_start < end:
        pieces.append((cur_start, end))
    return pieces


def range_bytes(info: PartitionInfo, start: Pos, end: Pos) -> int:
    """About how many bytes ``[start, end)`` holds (each ledger's average entry size)."""
    total = 0
    for lid, entries, size in info.ledgers:
        if entries > 0:
            total += size * entries_between(info, max(start, Pos(lid, 0)), min(end, Pos(lid, entries))) // entries
    return total


def pack_ranges(sizes: list[tuple[int, int]], max_bytes: int, max_entries: int,
                min_parts: int | None = None) -> list[list[int]]:
    """Indexes of consecutive ranges (``(bytes, entries)`` each) packed into tasks of at most
    ``max_bytes`` and ``max_entries`` (a range at either limit is a task of its own); with
    ``min_parts``, at most ``total / min_parts`` bytes per task and at least ``min_parts`` tasks
    (given as many ranges), as Spark's file sources pack small files (``maxPartitionBytes``,
    ``defaultParallelism``). Spark pays a fixed cost per task
    (0.1-0.2 s measured on a loaded 2-core machine): four 25 MB partitions read as two tasks on
    two cores are one wave instead of two."""
    target = max_bytes if not min_parts else min(max_bytes, -(-sum(b for b, _ in sizes) // min_parts))
    packs: list[list[int]] = []
    size = entries = 0
    for i, (b, n) in enumerate(sizes):
        if packs and size + b <= target and entries + n <= max_entries and \
                len(packs) + len(sizes) - 1 - i >= (min_parts or 0):
            packs[-1].append(i)
            size, entries = size + b, entries + n
        else:
            packs.append([i])
            size, entries = b, n
    return packs


def even_packs(sizes: list[tuple[int, int]], tasks: int, min_piece: int) -> list[list[tuple[int, int, int]]]:
    """Consecutive ranges (``(bytes, entries)`` each) dealt into ``tasks`` tasks of about equal
    bytes, a range cut at an entry where a task's share ends: each task is a list of ``(range
    index, first, end)`` entry offsets into its ranges. A cut leaving less than ``min_piece``
    entries on either side is not made (a range's read has a fixed cost). Tasks of unequal size
    leave a core idle at a query's end: the bench's two packed tasks were 526k and 474k rows."""
    total = sum(b for b, _ in sizes)
    bounds = [total * k / tasks for k in range(1, tasks)]  # byte offsets where a task ends
    out: list[list[tuple[int, int, int]]] = [[]]
    done = 0.0  # bytes dealt so far
    for i, (size, entries) in enumerate(sizes):
        at = 0
        per = size / entries if entries > 0 else 0.0
        while bounds and per > 0 and done + (entries - at) * per > bounds[0]:
            cut = at + max(0, round((bounds[0] - done) / per))
            if cut - at < min_piece:
                cut = at
            elif entries - cut < min_piece:
                cut = entries
            if cut > at:
                out[-1].append((i, at, cut))
                done += (cut - at) * per
                at = cut
            bounds.pop(0)
            if out[-1]:
                out.append([])
        if at < entries or per == 0:
            out[-1].append((i, at, entries))
            done += (entries - at) * per
    return [t for t in out if t]


def packs_fit(tasks: list[list[tuple[int, int, int]]], sizes: list[tuple[int, int]], max_bytes: int,
              max_entries: int) -> bool:
    """Whether every task of ``(range index, first, end)`` pieces stays within a task's bytes (a
    piece's share of its range's bytes) and entries."""
    return all(sum(sizes[i][0] * (k - j) // max(sizes[i][1], 1) for i, j, k in t) <= max_bytes
               and sum(k - j for _, j, k in t) <= max_entries for t in tasks)


def resolve_start(spec: object, tp: str, info: PartitionInfo) -> Pos:
    if spec == "earliest":
        return EARLIEST
    if spec == "latest":
        return info.end or EARLIEST
    assert isinstance(spec, dict)
    pos = spec.get(tp)
    if pos is None:
        return EARLIEST
    return info.end or EARLIEST if pos == LATEST else pos


def resolve_end(spec: object, tp: str, info: PartitionInfo) -> Pos | None:
    if info.end is None:
        return None
    if spec == "latest":
        return info.end
    assert isinstance(spec, dict)
    pos = spec.get(tp, LATEST)
    return info.end if pos == LATEST else pos
