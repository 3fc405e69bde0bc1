"""What the broker needs to know about a stored entry, parsed once per dispatch.

The entry is the producer's bytes untouched; the broker only peeks at its MessageMetadata
for the message count (permits), the key (Key_Shared), deliver-at time (delayed delivery),
publish time (seek by time) and the producer's sequence ids (deduplication).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass

from google.protobuf.message import DecodeError

from clients.protocol import frames
from clients.protocol.errors import ProtocolError
from clients.protocol.pulsar_api_pb2 import MessageMetadata

_U32 = struct.Struct(">I")


@dataclass(frozen=True, slots=True)
class EntryInfo:
    num_messages: int
    is_batch: bool
    key: bytes | None
    deliver_at_time: int
    publish_time: int
    producer_name: str
    sequence_id: int
    highest_sequence_id: int
    is_chunk: bool


def parse_metadata(data: bytes) -> MessageMetadata:
    return frames.parse_entry(data).metadata


def entry_info(data: bytes) -> EntryInfo:
    md = parse_metadata(data)
    is_batch = md.HasField("num_messages_in_batch")
    if md.HasField("ordering_key"):
        key: bytes | None = md.ordering_key
    elif md.HasField("partition_key"):
        key = md.partition_key.encode()
    else:
        key = None
    return EntryInfo(
        num_messages=md.num_messages_in_batch if is_batch else 1,
        is_batch=is_batch,
        key=key,
        deliver_at_time=md.deliver_at_time if md.HasField("deliver_at_time") else 0,
        publish_time=md.publish_time,
        producer_name=md.producer_name,
        sequence_id=md.sequence_id,
        highest_sequence_id=md.highest_sequence_id,
        is_chunk=md.HasField("chunk_id"),
    )


def dispatch_info(data: bytes) -> tuple[MessageMetadata, int]:
    """The metadata of a stored entry and its message count, for the dispatcher's per-entry
    look (ProtocolError as ``entry_info``): only the metadata is parsed, with none of
    ``frames.parse_entry``'s views, checksum bookkeeping or broker entry metadata parse,
    and the dispatcher reads the key and deliver-at time off it only when it needs them."""
    off = 0
    try:
        if data[0] == 0x0E and data[1] == 0x02:  # broker entry metadata: skipped
            off = 6 + _U32.unpack_from(data, 2)[0]
        if data[off] == 0x0E and data[off + 1] == 0x01:  # the producer's CRC32C: not checked here
            off += 6
        meta_size = _U32.unpack_from(data, off)[0]
    except (IndexError, struct.error):
        raise ProtocolError("stored entry too short for its headers") from None
    off += 4
    if meta_size > len(data) - off:
        raise ProtocolError(f"metadata size {meta_size} exceeds the {len(data) - off} bytes left")
    md = MessageMetadata()
    try:
        md.ParseFromString(memoryview(data)[off : off + meta_size])
    except (DecodeError, ValueError, RuntimeError) as exc:
        raise ProtocolError(f"cannot parse MessageMetadata: {exc}") from None
    if not md.IsInitialized():
        raise ProtocolError(f"MessageMetadata is missing required fields: {md.FindInitializationErrors()}")
    return md, (md.num_messages_in_batch if md.HasField("num_messages_in_batch") else 1)


def metadata_key(md: MessageMetadata) -> bytes | None:
    """The routing key of an entry (Key_Shared): the ordering key, else the partition key."""
    if md.HasField("ordering_key"):
        return md.ordering_key
    if md.HasField("partition_key"):
        return md.partition_key.encode()
    return None
