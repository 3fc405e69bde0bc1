"""What the broker needs to know about a stored entry, parsed once per dispatch.

The entry is the producer's bytes untouched; the broker only peeks at its MessageMetadata
for the message count (permits), the key (Key_Shared), deliver-at time (delayed delivery),
publish time (seek by time) and the producer's sequence ids (deduplication).
"""

from __future__ import annotations

from dataclasses import dataclass

from clients.protocol import frames
from clients.protocol.pulsar_api_pb2 import MessageMetadata


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
