"""The source schema (Spark DDL and Arrow) and message-id bytes as a consumer serializes them."""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

from quire.varint import encode_varint as _varint  # also used by entries and scanned_rows

META_DDL = ("__key STRING, __topic STRING, __messageId BINARY, __publishTime TIMESTAMP, "
            "__eventTime TIMESTAMP, __messageProperties MAP<STRING, STRING>")
SCHEMA_DDL = "value BINARY, " + META_DDL

TS = pa.timestamp("us", tz="UTC")  # __publishTime and __eventTime

ARROW_SCHEMA = pa.schema([
    ("value", pa.binary()),
    ("__key", pa.string()),
    ("__topic", pa.string()),
    ("__messageId", pa.binary()),
    ("__publishTime", TS),
    ("__eventTime", TS),
    ("__messageProperties", pa.map_(pa.string(), pa.string())),
])


_TOPIC_COLUMNS: dict[str, pa.Array] = {}  # per worker: topic -> its __topic column, the longest built yet
_TOPIC_CACHE_MAX = 8  # topics kept (a task reads one topic-partition at a time)


def topic_column(topic: str, n: int) -> pa.Array:
    """``__topic`` for ``n`` rows of ``topic``: a slice of one column built per topic and worker
    (Arrow arrays are immutable; ``pa.repeat`` took ~18x longer than laying out the buffers, and
    every record batch paid it)."""
    raw = topic.encode()
    if n * len(raw) >= 1 << 31:  # beyond 32-bit offsets: not worth a cache
        return pa.repeat(pa.scalar(topic, pa.string()), n)
    col = _TOPIC_COLUMNS.get(topic)
    if col is None or len(col) < n:
        col = pa.Array.from_buffers(pa.string(), n, [
            None, pa.py_buffer(np.arange(n + 1, dtype=np.int32) * len(raw)), pa.py_buffer(raw * n)])
        if len(_TOPIC_COLUMNS) >= _TOPIC_CACHE_MAX and topic not in _TOPIC_COLUMNS:
            _TOPIC_COLUMNS.clear()
        _TOPIC_COLUMNS[topic] = col
    return col if len(col) == n else col.slice(0, n)


def message_id(partition: int, ledger_id: int, entry_id: int, batch_index: int, batch_size: int,
               chunk_ids: tuple[tuple[int, int], ...] = ()) -> Any:
    """A ``clients.MessageId`` built as a consumer builds it (same ``serialize()`` bytes in both read modes)."""
    from clients.message_id import MessageId

    mid = MessageId(partition, ledger_id, entry_id, batch_index)
    mid.batch_size = batch_size
    mid.chunk_ids = chunk_ids
    return mid
