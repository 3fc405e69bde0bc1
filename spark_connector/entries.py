"""Stored entries -> Arrow record batches, column-wise (both read modes' hot path).

An entry is what a producer sent: ``MessageMetadata`` + payload, the payload a batch of
``[u32 size][SingleMessageMetadata][body]`` records when ``num_messages_in_batch`` is set.
A run of consecutive batches is decoded without per-record Python: by the compiled decoder
(:mod:`.native_records`) when it is built and vouches for the run; else, for a run of
``VECTOR_MIN`` records or more in all (however small each batch), its records are located and
their metadata read by :func:`scan_batch` (numpy), and the run becomes Arrow columns at once
(:class:`ScannedRun`).
Shorter runs, single messages, and batches the scan does not vouch for are appended row by row
to per-column lists (an inline scanner reads each record's metadata, with
protobuf only for rare fields). Both kinds keep their order in the record batches.
"""

from __future__ import annotations

import struct
from typing import Any, Iterator

import numpy as np
import pyarrow as pa

from .positions import Pos
from .rows import ARROW_SCHEMA, _varint, topic_column
from .scanned_rows import TS, BatchEntry, Columns, Props, ScannedRun, _suffixes
from .topic_names import registry_topic
from .value_schema import ValueSchema

_U32 = struct.Struct(">I").unpack_from
VECTOR_MIN = 32  # records in a run of batches from which the numpy scan beats the per-record loop
BATCH_BYTES = 16 << 20  # a record batch ends at this many payload bytes, whatever recordBatchSize says


_NO_PROPERTIES = np.zeros(1, np.int32)  # per worker: the longest all-zero map offsets built yet (read-only)
_NO_PROPERTIES.flags.writeable = False


def _no_properties(n: int) -> np.ndarray:
    """The ``n + 1`` offsets of ``n`` empty maps: one zero buffer, sliced (was two allocations
    and copies of ``n`` offsets per record batch)."""
    global _NO_PROPERTIES
    if len(_NO_PROPERTIES) <= n:
        _NO_PROPERTIES = np.zeros(n + 1, np.int32)
        _NO_PROPERTIES.flags.writeable = False
    return _NO_PROPERTIES[:n + 1]


def _uvarint(buf: bytes, p: int) -> tuple[int, int]:
    b = buf[p]
    if b < 0x80:
        return b, p + 1
    value, shift = b & 0x7F, 7
    p += 1
    while True:
        b = buf[p]
        p += 1
        value |= (b & 0x7F) << shift
        if b < 0x80:
            return value, p
        shift += 7


def _kv(buf: bytes, p: int, end: int) -> tuple[str, str]:
    """One ``KeyValue`` submessage (fields 1 and 2, strings)."""
    k = v = ""
    while p < end:
        tag = buf[p]
        n, p = _uvarint(buf, p + 1)
        if tag == 0x0A:
            k = buf[p:p + n].decode()
        elif tag == 0x12:
            v = buf[p:p + n].decode()
        else:
            raise ValueError(f"unexpected KeyValue field tag {tag:#x}")
        p += n
    return k, v


def _single_metadata(buf: bytes, p: int, end: int) -> tuple[int, str | None, int, list[tuple[str, str]], bool]:
    """``(payload_size, key, event_time, properties, compacted_out)`` of one SingleMessageMetadata."""
    size, key, event, props, compacted = -1, None, 0, [], False
    start = p
    while p < end:
        tag = buf[p]
        p += 1
        if tag == 0x18:
            size, p = _uvarint(buf, p)
        elif tag == 0x40 or tag == 0x30:  # sequence_id, partition_key_b64_encoded
            _, p = _uvarint(buf, p)
        elif tag == 0x12:
            n, p = _uvarint(buf, p)
            key = buf[p:p + n].decode()
            p += n
        elif tag == 0x28:
            event, p = _uvarint(buf, p)
        elif tag == 0x0A:
            n, p = _uvarint(buf, p)
            props.append(_kv(buf, p, p + n))
            p += n
        else:  # ordering key, null value, compacted_out...: the full parser
            return _single_metadata_pb(buf[start:end])
    return size, key, event, props, compacted


def _single_metadata_pb(raw: bytes) -> tuple[int, str | None, int, list[tuple[str, str]], bool]:
    from clients.protocol import pulsar_api_pb2 as pb

    m = pb.SingleMessageMetadata()
    m.ParseFromString(raw)
    return (m.payload_size, m.partition_key or None, m.event_time,
            [(kv.key, kv.value) for kv in m.properties], m.compacted_out)


class EntryDecoder:
    """Rows of the entries of ``[start, end)`` of one topic-partition, filtered by publish time."""

    def __init__(self, topic: str, partition: int, start: Pos, end: Pos, *, starting_time: int | None = None,
                 ending_time: int | None = None, value_schema: ValueSchema | None = None) -> None:
        self.topic = topic
        self.value_schema = value_schema
        self.arrow_schema = ARROW_SCHEMA if value_schema is None else \
            pa.schema(value_schema.arrow_fields() + list(ARROW_SCHEMA)[1:])
        self.partition = partition
        self.start, self.end = start, end
        self.starting_time, self.ending_time = starting_time, ending_time
        self.done = False  # reached the range's end (or endingTime)
        self.chunks: dict[str, tuple[list[bytes], list[tuple[int, int]]]] = {}
        self._part = b"\x18" + _varint(partition) if partition != -1 else b""
        self._ledger, self._ledger_field = -1, b""
        self._schema_topic = registry_topic(topic)
        self.writer: tuple[str, int] | None = None  # the schema the rows added now were written with (None: latest)
        self._reset()

    def _reset(self) -> None:
        # decoded batches: (value, __key, __messageId, __publishTime, __eventTime) arrays
        self.chunks_done: list[Columns] = []
        self.chunk_writers: list[tuple[str, int] | None] = []  # each chunk's writer schema
        self.rows_done = 0
        self.bytes = 0  # payload bytes taken since the last record batch
        self.run: ScannedRun | None = None  # batched entries since the last of those, not decoded yet
        # rows appended one by one since the last of those
        self.values: list[bytes] = []
        self.keys: list[str | None] = []
        self.ids: list[bytes] = []
        self.publish: list[int] = []
        self.event: list[int | None] = []
        # The properties: Arrow chunks (the compiled decoder's), then lists (the Python decoders');
        # each row's end among them: numpy chunks, then a list (ends in the lists, after the
        # props_in_chunks of the Arrow chunks) for the rows since the last numpy chunk.
        self.prop_offset_chunks: list[np.ndarray] = []
        self.prop_offsets: list[int] = []
        self.prop_keys: list[str] = []
        self.prop_values: list[str] = []
        self.prop_key_chunks: list[pa.Array] = []
        self.prop_value_chunks: list[pa.Array] = []
        self.props_in_chunks = 0

    def __len__(self) -> int:
        return self.rows_done + len(self.values) + (self.run.rows if self.run is not None else 0)

    def _prefix(self, ledger: int, entry: int) -> bytes:
        if ledger != self._ledger:  # entries of one ledger share the prefix's start
            self._ledger, self._ledger_field = ledger, b"\x08" + _varint(ledger) + b"\x10"
        return self._ledger_field + _varint(entry) + self._part

    def add_entry(self, ledger: int, entry: int, meta: Any, payload: Any) -> None:
        """One entry (``meta``: its parsed MessageMetadata, ``payload``: bytes after it)."""
        if self.done:
            return
        end = self.end
        if (ledger, entry) >= (end.ledger_id, end.entry_id) and (
                end.batch_index < 0 or (ledger, entry) > (end.ledger_id, end.entry_id) or end.batch_index == 0):
            self.done = True
            return
        start = self.start
        if (ledger, entry) < (start.ledger_id, start.entry_id):
            return
        publish = meta.publish_time
        if self.ending_time is not None and publish >= self.ending_time:
            self.done = True
            return
        if self.value_schema is not None:
            self._set_writer(meta)
        if meta.HasField("num_chunks_from_msg") and meta.num_chunks_from_msg > 1:
            self._add_chunk(ledger, entry, meta, payload)
            return
        if self.starting_time is not None and publish < self.starting_time:
            return
        if meta.compression:
            from clients.protocol import compression

            body = compression.decompress(meta.compression, payload, meta.uncompressed_size)
        else:
            body = payload  # a view is copied once, when a run of batches is joined
        publish_us = publish * 1000
        self.bytes += len(body)
        if not meta.HasField("num_messages_in_batch"):
            self._add_one(bytes(body), meta, self._prefix(ledger, entry), publish_us)
            return
        first = start.batch_index if (ledger, entry) == (start.ledger_id, start.entry_id) else 0
        last = end.batch_index if (ledger, entry) == (end.ledger_id, end.entry_id) else 1 << 31
        if self.run is None:
            self._seal_rows()
            self.run = ScannedRun()
        self.run.add(BatchEntry(body, meta.num_messages_in_batch, self._prefix(ledger, entry), publish_us,
                                max(first, 0), last))

    def _set_writer(self, meta: Any) -> None:
        """Rows of another schema version than the rows before go to chunks of their own."""
        assert self.value_schema is not None
        version = int.from_bytes(meta.schema_version, "big", signed=True) if meta.HasField("schema_version") else None
        writer = None if self.value_schema.is_latest(self._schema_topic, version) else (self._schema_topic, version)
        if writer != self.writer:
            self._seal_run()  # a short run becomes rows: sealed next
            self._seal_rows()
            self.writer = writer  # type: ignore[assignment]

    def _seal_props(self) -> None:
        if self.prop_offsets:
            self.prop_offset_chunks.append(np.array(self.prop_offsets, np.int32) + self.props_in_chunks)
            self.prop_offsets = []

    def _seal_prop_lists(self) -> None:
        """The properties appended to the lists become Arrow chunks (an Arrow chunk comes next)."""
        self._seal_props()
        if self.prop_keys:
            self.prop_key_chunks.append(pa.array(self.prop_keys, pa.string()))
            self.prop_value_chunks.append(pa.array(self.prop_values, pa.string()))
            self.props_in_chunks += len(self.prop_keys)
            self.prop_keys, self.prop_values = [], []

    def _seal_run(self) -> None:
        """The batched entries added since the last row-by-row one: scanned together, or one by
        one when they do not scan together, or record by record when one does not scan."""
        run, self.run = self.run, None
        if run is None:
            return
        got = run.native_columns()  # any run, however short; None: the Python decoder's turn
        if got is not None:
            self._add_columns(*got)
            return
        if run.records < VECTOR_MIN:  # numpy's per-call cost is more than the per-record loop's
            for e in run.entries:
                self._add_batch(bytes(e.body), e.n, e.prefix, e.publish_us, e.first, e.last)
            return
        got = run.columns()
        if got is not None:
            self._add_columns(*got)
            return
        for e in run.entries:
            one = ScannedRun()
            one.add(e)
            got = one.columns()
            if got is not None:
                self._add_columns(*got)
            else:
                self._add_batch(bytes(e.body), e.n, e.prefix, e.publish_us, e.first, e.last)
                self._seal_rows()

    def _add_columns(self, columns: Columns, props: Props) -> None:
        self.chunks_done.append(columns)
        self.chunk_writers.append(self.writer)
        self.rows_done += len(columns[0])
        self._seal_props()
        if isinstance(props, tuple):  # the compiled decoder's: (row offsets, keys, values) in Arrow
            self._seal_prop_lists()
            row_ends, keys, values = props
            self.prop_offset_chunks.append(row_ends[1:] + self.props_in_chunks)
            self.prop_key_chunks.append(keys)
            self.prop_value_chunks.append(values)
            self.props_in_chunks += len(keys)
            return
        pk, pv = self.prop_keys, self.prop_values
        if props is None:
            # a view, not n copies: flush copies it once, or not at all when no row has properties
            self.prop_offset_chunks.append(np.broadcast_to(np.int32(self.props_in_chunks + len(pk)), len(columns[0])))
            return
        po = self.prop_offsets
        for kvs in props:
            for k, v in kvs:
                pk.append(k)
                pv.append(v)
            po.append(len(pk))

    def _seal_rows(self) -> None:
        """The rows appended one by one so far become a chunk (keeps row order before a scanned batch)."""
        if not self.values:
            return
        n = len(self.values)
        self.chunks_done.append((pa.array(self.values, pa.binary()), pa.array(self.keys, pa.string()),
                                 pa.array(self.ids, pa.binary()), pa.array(self.publish, TS),
                                 pa.array(self.event, TS)))
        self.chunk_writers.append(self.writer)
        self.rows_done += n
        self.values, self.keys, self.ids, self.publish, self.event = [], [], [], [], []

    def _add_one(self, body: bytes, meta: Any, mid: bytes, publish_us: int) -> None:
        self._seal_run()
        self.values.append(body)
        self.keys.append(meta.partition_key or None)
        self.ids.append(mid)
        self.publish.append(publish_us)
        self.event.append(meta.event_time * 1000 if meta.event_time else None)
        for kv in meta.properties:
            self.prop_keys.append(kv.key)
            self.prop_values.append(kv.value)
        self.prop_offsets.append(len(self.prop_keys))

    def _add_batch(self, buf: bytes, n: int, prefix: bytes, publish_us: int, first: int, last: int) -> None:
        self._seal_run()
        values, keys, events = self.values, self.keys, self.event
        pk, pv, po = self.prop_keys, self.prop_values, self.prop_offsets
        suffixes = _suffixes(n)
        ids = self.ids
        total = len(buf)
        pos = 0
        taken = 0
        for i in range(min(n, last)):
            if pos + 4 > total:
                raise ValueError(f"batch record {i} of {n}: the batch ends before it")
            (msize,) = _U32(buf, pos)
            pos += 4
            mend = pos + msize
            if mend > total:
                raise ValueError(f"batch record {i} of {n}: metadata runs past the batch")
            # Inline scan of the usual fields (key 0x12, size 0x18, event time 0x28, sequence id
            # 0x40; one-byte lengths): a function call per record costs as much as the scan.
            size, key, event, props, compacted = -1, None, 0, None, False
            p = pos
            while p < mend:
                tag = buf[p]
                if tag == 0x18 and buf[p + 1] < 0x80:
                    size = buf[p + 1]
                    p += 2
                elif tag == 0x40:
                    p += 1
                    while buf[p] >= 0x80:
                        p += 1
                    p += 1
                elif tag == 0x12 and buf[p + 1] < 0x80:
                    key_end = p + 2 + buf[p + 1]
                    key = buf[p + 2:key_end].decode()
                    p = key_end
                else:
                    size, key, event, props, compacted = _single_metadata(buf, pos, mend)
                    break
            pos = mend + size
            if size < 0 or pos > total:
                raise ValueError(f"batch record {i} of {n}: bad payload size {size}")
            if i < first or compacted:
                continue
            values.append(buf[mend:pos])
            keys.append(key or None)
            events.append(event * 1000 if event else None)
            ids.append(prefix + suffixes[i])
            if props:
                for k, v in props:
                    pk.append(k)
                    pv.append(v)
            po.append(len(pk))
            taken += 1
        self.publish.extend([publish_us] * taken)

    def _add_chunk(self, ledger: int, entry: int, meta: Any, payload: Any) -> None:
        from .rows import message_id

        parts = self.chunks.setdefault(meta.uuid, ([], [])) if meta.chunk_id == 0 else self.chunks.get(meta.uuid)
        if parts is None or len(parts[0]) != meta.chunk_id:
            self.chunks.pop(meta.uuid, None)  # its first chunks are before this range
            return
        parts[0].append(bytes(payload))
        parts[1].append((ledger, entry))
        if meta.chunk_id < meta.num_chunks_from_msg - 1:
            return
        del self.chunks[meta.uuid]
        publish = meta.publish_time
        if self.starting_time is not None and publish < self.starting_time:
            return
        whole = b"".join(parts[0])
        if meta.compression:
            from clients.protocol import compression

            whole = compression.decompress(meta.compression, whole, meta.uncompressed_size)
        mid = message_id(self.partition, ledger, entry, -1, 0, tuple(parts[1])).serialize()
        self._add_one(whole, meta, mid, publish * 1000)

    def batches(self, entries: Iterator[Any], batch_rows: int) -> Iterator[pa.RecordBatch]:
        """Record batches of about ``batch_rows`` rows from ``(ledger, entry, metadata, payload, ...)``
        items, until the range ends; ``entries`` is closed (its fetcher stopped) either way."""
        try:
            for item in entries:
                self.add_entry(item[0], item[1], item[2], item[3])
                if len(self) >= batch_rows or self.bytes >= BATCH_BYTES:
                    yield self.flush()
                if self.done:
                    break
            if len(self):
                yield self.flush()
        finally:
            close = getattr(entries, "close", None)
            if close is not None:
                close()

    def flush(self) -> pa.RecordBatch:
        self._seal_run()  # while a run is open no row is appended one by one: the run's rows come last
        self._seal_rows()
        chunks = self.chunks_done
        columns = [c[0] if len(chunks) == 1 else pa.concat_arrays(c) for c in zip(*chunks)] if chunks \
            else [pa.array([], pa.binary()), pa.array([], pa.string()), pa.array([], pa.binary()),
                  pa.array([], TS), pa.array([], TS)]
        value_col, key_col, id_col, publish_col, event_col = columns
        n = len(value_col)
        self._seal_props()
        if self.prop_key_chunks or self.prop_keys:
            offsets = np.concatenate([np.zeros(1, np.int32), *self.prop_offset_chunks])
        else:  # no row has properties: every map is empty
            offsets = _no_properties(n)
        if self.prop_key_chunks:
            self._seal_prop_lists()
            prop_keys, prop_values = pa.concat_arrays(self.prop_key_chunks), pa.concat_arrays(self.prop_value_chunks)
        else:
            prop_keys, prop_values = pa.array(self.prop_keys, pa.string()), pa.array(self.prop_values, pa.string())
        props = pa.MapArray.from_arrays(pa.array(offsets), prop_keys, prop_values)
        values: list[Any] = [value_col] if self.value_schema is None else self._decode_values(value_col, id_col)
        arrays: list[Any] = [
            *values,
            key_col,
            topic_column(self.topic, n),
            id_col,
            publish_col,
            event_col,
            props,
        ]
        self._reset()
        return pa.RecordBatch.from_arrays(arrays, schema=self.arrow_schema)

    def _decode_values(self, value_col: pa.Array, id_col: pa.Array) -> list[pa.Array]:
        """The value schema's columns of the flushed rows, each run of chunks with its writer schema."""
        assert self.value_schema is not None
        runs: list[tuple[tuple[str, int] | None, int]] = []  # (writer, rows), consecutive writers merged
        for chunk, writer in zip(self.chunks_done, self.chunk_writers):
            if runs and runs[-1][0] == writer:
                runs[-1] = (writer, runs[-1][1] + len(chunk[0]))
            else:
                runs.append((writer, len(chunk[0])))
        if len(runs) <= 1:
            return self.value_schema.decode(value_col.to_pylist(), id_col.to_pylist(), runs[0][0] if runs else None)
        parts, at = [], 0
        for writer, rows in runs:
            parts.append(self.value_schema.decode(value_col.slice(at, rows).to_pylist(),
                                                  id_col.slice(at, rows).to_pylist(), writer))
            at += rows
        return [pa.concat_arrays(list(col)) for col in zip(*parts)]
