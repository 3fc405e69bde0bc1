"""The source schema (Spark DDL and Arrow) and message-id bytes as a consumer serializes them."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

META_DDL = ("__key STRING, __topic STRING, __messageId BINARY, __publishTime TIMESTAMP, "
            "__eventTime TIMESTAMP, __messageProperties MAP<STRING, STRING>")
SCHEMA_DDL = "value BINARY, " + META_DDL

ARROW_SCHEMA = pa.schema([
    ("value", pa.binary()),
    ("__key", pa.string()),
    ("__topic", pa.string()),
    ("__messageId", pa.binary()),
    ("__publishTime", pa.timestamp("us", tz="UTC")),
    ("__eventTime", pa.timestamp("us", tz="UTC")),
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


_ONE_BYTE = [bytes((i,)) for i in range(0x80)]


def _varint(n: int) -> bytes:
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    if 0 <= n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    n &= 0xFFFFFFFFFFFFFFFF  # negative int32/int64 values take ten bytes, as protobuf writes them
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)
