"""Command constructors: every one round-trips through a frame; wire details that clients rely on."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from clients.protocol import commands as c
from clients.protocol import frames as f
from clients.protocol import pulsar_api_pb2 as pb

T = pb.BaseCommand
SCHEMA = c.schema("s", pb.Schema.String, b"", {"a": "b"})

ALL = [
    c.connect("Pulsar-Python-quire", auth_data=b"tok"),
    c.connected("Pulsar Server quire", 20, max_message_size=5 * 1024 * 1024, supports_topic_watchers=False),
    c.ping(),
    c.pong(),
    c.auth_challenge("srv", "token", b"ch", 20),
    c.auth_response("cli", "token", b"resp", 20),
    c.partitioned_metadata("persistent://public/default/t", 1),
    c.partitioned_metadata_response(1, 4),
    c.partitioned_metadata_response(1, error=pb.TopicNotFound, message="no"),
    c.lookup("persistent://public/default/t", 2, authoritative=True),
    c.lookup_response(2, broker_service_url="pulsar://localhost:6650"),
    c.lookup_response(2, broker_service_url="pulsar://b:6650", redirect=True, authoritative=False),
    c.lookup_response(2, error=pb.ServiceNotReady, message="later"),
    c.get_topics_of_namespace(3, "public/default", 2, "persistent://public/default/x.*"),
    c.get_topics_of_namespace_response(3, ["persistent://public/default/x-partition-0"]),
    c.producer("t", 1, 4, producer_name="p", access_mode=pb.Exclusive, metadata={"k": "v"}, schema_=SCHEMA),
    c.producer_success(4, "p", 10, schema_version=b"\x00", producer_ready=False),
    c.send(1, 5, 10, highest_sequence_id=14),
    c.send(1, 6, is_chunk=True),
    c.send_receipt(1, 5, 3, 7, partition=0),
    c.send_error(1, 5, pb.ChecksumError, "bad crc"),
    c.close_producer(1, 9),
    c.subscribe(
        "t", "sub", pb.CommandSubscribe.Key_Shared, 2, 5,
        consumer_name="cn", durable=False, start_message_id=c.message_id(-1, -1),
        initial_position=pb.CommandSubscribe.Earliest, key_shared_mode=pb.STICKY,
        subscription_properties={"x": "y"}, schema_=SCHEMA, read_compacted=True,
    ),
    c.flow(2, 1000),
    c.message(2, 3, 4, partition=1, redelivery_count=2, ack_set=[-1, 5]),
    c.ack(2, [c.message_id(3, 4, ack_set=[6])], cumulative=True, request_id=8),
    c.ack(2, [c.message_id(3, 4)], validation_error=pb.CommandAck.ChecksumMismatch),
    c.ack_response(2, 8, error=pb.UnknownError, message="m"),
    c.redeliver_unacknowledged(2, [c.message_id(3, 4)]),
    c.redeliver_unacknowledged(2),
    c.unsubscribe(2, 10),
    c.close_consumer(2, 11, assigned_broker_url="pulsar://x:1"),
    c.seek(2, 12, message_id_=c.message_id(3, 4)),
    c.seek(2, 12, publish_time=1234),
    c.reached_end_of_topic(2),
    c.active_consumer_change(2, True),
    c.get_last_message_id(2, 13),
    c.get_last_message_id_response(13, c.message_id(3, 4, 0, 9), mark_delete_position=c.message_id(3, 2)),
    c.consumer_stats(2, 14),
    c.consumer_stats_response(14, msgRateOut=1.5, availablePermits=10, consumerName="cn"),
    c.topic_migrated(2, True, "pulsar://other:6650"),
    c.success(15, schema_=SCHEMA),
    c.error(15, pb.ProducerBusy, "busy"),
    c.get_schema(16, "t", b"\x01"),
    c.get_schema_response(16, schema_=SCHEMA, schema_version=b"\x01"),
    c.get_or_create_schema(17, "t", SCHEMA),
    c.get_or_create_schema_response(17, schema_version=b"\x02"),
]


@pytest.mark.parametrize("cmd", ALL, ids=lambda cmd: c.type_name(cmd))
def test_round_trip(cmd: pb.BaseCommand) -> None:
    assert cmd.IsInitialized(), cmd.FindInitializationErrors()
    (frame,) = f.FrameDecoder().feed(f.encode_command(cmd))
    assert frame.command == cmd
    # The sub-command selected by the type is the one present.
    assert c.sub_command(frame.command).IsInitialized()
    assert frame.command.HasField(c.FIELD_BY_TYPE[cmd.type])


def test_field_number_equals_type() -> None:
    for number, name in c.FIELD_BY_TYPE.items():
        assert T.DESCRIPTOR.fields_by_name[name].number == number
        assert T.Type.Name(number)  # each field has its Type value


def test_earliest_is_masked_to_uint64_and_read_back_signed() -> None:
    mid = c.message_id(-1, -1)
    assert mid.ledgerId == 2**64 - 1
    # ledgerId=1 varint of 2**64-1 is 10 bytes: ff*9 01.
    assert mid.SerializeToString().startswith(b"\x08" + b"\xff" * 9 + b"\x01")
    assert c.message_id_tuple(mid) == (-1, -1, -1, -1)
    latest = c.message_id(c.INT64_MAX, c.INT64_MAX)
    assert c.message_id_tuple(latest)[:2] == (c.INT64_MAX, c.INT64_MAX)


def test_responses_set_explicit_response_field() -> None:
    # The C++ client treats a response without `response` as a failure.
    ok = c.partitioned_metadata_response(1, 0).partitionMetadataResponse
    assert ok.HasField("response") and ok.HasField("partitions") and ok.partitions == 0
    lk = c.lookup_response(1, broker_service_url="pulsar://h:1").lookupTopicResponse
    assert lk.response == pb.CommandLookupTopicResponse.Connect and lk.authoritative


def test_receipt_always_carries_message_id_and_message_always_partition() -> None:
    assert c.send_receipt(1, 2, 3, 4).send_receipt.HasField("message_id")
    assert c.message(1, 2, 3).message.message_id.HasField("partition")


def test_batch_presence_semantics() -> None:
    assert not c.message_metadata("p", 1, 1).HasField("num_messages_in_batch")
    assert c.message_metadata("p", 1, 1, num_messages_in_batch=1).HasField("num_messages_in_batch")
    assert not c.send(1, 1).send.HasField("num_messages")


def test_seek_needs_one_target() -> None:
    with pytest.raises(ValueError):
        c.seek(1, 2)


@given(st.integers(0, 2**64 - 1), st.integers(0, 2**64 - 1), st.text(max_size=40), st.integers(0, 2**63 - 1))
def test_hand_encoded_send_and_metadata_match_protobuf(producer_id: int, seq: int, name: str, publish: int) -> None:
    """The unbatched send's hot path writes SEND and its MessageMetadata without protobuf objects."""
    assert c.send_bytes(producer_id, seq) == c.send(producer_id, seq).SerializeToString()
    expected = c.message_metadata(name, seq, publish).SerializeToString()
    assert c.plain_message_metadata(name.encode(), seq, publish) == expected


def test_one_plain_send_encoder_reused_matches_protobuf() -> None:
    """A producer's ``PlainSend`` serves every message: sequence ids and publish times that
    repeat, grow and go back give protobuf's bytes each time."""
    plain = c.PlainSend(300, "producer-7".encode())
    for seq, publish in [(0, 1_700_000_000_000), (1, 1_700_000_000_000), (2, 1_700_000_000_001), (128, 5),
                         (3, 1_700_000_000_001), (2**40, 2**63 - 1), (4, 0)]:
        send, meta = plain.parts(seq, publish)
        assert send == c.send(300, seq).SerializeToString()
        assert meta == c.message_metadata("producer-7", seq, publish).SerializeToString()
