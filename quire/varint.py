"""The protobuf varint encoder shared by every hand-encoded frame (bytes out, no protobuf import).

Broker receipts and MESSAGE frames, the client's SEND and batch metadata, and the Spark
connector's message ids all write protobuf fields by hand on their hot paths; they share this
one encoder. Values are uint64: a negative int64 field is written as its two's complement
(ten bytes), as protobuf writes it.
"""

from __future__ import annotations

_U64 = (1 << 64) - 1
ONE_BYTE = tuple(bytes((i,)) for i in range(0x80))  # the varints of 0..127


def encode_varint(n: int) -> bytes:
    # Unrolled up to four bytes (ids, sizes and sequence ids below 2**28): a loop costs several
    # times more, and a receipt alone needs five of these.
    if 0 <= n < 0x80:
        return ONE_BYTE[n]
    n &= _U64
    if n < 0x4000:
        return bytes(((n & 0x7F) | 0x80, n >> 7))
    if n < 0x200000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, n >> 14))
    if n < 0x10000000:
        return bytes(((n & 0x7F) | 0x80, ((n >> 7) & 0x7F) | 0x80, ((n >> 14) & 0x7F) | 0x80, n >> 21))
    out = bytearray()
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def decode_varint(buf: bytes | bytearray | memoryview, pos: int, end: int) -> tuple[int, int]:
    """``(value, next position)`` of the varint at ``buf[pos:end]``, or ``(-1, -1)`` when it runs
    past ``end``, is longer than ten bytes or exceeds 64 bits (the hand decoders then leave the
    frame to the general, protobuf path)."""
    if pos + 1 < end:  # one- and two-byte values (most sizes and sequence ids): no loop
        first, second = buf[pos], buf[pos + 1]
        if first < 0x80:
            return first, pos + 1
        if second < 0x80:
            return (first & 0x7F) | (second << 7), pos + 2
    value = shift = 0
    while pos < end and shift < 64:
        byte = buf[pos]
        pos += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return (value, pos) if value <= _U64 else (-1, -1)
        shift += 7
    return -1, -1
