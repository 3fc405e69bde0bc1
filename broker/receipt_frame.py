"""SEND_RECEIPT frames, encoded by hand: the one command the broker writes per stored entry.

Building a ``BaseCommand`` message and serializing it costs ~15 µs of CPU per receipt (about a
tenth of the broker's CPU per unbatched message); this writes the same protobuf bytes
directly (``tests/broker/test_receipt_frame.py`` checks them against the generated code):
``[total u32][cmdSize u32]BaseCommand{type=SEND_RECEIPT, send_receipt={producer_id,
sequence_id, message_id={ledgerId, entryId}, highest_sequence_id?}}``.
"""

from __future__ import annotations

import struct

_TWO_U32 = struct.Struct(">II")
_U64 = (1 << 64) - 1
_ONE_BYTE = tuple(bytes((i,)) for i in range(128))  # the varints of 0..127


def _varint(n: int) -> bytes:
    # Unrolled up to three bytes (ids and sequence ids below 2**21): a loop costs several
    # times more, and this runs five times per receipt.
    if 0 <= n < 0x80:
        return _ONE_BYTE[n]
    n &= _U64  # negative ids are sent as their uint64 (two's complement) value
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def send_receipt_frame(producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int) -> bytes:
    """The receipt frame; ``highest_sequence_id`` 0 means absent (as the broker sends it)."""
    mid = b"\x08" + _varint(ledger_id) + b"\x10" + _varint(entry_id)
    # (message lengths here are at most 22 and 57 bytes: one-byte varints)
    sub = b"\x08" + _varint(producer_id) + b"\x10" + _varint(sequence_id) + b"\x1a" + _ONE_BYTE[len(mid)] + mid
    if highest_sequence_id:
        sub += b"\x20" + _varint(highest_sequence_id)
    body = b"\x08\x07\x3a" + _ONE_BYTE[len(sub)] + sub  # type = SEND_RECEIPT (7), field 7
    return _TWO_U32.pack(4 + len(body), len(body)) + body
