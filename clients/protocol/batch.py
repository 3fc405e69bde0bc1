"""Batch payloads and batch-index ack sets (sans-IO).

A batch payload is N times ``[u32 size][SingleMessageMetadata][payload_size bytes]`` (before
compression; the entry's MessageMetadata carries ``num_messages_in_batch=N``). Ack sets use the
Java ``BitSet.toLongArray`` layout: bit i lives in word i // 64 at bit i % 64, words are signed
int64, and a *set* bit means "not yet acknowledged, deliver it".
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Sequence

from google.protobuf.message import DecodeError

from quire.varint import decode_varint

from .commands import varint
from .errors import BatchFormatError
from .pulsar_api_pb2 import SingleMessageMetadata

_U32 = struct.Struct(">I")
Buffer = bytes | bytearray | memoryview


def serialize_batch(messages: Iterable[tuple[SingleMessageMetadata | bytes, Buffer]]) -> bytes:
    """Concatenate (metadata, payload) pairs; each metadata's payload_size is set here.

    A metadata given as ``bytes`` is already serialized (``plain_message_metadata``) and is
    used as is: it must carry the payload's size."""
    parts: list[bytes | Buffer] = []
    append, pack = parts.append, _U32.pack
    for meta, payload in messages:
        if isinstance(meta, bytes):
            body = meta
        else:
            meta.payload_size = len(payload)
            body = meta.SerializeToString()
        append(pack(len(body)))
        append(body)
        append(payload)
    return b"".join(parts)


_HEAD_SIZES = [_U32.pack(n) for n in range(32)]  # a plain record's metadata is at most 17 bytes


def serialize_plain_batch(messages: Iterable[tuple[Buffer, int]]) -> bytes:
    """``serialize_batch`` of (payload, sequence id) pairs whose metadata is
    ``plain_message_metadata``: the same bytes, with the per-size part of each record's
    header built once per payload size (the producer's per-message hot path)."""
    parts: list[bytes | Buffer] = []
    append = parts.append
    heads: dict[int, bytes] = {}  # payload size -> b"\x18" varint(size) b"\x40"
    sizes = _HEAD_SIZES
    for payload, seq in messages:
        n = len(payload)
        head = heads.get(n)
        if head is None:
            head = heads[n] = b"\x18" + varint(n) + b"\x40"
        tail = varint(seq)
        append(sizes[len(head) + len(tail)])
        append(head)
        append(tail)
        append(payload)
    return b"".join(parts)


def plain_message_metadata(payload_size: int, sequence_id: int) -> bytes:
    """The serialized SingleMessageMetadata of a message with no properties, keys or event
    time: ``payload_size`` (field 3) and ``sequence_id`` (field 8), byte for byte what protobuf
    writes, without building a message object (the producer's per-message hot path)."""
    return b"\x18" + varint(payload_size) + b"\x40" + varint(sequence_id)


def batch_entry_size(meta: SingleMessageMetadata, payload_len: int) -> int:
    """Bytes one message adds to a batch payload (to cap batches by size before serializing)."""
    return 4 + meta.ByteSize() + payload_len + 2  # +2: payload_size varint may grow when set


def parse_batch(payload: Buffer, count: int) -> list[tuple[SingleMessageMetadata, bytes]]:
    """Split a (decompressed) batch payload into ``count`` (metadata, payload) pairs."""
    out: list[tuple[SingleMessageMetadata, bytes]] = []
    for meta, seq, body in split_batch(payload, count):
        if meta is None:
            meta = SingleMessageMetadata(payload_size=len(body))
            if seq >= 0:
                meta.sequence_id = seq
        out.append((meta, bytes(body)))  # copies already: bytes() returns them as they are
    return out


def split_batch(
    payload: Buffer, count: int, views_from: int = 1 << 62, start: int = 0, end: int | None = None
) -> list[tuple[SingleMessageMetadata | None, int, bytes | memoryview]]:
    """Split a batch payload into ``count`` (metadata, sequence id, payload) triples.

    Records whose metadata holds nothing but ``payload_size`` and ``sequence_id`` (what
    producers write for messages without properties, keys or event time) are read without a
    protobuf object: ``(None, sequence_id or -1, payload)``. Others come back as
    ``(SingleMessageMetadata, -1, payload)``. This is the consumer's per-message hot path, so
    it works on ``bytes`` (indexing is cheaper than on a memoryview) and slices payloads out:
    copies, except payloads of at least ``views_from`` bytes, which come back as views of the
    batch (no copy of large payloads nobody may read).

    ``start``/``end``: the batch is ``payload[start:end]`` (a frame's payload inside the bytes
    it was received in, split without copying it out first)."""
    if count < 0:
        raise BatchFormatError(f"negative batch size {count}")
    buf = payload if type(payload) is bytes else bytes(payload)
    end_all = len(buf) if end is None else end
    if not 0 <= start <= end_all <= len(buf):
        raise BatchFormatError(f"batch span {start}:{end_all} outside a buffer of {len(buf)} bytes")
    out: list[tuple[SingleMessageMetadata | None, int, bytes | memoryview]] = []
    append, unpack = out.append, _U32.unpack_from
    view = memoryview(buf)
    pos = start
    # The header of the last plain record read inline, ``[u32 metadata size] 0x18 <size> 0x40``
    # (``hl`` bytes), its sequence id's width and its payload size: producers repeat it for
    # every message of one size, so a record that starts with it only needs its sequence id read.
    head, hl, width, hsize = b"", 0, 0, 0
    for i in range(count):
        if hl and buf.startswith(head, pos, end_all) and pos + hl + width <= end_all:
            p = pos + hl
            b = buf[p]
            if width == 1:
                seq = b if b < 0x80 else -1
            elif width == 2:
                seq = (b & 0x7F) | (buf[p + 1] << 7) if b >= 0x80 and buf[p + 1] < 0x80 else -1
            elif b >= 0x80 and buf[p + 1] >= 0x80 and buf[p + 2] < 0x80:
                seq = (b & 0x7F) | ((buf[p + 1] & 0x7F) << 7) | (buf[p + 2] << 14)
            else:
                seq = -1
            if seq >= 0:
                pos = p + width
                if hsize > end_all - pos:
                    raise BatchFormatError(f"message {i}: payload size {hsize} runs past the batch")
                append((None, seq, buf[pos : pos + hsize] if hsize < views_from else view[pos : pos + hsize]))
                pos += hsize
                continue
        if end_all - pos < 4:
            raise BatchFormatError(f"batch truncated before message {i} of {count}")
        (meta_size,) = unpack(buf, pos)
        pos += 4
        meta_end = pos + meta_size
        if meta_end > end_all:
            raise BatchFormatError(f"message {i}: metadata size {meta_size} runs past the batch")
        # Inline decoding of the plain layout 0x18 <size: 1-2 byte varint> 0x40 <seq: 1-3 bytes>
        # (payloads below 16 KiB, sequence ids below 2**21); anything else takes the general path.
        size = seq = -1
        if meta_size >= 4 and buf[pos] == 0x18:
            b = buf[pos + 1]
            if b < 0x80:
                p = pos + 2
                size = b
            elif buf[pos + 2] < 0x80:
                p = pos + 3
                size = (b & 0x7F) | (buf[pos + 2] << 7)
            else:
                p = meta_end
            if p + 1 < meta_end and buf[p] == 0x40:
                n = meta_end - p
                b = buf[p + 1]
                if n == 2:
                    if b < 0x80:
                        seq = b
                elif n == 3:
                    if b >= 0x80 and buf[p + 2] < 0x80:
                        seq = (b & 0x7F) | (buf[p + 2] << 7)
                elif n == 4 and b >= 0x80 and buf[p + 2] >= 0x80 and buf[p + 3] < 0x80:
                    seq = (b & 0x7F) | ((buf[p + 2] & 0x7F) << 7) | (buf[p + 3] << 14)
                if seq >= 0:
                    head, hl, width, hsize = buf[pos - 4 : p + 1], p + 5 - pos, n - 1, size
        if seq >= 0:
            meta = None
        else:
            plain = _plain_fields(buf, pos, meta_end)
            if plain is not None:
                meta, (size, seq) = None, plain
            else:
                meta, seq = _full_metadata(buf[pos:meta_end], i), -1
                size = meta.payload_size
        pos = meta_end
        if size < 0 or size > end_all - pos:
            raise BatchFormatError(f"message {i}: payload size {size} runs past the batch")
        append((meta, seq, buf[pos : pos + size] if size < views_from else view[pos : pos + size]))
        pos += size
    return out


_FLIP_HIGH = bytes(b ^ 0x80 for b in range(256))  # translate: bytes all >= 0x80 become ASCII


def split_uniform_batch(
    payload: bytes, count: int, views_from: int = 1 << 62, start: int = 0, end: int | None = None
) -> tuple[list[int], list[bytes | memoryview]] | None:
    """``(sequence ids, payloads)`` of a batch whose ``count`` records all share one layout:
    plain metadata (``payload_size`` and ``sequence_id`` only, as ``plain_message_metadata``
    writes it) with the same payload size and sequence-id width, filling ``payload[start:end]``
    exactly; ``None`` for any other batch (``split_batch`` then reads it record by record).

    What producers write for a run of same-size messages: the records then lie at a fixed
    stride, so each header byte is checked for all records at once, as one strided slice
    (C loops instead of a Python iteration per record)."""
    end_all = len(payload) if end is None else end
    if count <= 0 or type(payload) is not bytes or not 0 <= start <= end_all - 8 or end_all > len(payload):
        return None
    buf = payload
    (meta_size,) = _U32.unpack_from(buf, start)
    p = start + 4
    if not 4 <= meta_size <= 14 or buf[p] != 0x18:
        return None
    size, q = decode_varint(buf, p + 1, p + 4)  # payloads below 2 MiB
    if size < 0:
        return None
    size_len = q - p - 1
    width = meta_size - size_len - 2  # bytes of the sequence id's varint
    hl = 4 + 2 + size_len  # [u32 metadata size] 0x18 <size> 0x40
    stride = hl + width + size
    if not 1 <= width <= 9 or count * stride != end_all - start or buf[p + 1 + size_len] != 0x40:
        return None
    stop = start + count * stride
    for k in range(hl):  # every record's header: the same bytes as the first's
        if buf[start + k : stop : stride].count(buf[start + k]) != count:
            return None
    s = start + hl
    # The sequence id's varint: every byte but its last has the high bit set.
    cols = [buf[s + k : stop : stride] for k in range(width)]
    if not cols[-1].isascii() or not all(c.translate(_FLIP_HIGH).isascii() for c in cols[:-1]):
        return None
    if width == 1:
        seqs = list(cols[0])
    elif width == 2:
        seqs = [a - 0x80 + (c << 7) for a, c in zip(cols[0], cols[1])]
    elif width == 3:  # ids from 16,384 to 2,097,151
        seqs = [a - 0x80 + ((c - 0x80) << 7) + (d << 14) for a, c, d in zip(*cols)]
    else:
        seqs = [0] * count
        for k in range(width - 1, -1, -1):
            low = 0 if k == width - 1 else 0x80
            seqs = [(x << 7) | (c - low) for x, c in zip(seqs, cols[k])]
    at = range(s + width, stop + width, stride)  # where each payload starts (size may be 0)
    if size < views_from:
        bodies: list[bytes | memoryview] = [buf[q : q + size] for q in at]
    else:
        view = memoryview(buf)
        bodies = [view[q : q + size] for q in at]
    return seqs, bodies


def _plain_fields(buf: bytes, pos: int, end: int) -> tuple[int, int] | None:
    """``(payload_size, sequence_id or -1)`` if the metadata is exactly field 3 [+ field 8]."""
    if end - pos < 2 or buf[pos] != 0x18:
        return None
    size, pos = decode_varint(buf, pos + 1, end)
    if size < 0:
        return None
    if pos == end:
        return size, -1
    if buf[pos] != 0x40:
        return None
    seq, pos = decode_varint(buf, pos + 1, end)
    if seq < 0 or pos != end:
        return None
    return size, seq


def _full_metadata(raw: bytes, index: int) -> SingleMessageMetadata:
    meta = SingleMessageMetadata()
    try:
        meta.ParseFromString(raw)
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise BatchFormatError(f"message {index}: bad SingleMessageMetadata: {exc}") from None
    if not meta.IsInitialized():
        raise BatchFormatError(f"message {index}: SingleMessageMetadata without payload_size")
    return meta


# ---------------------------------------------------------------------------------------------
# Ack sets

_WORD = 64
_SIGN = 1 << 63


def _to_signed(word: int) -> int:
    return word - (1 << 64) if word & _SIGN else word


def ack_set_of(unacked: Iterable[int], batch_size: int) -> list[int]:
    """The ack_set words marking ``unacked`` batch indexes (bits past batch_size ignored)."""
    words = [0] * ((batch_size + _WORD - 1) // _WORD)
    for i in unacked:
        if 0 <= i < batch_size:
            words[i // _WORD] |= 1 << (i % _WORD)
    # Java BitSet.toLongArray drops trailing zero words.
    while words and words[-1] == 0:
        words.pop()
    return [_to_signed(w) for w in words]


def unacked_indexes(ack_set: Sequence[int], batch_size: int) -> set[int]:
    """The batch indexes still to deliver; an empty ack_set means all of them."""
    if not ack_set:
        return set(range(batch_size))
    out = set()
    for w, word in enumerate(ack_set):
        word &= (1 << 64) - 1
        while word:
            low = word & -word
            i = w * _WORD + low.bit_length() - 1
            if i < batch_size:
                out.add(i)
            word ^= low
    return out
