"""Type stub of pulsar_api_pb2 (written by scripts/gen_pulsar_api_stub.py from its descriptors; do not edit)."""

from collections.abc import Iterable, Iterator
from typing import Any, ClassVar, Generic, TypeVar, overload

from google.protobuf.descriptor import Descriptor, EnumDescriptor, FileDescriptor

import clients.protocol.pulsar_api_pb2 as _pb  # message types by module: an enum value may shadow a class name

_T = TypeVar("_T")
_M = TypeVar("_M", bound="_Message")

DESCRIPTOR: FileDescriptor

class _Message:
    DESCRIPTOR: ClassVar[Descriptor]
    def SerializeToString(self, *, deterministic: bool = ...) -> bytes: ...
    def ParseFromString(self, serialized: bytes | bytearray | memoryview) -> int: ...
    def MergeFromString(self, serialized: bytes | bytearray | memoryview) -> int: ...
    def CopyFrom(self, other_msg: Any) -> None: ...
    def MergeFrom(self, other_msg: Any) -> None: ...
    def Clear(self) -> None: ...
    def ClearField(self, field_name: str) -> None: ...
    def HasField(self, field_name: str) -> bool: ...
    def SetInParent(self) -> None: ...
    def IsInitialized(self) -> bool: ...
    def FindInitializationErrors(self) -> list[str]: ...
    def ByteSize(self) -> int: ...
    def ListFields(self) -> list[tuple[Any, Any]]: ...

class _Enum(int):
    DESCRIPTOR: ClassVar[EnumDescriptor]
    @classmethod
    def Name(cls, number: int) -> str: ...
    @classmethod
    def Value(cls, name: str) -> int: ...
    @classmethod
    def keys(cls) -> list[str]: ...
    @classmethod
    def values(cls) -> list[int]: ...
    @classmethod
    def items(cls) -> list[tuple[str, int]]: ...

class _Repeated(Generic[_T]):
    def __iter__(self) -> Iterator[_T]: ...
    def __len__(self) -> int: ...
    @overload
    def __getitem__(self, key: int) -> _T: ...
    @overload
    def __getitem__(self, key: slice) -> list[_T]: ...
    def __delitem__(self, key: int | slice) -> None: ...
    def __bool__(self) -> bool: ...
    def remove(self, elem: _T) -> None: ...
    def pop(self, key: int = ...) -> _T: ...

class _RepeatedScalar(_Repeated[_T]):
    def append(self, value: _T) -> None: ...
    def extend(self, values: Iterable[_T]) -> None: ...
    def insert(self, key: int, value: _T) -> None: ...
    def __setitem__(self, key: int, value: _T) -> None: ...

class _RepeatedMessage(_Repeated[_M]):
    def add(self, **kwargs: Any) -> _M: ...
    def append(self, value: _M) -> None: ...
    def extend(self, values: Iterable[_M]) -> None: ...


class CompressionType(_Enum):
    NONE: ClassVar[int]
    LZ4: ClassVar[int]
    ZLIB: ClassVar[int]
    ZSTD: ClassVar[int]
    SNAPPY: ClassVar[int]

NONE: int
LZ4: int
ZLIB: int
ZSTD: int
SNAPPY: int

class ProducerAccessMode(_Enum):
    Shared: ClassVar[int]
    Exclusive: ClassVar[int]
    WaitForExclusive: ClassVar[int]
    ExclusiveWithFencing: ClassVar[int]

Shared: int
Exclusive: int
WaitForExclusive: int
ExclusiveWithFencing: int

class ServerError(_Enum):
    UnknownError: ClassVar[int]
    MetadataError: ClassVar[int]
    PersistenceError: ClassVar[int]
    AuthenticationError: ClassVar[int]
    AuthorizationError: ClassVar[int]
    ConsumerBusy: ClassVar[int]
    ServiceNotReady: ClassVar[int]
    ProducerBlockedQuotaExceededError: ClassVar[int]
    ProducerBlockedQuotaExceededException: ClassVar[int]
    ChecksumError: ClassVar[int]
    UnsupportedVersionError: ClassVar[int]
    TopicNotFound: ClassVar[int]
    SubscriptionNotFound: ClassVar[int]
    ConsumerNotFound: ClassVar[int]
    TooManyRequests: ClassVar[int]
    TopicTerminatedError: ClassVar[int]
    ProducerBusy: ClassVar[int]
    InvalidTopicName: ClassVar[int]
    IncompatibleSchema: ClassVar[int]
    ConsumerAssignError: ClassVar[int]
    TransactionCoordinatorNotFound: ClassVar[int]
    InvalidTxnStatus: ClassVar[int]
    NotAllowedError: ClassVar[int]
    TransactionConflict: ClassVar[int]
    TransactionNotFound: ClassVar[int]
    ProducerFenced: ClassVar[int]

UnknownError: int
MetadataError: int
PersistenceError: int
AuthenticationError: int
AuthorizationError: int
ConsumerBusy: int
ServiceNotReady: int
ProducerBlockedQuotaExceededError: int
ProducerBlockedQuotaExceededException: int
ChecksumError: int
UnsupportedVersionError: int
TopicNotFound: int
SubscriptionNotFound: int
ConsumerNotFound: int
TooManyRequests: int
TopicTerminatedError: int
ProducerBusy: int
InvalidTopicName: int
IncompatibleSchema: int
ConsumerAssignError: int
TransactionCoordinatorNotFound: int
InvalidTxnStatus: int
NotAllowedError: int
TransactionConflict: int
TransactionNotFound: int
ProducerFenced: int

class AuthMethod(_Enum):
    AuthMethodNone: ClassVar[int]
    AuthMethodYcaV1: ClassVar[int]
    AuthMethodAthens: ClassVar[int]

AuthMethodNone: int
AuthMethodYcaV1: int
AuthMethodAthens: int

class ProtocolVersion(_Enum):
    v0: ClassVar[int]
    v1: ClassVar[int]
    v2: ClassVar[int]
    v3: ClassVar[int]
    v4: ClassVar[int]
    v5: ClassVar[int]
    v6: ClassVar[int]
    v7: ClassVar[int]
    v8: ClassVar[int]
    v9: ClassVar[int]
    v10: ClassVar[int]
    v11: ClassVar[int]
    v12: ClassVar[int]
    v13: ClassVar[int]
    v14: ClassVar[int]
    v15: ClassVar[int]
    v16: ClassVar[int]
    v17: ClassVar[int]
    v18: ClassVar[int]
    v19: ClassVar[int]
    v20: ClassVar[int]

v0: int
v1: int
v2: int
v3: int
v4: int
v5: int
v6: int
v7: int
v8: int
v9: int
v10: int
v11: int
v12: int
v13: int
v14: int
v15: int
v16: int
v17: int
v18: int
v19: int
v20: int

class KeySharedMode(_Enum):
    AUTO_SPLIT: ClassVar[int]
    STICKY: ClassVar[int]

AUTO_SPLIT: int
STICKY: int

class Schema(_Message):
    class Type(_Enum):
        String: ClassVar[int]
        Json: ClassVar[int]
        Protobuf: ClassVar[int]
        Avro: ClassVar[int]
        Bool: ClassVar[int]
        Int8: ClassVar[int]
        Int16: ClassVar[int]
        Int32: ClassVar[int]
        Int64: ClassVar[int]
        Float: ClassVar[int]
        Double: ClassVar[int]
        Date: ClassVar[int]
        Time: ClassVar[int]
        Timestamp: ClassVar[int]
        KeyValue: ClassVar[int]
        Instant: ClassVar[int]
        LocalDate: ClassVar[int]
        LocalTime: ClassVar[int]
        LocalDateTime: ClassVar[int]
        ProtobufNative: ClassVar[int]
    String: ClassVar[int]
    Json: ClassVar[int]
    Protobuf: ClassVar[int]
    Avro: ClassVar[int]
    Bool: ClassVar[int]
    Int8: ClassVar[int]
    Int16: ClassVar[int]
    Int32: ClassVar[int]
    Int64: ClassVar[int]
    Float: ClassVar[int]
    Double: ClassVar[int]
    Date: ClassVar[int]
    Time: ClassVar[int]
    Timestamp: ClassVar[int]
    KeyValue: ClassVar[int]
    Instant: ClassVar[int]
    LocalDate: ClassVar[int]
    LocalTime: ClassVar[int]
    LocalDateTime: ClassVar[int]
    ProtobufNative: ClassVar[int]
    NAME_FIELD_NUMBER: ClassVar[int]
    SCHEMA_DATA_FIELD_NUMBER: ClassVar[int]
    TYPE_FIELD_NUMBER: ClassVar[int]
    PROPERTIES_FIELD_NUMBER: ClassVar[int]
    name: str
    schema_data: bytes
    type: int
    properties: _RepeatedMessage[_pb.KeyValue]
    def __init__(self, *, name: str | None = ..., schema_data: bytes | None = ..., type: int | None = ..., properties: Iterable[_pb.KeyValue] | None = ...) -> None: ...

class MessageIdData(_Message):
    LEDGERID_FIELD_NUMBER: ClassVar[int]
    ENTRYID_FIELD_NUMBER: ClassVar[int]
    PARTITION_FIELD_NUMBER: ClassVar[int]
    BATCH_INDEX_FIELD_NUMBER: ClassVar[int]
    ACK_SET_FIELD_NUMBER: ClassVar[int]
    BATCH_SIZE_FIELD_NUMBER: ClassVar[int]
    FIRST_CHUNK_MESSAGE_ID_FIELD_NUMBER: ClassVar[int]
    ledgerId: int
    entryId: int
    partition: int
    batch_index: int
    ack_set: _RepeatedScalar[int]
    batch_size: int
    first_chunk_message_id: _pb.MessageIdData
    def __init__(self, *, ledgerId: int | None = ..., entryId: int | None = ..., partition: int | None = ..., batch_index: int | None = ..., ack_set: Iterable[int] | None = ..., batch_size: int | None = ..., first_chunk_message_id: _pb.MessageIdData | None = ...) -> None: ...

class KeyValue(_Message):
    KEY_FIELD_NUMBER: ClassVar[int]
    VALUE_FIELD_NUMBER: ClassVar[int]
    key: str
    value: str
    def __init__(self, *, key: str | None = ..., value: str | None = ...) -> None: ...

class KeyLongValue(_Message):
    KEY_FIELD_NUMBER: ClassVar[int]
    VALUE_FIELD_NUMBER: ClassVar[int]
    key: str
    value: int
    def __init__(self, *, key: str | None = ..., value: int | None = ...) -> None: ...

class IntRange(_Message):
    START_FIELD_NUMBER: ClassVar[int]
    END_FIELD_NUMBER: ClassVar[int]
    start: int
    end: int
    def __init__(self, *, start: int | None = ..., end: int | None = ...) -> None: ...

class EncryptionKeys(_Message):
    KEY_FIELD_NUMBER: ClassVar[int]
    VALUE_FIELD_NUMBER: ClassVar[int]
    METADATA_FIELD_NUMBER: ClassVar[int]
    key: str
    value: bytes
    metadata: _RepeatedMessage[_pb.KeyValue]
    def __init__(self, *, key: str | None = ..., value: bytes | None = ..., metadata: Iterable[_pb.KeyValue] | None = ...) -> None: ...

class MessageMetadata(_Message):
    PRODUCER_NAME_FIELD_NUMBER: ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: ClassVar[int]
    PUBLISH_TIME_FIELD_NUMBER: ClassVar[int]
    PROPERTIES_FIELD_NUMBER: ClassVar[int]
    REPLICATED_FROM_FIELD_NUMBER: ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: ClassVar[int]
    REPLICATE_TO_FIELD_NUMBER: ClassVar[int]
    COMPRESSION_FIELD_NUMBER: ClassVar[int]
    UNCOMPRESSED_SIZE_FIELD_NUMBER: ClassVar[int]
    NUM_MESSAGES_IN_BATCH_FIELD_NUMBER: ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: ClassVar[int]
    ENCRYPTION_KEYS_FIELD_NUMBER: ClassVar[int]
    ENCRYPTION_ALGO_FIELD_NUMBER: ClassVar[int]
    ENCRYPTION_PARAM_FIELD_NUMBER: ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: ClassVar[int]
    PARTITION_KEY_B64_ENCODED_FIELD_NUMBER: ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: ClassVar[int]
    DELIVER_AT_TIME_FIELD_NUMBER: ClassVar[int]
    MARKER_TYPE_FIELD_NUMBER: ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: ClassVar[int]
    UUID_FIELD_NUMBER: ClassVar[int]
    NUM_CHUNKS_FROM_MSG_FIELD_NUMBER: ClassVar[int]
    TOTAL_CHUNK_MSG_SIZE_FIELD_NUMBER: ClassVar[int]
    CHUNK_ID_FIELD_NUMBER: ClassVar[int]
    NULL_PARTITION_KEY_FIELD_NUMBER: ClassVar[int]
    producer_name: str
    sequence_id: int
    publish_time: int
    properties: _RepeatedMessage[_pb.KeyValue]
    replicated_from: str
    partition_key: str
    replicate_to: _RepeatedScalar[str]
    compression: int
    uncompressed_size: int
    num_messages_in_batch: int
    event_time: int
    encryption_keys: _RepeatedMessage[_pb.EncryptionKeys]
    encryption_algo: str
    encryption_param: bytes
    schema_version: bytes
    partition_key_b64_encoded: bool
    ordering_key: bytes
    deliver_at_time: int
    marker_type: int
    txnid_least_bits: int
    txnid_most_bits: int
    highest_sequence_id: int
    null_value: bool
    uuid: str
    num_chunks_from_msg: int
    total_chunk_msg_size: int
    chunk_id: int
    null_partition_key: bool
    def __init__(self, *, producer_name: str | None = ..., sequence_id: int | None = ..., publish_time: int | None = ..., properties: Iterable[_pb.KeyValue] | None = ..., replicated_from: str | None = ..., partition_key: str | None = ..., replicate_to: Iterable[str] | None = ..., compression: int | None = ..., uncompressed_size: int | None = ..., num_messages_in_batch: int | None = ..., event_time: int | None = ..., encryption_keys: Iterable[_pb.EncryptionKeys] | None = ..., encryption_algo: str | None = ..., encryption_param: bytes | None = ..., schema_version: bytes | None = ..., partition_key_b64_encoded: bool | None = ..., ordering_key: bytes | None = ..., deliver_at_time: int | None = ..., marker_type: int | None = ..., txnid_least_bits: int | None = ..., txnid_most_bits: int | None = ..., highest_sequence_id: int | None = ..., null_value: bool | None = ..., uuid: str | None = ..., num_chunks_from_msg: int | None = ..., total_chunk_msg_size: int | None = ..., chunk_id: int | None = ..., null_partition_key: bool | None = ...) -> None: ...

class SingleMessageMetadata(_Message):
    PROPERTIES_FIELD_NUMBER: ClassVar[int]
    PARTITION_KEY_FIELD_NUMBER: ClassVar[int]
    PAYLOAD_SIZE_FIELD_NUMBER: ClassVar[int]
    COMPACTED_OUT_FIELD_NUMBER: ClassVar[int]
    EVENT_TIME_FIELD_NUMBER: ClassVar[int]
    PARTITION_KEY_B64_ENCODED_FIELD_NUMBER: ClassVar[int]
    ORDERING_KEY_FIELD_NUMBER: ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: ClassVar[int]
    NULL_VALUE_FIELD_NUMBER: ClassVar[int]
    NULL_PARTITION_KEY_FIELD_NUMBER: ClassVar[int]
    properties: _RepeatedMessage[_pb.KeyValue]
    partition_key: str
    payload_size: int
    compacted_out: bool
    event_time: int
    partition_key_b64_encoded: bool
    ordering_key: bytes
    sequence_id: int
    null_value: bool
    null_partition_key: bool
    def __init__(self, *, properties: Iterable[_pb.KeyValue] | None = ..., partition_key: str | None = ..., payload_size: int | None = ..., compacted_out: bool | None = ..., event_time: int | None = ..., partition_key_b64_encoded: bool | None = ..., ordering_key: bytes | None = ..., sequence_id: int | None = ..., null_value: bool | None = ..., null_partition_key: bool | None = ...) -> None: ...

class BrokerEntryMetadata(_Message):
    BROKER_TIMESTAMP_FIELD_NUMBER: ClassVar[int]
    INDEX_FIELD_NUMBER: ClassVar[int]
    broker_timestamp: int
    index: int
    def __init__(self, *, broker_timestamp: int | None = ..., index: int | None = ...) -> None: ...

class FeatureFlags(_Message):
    SUPPORTS_AUTH_REFRESH_FIELD_NUMBER: ClassVar[int]
    SUPPORTS_BROKER_ENTRY_METADATA_FIELD_NUMBER: ClassVar[int]
    SUPPORTS_PARTIAL_PRODUCER_FIELD_NUMBER: ClassVar[int]
    SUPPORTS_TOPIC_WATCHERS_FIELD_NUMBER: ClassVar[int]
    supports_auth_refresh: bool
    supports_broker_entry_metadata: bool
    supports_partial_producer: bool
    supports_topic_watchers: bool
    def __init__(self, *, supports_auth_refresh: bool | None = ..., supports_broker_entry_metadata: bool | None = ..., supports_partial_producer: bool | None = ..., supports_topic_watchers: bool | None = ...) -> None: ...

class CommandConnect(_Message):
    CLIENT_VERSION_FIELD_NUMBER: ClassVar[int]
    AUTH_METHOD_FIELD_NUMBER: ClassVar[int]
    AUTH_DATA_FIELD_NUMBER: ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: ClassVar[int]
    AUTH_METHOD_NAME_FIELD_NUMBER: ClassVar[int]
    PROXY_TO_BROKER_URL_FIELD_NUMBER: ClassVar[int]
    ORIGINAL_PRINCIPAL_FIELD_NUMBER: ClassVar[int]
    ORIGINAL_AUTH_DATA_FIELD_NUMBER: ClassVar[int]
    ORIGINAL_AUTH_METHOD_FIELD_NUMBER: ClassVar[int]
    FEATURE_FLAGS_FIELD_NUMBER: ClassVar[int]
    client_version: str
    auth_method: int
    auth_data: bytes
    protocol_version: int
    auth_method_name: str
    proxy_to_broker_url: str
    original_principal: str
    original_auth_data: str
    original_auth_method: str
    feature_flags: _pb.FeatureFlags
    def __init__(self, *, client_version: str | None = ..., auth_method: int | None = ..., auth_data: bytes | None = ..., protocol_version: int | None = ..., auth_method_name: str | None = ..., proxy_to_broker_url: str | None = ..., original_principal: str | None = ..., original_auth_data: str | None = ..., original_auth_method: str | None = ..., feature_flags: _pb.FeatureFlags | None = ...) -> None: ...

class CommandConnected(_Message):
    SERVER_VERSION_FIELD_NUMBER: ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: ClassVar[int]
    MAX_MESSAGE_SIZE_FIELD_NUMBER: ClassVar[int]
    FEATURE_FLAGS_FIELD_NUMBER: ClassVar[int]
    server_version: str
    protocol_version: int
    max_message_size: int
    feature_flags: _pb.FeatureFlags
    def __init__(self, *, server_version: str | None = ..., protocol_version: int | None = ..., max_message_size: int | None = ..., feature_flags: _pb.FeatureFlags | None = ...) -> None: ...

class AuthData(_Message):
    AUTH_METHOD_NAME_FIELD_NUMBER: ClassVar[int]
    AUTH_DATA_FIELD_NUMBER: ClassVar[int]
    auth_method_name: str
    auth_data: bytes
    def __init__(self, *, auth_method_name: str | None = ..., auth_data: bytes | None = ...) -> None: ...

class CommandAuthChallenge(_Message):
    SERVER_VERSION_FIELD_NUMBER: ClassVar[int]
    CHALLENGE_FIELD_NUMBER: ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: ClassVar[int]
    server_version: str
    challenge: _pb.AuthData
    protocol_version: int
    def __init__(self, *, server_version: str | None = ..., challenge: _pb.AuthData | None = ..., protocol_version: int | None = ...) -> None: ...

class CommandAuthResponse(_Message):
    CLIENT_VERSION_FIELD_NUMBER: ClassVar[int]
    RESPONSE_FIELD_NUMBER: ClassVar[int]
    PROTOCOL_VERSION_FIELD_NUMBER: ClassVar[int]
    client_version: str
    response: _pb.AuthData
    protocol_version: int
    def __init__(self, *, client_version: str | None = ..., response: _pb.AuthData | None = ..., protocol_version: int | None = ...) -> None: ...

class KeySharedMeta(_Message):
    KEYSHAREDMODE_FIELD_NUMBER: ClassVar[int]
    HASHRANGES_FIELD_NUMBER: ClassVar[int]
    ALLOWOUTOFORDERDELIVERY_FIELD_NUMBER: ClassVar[int]
    keySharedMode: int
    hashRanges: _RepeatedMessage[_pb.IntRange]
    allowOutOfOrderDelivery: bool
    def __init__(self, *, keySharedMode: int | None = ..., hashRanges: Iterable[_pb.IntRange] | None = ..., allowOutOfOrderDelivery: bool | None = ...) -> None: ...

class CommandSubscribe(_Message):
    class SubType(_Enum):
        Exclusive: ClassVar[int]
        Shared: ClassVar[int]
        Failover: ClassVar[int]
        Key_Shared: ClassVar[int]
    Exclusive: ClassVar[int]
    Shared: ClassVar[int]
    Failover: ClassVar[int]
    Key_Shared: ClassVar[int]
    class InitialPosition(_Enum):
        Latest: ClassVar[int]
        Earliest: ClassVar[int]
    Latest: ClassVar[int]
    Earliest: ClassVar[int]
    TOPIC_FIELD_NUMBER: ClassVar[int]
    SUBSCRIPTION_FIELD_NUMBER: ClassVar[int]
    SUBTYPE_FIELD_NUMBER: ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    CONSUMER_NAME_FIELD_NUMBER: ClassVar[int]
    PRIORITY_LEVEL_FIELD_NUMBER: ClassVar[int]
    DURABLE_FIELD_NUMBER: ClassVar[int]
    START_MESSAGE_ID_FIELD_NUMBER: ClassVar[int]
    METADATA_FIELD_NUMBER: ClassVar[int]
    READ_COMPACTED_FIELD_NUMBER: ClassVar[int]
    SCHEMA_FIELD_NUMBER: ClassVar[int]
    INITIALPOSITION_FIELD_NUMBER: ClassVar[int]
    REPLICATE_SUBSCRIPTION_STATE_FIELD_NUMBER: ClassVar[int]
    FORCE_TOPIC_CREATION_FIELD_NUMBER: ClassVar[int]
    START_MESSAGE_ROLLBACK_DURATION_SEC_FIELD_NUMBER: ClassVar[int]
    KEYSHAREDMETA_FIELD_NUMBER: ClassVar[int]
    SUBSCRIPTION_PROPERTIES_FIELD_NUMBER: ClassVar[int]
    CONSUMER_EPOCH_FIELD_NUMBER: ClassVar[int]
    topic: str
    subscription: str
    subType: int
    consumer_id: int
    request_id: int
    consumer_name: str
    priority_level: int
    durable: bool
    start_message_id: _pb.MessageIdData
    metadata: _RepeatedMessage[_pb.KeyValue]
    read_compacted: bool
    schema: _pb.Schema
    initialPosition: int
    replicate_subscription_state: bool
    force_topic_creation: bool
    start_message_rollback_duration_sec: int
    keySharedMeta: _pb.KeySharedMeta
    subscription_properties: _RepeatedMessage[_pb.KeyValue]
    consumer_epoch: int
    def __init__(self, *, topic: str | None = ..., subscription: str | None = ..., subType: int | None = ..., consumer_id: int | None = ..., request_id: int | None = ..., consumer_name: str | None = ..., priority_level: int | None = ..., durable: bool | None = ..., start_message_id: _pb.MessageIdData | None = ..., metadata: Iterable[_pb.KeyValue] | None = ..., read_compacted: bool | None = ..., schema: _pb.Schema | None = ..., initialPosition: int | None = ..., replicate_subscription_state: bool | None = ..., force_topic_creation: bool | None = ..., start_message_rollback_duration_sec: int | None = ..., keySharedMeta: _pb.KeySharedMeta | None = ..., subscription_properties: Iterable[_pb.KeyValue] | None = ..., consumer_epoch: int | None = ...) -> None: ...

class CommandPartitionedTopicMetadata(_Message):
    TOPIC_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    ORIGINAL_PRINCIPAL_FIELD_NUMBER: ClassVar[int]
    ORIGINAL_AUTH_DATA_FIELD_NUMBER: ClassVar[int]
    ORIGINAL_AUTH_METHOD_FIELD_NUMBER: ClassVar[int]
    topic: str
    request_id: int
    original_principal: str
    original_auth_data: str
    original_auth_method: str
    def __init__(self, *, topic: str | None = ..., request_id: int | None = ..., original_principal: str | None = ..., original_auth_data: str | None = ..., original_auth_method: str | None = ...) -> None: ...

class CommandPartitionedTopicMetadataResponse(_Message):
    class LookupType(_Enum):
        Success: ClassVar[int]
        Failed: ClassVar[int]
    Success: ClassVar[int]
    Failed: ClassVar[int]
    PARTITIONS_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    RESPONSE_FIELD_NUMBER: ClassVar[int]
    ERROR_FIELD_NUMBER: ClassVar[int]
    MESSAGE_FIELD_NUMBER: ClassVar[int]
    partitions: int
    request_id: int
    response: int
    error: int
    message: str
    def __init__(self, *, partitions: int | None = ..., request_id: int | None = ..., response: int | None = ..., error: int | None = ..., message: str | None = ...) -> None: ...

class CommandLookupTopic(_Message):
    TOPIC_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    AUTHORITATIVE_FIELD_NUMBER: ClassVar[int]
    ORIGINAL_PRINCIPAL_FIELD_NUMBER: ClassVar[int]
    ORIGINAL_AUTH_DATA_FIELD_NUMBER: ClassVar[int]
    ORIGINAL_AUTH_METHOD_FIELD_NUMBER: ClassVar[int]
    ADVERTISED_LISTENER_NAME_FIELD_NUMBER: ClassVar[int]
    topic: str
    request_id: int
    authoritative: bool
    original_principal: str
    original_auth_data: str
    original_auth_method: str
    advertised_listener_name: str
    def __init__(self, *, topic: str | None = ..., request_id: int | None = ..., authoritative: bool | None = ..., original_principal: str | None = ..., original_auth_data: str | None = ..., original_auth_method: str | None = ..., advertised_listener_name: str | None = ...) -> None: ...

class CommandLookupTopicResponse(_Message):
    class LookupType(_Enum):
        Redirect: ClassVar[int]
        Connect: ClassVar[int]
        Failed: ClassVar[int]
    Redirect: ClassVar[int]
    Connect: ClassVar[int]
    Failed: ClassVar[int]
    BROKERSERVICEURL_FIELD_NUMBER: ClassVar[int]
    BROKERSERVICEURLTLS_FIELD_NUMBER: ClassVar[int]
    RESPONSE_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    AUTHORITATIVE_FIELD_NUMBER: ClassVar[int]
    ERROR_FIELD_NUMBER: ClassVar[int]
    MESSAGE_FIELD_NUMBER: ClassVar[int]
    PROXY_THROUGH_SERVICE_URL_FIELD_NUMBER: ClassVar[int]
    brokerServiceUrl: str
    brokerServiceUrlTls: str
    response: int
    request_id: int
    authoritative: bool
    error: int
    message: str
    proxy_through_service_url: bool
    def __init__(self, *, brokerServiceUrl: str | None = ..., brokerServiceUrlTls: str | None = ..., response: int | None = ..., request_id: int | None = ..., authoritative: bool | None = ..., error: int | None = ..., message: str | None = ..., proxy_through_service_url: bool | None = ...) -> None: ...

class CommandProducer(_Message):
    TOPIC_FIELD_NUMBER: ClassVar[int]
    PRODUCER_ID_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: ClassVar[int]
    ENCRYPTED_FIELD_NUMBER: ClassVar[int]
    METADATA_FIELD_NUMBER: ClassVar[int]
    SCHEMA_FIELD_NUMBER: ClassVar[int]
    EPOCH_FIELD_NUMBER: ClassVar[int]
    USER_PROVIDED_PRODUCER_NAME_FIELD_NUMBER: ClassVar[int]
    PRODUCER_ACCESS_MODE_FIELD_NUMBER: ClassVar[int]
    TOPIC_EPOCH_FIELD_NUMBER: ClassVar[int]
    TXN_ENABLED_FIELD_NUMBER: ClassVar[int]
    INITIAL_SUBSCRIPTION_NAME_FIELD_NUMBER: ClassVar[int]
    topic: str
    producer_id: int
    request_id: int
    producer_name: str
    encrypted: bool
    metadata: _RepeatedMessage[_pb.KeyValue]
    schema: _pb.Schema
    epoch: int
    user_provided_producer_name: bool
    producer_access_mode: int
    topic_epoch: int
    txn_enabled: bool
    initial_subscription_name: str
    def __init__(self, *, topic: str | None = ..., producer_id: int | None = ..., request_id: int | None = ..., producer_name: str | None = ..., encrypted: bool | None = ..., metadata: Iterable[_pb.KeyValue] | None = ..., schema: _pb.Schema | None = ..., epoch: int | None = ..., user_provided_producer_name: bool | None = ..., producer_access_mode: int | None = ..., topic_epoch: int | None = ..., txn_enabled: bool | None = ..., initial_subscription_name: str | None = ...) -> None: ...

class CommandSend(_Message):
    PRODUCER_ID_FIELD_NUMBER: ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: ClassVar[int]
    NUM_MESSAGES_FIELD_NUMBER: ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: ClassVar[int]
    IS_CHUNK_FIELD_NUMBER: ClassVar[int]
    MARKER_FIELD_NUMBER: ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: ClassVar[int]
    producer_id: int
    sequence_id: int
    num_messages: int
    txnid_least_bits: int
    txnid_most_bits: int
    highest_sequence_id: int
    is_chunk: bool
    marker: bool
    message_id: _pb.MessageIdData
    def __init__(self, *, producer_id: int | None = ..., sequence_id: int | None = ..., num_messages: int | None = ..., txnid_least_bits: int | None = ..., txnid_most_bits: int | None = ..., highest_sequence_id: int | None = ..., is_chunk: bool | None = ..., marker: bool | None = ..., message_id: _pb.MessageIdData | None = ...) -> None: ...

class CommandSendReceipt(_Message):
    PRODUCER_ID_FIELD_NUMBER: ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: ClassVar[int]
    HIGHEST_SEQUENCE_ID_FIELD_NUMBER: ClassVar[int]
    producer_id: int
    sequence_id: int
    message_id: _pb.MessageIdData
    highest_sequence_id: int
    def __init__(self, *, producer_id: int | None = ..., sequence_id: int | None = ..., message_id: _pb.MessageIdData | None = ..., highest_sequence_id: int | None = ...) -> None: ...

class CommandSendError(_Message):
    PRODUCER_ID_FIELD_NUMBER: ClassVar[int]
    SEQUENCE_ID_FIELD_NUMBER: ClassVar[int]
    ERROR_FIELD_NUMBER: ClassVar[int]
    MESSAGE_FIELD_NUMBER: ClassVar[int]
    producer_id: int
    sequence_id: int
    error: int
    message: str
    def __init__(self, *, producer_id: int | None = ..., sequence_id: int | None = ..., error: int | None = ..., message: str | None = ...) -> None: ...

class CommandMessage(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: ClassVar[int]
    REDELIVERY_COUNT_FIELD_NUMBER: ClassVar[int]
    ACK_SET_FIELD_NUMBER: ClassVar[int]
    CONSUMER_EPOCH_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    message_id: _pb.MessageIdData
    redelivery_count: int
    ack_set: _RepeatedScalar[int]
    consumer_epoch: int
    def __init__(self, *, consumer_id: int | None = ..., message_id: _pb.MessageIdData | None = ..., redelivery_count: int | None = ..., ack_set: Iterable[int] | None = ..., consumer_epoch: int | None = ...) -> None: ...

class CommandAck(_Message):
    class AckType(_Enum):
        Individual: ClassVar[int]
        Cumulative: ClassVar[int]
    Individual: ClassVar[int]
    Cumulative: ClassVar[int]
    class ValidationError(_Enum):
        UncompressedSizeCorruption: ClassVar[int]
        DecompressionError: ClassVar[int]
        ChecksumMismatch: ClassVar[int]
        BatchDeSerializeError: ClassVar[int]
        DecryptionError: ClassVar[int]
    UncompressedSizeCorruption: ClassVar[int]
    DecompressionError: ClassVar[int]
    ChecksumMismatch: ClassVar[int]
    BatchDeSerializeError: ClassVar[int]
    DecryptionError: ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    ACK_TYPE_FIELD_NUMBER: ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: ClassVar[int]
    VALIDATION_ERROR_FIELD_NUMBER: ClassVar[int]
    PROPERTIES_FIELD_NUMBER: ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    ack_type: int
    message_id: _RepeatedMessage[_pb.MessageIdData]
    validation_error: int
    properties: _RepeatedMessage[_pb.KeyLongValue]
    txnid_least_bits: int
    txnid_most_bits: int
    request_id: int
    def __init__(self, *, consumer_id: int | None = ..., ack_type: int | None = ..., message_id: Iterable[_pb.MessageIdData] | None = ..., validation_error: int | None = ..., properties: Iterable[_pb.KeyLongValue] | None = ..., txnid_least_bits: int | None = ..., txnid_most_bits: int | None = ..., request_id: int | None = ...) -> None: ...

class CommandAckResponse(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    TXNID_LEAST_BITS_FIELD_NUMBER: ClassVar[int]
    TXNID_MOST_BITS_FIELD_NUMBER: ClassVar[int]
    ERROR_FIELD_NUMBER: ClassVar[int]
    MESSAGE_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    txnid_least_bits: int
    txnid_most_bits: int
    error: int
    message: str
    request_id: int
    def __init__(self, *, consumer_id: int | None = ..., txnid_least_bits: int | None = ..., txnid_most_bits: int | None = ..., error: int | None = ..., message: str | None = ..., request_id: int | None = ...) -> None: ...

class CommandActiveConsumerChange(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    IS_ACTIVE_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    is_active: bool
    def __init__(self, *, consumer_id: int | None = ..., is_active: bool | None = ...) -> None: ...

class CommandFlow(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    MESSAGEPERMITS_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    messagePermits: int
    def __init__(self, *, consumer_id: int | None = ..., messagePermits: int | None = ...) -> None: ...

class CommandUnsubscribe(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    request_id: int
    def __init__(self, *, consumer_id: int | None = ..., request_id: int | None = ...) -> None: ...

class CommandSeek(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    MESSAGE_ID_FIELD_NUMBER: ClassVar[int]
    MESSAGE_PUBLISH_TIME_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    request_id: int
    message_id: _pb.MessageIdData
    message_publish_time: int
    def __init__(self, *, consumer_id: int | None = ..., request_id: int | None = ..., message_id: _pb.MessageIdData | None = ..., message_publish_time: int | None = ...) -> None: ...

class CommandReachedEndOfTopic(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    def __init__(self, *, consumer_id: int | None = ...) -> None: ...

class CommandTopicMigrated(_Message):
    class ResourceType(_Enum):
        Producer: ClassVar[int]
        Consumer: ClassVar[int]
    Producer: ClassVar[int]
    Consumer: ClassVar[int]
    RESOURCE_ID_FIELD_NUMBER: ClassVar[int]
    RESOURCE_TYPE_FIELD_NUMBER: ClassVar[int]
    BROKERSERVICEURL_FIELD_NUMBER: ClassVar[int]
    BROKERSERVICEURLTLS_FIELD_NUMBER: ClassVar[int]
    resource_id: int
    resource_type: int
    brokerServiceUrl: str
    brokerServiceUrlTls: str
    def __init__(self, *, resource_id: int | None = ..., resource_type: int | None = ..., brokerServiceUrl: str | None = ..., brokerServiceUrlTls: str | None = ...) -> None: ...

class CommandCloseProducer(_Message):
    PRODUCER_ID_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    ASSIGNEDBROKERSERVICEURL_FIELD_NUMBER: ClassVar[int]
    ASSIGNEDBROKERSERVICEURLTLS_FIELD_NUMBER: ClassVar[int]
    producer_id: int
    request_id: int
    assignedBrokerServiceUrl: str
    assignedBrokerServiceUrlTls: str
    def __init__(self, *, producer_id: int | None = ..., request_id: int | None = ..., assignedBrokerServiceUrl: str | None = ..., assignedBrokerServiceUrlTls: str | None = ...) -> None: ...

class CommandCloseConsumer(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    ASSIGNEDBROKERSERVICEURL_FIELD_NUMBER: ClassVar[int]
    ASSIGNEDBROKERSERVICEURLTLS_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    request_id: int
    assignedBrokerServiceUrl: str
    assignedBrokerServiceUrlTls: str
    def __init__(self, *, consumer_id: int | None = ..., request_id: int | None = ..., assignedBrokerServiceUrl: str | None = ..., assignedBrokerServiceUrlTls: str | None = ...) -> None: ...

class CommandRedeliverUnacknowledgedMessages(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    MESSAGE_IDS_FIELD_NUMBER: ClassVar[int]
    CONSUMER_EPOCH_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    message_ids: _RepeatedMessage[_pb.MessageIdData]
    consumer_epoch: int
    def __init__(self, *, consumer_id: int | None = ..., message_ids: Iterable[_pb.MessageIdData] | None = ..., consumer_epoch: int | None = ...) -> None: ...

class CommandSuccess(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    SCHEMA_FIELD_NUMBER: ClassVar[int]
    request_id: int
    schema: _pb.Schema
    def __init__(self, *, request_id: int | None = ..., schema: _pb.Schema | None = ...) -> None: ...

class CommandProducerSuccess(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    PRODUCER_NAME_FIELD_NUMBER: ClassVar[int]
    LAST_SEQUENCE_ID_FIELD_NUMBER: ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: ClassVar[int]
    TOPIC_EPOCH_FIELD_NUMBER: ClassVar[int]
    PRODUCER_READY_FIELD_NUMBER: ClassVar[int]
    request_id: int
    producer_name: str
    last_sequence_id: int
    schema_version: bytes
    topic_epoch: int
    producer_ready: bool
    def __init__(self, *, request_id: int | None = ..., producer_name: str | None = ..., last_sequence_id: int | None = ..., schema_version: bytes | None = ..., topic_epoch: int | None = ..., producer_ready: bool | None = ...) -> None: ...

class CommandError(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    ERROR_FIELD_NUMBER: ClassVar[int]
    MESSAGE_FIELD_NUMBER: ClassVar[int]
    request_id: int
    error: int
    message: str
    def __init__(self, *, request_id: int | None = ..., error: int | None = ..., message: str | None = ...) -> None: ...

class CommandPing(_Message):
    def __init__(self) -> None: ...

class CommandPong(_Message):
    def __init__(self) -> None: ...

class CommandConsumerStats(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    request_id: int
    consumer_id: int
    def __init__(self, *, request_id: int | None = ..., consumer_id: int | None = ...) -> None: ...

class CommandConsumerStatsResponse(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: ClassVar[int]
    MSGRATEOUT_FIELD_NUMBER: ClassVar[int]
    MSGTHROUGHPUTOUT_FIELD_NUMBER: ClassVar[int]
    MSGRATEREDELIVER_FIELD_NUMBER: ClassVar[int]
    CONSUMERNAME_FIELD_NUMBER: ClassVar[int]
    AVAILABLEPERMITS_FIELD_NUMBER: ClassVar[int]
    UNACKEDMESSAGES_FIELD_NUMBER: ClassVar[int]
    BLOCKEDCONSUMERONUNACKEDMSGS_FIELD_NUMBER: ClassVar[int]
    ADDRESS_FIELD_NUMBER: ClassVar[int]
    CONNECTEDSINCE_FIELD_NUMBER: ClassVar[int]
    TYPE_FIELD_NUMBER: ClassVar[int]
    MSGRATEEXPIRED_FIELD_NUMBER: ClassVar[int]
    MSGBACKLOG_FIELD_NUMBER: ClassVar[int]
    MESSAGEACKRATE_FIELD_NUMBER: ClassVar[int]
    request_id: int
    error_code: int
    error_message: str
    msgRateOut: float
    msgThroughputOut: float
    msgRateRedeliver: float
    consumerName: str
    availablePermits: int
    unackedMessages: int
    blockedConsumerOnUnackedMsgs: bool
    address: str
    connectedSince: str
    type: str
    msgRateExpired: float
    msgBacklog: int
    messageAckRate: float
    def __init__(self, *, request_id: int | None = ..., error_code: int | None = ..., error_message: str | None = ..., msgRateOut: float | None = ..., msgThroughputOut: float | None = ..., msgRateRedeliver: float | None = ..., consumerName: str | None = ..., availablePermits: int | None = ..., unackedMessages: int | None = ..., blockedConsumerOnUnackedMsgs: bool | None = ..., address: str | None = ..., connectedSince: str | None = ..., type: str | None = ..., msgRateExpired: float | None = ..., msgBacklog: int | None = ..., messageAckRate: float | None = ...) -> None: ...

class CommandGetLastMessageId(_Message):
    CONSUMER_ID_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    consumer_id: int
    request_id: int
    def __init__(self, *, consumer_id: int | None = ..., request_id: int | None = ...) -> None: ...

class CommandGetLastMessageIdResponse(_Message):
    LAST_MESSAGE_ID_FIELD_NUMBER: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    CONSUMER_MARK_DELETE_POSITION_FIELD_NUMBER: ClassVar[int]
    last_message_id: _pb.MessageIdData
    request_id: int
    consumer_mark_delete_position: _pb.MessageIdData
    def __init__(self, *, last_message_id: _pb.MessageIdData | None = ..., request_id: int | None = ..., consumer_mark_delete_position: _pb.MessageIdData | None = ...) -> None: ...

class CommandGetTopicsOfNamespace(_Message):
    class Mode(_Enum):
        PERSISTENT: ClassVar[int]
        NON_PERSISTENT: ClassVar[int]
        ALL: ClassVar[int]
    PERSISTENT: ClassVar[int]
    NON_PERSISTENT: ClassVar[int]
    ALL: ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    NAMESPACE_FIELD_NUMBER: ClassVar[int]
    MODE_FIELD_NUMBER: ClassVar[int]
    TOPICS_PATTERN_FIELD_NUMBER: ClassVar[int]
    TOPICS_HASH_FIELD_NUMBER: ClassVar[int]
    request_id: int
    namespace: str
    mode: int
    topics_pattern: str
    topics_hash: str
    def __init__(self, *, request_id: int | None = ..., namespace: str | None = ..., mode: int | None = ..., topics_pattern: str | None = ..., topics_hash: str | None = ...) -> None: ...

class CommandGetTopicsOfNamespaceResponse(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    TOPICS_FIELD_NUMBER: ClassVar[int]
    FILTERED_FIELD_NUMBER: ClassVar[int]
    TOPICS_HASH_FIELD_NUMBER: ClassVar[int]
    CHANGED_FIELD_NUMBER: ClassVar[int]
    request_id: int
    topics: _RepeatedScalar[str]
    filtered: bool
    topics_hash: str
    changed: bool
    def __init__(self, *, request_id: int | None = ..., topics: Iterable[str] | None = ..., filtered: bool | None = ..., topics_hash: str | None = ..., changed: bool | None = ...) -> None: ...

class CommandWatchTopicList(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    WATCHER_ID_FIELD_NUMBER: ClassVar[int]
    NAMESPACE_FIELD_NUMBER: ClassVar[int]
    TOPICS_PATTERN_FIELD_NUMBER: ClassVar[int]
    TOPICS_HASH_FIELD_NUMBER: ClassVar[int]
    request_id: int
    watcher_id: int
    namespace: str
    topics_pattern: str
    topics_hash: str
    def __init__(self, *, request_id: int | None = ..., watcher_id: int | None = ..., namespace: str | None = ..., topics_pattern: str | None = ..., topics_hash: str | None = ...) -> None: ...

class CommandWatchTopicListSuccess(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    WATCHER_ID_FIELD_NUMBER: ClassVar[int]
    TOPIC_FIELD_NUMBER: ClassVar[int]
    TOPICS_HASH_FIELD_NUMBER: ClassVar[int]
    request_id: int
    watcher_id: int
    topic: _RepeatedScalar[str]
    topics_hash: str
    def __init__(self, *, request_id: int | None = ..., watcher_id: int | None = ..., topic: Iterable[str] | None = ..., topics_hash: str | None = ...) -> None: ...

class CommandWatchTopicUpdate(_Message):
    WATCHER_ID_FIELD_NUMBER: ClassVar[int]
    NEW_TOPICS_FIELD_NUMBER: ClassVar[int]
    DELETED_TOPICS_FIELD_NUMBER: ClassVar[int]
    TOPICS_HASH_FIELD_NUMBER: ClassVar[int]
    watcher_id: int
    new_topics: _RepeatedScalar[str]
    deleted_topics: _RepeatedScalar[str]
    topics_hash: str
    def __init__(self, *, watcher_id: int | None = ..., new_topics: Iterable[str] | None = ..., deleted_topics: Iterable[str] | None = ..., topics_hash: str | None = ...) -> None: ...

class CommandWatchTopicListClose(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    WATCHER_ID_FIELD_NUMBER: ClassVar[int]
    request_id: int
    watcher_id: int
    def __init__(self, *, request_id: int | None = ..., watcher_id: int | None = ...) -> None: ...

class CommandGetSchema(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    TOPIC_FIELD_NUMBER: ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: ClassVar[int]
    request_id: int
    topic: str
    schema_version: bytes
    def __init__(self, *, request_id: int | None = ..., topic: str | None = ..., schema_version: bytes | None = ...) -> None: ...

class CommandGetSchemaResponse(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: ClassVar[int]
    SCHEMA_FIELD_NUMBER: ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: ClassVar[int]
    request_id: int
    error_code: int
    error_message: str
    schema: _pb.Schema
    schema_version: bytes
    def __init__(self, *, request_id: int | None = ..., error_code: int | None = ..., error_message: str | None = ..., schema: _pb.Schema | None = ..., schema_version: bytes | None = ...) -> None: ...

class CommandGetOrCreateSchema(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    TOPIC_FIELD_NUMBER: ClassVar[int]
    SCHEMA_FIELD_NUMBER: ClassVar[int]
    request_id: int
    topic: str
    schema: _pb.Schema
    def __init__(self, *, request_id: int | None = ..., topic: str | None = ..., schema: _pb.Schema | None = ...) -> None: ...

class CommandGetOrCreateSchemaResponse(_Message):
    REQUEST_ID_FIELD_NUMBER: ClassVar[int]
    ERROR_CODE_FIELD_NUMBER: ClassVar[int]
    ERROR_MESSAGE_FIELD_NUMBER: ClassVar[int]
    SCHEMA_VERSION_FIELD_NUMBER: ClassVar[int]
    request_id: int
    error_code: int
    error_message: str
    schema_version: bytes
    def __init__(self, *, request_id: int | None = ..., error_code: int | None = ..., error_message: str | None = ..., schema_version: bytes | None = ...) -> None: ...

class BaseCommand(_Message):
    class Type(_Enum):
        CONNECT: ClassVar[int]
        CONNECTED: ClassVar[int]
        SUBSCRIBE: ClassVar[int]
        PRODUCER: ClassVar[int]
        SEND: ClassVar[int]
        SEND_RECEIPT: ClassVar[int]
        SEND_ERROR: ClassVar[int]
        MESSAGE: ClassVar[int]
        ACK: ClassVar[int]
        FLOW: ClassVar[int]
        UNSUBSCRIBE: ClassVar[int]
        SUCCESS: ClassVar[int]
        ERROR: ClassVar[int]
        CLOSE_PRODUCER: ClassVar[int]
        CLOSE_CONSUMER: ClassVar[int]
        PRODUCER_SUCCESS: ClassVar[int]
        PING: ClassVar[int]
        PONG: ClassVar[int]
        REDELIVER_UNACKNOWLEDGED_MESSAGES: ClassVar[int]
        PARTITIONED_METADATA: ClassVar[int]
        PARTITIONED_METADATA_RESPONSE: ClassVar[int]
        LOOKUP: ClassVar[int]
        LOOKUP_RESPONSE: ClassVar[int]
        CONSUMER_STATS: ClassVar[int]
        CONSUMER_STATS_RESPONSE: ClassVar[int]
        REACHED_END_OF_TOPIC: ClassVar[int]
        SEEK: ClassVar[int]
        GET_LAST_MESSAGE_ID: ClassVar[int]
        GET_LAST_MESSAGE_ID_RESPONSE: ClassVar[int]
        ACTIVE_CONSUMER_CHANGE: ClassVar[int]
        GET_TOPICS_OF_NAMESPACE: ClassVar[int]
        GET_TOPICS_OF_NAMESPACE_RESPONSE: ClassVar[int]
        GET_SCHEMA: ClassVar[int]
        GET_SCHEMA_RESPONSE: ClassVar[int]
        AUTH_CHALLENGE: ClassVar[int]
        AUTH_RESPONSE: ClassVar[int]
        ACK_RESPONSE: ClassVar[int]
        GET_OR_CREATE_SCHEMA: ClassVar[int]
        GET_OR_CREATE_SCHEMA_RESPONSE: ClassVar[int]
        NEW_TXN: ClassVar[int]
        NEW_TXN_RESPONSE: ClassVar[int]
        ADD_PARTITION_TO_TXN: ClassVar[int]
        ADD_PARTITION_TO_TXN_RESPONSE: ClassVar[int]
        ADD_SUBSCRIPTION_TO_TXN: ClassVar[int]
        ADD_SUBSCRIPTION_TO_TXN_RESPONSE: ClassVar[int]
        END_TXN: ClassVar[int]
        END_TXN_RESPONSE: ClassVar[int]
        END_TXN_ON_PARTITION: ClassVar[int]
        END_TXN_ON_PARTITION_RESPONSE: ClassVar[int]
        END_TXN_ON_SUBSCRIPTION: ClassVar[int]
        END_TXN_ON_SUBSCRIPTION_RESPONSE: ClassVar[int]
        TC_CLIENT_CONNECT_REQUEST: ClassVar[int]
        TC_CLIENT_CONNECT_RESPONSE: ClassVar[int]
        WATCH_TOPIC_LIST: ClassVar[int]
        WATCH_TOPIC_LIST_SUCCESS: ClassVar[int]
        WATCH_TOPIC_UPDATE: ClassVar[int]
        WATCH_TOPIC_LIST_CLOSE: ClassVar[int]
        TOPIC_MIGRATED: ClassVar[int]
    CONNECT: ClassVar[int]
    CONNECTED: ClassVar[int]
    SUBSCRIBE: ClassVar[int]
    PRODUCER: ClassVar[int]
    SEND: ClassVar[int]
    SEND_RECEIPT: ClassVar[int]
    SEND_ERROR: ClassVar[int]
    MESSAGE: ClassVar[int]
    ACK: ClassVar[int]
    FLOW: ClassVar[int]
    UNSUBSCRIBE: ClassVar[int]
    SUCCESS: ClassVar[int]
    ERROR: ClassVar[int]
    CLOSE_PRODUCER: ClassVar[int]
    CLOSE_CONSUMER: ClassVar[int]
    PRODUCER_SUCCESS: ClassVar[int]
    PING: ClassVar[int]
    PONG: ClassVar[int]
    REDELIVER_UNACKNOWLEDGED_MESSAGES: ClassVar[int]
    PARTITIONED_METADATA: ClassVar[int]
    PARTITIONED_METADATA_RESPONSE: ClassVar[int]
    LOOKUP: ClassVar[int]
    LOOKUP_RESPONSE: ClassVar[int]
    CONSUMER_STATS: ClassVar[int]
    CONSUMER_STATS_RESPONSE: ClassVar[int]
    REACHED_END_OF_TOPIC: ClassVar[int]
    SEEK: ClassVar[int]
    GET_LAST_MESSAGE_ID: ClassVar[int]
    GET_LAST_MESSAGE_ID_RESPONSE: ClassVar[int]
    ACTIVE_CONSUMER_CHANGE: ClassVar[int]
    GET_TOPICS_OF_NAMESPACE: ClassVar[int]
    GET_TOPICS_OF_NAMESPACE_RESPONSE: ClassVar[int]
    GET_SCHEMA: ClassVar[int]
    GET_SCHEMA_RESPONSE: ClassVar[int]
    AUTH_CHALLENGE: ClassVar[int]
    AUTH_RESPONSE: ClassVar[int]
    ACK_RESPONSE: ClassVar[int]
    GET_OR_CREATE_SCHEMA: ClassVar[int]
    GET_OR_CREATE_SCHEMA_RESPONSE: ClassVar[int]
    NEW_TXN: ClassVar[int]
    NEW_TXN_RESPONSE: ClassVar[int]
    ADD_PARTITION_TO_TXN: ClassVar[int]
    ADD_PARTITION_TO_TXN_RESPONSE: ClassVar[int]
    ADD_SUBSCRIPTION_TO_TXN: ClassVar[int]
    ADD_SUBSCRIPTION_TO_TXN_RESPONSE: ClassVar[int]
    END_TXN: ClassVar[int]
    END_TXN_RESPONSE: ClassVar[int]
    END_TXN_ON_PARTITION: ClassVar[int]
    END_TXN_ON_PARTITION_RESPONSE: ClassVar[int]
    END_TXN_ON_SUBSCRIPTION: ClassVar[int]
    END_TXN_ON_SUBSCRIPTION_RESPONSE: ClassVar[int]
    TC_CLIENT_CONNECT_REQUEST: ClassVar[int]
    TC_CLIENT_CONNECT_RESPONSE: ClassVar[int]
    WATCH_TOPIC_LIST: ClassVar[int]
    WATCH_TOPIC_LIST_SUCCESS: ClassVar[int]
    WATCH_TOPIC_UPDATE: ClassVar[int]
    WATCH_TOPIC_LIST_CLOSE: ClassVar[int]
    TOPIC_MIGRATED: ClassVar[int]
    TYPE_FIELD_NUMBER: ClassVar[int]
    CONNECT_FIELD_NUMBER: ClassVar[int]
    CONNECTED_FIELD_NUMBER: ClassVar[int]
    SUBSCRIBE_FIELD_NUMBER: ClassVar[int]
    PRODUCER_FIELD_NUMBER: ClassVar[int]
    SEND_FIELD_NUMBER: ClassVar[int]
    SEND_RECEIPT_FIELD_NUMBER: ClassVar[int]
    SEND_ERROR_FIELD_NUMBER: ClassVar[int]
    MESSAGE_FIELD_NUMBER: ClassVar[int]
    ACK_FIELD_NUMBER: ClassVar[int]
    FLOW_FIELD_NUMBER: ClassVar[int]
    UNSUBSCRIBE_FIELD_NUMBER: ClassVar[int]
    SUCCESS_FIELD_NUMBER: ClassVar[int]
    ERROR_FIELD_NUMBER: ClassVar[int]
    CLOSE_PRODUCER_FIELD_NUMBER: ClassVar[int]
    CLOSE_CONSUMER_FIELD_NUMBER: ClassVar[int]
    PRODUCER_SUCCESS_FIELD_NUMBER: ClassVar[int]
    PING_FIELD_NUMBER: ClassVar[int]
    PONG_FIELD_NUMBER: ClassVar[int]
    REDELIVERUNACKNOWLEDGEDMESSAGES_FIELD_NUMBER: ClassVar[int]
    PARTITIONMETADATA_FIELD_NUMBER: ClassVar[int]
    PARTITIONMETADATARESPONSE_FIELD_NUMBER: ClassVar[int]
    LOOKUPTOPIC_FIELD_NUMBER: ClassVar[int]
    LOOKUPTOPICRESPONSE_FIELD_NUMBER: ClassVar[int]
    CONSUMERSTATS_FIELD_NUMBER: ClassVar[int]
    CONSUMERSTATSRESPONSE_FIELD_NUMBER: ClassVar[int]
    REACHEDENDOFTOPIC_FIELD_NUMBER: ClassVar[int]
    SEEK_FIELD_NUMBER: ClassVar[int]
    GETLASTMESSAGEID_FIELD_NUMBER: ClassVar[int]
    GETLASTMESSAGEIDRESPONSE_FIELD_NUMBER: ClassVar[int]
    ACTIVE_CONSUMER_CHANGE_FIELD_NUMBER: ClassVar[int]
    GETTOPICSOFNAMESPACE_FIELD_NUMBER: ClassVar[int]
    GETTOPICSOFNAMESPACERESPONSE_FIELD_NUMBER: ClassVar[int]
    GETSCHEMA_FIELD_NUMBER: ClassVar[int]
    GETSCHEMARESPONSE_FIELD_NUMBER: ClassVar[int]
    AUTHCHALLENGE_FIELD_NUMBER: ClassVar[int]
    AUTHRESPONSE_FIELD_NUMBER: ClassVar[int]
    ACKRESPONSE_FIELD_NUMBER: ClassVar[int]
    GETORCREATESCHEMA_FIELD_NUMBER: ClassVar[int]
    GETORCREATESCHEMARESPONSE_FIELD_NUMBER: ClassVar[int]
    WATCHTOPICLIST_FIELD_NUMBER: ClassVar[int]
    WATCHTOPICLISTSUCCESS_FIELD_NUMBER: ClassVar[int]
    WATCHTOPICUPDATE_FIELD_NUMBER: ClassVar[int]
    WATCHTOPICLISTCLOSE_FIELD_NUMBER: ClassVar[int]
    TOPICMIGRATED_FIELD_NUMBER: ClassVar[int]
    type: int
    connect: _pb.CommandConnect
    connected: _pb.CommandConnected
    subscribe: _pb.CommandSubscribe
    producer: _pb.CommandProducer
    send: _pb.CommandSend
    send_receipt: _pb.CommandSendReceipt
    send_error: _pb.CommandSendError
    message: _pb.CommandMessage
    ack: _pb.CommandAck
    flow: _pb.CommandFlow
    unsubscribe: _pb.CommandUnsubscribe
    success: _pb.CommandSuccess
    error: _pb.CommandError
    close_producer: _pb.CommandCloseProducer
    close_consumer: _pb.CommandCloseConsumer
    producer_success: _pb.CommandProducerSuccess
    ping: _pb.CommandPing
    pong: _pb.CommandPong
    redeliverUnacknowledgedMessages: _pb.CommandRedeliverUnacknowledgedMessages
    partitionMetadata: _pb.CommandPartitionedTopicMetadata
    partitionMetadataResponse: _pb.CommandPartitionedTopicMetadataResponse
    lookupTopic: _pb.CommandLookupTopic
    lookupTopicResponse: _pb.CommandLookupTopicResponse
    consumerStats: _pb.CommandConsumerStats
    consumerStatsResponse: _pb.CommandConsumerStatsResponse
    reachedEndOfTopic: _pb.CommandReachedEndOfTopic
    seek: _pb.CommandSeek
    getLastMessageId: _pb.CommandGetLastMessageId
    getLastMessageIdResponse: _pb.CommandGetLastMessageIdResponse
    active_consumer_change: _pb.CommandActiveConsumerChange
    getTopicsOfNamespace: _pb.CommandGetTopicsOfNamespace
    getTopicsOfNamespaceResponse: _pb.CommandGetTopicsOfNamespaceResponse
    getSchema: _pb.CommandGetSchema
    getSchemaResponse: _pb.CommandGetSchemaResponse
    authChallenge: _pb.CommandAuthChallenge
    authResponse: _pb.CommandAuthResponse
    ackResponse: _pb.CommandAckResponse
    getOrCreateSchema: _pb.CommandGetOrCreateSchema
    getOrCreateSchemaResponse: _pb.CommandGetOrCreateSchemaResponse
    watchTopicList: _pb.CommandWatchTopicList
    watchTopicListSuccess: _pb.CommandWatchTopicListSuccess
    watchTopicUpdate: _pb.CommandWatchTopicUpdate
    watchTopicListClose: _pb.CommandWatchTopicListClose
    topicMigrated: _pb.CommandTopicMigrated
    def __init__(self, *, type: int | None = ..., connect: _pb.CommandConnect | None = ..., connected: _pb.CommandConnected | None = ..., subscribe: _pb.CommandSubscribe | None = ..., producer: _pb.CommandProducer | None = ..., send: _pb.CommandSend | None = ..., send_receipt: _pb.CommandSendReceipt | None = ..., send_error: _pb.CommandSendError | None = ..., message: _pb.CommandMessage | None = ..., ack: _pb.CommandAck | None = ..., flow: _pb.CommandFlow | None = ..., unsubscribe: _pb.CommandUnsubscribe | None = ..., success: _pb.CommandSuccess | None = ..., error: _pb.CommandError | None = ..., close_producer: _pb.CommandCloseProducer | None = ..., close_consumer: _pb.CommandCloseConsumer | None = ..., producer_success: _pb.CommandProducerSuccess | None = ..., ping: _pb.CommandPing | None = ..., pong: _pb.CommandPong | None = ..., redeliverUnacknowledgedMessages: _pb.CommandRedeliverUnacknowledgedMessages | None = ..., partitionMetadata: _pb.CommandPartitionedTopicMetadata | None = ..., partitionMetadataResponse: _pb.CommandPartitionedTopicMetadataResponse | None = ..., lookupTopic: _pb.CommandLookupTopic | None = ..., lookupTopicResponse: _pb.CommandLookupTopicResponse | None = ..., consumerStats: _pb.CommandConsumerStats | None = ..., consumerStatsResponse: _pb.CommandConsumerStatsResponse | None = ..., reachedEndOfTopic: _pb.CommandReachedEndOfTopic | None = ..., seek: _pb.CommandSeek | None = ..., getLastMessageId: _pb.CommandGetLastMessageId | None = ..., getLastMessageIdResponse: _pb.CommandGetLastMessageIdResponse | None = ..., active_consumer_change: _pb.CommandActiveConsumerChange | None = ..., getTopicsOfNamespace: _pb.CommandGetTopicsOfNamespace | None = ..., getTopicsOfNamespaceResponse: _pb.CommandGetTopicsOfNamespaceResponse | None = ..., getSchema: _pb.CommandGetSchema | None = ..., getSchemaResponse: _pb.CommandGetSchemaResponse | None = ..., authChallenge: _pb.CommandAuthChallenge | None = ..., authResponse: _pb.CommandAuthResponse | None = ..., ackResponse: _pb.CommandAckResponse | None = ..., getOrCreateSchema: _pb.CommandGetOrCreateSchema | None = ..., getOrCreateSchemaResponse: _pb.CommandGetOrCreateSchemaResponse | None = ..., watchTopicList: _pb.CommandWatchTopicList | None = ..., watchTopicListSuccess: _pb.CommandWatchTopicListSuccess | None = ..., watchTopicUpdate: _pb.CommandWatchTopicUpdate | None = ..., watchTopicListClose: _pb.CommandWatchTopicListClose | None = ..., topicMigrated: _pb.CommandTopicMigrated | None = ...) -> None: ...
