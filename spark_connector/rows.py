"""The source schema (Spark DDL and Arrow) and message-id bytes as a consumer serializes them."""

from __future__ import annotations

from typing import Any

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


def message_id(partition: int, ledger_id: int, entry_id: int, batch_index: int, batch_size: int,
               chunk_ids: tuple[tuple[int, int], ...] = ()) -> Any:
    """A ``clients.MessageId`` built as a consumer builds it (same ``serialize()`` bytes in both read modes)."""
    from clients.message_id import MessageId

    mid = MessageId(partition, ledger_id, entry_id, batch_index)
    mid.batch_size = batch_size
    mid.chunk_ids = chunk_ids
    return mid
