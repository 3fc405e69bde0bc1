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


def _varint(value: int) -> bytes:
    if value < 0x4000:  # sequence ids and payload sizes mostly fit in two bytes: no loop
        return bytes((value,)) if value < 0x80 else bytes(((value & 0x7F) | 0x80, value >> 7))
    out = bytearray()
    while value > 0x7F:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def plain_message_metadata(payload_size: int, sequence_id: int) -> bytes:
    """The serialized SingleMessageMetadata of a message with no properties, keys or event
    time: ``payload_size`` (field 3) and ``sequence_id`` (field 8), byte for byte what protobuf
    writes, without building a message object (the producer's per-message hot path)."""
    return b"\x18" + _varint(payload_size) + b"\x40" + _varint(sequence_id)


def batch_entry_size(meta: SingleMessageMetadata, payload_len: int) -> int:
    """Bytes one message adds to a batch payload (to cap batches by size before serializing)."""
    return 4 + meta.ByteSize() + payload_len + 2  # +2: payload_size varint may grow when set


def parse_batch(payload: Buffer, count: int) -> list[tuple[SingleMessageMetadata, memoryview]]:
    """Split a (decompressed) batch payload into ``count`` (metadata, payload view) pairs."""
    if count < 0:
        raise BatchFormatError(f"negative batch size {count}")
    view = memoryview(payload)
    out: list[tuple[SingleMessageMetadata, memoryview]] = []
    pos = 0
    for i in range(count):
        if len(view) - pos < 4:
            raise BatchFormatError(f"batch truncated before message {i} of {count}")
        (meta_size,) = _U32.unpack_from(view, pos)
        pos += 4
        if meta_size > len(view) - pos:
            raise BatchFormatError(f"message {i}: metadata size {meta_size} runs past the batch")
        meta = SingleMessageMetadata()
        try:
            meta.ParseFromString(view[pos : pos + meta_size])
        except (DecodeError, ValueError, RuntimeError) as exc:
            raise BatchFormatError(f"message {i}: bad SingleMessageMetadata: {exc}") from None
        if not meta.IsInitialized():
            raise BatchFormatError(f"message {i}: SingleMessageMetadata without payload_size")
        pos += meta_size
        size = meta.payload_size
        if size < 0 or size > len(view) - pos:
            raise BatchFormatError(f"message {i}: payload size {size} runs past the batch")
        out.append((meta, view[pos : pos + size]))
        pos += size
    return out


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
