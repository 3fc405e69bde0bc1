"""A read that holds exactly one plain SEND_RECEIPT frame, decoded by hand (the sync-send path).

A producer that sends one message at a time gets every receipt as one read of its own. The
general path (``FrameDecoder.feed``) keeps a buffer, builds a ``Frame`` and a ``BaseCommand``
and reads the receipt's fields through protobuf wrappers; this reads the four numbers straight
from the bytes. It accepts only the shape brokers write (quire's ``broker/receipt_frame.py``,
Pulsar's ``Commands.newSendReceipt``): ``[total][cmdSize]`` covering the whole read with no
payload, a BaseCommand that is exactly ``type = SEND_RECEIPT`` followed by ``send_receipt``, a
CommandSendReceipt of ``producer_id``, ``sequence_id``, ``message_id`` (and optionally
``highest_sequence_id``), a MessageIdData of exactly ``ledgerId`` and ``entryId``, every length
one byte and every varint within 64 bits. Anything else (a partition or batch index in the id,
a second or partial frame, unknown fields) returns None and takes the general path, which gives
every error its usual answer.
"""

from __future__ import annotations

import struct

from quire.varint import decode_varint

_TWO_U32 = struct.Struct(">II")
# BaseCommand{type (field 1, varint) = SEND_RECEIPT (7), send_receipt (field 7, length-delimited)}
_RECEIPT_PREFIX = b"\x08\x07\x3a"
_U64 = 1 << 64
_I64_MAX = (1 << 63) - 1
# The longest such frame: 12 bytes of header, then at most 4 tags, 5 ten-byte varints and the
# id's length byte (57): anything longer is not this shape.
MAX_LONE_RECEIPT = 12 + 57


def decode_lone_receipt(data: bytes) -> tuple[int, int, int, int] | None:
    """``data`` as one SEND_RECEIPT frame (with its leading total size): ``(producer_id,
    sequence_id, ledger_id, entry_id)``, the ids signed as the general path's ``signed64``
    gives them; None when ``data`` is not exactly that shape."""
    n = len(data)
    if n < 20 or n > MAX_LONE_RECEIPT or data[8:11] != _RECEIPT_PREFIX or data[11] + 12 != n:
        return None
    total, cmd_size = _TWO_U32.unpack_from(data, 0)
    if total + 4 != n or cmd_size + 8 != n:
        return None
    pid = seq = ledger = entry = -1
    pos = 12
    while pos < n:
        tag = data[pos]
        if tag == 0x1A:  # message_id: one-byte length, then exactly ledgerId and entryId
            size = data[pos + 1] if pos + 1 < n else 0x80
            end = pos + 2 + size
            if size >= 0x80 or size < 4 or end > n or ledger >= 0 or data[pos + 2] != 0x08:
                return None
            ledger = data[pos + 3]
            if ledger < 0x80:  # (ledger ids are small: one byte, no call)
                pos += 4
            else:
                ledger, pos = decode_varint(data, pos + 3, end)
            if pos < 0 or pos >= end or data[pos] != 0x10:
                return None
            entry, pos = decode_varint(data, pos + 1, end)
            if pos != end:
                return None
            continue
        value = data[pos + 1] if pos + 1 < n else 0x80
        if value < 0x80:  # a one-byte varint: no call
            pos += 2
        else:
            value, pos = decode_varint(data, pos + 1, n)
            if pos < 0:
                return None
        if tag == 0x08:
            pid = value
        elif tag == 0x10:
            seq = value
        elif tag != 0x20:  # highest_sequence_id: the producer keeps its own
            return None
    if pid < 0 or seq < 0 or ledger < 0:
        return None
    if ledger > _I64_MAX:
        ledger -= _U64
    if entry > _I64_MAX:
        entry -= _U64
    return pid, seq, ledger, entry
