"""Constructors for every Pulsar command, so broker and client build them the same way.

Each function returns a ``BaseCommand`` with ``type`` set and the matching sub-command filled
in. Optional arguments left at None are not set on the wire (proto2 presence matters to the
C++ client: e.g. ``num_messages_in_batch`` present means "this is a batch"). Message ids are
masked to uint64 on the way out (``MessageId.earliest`` is (-1, -1)) and read back signed.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from quire.varint import ONE_BYTE
from quire.varint import encode_varint as varint  # the hand-encoded hot paths here and in ``batch``

from . import pulsar_api_pb2 as pb
from .pulsar_api_pb2 import BaseCommand, MessageIdData

if TYPE_CHECKING:
    from .pulsar_api_pb2 import KeyValue, _RepeatedMessage  # stub-only container type

T = BaseCommand.Type

# The protocol version quire speaks (v20: topic migration, the newest the C++ 3.5+ client sends).
PROTOCOL_VERSION = 20
_U64 = (1 << 64) - 1
INT64_MAX = (1 << 63) - 1

# BaseCommand field name for each Type (field number == type value).
FIELD_BY_TYPE: dict[int, str] = {
    f.number: f.name for f in BaseCommand.DESCRIPTOR.fields if f.name != "type"
}


def u64(value: int) -> int:
    """Mask a signed id (e.g. -1 for earliest) to its uint64 wire value."""
    return value & _U64


def signed64(value: int) -> int:
    """Reinterpret a uint64 wire value as the signed id it encodes."""
    return value - (1 << 64) if value > INT64_MAX else value


def type_name(command: BaseCommand) -> str:
    """The Type name of a command (e.g. 'SEND'), or its number when unknown."""
    try:
        return T.Name(command.type)
    except ValueError:
        return str(command.type)


# Sub-commands are typed Any: which message class a BaseCommand field holds depends on its type
# number at run time (callers that know the type read the typed field, e.g. ``command.send``).
def sub_command(command: BaseCommand) -> Any:
    """The sub-command message that ``command.type`` selects (e.g. ``command.send``)."""
    name = FIELD_BY_TYPE.get(command.type)
    if name is None:
        raise KeyError(f"no sub-command field for type {command.type}")
    return getattr(command, name)


def _base(kind: int) -> tuple[BaseCommand, Any]:
    cmd = BaseCommand(type=kind)
    sub = getattr(cmd, FIELD_BY_TYPE[kind])
    sub.SetInParent()  # empty sub-commands (PING) must still be present
    return cmd, sub


def _set(sub: object, **fields: object) -> None:
    for name, value in fields.items():
        if value is not None:
            setattr(sub, name, value)


def _key_values(target: _RepeatedMessage[KeyValue], mapping: Mapping[str, str] | None) -> None:
    if mapping:
        for k, v in mapping.items():
            target.add(key=k, value=v)


# ---------------------------------------------------------------------------------------------
# Shared types


def message_id(
    ledger_id: int,
    entry_id: int,
    partition: int | None = None,
    batch_index: int | None = None,
    *,
    ack_set: Sequence[int] | None = None,
    batch_size: int | None = None,
    first_chunk: MessageIdData | None = None,
) -> MessageIdData:
    """A MessageIdData; negative ledger/entry ids are masked to uint64."""
    mid = MessageIdData(ledgerId=u64(ledger_id), entryId=u64(entry_id))
    if partition is not None:
        mid.partition = partition
    if batch_index is not None:
        mid.batch_index = batch_index
    if ack_set:
        mid.ack_set.extend(ack_set)
    if batch_size is not None:
        mid.batch_size = batch_size
    if first_chunk is not None:
        mid.first_chunk_message_id.CopyFrom(first_chunk)
    return mid


def message_id_tuple(mid: MessageIdData) -> tuple[int, int, int, int]:
    """(ledger, entry, partition, batch_index) with the ids read back as signed."""
    return signed64(mid.ledgerId), signed64(mid.entryId), mid.partition, mid.batch_index


def schema(name: str, type_: int, data: bytes = b"", properties: Mapping[str, str] | None = None) -> pb.Schema:
    """A Schema (type from ``pb.Schema.Type``)."""
    s = pb.Schema(name=name, schema_data=data, type=type_)
    _key_values(s.properties, properties)
    return s


def message_metadata(
    producer_name: str,
    sequence_id: int,
    publish_time: int,
    *,
    properties: Mapping[str, str] | None = None,
    partition_key: str | None = None,
    ordering_key: bytes | None = None,
    event_time: int | None = None,
    compression: int | None = None,
    uncompressed_size: int | None = None,
    num_messages_in_batch: int | None = None,
    deliver_at_time: int | None = None,
    highest_sequence_id: int | None = None,
    replicated_from: str | None = None,
    schema_version: bytes | None = None,
    uuid: str | None = None,
    num_chunks_from_msg: int | None = None,
    total_chunk_msg_size: int | None = None,
    chunk_id: int | None = None,
    null_value: bool | None = None,
) -> pb.MessageMetadata:
    """A MessageMetadata; set ``num_messages_in_batch`` only for batches (presence = batch)."""
    m = pb.MessageMetadata(producer_name=producer_name, sequence_id=sequence_id, publish_time=publish_time)
    _key_values(m.properties, properties)
    _set(
        m,
        partition_key=partition_key,
        ordering_key=ordering_key,
        event_time=event_time or None,
        compression=compression or None,
        uncompressed_size=uncompressed_size,
        num_messages_in_batch=num_messages_in_batch,
        deliver_at_time=deliver_at_time,
        highest_sequence_id=highest_sequence_id,
        replicated_from=replicated_from,
        schema_version=schema_version,
        uuid=uuid,
        num_chunks_from_msg=num_chunks_from_msg,
        total_chunk_msg_size=total_chunk_msg_size,
        chunk_id=chunk_id,
        null_value=null_value,
    )
    return m


class PlainSend:
    """One producer's unbatched plain SEND, serialized by hand: the BaseCommand of ``send(
    producer_id, sequence_id)`` and the MessageMetadata of ``message_metadata(name, sequence_id,
    publish_time)`` (fields 1, 2, 3 and nothing else), byte for byte as protobuf writes them,
    without protobuf objects. What never changes for the producer is encoded once: a message
    (a synchronous sender's hot path) costs two varints."""

    __slots__ = ("_send_head", "_meta_head", "_time")

    def __init__(self, producer_id: int, producer_name: bytes) -> None:
        self._send_head = b"\x08" + varint(producer_id) + b"\x10"
        self._meta_head = b"\x0a" + varint(len(producer_name)) + producer_name + b"\x10"
        # The last publish time and its field: a millisecond holds several sync sends, and the
        # time's six-byte varint is the dearest part (one tuple: replaced, never half-updated).
        self._time: tuple[int, bytes] = (-1, b"")

    def parts(self, sequence_id: int, publish_time: int) -> tuple[bytes, bytes]:
        """(the SEND command, its metadata)."""
        seq = varint(sequence_id)
        head = self._send_head
        last, field = self._time
        if publish_time != last:
            field = b"\x18" + varint(publish_time)
            self._time = (publish_time, field)
        # (a CommandSend of two varints is at most 22 bytes long: a one-byte length)
        return (b"".join((b"\x08\x06\x32", ONE_BYTE[len(head) + len(seq)], head, seq)),
                b"".join((self._meta_head, seq, field)))


def plain_message_metadata(producer_name: bytes, sequence_id: int, publish_time: int) -> bytes:
    """``message_metadata(name, sequence_id, publish_time)`` with no other field (see ``PlainSend``)."""
    return PlainSend(0, producer_name).parts(sequence_id, publish_time)[1]


def send_bytes(producer_id: int, sequence_id: int) -> bytes:
    """``send(producer_id, sequence_id)`` serialized as protobuf does (see ``PlainSend``)."""
    return PlainSend(producer_id, b"").parts(sequence_id, 0)[0]


def single_message_metadata(
    payload_size: int,
    *,
    properties: Mapping[str, str] | None = None,
    partition_key: str | None = None,
    ordering_key: bytes | None = None,
    event_time: int | None = None,
    sequence_id: int | None = None,
    null_value: bool | None = None,
) -> pb.SingleMessageMetadata:
    """The per-message metadata inside a batch payload."""
    m = pb.SingleMessageMetadata(payload_size=payload_size)
    _key_values(m.properties, properties)
    _set(
        m,
        partition_key=partition_key,
        ordering_key=ordering_key,
        event_time=event_time or None,
        sequence_id=sequence_id,
        null_value=null_value,
    )
    return m


# ---------------------------------------------------------------------------------------------
# Connection


def connect(
    client_version: str,
    *,
    protocol_version: int = PROTOCOL_VERSION,
    auth_method_name: str | None = "none",
    auth_data: bytes | None = None,
    proxy_to_broker_url: str | None = None,
    supports_auth_refresh: bool = True,
    supports_broker_entry_metadata: bool = True,
) -> BaseCommand:
    cmd, c = _base(T.CONNECT)
    _set(
        c,
        client_version=client_version,
        protocol_version=protocol_version,
        auth_method_name=auth_method_name,
        auth_data=auth_data,
        proxy_to_broker_url=proxy_to_broker_url,
    )
    c.feature_flags.supports_auth_refresh = supports_auth_refresh
    c.feature_flags.supports_broker_entry_metadata = supports_broker_entry_metadata
    return cmd


def connected(
    server_version: str,
    protocol_version: int,
    *,
    max_message_size: int | None = None,
    supports_topic_watchers: bool | None = None,
) -> BaseCommand:
    cmd, c = _base(T.CONNECTED)
    _set(c, server_version=server_version, protocol_version=protocol_version, max_message_size=max_message_size)
    if supports_topic_watchers is not None:
        c.feature_flags.supports_topic_watchers = supports_topic_watchers
    return cmd


def ping() -> BaseCommand:
    return _base(T.PING)[0]


def pong() -> BaseCommand:
    return _base(T.PONG)[0]


def auth_challenge(server_version: str, auth_method_name: str, challenge: bytes, protocol_version: int) -> BaseCommand:
    cmd, c = _base(T.AUTH_CHALLENGE)
    c.server_version = server_version
    c.protocol_version = protocol_version
    c.challenge.auth_method_name = auth_method_name
    c.challenge.auth_data = challenge
    return cmd


def auth_response(client_version: str, auth_method_name: str, response: bytes, protocol_version: int) -> BaseCommand:
    cmd, c = _base(T.AUTH_RESPONSE)
    c.client_version = client_version
    c.protocol_version = protocol_version
    c.response.auth_method_name = auth_method_name
    c.response.auth_data = response
    return cmd


# ---------------------------------------------------------------------------------------------
# Lookup


def partitioned_metadata(topic: str, request_id: int) -> BaseCommand:
    cmd, c = _base(T.PARTITIONED_METADATA)
    c.topic, c.request_id = topic, request_id
    return cmd


def partitioned_metadata_response(
    request_id: int,
    partitions: int | None = None,
    *,
    error: int | None = None,
    message: str | None = None,
) -> BaseCommand:
    """Success with ``partitions`` (0 = not partitioned), or Failed when ``error`` is given."""
    cmd, c = _base(T.PARTITIONED_METADATA_RESPONSE)
    c.request_id = request_id
    R = pb.CommandPartitionedTopicMetadataResponse
    if error is None:
        c.response = R.Success  # must be explicit: the C++ client treats absence as failure
        c.partitions = partitions or 0
    else:
        c.response = R.Failed
        _set(c, error=error, message=message)
    return cmd


def lookup(topic: str, request_id: int, *, authoritative: bool = False, listener: str | None = None) -> BaseCommand:
    cmd, c = _base(T.LOOKUP)
    c.topic, c.request_id, c.authoritative = topic, request_id, authoritative
    _set(c, advertised_listener_name=listener)
    return cmd


def lookup_response(
    request_id: int,
    *,
    broker_service_url: str | None = None,
    broker_service_url_tls: str | None = None,
    redirect: bool = False,
    authoritative: bool = True,
    proxy_through_service_url: bool = False,
    error: int | None = None,
    message: str | None = None,
) -> BaseCommand:
    """Connect (default), Redirect (``redirect=True``) or Failed (``error`` given)."""
    cmd, c = _base(T.LOOKUP_RESPONSE)
    c.request_id = request_id
    R = pb.CommandLookupTopicResponse
    if error is not None:
        c.response = R.Failed
        _set(c, error=error, message=message)
        return cmd
    c.response = R.Redirect if redirect else R.Connect
    c.authoritative = authoritative
    _set(c, brokerServiceUrl=broker_service_url, brokerServiceUrlTls=broker_service_url_tls)
    if proxy_through_service_url:
        c.proxy_through_service_url = True
    return cmd


def get_topics_of_namespace(request_id: int, namespace: str, mode: int = 0, pattern: str | None = None) -> BaseCommand:
    cmd, c = _base(T.GET_TOPICS_OF_NAMESPACE)
    c.request_id, c.namespace, c.mode = request_id, namespace, mode
    _set(c, topics_pattern=pattern)
    return cmd


def get_topics_of_namespace_response(request_id: int, topics: Iterable[str], *, filtered: bool = False) -> BaseCommand:
    cmd, c = _base(T.GET_TOPICS_OF_NAMESPACE_RESPONSE)
    c.request_id = request_id
    c.topics.extend(topics)
    if filtered:
        c.filtered = True
    return cmd


# ---------------------------------------------------------------------------------------------
# Producer


def producer(
    topic: str,
    producer_id: int,
    request_id: int,
    *,
    producer_name: str | None = None,
    user_provided_name: bool | None = None,
    epoch: int = 0,
    access_mode: int = pb.Shared,
    metadata: Mapping[str, str] | None = None,
    schema_: pb.Schema | None = None,
    topic_epoch: int | None = None,
    initial_subscription_name: str | None = None,
) -> BaseCommand:
    cmd, c = _base(T.PRODUCER)
    c.topic, c.producer_id, c.request_id = topic, producer_id, request_id
    if producer_name is not None:
        c.producer_name = producer_name
    # False when the broker generated the name (a re-created producer sends it back).
    c.user_provided_producer_name = producer_name is not None if user_provided_name is None else user_provided_name
    _set(c, epoch=epoch or None, producer_access_mode=access_mode or None, topic_epoch=topic_epoch,
         initial_subscription_name=initial_subscription_name)
    _key_values(c.metadata, metadata)
    if schema_ is not None:
        c.schema.CopyFrom(schema_)
    return cmd


def producer_success(
    request_id: int,
    producer_name: str,
    last_sequence_id: int = -1,
    *,
    schema_version: bytes | None = None,
    topic_epoch: int | None = None,
    producer_ready: bool = True,
) -> BaseCommand:
    cmd, c = _base(T.PRODUCER_SUCCESS)
    c.request_id, c.producer_name, c.last_sequence_id = request_id, producer_name, last_sequence_id
    _set(c, schema_version=schema_version, topic_epoch=topic_epoch)
    if not producer_ready:
        c.producer_ready = False
    return cmd


def send(
    producer_id: int,
    sequence_id: int,
    num_messages: int = 1,
    *,
    highest_sequence_id: int | None = None,
    is_chunk: bool = False,
    marker: bool = False,
) -> BaseCommand:
    cmd, c = _base(T.SEND)
    c.producer_id, c.sequence_id = producer_id, sequence_id
    if num_messages != 1:
        c.num_messages = num_messages
    _set(c, highest_sequence_id=highest_sequence_id, is_chunk=is_chunk or None, marker=marker or None)
    return cmd


def send_receipt(
    producer_id: int,
    sequence_id: int,
    ledger_id: int,
    entry_id: int,
    *,
    partition: int | None = None,
    highest_sequence_id: int | None = None,
) -> BaseCommand:
    """A receipt; the message id is always set (the C++ client reads it unconditionally)."""
    cmd, c = _base(T.SEND_RECEIPT)
    c.producer_id, c.sequence_id = producer_id, sequence_id
    c.message_id.CopyFrom(message_id(ledger_id, entry_id, partition))
    _set(c, highest_sequence_id=highest_sequence_id)
    return cmd


def send_error(producer_id: int, sequence_id: int, error: int, message: str) -> BaseCommand:
    cmd, c = _base(T.SEND_ERROR)
    c.producer_id, c.sequence_id, c.error, c.message = producer_id, sequence_id, error, message
    return cmd


def close_producer(producer_id: int, request_id: int, *, assigned_broker_url: str | None = None) -> BaseCommand:
    cmd, c = _base(T.CLOSE_PRODUCER)
    c.producer_id, c.request_id = producer_id, request_id
    _set(c, assignedBrokerServiceUrl=assigned_broker_url)
    return cmd


# ---------------------------------------------------------------------------------------------
# Consumer


def subscribe(
    topic: str,
    subscription: str,
    sub_type: int,
    consumer_id: int,
    request_id: int,
    *,
    consumer_name: str | None = None,
    priority_level: int | None = None,
    durable: bool = True,
    start_message_id: MessageIdData | None = None,
    metadata: Mapping[str, str] | None = None,
    read_compacted: bool | None = None,
    initial_position: int = pb.CommandSubscribe.Latest,
    replicate_subscription_state: bool | None = None,
    force_topic_creation: bool = True,
    start_message_rollback_duration_sec: int = 0,
    key_shared_mode: int | None = None,
    allow_out_of_order_delivery: bool = False,
    hash_ranges: Sequence[tuple[int, int]] | None = None,
    subscription_properties: Mapping[str, str] | None = None,
    consumer_epoch: int | None = None,
    schema_: pb.Schema | None = None,
) -> BaseCommand:
    cmd, c = _base(T.SUBSCRIBE)
    c.topic, c.subscription, c.subType = topic, subscription, sub_type
    c.consumer_id, c.request_id = consumer_id, request_id
    _set(
        c,
        consumer_name=consumer_name,
        priority_level=priority_level,
        read_compacted=read_compacted,
        replicate_subscription_state=replicate_subscription_state,
        consumer_epoch=consumer_epoch,
        start_message_rollback_duration_sec=start_message_rollback_duration_sec or None,
    )
    if not durable:
        c.durable = False
    if not force_topic_creation:
        c.force_topic_creation = False
    if initial_position != pb.CommandSubscribe.Latest:
        c.initialPosition = initial_position
    if start_message_id is not None:
        c.start_message_id.CopyFrom(start_message_id)
    _key_values(c.metadata, metadata)
    _key_values(c.subscription_properties, subscription_properties)
    if key_shared_mode is not None:
        c.keySharedMeta.keySharedMode = key_shared_mode
        if allow_out_of_order_delivery:
            c.keySharedMeta.allowOutOfOrderDelivery = True
        for start, end in hash_ranges or ():
            c.keySharedMeta.hashRanges.add(start=start, end=end)
    if schema_ is not None:
        c.schema.CopyFrom(schema_)
    return cmd


def flow(consumer_id: int, permits: int) -> BaseCommand:
    cmd, c = _base(T.FLOW)
    c.consumer_id, c.messagePermits = consumer_id, permits
    return cmd


def message(
    consumer_id: int,
    ledger_id: int,
    entry_id: int,
    *,
    partition: int = -1,
    redelivery_count: int = 0,
    ack_set: Sequence[int] | None = None,
    consumer_epoch: int | None = None,
) -> BaseCommand:
    """A MESSAGE command (send it with ``frames.message_frame``); partition always set, as JAVA."""
    cmd, c = _base(T.MESSAGE)
    c.consumer_id = consumer_id
    c.message_id.CopyFrom(message_id(ledger_id, entry_id, partition))
    if redelivery_count:
        c.redelivery_count = redelivery_count
    if ack_set:
        c.ack_set.extend(ack_set)
    _set(c, consumer_epoch=consumer_epoch)
    return cmd


def ack(
    consumer_id: int,
    message_ids: Iterable[MessageIdData],
    *,
    cumulative: bool = False,
    validation_error: int | None = None,
    request_id: int | None = None,
) -> BaseCommand:
    cmd, c = _base(T.ACK)
    c.consumer_id = consumer_id
    c.ack_type = pb.CommandAck.Cumulative if cumulative else pb.CommandAck.Individual
    c.message_id.extend(message_ids)
    _set(c, validation_error=validation_error, request_id=request_id)
    return cmd


def ack_response(
    consumer_id: int, request_id: int | None = None, *, error: int | None = None, message: str | None = None
) -> BaseCommand:
    cmd, c = _base(T.ACK_RESPONSE)
    c.consumer_id = consumer_id
    _set(c, request_id=request_id, error=error, message=message)
    return cmd


def redeliver_unacknowledged(
    consumer_id: int, message_ids: Iterable[MessageIdData] = (), *, consumer_epoch: int | None = None
) -> BaseCommand:
    """REDELIVER_UNACKNOWLEDGED_MESSAGES; no ids means all of the consumer's unacked messages."""
    cmd, c = _base(T.REDELIVER_UNACKNOWLEDGED_MESSAGES)
    c.consumer_id = consumer_id
    c.message_ids.extend(message_ids)
    _set(c, consumer_epoch=consumer_epoch)
    return cmd


def unsubscribe(consumer_id: int, request_id: int) -> BaseCommand:
    cmd, c = _base(T.UNSUBSCRIBE)
    c.consumer_id, c.request_id = consumer_id, request_id
    return cmd


def close_consumer(consumer_id: int, request_id: int, *, assigned_broker_url: str | None = None) -> BaseCommand:
    cmd, c = _base(T.CLOSE_CONSUMER)
    c.consumer_id, c.request_id = consumer_id, request_id
    _set(c, assignedBrokerServiceUrl=assigned_broker_url)
    return cmd


def seek(
    consumer_id: int,
    request_id: int,
    *,
    message_id_: MessageIdData | None = None,
    publish_time: int | None = None,
) -> BaseCommand:
    """SEEK to a message id or to the first entry with publish_time >= ``publish_time`` (ms)."""
    if (message_id_ is None) == (publish_time is None):
        raise ValueError("seek needs exactly one of message_id_ and publish_time")
    cmd, c = _base(T.SEEK)
    c.consumer_id, c.request_id = consumer_id, request_id
    if message_id_ is not None:
        c.message_id.CopyFrom(message_id_)
    else:
        c.message_publish_time = publish_time
    return cmd


def reached_end_of_topic(consumer_id: int) -> BaseCommand:
    cmd, c = _base(T.REACHED_END_OF_TOPIC)
    c.consumer_id = consumer_id
    return cmd


def active_consumer_change(consumer_id: int, is_active: bool) -> BaseCommand:
    cmd, c = _base(T.ACTIVE_CONSUMER_CHANGE)
    c.consumer_id, c.is_active = consumer_id, is_active
    return cmd


def get_last_message_id(consumer_id: int, request_id: int) -> BaseCommand:
    cmd, c = _base(T.GET_LAST_MESSAGE_ID)
    c.consumer_id, c.request_id = consumer_id, request_id
    return cmd


def get_last_message_id_response(
    request_id: int,
    last_message_id: MessageIdData,
    *,
    mark_delete_position: MessageIdData | None = None,
) -> BaseCommand:
    cmd, c = _base(T.GET_LAST_MESSAGE_ID_RESPONSE)
    c.request_id = request_id
    c.last_message_id.CopyFrom(last_message_id)
    if mark_delete_position is not None:
        c.consumer_mark_delete_position.CopyFrom(mark_delete_position)
    return cmd


def consumer_stats(consumer_id: int, request_id: int) -> BaseCommand:
    cmd, c = _base(T.CONSUMER_STATS)
    c.consumer_id, c.request_id = consumer_id, request_id
    return cmd


def consumer_stats_response(request_id: int, **stats: object) -> BaseCommand:
    """Fields by their proto names (msgRateOut, availablePermits, ...); error_code for failure."""
    cmd, c = _base(T.CONSUMER_STATS_RESPONSE)
    c.request_id = request_id
    _set(c, **stats)
    return cmd


def topic_migrated(resource_id: int, is_consumer: bool, broker_service_url: str) -> BaseCommand:
    cmd, c = _base(T.TOPIC_MIGRATED)
    c.resource_id = resource_id
    c.resource_type = pb.CommandTopicMigrated.Consumer if is_consumer else pb.CommandTopicMigrated.Producer
    c.brokerServiceUrl = broker_service_url
    return cmd


# ---------------------------------------------------------------------------------------------
# Generic replies and schema


def success(request_id: int, *, schema_: pb.Schema | None = None) -> BaseCommand:
    cmd, c = _base(T.SUCCESS)
    c.request_id = request_id
    if schema_ is not None:
        c.schema.CopyFrom(schema_)
    return cmd


def error(request_id: int, error_code: int, message: str) -> BaseCommand:
    """ERROR (``error_code`` from ``pb.ServerError``); the message is required on the wire."""
    cmd, c = _base(T.ERROR)
    c.request_id, c.error, c.message = request_id, error_code, message
    return cmd


def get_schema(request_id: int, topic: str, schema_version: bytes | None = None) -> BaseCommand:
    cmd, c = _base(T.GET_SCHEMA)
    c.request_id, c.topic = request_id, topic
    _set(c, schema_version=schema_version)
    return cmd


def get_schema_response(
    request_id: int,
    *,
    schema_: pb.Schema | None = None,
    schema_version: bytes | None = None,
    error_code: int | None = None,
    error_message: str | None = None,
) -> BaseCommand:
    cmd, c = _base(T.GET_SCHEMA_RESPONSE)
    c.request_id = request_id
    if schema_ is not None:
        c.schema.CopyFrom(schema_)
    _set(c, schema_version=schema_version, error_code=error_code, error_message=error_message)
    return cmd


def get_or_create_schema(request_id: int, topic: str, schema_: pb.Schema) -> BaseCommand:
    cmd, c = _base(T.GET_OR_CREATE_SCHEMA)
    c.request_id, c.topic = request_id, topic
    c.schema.CopyFrom(schema_)
    return cmd


def get_or_create_schema_response(
    request_id: int,
    *,
    schema_version: bytes | None = None,
    error_code: int | None = None,
    error_message: str | None = None,
) -> BaseCommand:
    cmd, c = _base(T.GET_OR_CREATE_SCHEMA_RESPONSE)
    c.request_id = request_id
    _set(c, schema_version=schema_version, error_code=error_code, error_message=error_message)
    return cmd
