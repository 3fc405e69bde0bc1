"""MESSAGE frames for dispatch, encoded by hand: the stored entry goes out untouched and
only the CommandMessage header is built per entry.

Building a ``BaseCommand`` protobuf object per dispatched entry (two message objects, a
``CopyFrom`` and a serialization) costs more than everything else the broker does for a
cached entry; the header has at most five small integer fields, so it is written here as
protobuf wire bytes directly: ``BaseCommand{type=MESSAGE, message=CommandMessage{
consumer_id, message_id{ledgerId, entryId, partition}, redelivery_count?, ack_set*,
consumer_epoch?}}``, fields in number order, exactly what protobuf serializes
(``tests/broker/test_message_frame.py`` compares the two). Pure codec, no I/O.
"""

from __future__ import annotations

import struct
from typing import Sequence

from quire.varint import encode_varint as _varint

_TWO_U32 = struct.Struct(">II")


def message_frames(consumer_id: int, partition: int, consumer_epoch: int | None,
                   deliveries: Sequence[tuple[int, int, int, Sequence[int] | None, bytes]]) -> tuple[list[bytes], int]:
    """MESSAGE frames for ``(ledger_id, entry_id, redelivery_count, ack_set, entry)`` each,
    and their total size: what stays the same from entry to entry (consumer, partition,
    epoch, ledger) is encoded once."""
    head = b"\x08" + _varint(consumer_id) + b"\x12"
    mid_tail = b"\x18" + _varint(partition)
    epoch = b"" if consumer_epoch is None else b"\x28" + _varint(consumer_epoch)
    pack = _TWO_U32.pack
    join = b"".join
    out: list[bytes] = []
    nbytes = 0
    last_ledger: int | None = None
    ledger_part = b""
    for ledger_id, entry_id, redelivery_count, ack_set, entry in deliveries:
        if ledger_id != last_ledger:
            last_ledger = ledger_id
            ledger_part = b"\x08" + _varint(ledger_id) + b"\x10"
        mid = join((ledger_part, _varint(entry_id) if entry_id >= 0x80 or entry_id < 0 else bytes((entry_id,)), mid_tail))
        if redelivery_count or ack_set:
            extra = b"\x18" + _varint(redelivery_count) if redelivery_count else b""
            if ack_set:
                extra += join([b"\x20" + _varint(w) for w in ack_set])
            msg = join((head, bytes((len(mid),)), mid, extra, epoch))
        else:
            msg = join((head, bytes((len(mid),)), mid, epoch))  # a MessageIdData is < 128 bytes
        n = len(msg)
        # BaseCommand.type = MESSAGE (field 1, value 9), BaseCommand.message (field 9, bytes)
        cmd = join((b"\x08\x09\x4a", bytes((n,)) if n < 0x80 else _varint(n), msg))
        frame = join((pack(4 + len(cmd) + len(entry), len(cmd)), cmd, entry))
        out.append(frame)
        nbytes += len(frame)
    return out, nbytes
