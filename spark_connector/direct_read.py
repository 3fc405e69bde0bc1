"""Executor side of ``readMode=direct``: read a topic-partition's ledgers straight from the bookies.

As Pulsar's SQL connector: the driver planned ``[start, end)`` and the ledger list from the
broker's admin API; here the ledger client (``bookie.client``, given ``metadata.url``) opens each
ledger without recovery (never fencing the broker's open ledger) and reads entries in chunks;
stored entries (``[metadata][payload]`` as the producer sent them) are decoded with the same
codec the clients use, so the rows equal ``readMode=broker``'s.
"""

from __future__ import annotations

import threading
from typing import Any, Iterator

import pyarrow as pa

from metadata.store import MetadataStore

from .positions import Pos
from .entries import EntryDecoder
from .pump import FetchChain, Put, pumped
from .task_trace import mark
from .topic_names import partition_index
from .value_schema import ValueSchema
from .writer_schemas import fetch_from_store, missing_versions

READ_BYTES = 2 << 20  # about this much per bookie read request: the first rows reach Spark sooner
READ_CHUNK_MIN, READ_CHUNK_MAX = 16, 1024  # entries per read request


def _ledger_ranges(ledgers: tuple, start: Pos, end: Pos) -> list[tuple[int, int, int, int]]:
    """``(ledger_id, first_entry, last_entry, entries per read)`` covering ``[start, end)``
    (entry granularity); a read asks for about READ_BYTES of the ledger's average entry."""
    out = []
    for lid, entries, size in ledgers:
        if entries <= 0 or lid < start.ledger_id or lid > end.ledger_id:
            continue
        first = max(start.entry_id, 0) if lid == start.ledger_id else 0
        last = entries - 1
        if lid == end.ledger_id:
            last = min(last, end.entry_id if end.batch_index >= 0 else end.entry_id - 1)
        if last >= first:
            chunk = READ_BYTES // max(size // entries, 1) if size > 0 else READ_CHUNK_MAX
            out.append((lid, first, last, min(max(chunk, READ_CHUNK_MIN), READ_CHUNK_MAX)))
    return out


def read_range_direct(metadata_url: str, topic: str, start: Pos, end: Pos, ledgers: tuple, *, batch_rows: int,
                      starting_time: int | None = None, ending_time: int | None = None,
                      password: bytes = b"", value_schema: ValueSchema | None = None, chain: FetchChain | None = None) -> Iterator[pa.RecordBatch]:
    from bookie.client import BookKeeper
    from clients.protocol.frames import parse_entry
    from bookie.client.config import ClientConfig
    from metadata import open_store

    partition = partition_index(topic)

    async def fetch(put: Put, stop: threading.Event) -> None:
        store: MetadataStore
        if metadata_url.startswith("rocksdb://"):
            # a standalone's embedded store: read a snapshot, the standalone process owns the database
            from metadata.rocksdb_store import open_rocksdb_store
            store = await open_rocksdb_store(metadata_url[len("rocksdb://"):], read_only=True)
        else:
            store = await open_store(metadata_url)
        try:
            async with BookKeeper(store, ClientConfig()) as bk:
                for lid, first, last, chunk in _ledger_ranges(ledgers, start, end):
                    lh = await bk.open_ledger(lid, password, recovery=False)
                    mark("ledger_open")
                    try:
                        for lo in range(first, last + 1, chunk):
                            if stop.is_set():
                                return
                            # views of the reply's one receive buffer: the decoder copies a
                            # run's payloads once, when it joins them
                            got = await lh.read_payload_views(lo, min(last, lo + chunk - 1), unconfirmed=True)
                            parsed = [parse_entry(data) for data in got]
                            items = [(lid, eid, p.metadata, p.payload) for eid, p in enumerate(parsed, lo)]
                            if value_schema is not None and (versions := missing_versions(value_schema, topic, items)):
                                await fetch_from_store(store, value_schema, topic, versions)
                            await put(items)
                    finally:
                        await lh.close()
                mark("fetched")
        finally:
            await store.close()

    decoder = EntryDecoder(topic, partition, start, end, starting_time=starting_time, ending_time=ending_time,
                           value_schema=value_schema)
    return decoder.batches(pumped(fetch, "pulsar-direct-read", chain=chain), batch_rows)
