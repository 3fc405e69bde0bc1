"""Batched entries -> Arrow columns, a whole run of entries at once.

The run's payloads are joined into one buffer and scanned as one batch (:func:`scan_batch`:
consecutive batches chain like the records inside one), so every numpy and Arrow call is paid
once per record batch, not once per entry. Values and keys are ``take``n from a binary array
over that buffer whose offsets interleave each record's start and end (the odd elements are the
bytes between records). A message id is the entry's prefix and the record's ``batch_index`` and
``batch_size`` fields: numpy places an entry's ids with a layout cached per (batch size, prefix
length).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from . import native_records
from .batch_records import PAD, Records, scan_batch
from .rows import TS, _varint
_ID_LAYOUTS: dict[tuple[int, int], tuple[np.ndarray, list[tuple[int, int, int]], np.ndarray]] = {}
_SUFFIXES: dict[int, list[bytes]] = {}  # batch size -> id suffix of each batch index
_ZEROS = bytes(PAD)
SMALL_BATCHES = 16  # records per batch on average under which ids are joined as bytes, not placed by numpy
Columns = native_records.Columns  # value, key, id, publish, event
Props = native_records.Props  # each row's properties: lists (Python decoders) or Arrow (compiled), None: none


def id_suffixes(n: int) -> list[bytes]:
    """The ``batch_index`` and ``batch_size`` fields of each message id of a batch of ``n``."""
    tail = b"0" + _varint(n)
    return [b" " + _varint(i) + tail for i in range(n)]


def _suffixes(n: int) -> list[bytes]:
    """:func:`id_suffixes`, cached per batch size."""
    s = _SUFFIXES.get(n)
    if s is None:
        if len(_SUFFIXES) > 4096:
            _SUFFIXES.clear()
        s = _SUFFIXES[n] = id_suffixes(n)
    return s


def _varints_of(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Varint encodings of the non-negative ``x``: ``(bytes (len(x) x 10), sizes)``."""
    out = np.zeros((len(x), 10), np.uint8)
    sizes = np.ones(len(x), np.int64)
    v = x.astype(np.int64)
    for j in range(10):
        low = (v & 0x7F).astype(np.uint8)
        v = v >> 7
        more = v > 0
        out[:, j] = low | (more.astype(np.uint8) << 7)
        if not more.any():
            break
        sizes += more
    return out, sizes


def _id_layout(n: int, head: int) -> tuple[np.ndarray, list[tuple[int, int, int]], np.ndarray]:
    """The message ids of a whole batch of ``n``, each a ``head``-byte prefix and the suffix of
    its index: ``(the ids laid end to end with their suffixes in place and the prefixes' bytes
    still to write, (first byte, ids, bytes per id) of each run of ids of one size, id sizes)``.
    Built with numpy: batch sizes vary, so a layout is often new."""
    layout = _ID_LAYOUTS.get((n, head))
    if layout is None:
        index, index_sizes = _varints_of(np.arange(n))
        tail = np.frombuffer(b"0" + _varint(n), np.uint8)
        widest = int(index_sizes.max())
        rows = np.zeros((n, 1 + widest + len(tail)), np.uint8)
        rows[:, 0] = 0x20  # batch_index: field 4, varint
        rows[:, 1:1 + widest] = index[:, :widest]
        for w in range(1, widest + 1):  # batch_size (field 6) after each index's varint
            rows[index_sizes == w, 1 + w:1 + w + len(tail)] = tail
        suffix_sizes = 1 + index_sizes + len(tail)
        suffix_bytes = rows[np.arange(rows.shape[1]) < suffix_sizes[:, None]]
        sizes = suffix_sizes + head
        starts = np.zeros(n, np.int64)
        np.cumsum(sizes[:-1], out=starts[1:])
        suffix_starts = np.zeros(n, np.int64)
        np.cumsum(suffix_sizes[:-1], out=suffix_starts[1:])
        template = np.zeros(int(sizes.sum()), np.uint8)
        template[np.repeat(starts + head - suffix_starts, suffix_sizes) + np.arange(len(suffix_bytes))] = suffix_bytes
        # an index's varint only grows with it: ids of one size are consecutive, a fixed stride apart
        firsts = [0, *(np.flatnonzero(np.diff(sizes)) + 1).tolist()]
        ends = [*firsts[1:], n]
        groups = [(int(starts[f]), e - f, int(sizes[f])) for f, e in zip(firsts, ends)]
        layout = (template, groups, sizes)
        if len(_ID_LAYOUTS) > 1024:
            _ID_LAYOUTS.clear()
        _ID_LAYOUTS[(n, head)] = layout
    return layout


def message_ids(prefix: bytes, n: int, keep: np.ndarray | None) -> tuple[np.ndarray, np.ndarray]:
    """``(bytes, sizes)`` of the message ids of the records ``keep`` (None: all) of an entry of
    ``n`` whose id prefix is ``prefix``, laid end to end."""
    if keep is not None:
        suffixes = id_suffixes(n)
        ids = [prefix + suffixes[i] for i in keep.tolist()]
        return np.frombuffer(b"".join(ids), np.uint8), np.array([len(i) for i in ids], np.int64)
    head = len(prefix)
    template, groups, sizes = _id_layout(n, head)
    out = template.copy()
    p = np.frombuffer(prefix, np.uint8)
    for first, count, stride in groups:  # a strided view per run: no index arrays
        out[first:first + count * stride].reshape(count, stride)[:, :head] = p
    return out, sizes


def _spans(buffer: pa.Buffer, starts: np.ndarray, sizes: np.ndarray) -> pa.Array:
    """A binary array of ``2n-1`` slices of ``buffer`` (no copy) whose even elements are
    ``buffer[starts[i]:starts[i] + sizes[i]]`` (the odd ones are the gaps between them); 32-bit
    offsets under 2 GiB, so what is taken from it is already Spark's ``binary`` (no cast pass)."""
    n = len(starts)
    wide = buffer.size >= 1 << 31
    offsets = np.empty(2 * n, np.int64 if wide else np.int32)
    offsets[0::2] = starts
    offsets[1::2] = starts + sizes
    return pa.Array.from_buffers(pa.large_binary() if wide else pa.binary(), 2 * n - 1,
                                 [None, pa.py_buffer(offsets), buffer])


@dataclass
class BatchEntry:
    body: bytes | memoryview  # the (decompressed) batch payload
    n: int  # num_messages_in_batch
    prefix: bytes  # message-id prefix (ledger, entry, partition)
    publish_us: int
    first: int  # records [first, last) are in the read's range
    last: int


class ScannedRun:
    """Consecutive batched entries, decoded together by :meth:`columns`."""

    def __init__(self) -> None:
        self.entries: list[BatchEntry] = []
        self.rows = 0  # rows in range (before compacted-out records are dropped)
        self.records = 0  # records in the run's batches

    def add(self, entry: BatchEntry) -> None:
        self.entries.append(entry)
        self.rows += max(min(entry.n, entry.last) - entry.first, 0)
        self.records += entry.n

    def native_columns(self) -> tuple[Columns, Props] | None:
        """:meth:`columns` by the compiled decoder, or None: it is off or does not vouch for the run
        (then the Python decoder answers, rows or error, as if it had not been asked)."""
        if native_records.EXT is None:
            return None
        entries = self.entries
        return native_records.run_columns([e.body for e in entries], [e.n for e in entries],
                                          [e.first for e in entries], [e.last for e in entries],
                                          [e.prefix for e in entries], [e.publish_us for e in entries])

    def columns(self) -> tuple[Columns, list[list[tuple[str, str]]] | None] | None:
        """The run's rows and their properties (None: no row has any), or None when the joined
        payloads do not scan as one batch: then decode the entries one by one."""
        entries = self.entries
        sizes = [len(e.body) for e in entries]
        total = sum(sizes)
        joined = b"".join([*(e.body for e in entries), _ZEROS])
        counts = [e.n for e in entries]
        n = sum(counts)
        rec = scan_batch(joined, n, total)
        if rec is None:
            return None
        bases = np.zeros(len(entries), np.int64)
        np.cumsum(sizes[:-1], out=bases[1:])
        firsts = np.zeros(len(entries), np.int64)
        np.cumsum(counts[:-1], out=firsts[1:])
        if not (rec.meta_start[firsts] - 4 == bases).all():
            return None  # an entry's records do not tile its payload (trailing bytes)
        cut = [(i, e) for i, e in enumerate(entries) if e.first > 0 or e.last < e.n]
        keep: np.ndarray | None = None
        if cut or rec.compacted.any():
            mask = ~rec.compacted
            for i, e in cut:
                mask[firsts[i]:firsts[i] + min(e.first, e.n)] = False
                mask[firsts[i] + min(e.last, e.n):firsts[i] + e.n] = False
            keep = np.flatnonzero(mask)
        rows = n if keep is None else len(keep)
        kept: list[int] = []
        if n < SMALL_BATCHES * len(entries):  # small batches: numpy's per-entry cost is more than a list's
            id_list: list[bytes] = []
            for i, e in enumerate(entries):
                prefix, suffixes = e.prefix, _suffixes(e.n)
                if keep is None:
                    id_list.extend([prefix + x for x in suffixes])
                    kept.append(e.n)
                else:
                    local = keep[(keep >= firsts[i]) & (keep < firsts[i] + e.n)] - firsts[i]
                    id_list.extend([prefix + suffixes[j] for j in local.tolist()])
                    kept.append(len(local))
            ids = pa.array(id_list, pa.binary())
        else:
            id_bytes, id_sizes = [], []
            for i, e in enumerate(entries):
                local = None if keep is None else keep[(keep >= firsts[i]) & (keep < firsts[i] + e.n)] - firsts[i]
                if local is not None and len(local) == e.n:
                    local = None
                ib, isz = message_ids(e.prefix, e.n, local)
                id_bytes.append(ib)
                id_sizes.append(isz)
                kept.append(e.n if local is None else len(local))
            id_offsets = np.zeros(rows + 1, np.int32)
            np.cumsum(np.concatenate(id_sizes), out=id_offsets[1:])
            ids = pa.Array.from_buffers(pa.binary(), rows, [None, pa.py_buffer(id_offsets),
                                                           pa.py_buffer(np.concatenate(id_bytes))])
        buffer = pa.py_buffer(joined)
        pick_index = np.arange(0, 2 * n, 2, dtype=np.int64) if keep is None else 2 * keep
        pick = pa.array(pick_index)
        values = _spans(buffer, rec.value_start, rec.value_size).take(pick).cast(pa.binary())  # no-op under 2 GiB
        key_size = rec.key_size if keep is None else rec.key_size[keep]
        has_key = key_size > 0  # an empty key reads as none, as for a single message
        if has_key.all():
            keys = _spans(buffer, rec.key_start, np.maximum(rec.key_size, 0)).take(pick)
        elif has_key.any():
            keys = _spans(buffer, rec.key_start, np.maximum(rec.key_size, 0)).take(pa.array(pick_index, mask=~has_key))
        else:
            keys = pa.nulls(rows, pa.binary())
        keys = keys.cast(pa.string())  # checks UTF-8 as a str decode would
        event = rec.event_time if keep is None else rec.event_time[keep]
        events = pa.array(event * 1000, TS, mask=event == 0) if event.any() else pa.nulls(rows, TS)
        publish = pa.array(np.repeat(np.array([e.publish_us for e in entries], np.int64), kept), TS)
        props = None
        if rec.properties:
            from .entries import _kv

            props = [[_kv(joined, s, s + z) for s, z in rec.properties.get(i, ())]
                     for i in (range(n) if keep is None else keep.tolist())]
        return (values, keys, ids, publish, events), props
