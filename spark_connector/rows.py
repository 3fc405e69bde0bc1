"""The source schema and the column-wise Arrow builder for read rows."""

from __future__ import annotations

from typing import Any

import pyarrow as pa

SCHEMA_DDL = (
    "value BINARY, __key STRING, __topic STRING, __messageId BINARY, __publishTime TIMESTAMP, "
    "__eventTime TIMESTAMP, __messageProperties MAP<STRING, STRING>"
)

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


def _varint(n: int) -> bytes:
    n &= 0xFFFFFFFFFFFFFFFF  # negative int32/int64 values take ten bytes, as protobuf writes them
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


class MessageIdEncoder:
    """``MessageId.serialize()`` bytes (a MessageIdData) without protobuf per message: the
    ledger/entry/partition prefix is built once per entry, then only the batch fields vary."""

    __slots__ = ("partition", "_entry", "_prefix")

    def __init__(self, partition: int) -> None:
        self.partition = partition
        self._entry: tuple[int, int] | None = None
        self._prefix = b""

    def encode(self, ledger_id: int, entry_id: int, batch_index: int, batch_size: int) -> bytes:
        if self._entry != (ledger_id, entry_id):
            self._entry = (ledger_id, entry_id)
            prefix = b"\x08" + _varint(ledger_id) + b"\x10" + _varint(entry_id)
            if self.partition != -1:
                prefix += b"\x18" + _varint(self.partition)
            self._prefix = prefix
        if batch_index == -1:
            return self._prefix + (b"0" + _varint(batch_size) if batch_size else b"")
        return self._prefix + b" " + _varint(batch_index) + (b"0" + _varint(batch_size) if batch_size else b"")


class BatchBuilder:
    """Collects one list per column; ``flush()`` turns them into one ``pyarrow.RecordBatch``."""

    __slots__ = ("values", "keys", "ids", "publish", "event", "props", "topic")

    def __init__(self, topic: str) -> None:
        self.topic = topic
        self.values: list[bytes] = []
        self.keys: list[str | None] = []
        self.ids: list[bytes] = []
        self.publish: list[int] = []
        self.event: list[int | None] = []
        self.props: list[list[tuple[str, str]]] = []

    def add(self, value: bytes, key: str | None, mid: bytes, publish_ms: int, event_ms: int,
            props: dict[str, str]) -> None:
        self.values.append(value)
        self.keys.append(key or None)
        self.ids.append(mid)
        self.publish.append(publish_ms * 1000)
        self.event.append(event_ms * 1000 if event_ms else None)
        self.props.append(list(props.items()))

    def __len__(self) -> int:
        return len(self.values)

    def flush(self) -> pa.RecordBatch:
        n = len(self.values)
        arrays: list[Any] = [
            pa.array(self.values, pa.binary()),
            pa.array(self.keys, pa.string()),
            pa.array([self.topic] * n, pa.string()) if n else pa.array([], pa.string()),
            pa.array(self.ids, pa.binary()),
            pa.array(self.publish, pa.timestamp("us", tz="UTC")),
            pa.array(self.event, pa.timestamp("us", tz="UTC")),
            pa.array(self.props, pa.map_(pa.string(), pa.string())),
        ]
        self.values, self.keys, self.ids, self.publish, self.event, self.props = [], [], [], [], [], []
        return pa.RecordBatch.from_arrays(arrays, schema=ARROW_SCHEMA)
