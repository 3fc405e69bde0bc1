"""Executor side of ``readMode=direct``: read a topic-partition's ledgers straight from the bookies.

As Pulsar's SQL connector: the driver planned ``[start, end)`` and the ledger list from the
broker's admin API; here the ledger client (``bookie.client``, given ``metadata.url``) opens each
ledger without recovery (never fencing the broker's open ledger) and reads entries in chunks;
stored entries (``[metadata][payload]`` as the producer sent them) are decoded with the same
codec the clients use, so the rows equal ``readMode=broker``'s.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Iterator

import pyarrow as pa

from metadata.store import MetadataStore

from .admin import PARTITION_SUFFIX
from .positions import Pos
from .rows import BatchBuilder, MessageIdEncoder, message_id

READ_CHUNK = 256  # entries per bookie read request


def _ledger_ranges(ledgers: tuple, start: Pos, end: Pos) -> list[tuple[int, int, int]]:
    """``(ledger_id, first_entry, last_entry)`` covering ``[start, end)`` (entry granularity)."""
    out = []
    for lid, entries, _ in ledgers:
        if entries <= 0 or lid < start.ledger_id or lid > end.ledger_id:
            continue
        first = max(start.entry_id, 0) if lid == start.ledger_id else 0
        last = entries - 1
        if lid == end.ledger_id:
            last = min(last, end.entry_id if end.batch_index >= 0 else end.entry_id - 1)
        if last >= first:
            out.append((lid, first, last))
    return out


def read_range_direct(metadata_url: str, topic: str, start: Pos, end: Pos, ledgers: tuple, *, batch_rows: int,
                      starting_time: int | None = None, ending_time: int | None = None,
                      password: bytes = b"") -> Iterator[pa.RecordBatch]:
    import trio

    from bookie.client import BookKeeper
    from bookie.client.config import ClientConfig
    from metadata import open_store

    partition = int(topic.rsplit(PARTITION_SUFFIX, 1)[1]) if PARTITION_SUFFIX in topic else -1
    # The ledger client runs on its own trio loop thread; chunks come over a bounded queue.
    chunks_q: queue.Queue[Any] = queue.Queue(maxsize=8)
    stop = threading.Event()

    async def fetch() -> None:
        store: MetadataStore
        if metadata_url.startswith("rocksdb://"):
            # a standalone's embedded store: read a snapshot, the standalone process owns the database
            from metadata.rocksdb_store import open_rocksdb_store
            store = await open_rocksdb_store(metadata_url[len("rocksdb://"):], read_only=True)
        else:
            store = await open_store(metadata_url)
        try:
            async with BookKeeper(store, ClientConfig()) as bk:
                for lid, first, last in _ledger_ranges(ledgers, start, end):
                    lh = await bk.open_ledger(lid, password, recovery=False)
                    try:
                        for lo in range(first, last + 1, READ_CHUNK):
                            if stop.is_set():
                                return
                            got = await lh.read_unconfirmed(lo, min(last, lo + READ_CHUNK - 1))
                            await trio.to_thread.run_sync(chunks_q.put, [(lid, e.entry_id, e.data) for e in got])
                    finally:
                        await lh.close()
        finally:
            await store.close()

    def run() -> None:
        try:
            trio.run(fetch)
            chunks_q.put(None)
        except BaseException as exc:  # handed to the reading thread
            chunks_q.put(exc)

    thread = threading.Thread(target=run, name="pulsar-direct-read", daemon=True)
    thread.start()

    def entries() -> Iterator[tuple[int, int, bytes]]:
        while True:
            item = chunks_q.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield from item

    builder = BatchBuilder(topic)
    try:
        yield from _rows(builder, entries(), start, end, partition, batch_rows, starting_time, ending_time)
    finally:
        stop.set()
        while thread.is_alive():  # unblock a producer waiting on the full queue
            try:
                chunks_q.get(timeout=0.1)
            except queue.Empty:
                pass


def _rows(builder: BatchBuilder, entries: Iterator[tuple[int, int, bytes]], start: Pos, end: Pos, partition: int,
          batch_rows: int, starting_time: int | None, ending_time: int | None) -> Iterator[pa.RecordBatch]:
    chunks: dict[str, tuple[list[bytes], list[tuple[int, int]]]] = {}
    encoder = MessageIdEncoder(partition)
    for lid, eid, data in entries:
        for value, key, batch, batch_size, chunk_ids, publish, event, props in decode_entry(data, lid, eid, chunks):
            k = (lid, eid, batch if batch > 0 else 0)
            if k < start or k >= end:
                continue
            if ending_time is not None and publish >= ending_time:
                return
            if starting_time is not None and publish < starting_time:
                continue
            mid_bytes = encoder.encode(lid, eid, batch, batch_size) if not chunk_ids else \
                message_id(partition, lid, eid, -1, 0, chunk_ids).serialize()
            builder.add(value, key, mid_bytes, publish, event, props)
            if len(builder) >= batch_rows:
                yield builder.flush()
    if len(builder):
        yield builder.flush()


def decode_entry(data: bytes, ledger: int, entry: int,
                 chunks: dict[str, tuple[list[bytes], list[tuple[int, int]]]]) -> Iterator[tuple[Any, ...]]:
    """One stored entry -> ``(value, key, batch_index, batch_size, chunk_ids, publish_ms, event_ms,
    properties)`` per message; chunks are kept in ``chunks`` until their last one arrives."""
    from clients.protocol import batch as batch_codec
    from clients.protocol import compression
    from clients.protocol.frames import parse_entry

    parsed = parse_entry(data)
    meta = parsed.metadata
    payload = parsed.payload
    publish = meta.publish_time
    if meta.HasField("num_chunks_from_msg") and meta.num_chunks_from_msg > 1:
        parts = chunks.setdefault(meta.uuid, ([], [])) if meta.chunk_id == 0 else chunks.get(meta.uuid)
        if parts is None or len(parts[0]) != meta.chunk_id:
            chunks.pop(meta.uuid, None)  # its first chunks are before this range
            return
        parts[0].append(bytes(payload))
        parts[1].append((ledger, entry))
        if meta.chunk_id < meta.num_chunks_from_msg - 1:
            return
        del chunks[meta.uuid]
        whole = b"".join(parts[0])
        if meta.compression:
            whole = compression.decompress(meta.compression, whole, meta.uncompressed_size)
        yield (whole, meta.partition_key, -1, 0, tuple(parts[1]), publish, meta.event_time,
               {kv.key: kv.value for kv in meta.properties})
        return
    body = compression.decompress(meta.compression, payload, meta.uncompressed_size) if meta.compression \
        else bytes(payload)
    if not meta.HasField("num_messages_in_batch"):
        yield (body, meta.partition_key, -1, 0, None, publish, meta.event_time,
               {kv.key: kv.value for kv in meta.properties})
        return
    n = meta.num_messages_in_batch
    for i, (smm, _seq, value) in enumerate(batch_codec.split_batch(body, n)):
        if smm is None:
            yield value, "", i, n, None, publish, 0, {}
        elif not smm.compacted_out:
            yield (value, smm.partition_key, i, n, None, publish, smm.event_time,
                   {kv.key: kv.value for kv in smm.properties})
