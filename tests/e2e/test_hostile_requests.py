"""Requests that once ended or stalled a whole standalone (issue 10, items 2, 3 and 5), each
sent as raw frames to a live ``quire standalone``: every one gets a clear answer and the
process keeps serving other connections."""

from __future__ import annotations

import socket
import struct
import threading
import time
import uuid

import httpx
import pulsar

from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from tests.e2e.conftest import Standalone
from tests.e2e.raw_protocol import RawConnection, assert_serving, next_request_id

T = pb.BaseCommand
ChecksumError = pb.ServerError.ChecksumError


def _topic(prefix: str) -> str:
    return f"persistent://public/default/{prefix}-{uuid.uuid4().hex[:8]}"


def _entry_with_raw_metadata(meta: bytes, payload: bytes) -> bytes:
    """A SEND's stored entry whose metadata section is ``meta`` as given, with a right CRC."""
    section = len(meta).to_bytes(4, "big") + meta + payload
    return (0x0E01).to_bytes(2, "big") + frames.crc32c(section).to_bytes(4, "big") + section


def _read_all(standalone: Standalone, topic: str) -> list[bytes]:
    client = standalone.client()
    try:
        reader = client.create_reader(topic, pulsar.MessageId.earliest)
        out = []
        while reader.has_message_available():
            out.append(reader.read_next(timeout_millis=10000).data())
        return out
    finally:
        client.close()


# -- item 2: one request must never end the process ------------------------------------------


def test_send_without_payload_is_rejected(standalone: Standalone) -> None:
    topic = _topic("no-payload")
    with RawConnection(standalone.port) as conn:
        conn.handshake()
        conn.create_producer(topic)
        conn.send(C.send(1, 0))  # a SEND with no metadata and no payload
        err = conn.wait_for(T.SEND_ERROR).command.send_error
        assert (err.producer_id, err.sequence_id, err.error) == (1, 0, ChecksumError)
        # the producer goes on
        conn.send(frames.encode_payload_command(C.send(1, 1), C.message_metadata("raw-p", 1, 1), b"ok"))
        assert conn.wait_for(T.SEND_RECEIPT).command.send_receipt.sequence_id == 1
    assert_serving(standalone.port, standalone.proc)
    assert _read_all(standalone, topic) == [b"ok"]


def test_send_with_unparseable_metadata_is_rejected_and_not_stored(standalone: Standalone) -> None:
    """The CRC is right but the metadata is no MessageMetadata (or lacks its required fields):
    nothing is stored, so no consumer ever meets it."""
    topic = _topic("bad-meta")
    bad = [
        b"\xff\xff\xff\xff",                              # not protobuf
        b"",                                              # parses, misses every required field
        pb.MessageMetadata(producer_name="raw-p").SerializePartialToString(),  # misses sequence_id, publish_time
        C.message_metadata("raw-p", 5, 1, num_messages_in_batch=-3).SerializeToString(),  # impossible batch size
    ]
    with RawConnection(standalone.port) as conn:
        conn.handshake()
        conn.create_producer(topic)
        for seq, meta in enumerate(bad):
            conn.send(frames.frame_with_entry(C.send(1, seq), _entry_with_raw_metadata(meta, b"evil")))
            err = conn.wait_for(T.SEND_ERROR).command.send_error
            assert (err.sequence_id, err.error) == (seq, ChecksumError), err
            assert "metadata" in err.message.lower()
        good = len(bad)
        conn.send(frames.encode_payload_command(C.send(1, good), C.message_metadata("raw-p", good, 1), b"good"))
        assert conn.wait_for(T.SEND_RECEIPT).command.send_receipt.sequence_id == good
    assert_serving(standalone.port, standalone.proc)
    assert _read_all(standalone, topic) == [b"good"]


def test_deeply_nested_topics_pattern_is_answered(standalone: Standalone) -> None:
    pattern = "persistent://public/default/" + "(" * 600 + "a" + ")" * 600
    with RawConnection(standalone.port) as conn:
        conn.handshake()
        rid = next_request_id()
        conn.send(C.get_topics_of_namespace(rid, "public/default", pattern=pattern))
        reply = conn.wait_for(T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
                              lambda f: f.command.getTopicsOfNamespaceResponse.request_id == rid)
        # longer than subscription_pattern_max_length: answered unfiltered, the client filters
        assert not reply.command.getTopicsOfNamespaceResponse.filtered
    assert_serving(standalone.port, standalone.proc)


def test_partition_index_beyond_int32_is_an_invalid_topic_name(standalone: Standalone) -> None:
    topic = "persistent://public/default/big-partition-99999999999999999999"
    with RawConnection(standalone.port) as conn:
        conn.handshake()
        reply = conn.lookup(topic)
        assert (reply.response, reply.error) == (pb.CommandLookupTopicResponse.Failed, pb.ServerError.InvalidTopicName)
        rid = next_request_id()
        conn.send(C.partitioned_metadata(topic, rid))
        pm = conn.wait_for(T.PARTITIONED_METADATA_RESPONSE).command.partitionMetadataResponse
        assert pm.error == pb.ServerError.InvalidTopicName
        rid = next_request_id()
        conn.send(C.producer(topic, 1, rid))
        err = conn.wait_for(T.ERROR, lambda f: f.command.error.request_id == rid).command.error
        assert err.error == pb.ServerError.InvalidTopicName
        rid = next_request_id()
        conn.send(C.subscribe(topic, "s", pb.CommandSubscribe.Exclusive, 1, rid))
        err = conn.wait_for(T.ERROR, lambda f: f.command.error.request_id == rid).command.error
        assert err.error == pb.ServerError.InvalidTopicName
    assert_serving(standalone.port, standalone.proc)


def test_partition_suffix_without_a_valid_index_is_an_ordinary_topic(standalone: Standalone) -> None:
    """As Pulsar's TopicName: ``-partition-01`` or ``-partition-x`` is no partition index."""
    for suffix in ("-partition-01", "-partition-x", "-partition-"):
        topic = _topic("plain") + suffix
        with RawConnection(standalone.port) as conn:
            conn.handshake()
            conn.create_producer(topic)
            conn.send(frames.encode_payload_command(C.send(1, 0), C.message_metadata("raw-p", 0, 1), b"m"))
            assert conn.wait_for(T.SEND_RECEIPT).command.send_receipt.sequence_id == 0
    assert_serving(standalone.port, standalone.proc)


# -- item 3: no request may stall the event loop ----------------------------------------------


def test_catastrophic_backtracking_pattern_is_matched_in_linear_time(standalone: Standalone) -> None:
    ns = f"public/evil-{uuid.uuid4().hex[:6]}"
    assert httpx.put(f"{standalone.admin}/admin/v2/namespaces/{ns}").status_code == 204
    good, bad = "a" * 40, "a" * 40 + "!"  # a backtracking engine takes 2^40 steps on `bad`
    with RawConnection(standalone.port) as conn:
        conn.handshake()
        for i, local in enumerate((good, bad, "other")):
            conn.create_producer(f"persistent://{ns}/{local}", producer_id=i + 1)
        rid = next_request_id()
        conn.send(C.get_topics_of_namespace(rid, ns, pattern=f"persistent://{ns}/(a+)+$"))
        # Meanwhile another connection is served (the event loop is not stalled).
        served: list[bool] = []
        probe = threading.Thread(target=lambda: served.append(assert_serving(standalone.port) is None))
        probe.start()
        reply = conn.wait_for(T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
                              lambda f: f.command.getTopicsOfNamespaceResponse.request_id == rid, timeout=30)
        probe.join(30)
    assert served == [True]
    r = reply.command.getTopicsOfNamespaceResponse
    assert r.filtered and list(r.topics) == [f"persistent://{ns}/{good}"]
    assert_serving(standalone.port, standalone.proc)


def test_topics_pattern_matches_the_whole_name_as_pulsar(standalone: Standalone) -> None:
    """Pulsar matches the pattern against the whole ``tenant/ns/topic`` of the partitioned topic
    (``-partition-N`` removed) and answers the full names."""
    ns = f"public/pat-{uuid.uuid4().hex[:6]}"
    assert httpx.put(f"{standalone.admin}/admin/v2/namespaces/{ns}").status_code == 204
    assert httpx.put(f"{standalone.admin}/admin/v2/persistent/{ns}/orders/partitions", json=2).status_code == 204
    with RawConnection(standalone.port) as conn:
        conn.handshake()
        for i, local in enumerate(("orders-partition-0", "orders-partition-1", "orders-eu", "returns")):
            conn.create_producer(f"persistent://{ns}/{local}", producer_id=i + 1)

        def topics(pattern: str) -> tuple[list[str], bool]:
            rid = next_request_id()
            conn.send(C.get_topics_of_namespace(rid, ns, pattern=pattern))
            r = conn.wait_for(T.GET_TOPICS_OF_NAMESPACE_RESPONSE,
                              lambda f: f.command.getTopicsOfNamespaceResponse.request_id == rid
                              ).command.getTopicsOfNamespaceResponse
            return sorted(t.rsplit("/", 1)[1] for t in r.topics), r.filtered

        assert topics(f"persistent://{ns}/orders") == (["orders-partition-0", "orders-partition-1"], True)
        assert topics(f"{ns}/orders.*") == (["orders-eu", "orders-partition-0", "orders-partition-1"], True)
        assert topics(f"persistent://{ns}/ret.*") == (["returns"], True)
        # RE2 has no look-around: unfiltered, the client applies its own regex
        assert topics(f"persistent://{ns}/(?!orders).*") == (
            ["orders-eu", "orders-partition-0", "orders-partition-1", "returns"], False)
        # not a regular expression at all
        rid = next_request_id()
        conn.send(C.get_topics_of_namespace(rid, ns, pattern=f"{ns}/[unclosed"))
        err = conn.wait_for(T.ERROR, lambda f: f.command.error.request_id == rid).command.error
        assert "pattern" in err.message
    assert_serving(standalone.port, standalone.proc)


# -- item 5: wrong errors ---------------------------------------------------------------------


def test_send_for_unknown_producer_is_answered_and_closes_the_connection(standalone: Standalone) -> None:
    """Pulsar closes a connection that sends for a producer it never created; we say why first."""
    with RawConnection(standalone.port) as conn:
        conn.handshake()
        conn.send(frames.encode_payload_command(C.send(77, 3), C.message_metadata("ghost", 3, 1), b"lost?"))
        err = conn.wait_for(T.SEND_ERROR).command.send_error
        assert (err.producer_id, err.sequence_id) == (77, 3)
        assert err.error == pb.ServerError.NotAllowedError and "77" in err.message
        assert conn.wait_closed()
    assert_serving(standalone.port, standalone.proc)


def test_send_after_close_producer_is_dropped_quietly(standalone: Standalone) -> None:
    """A SEND racing the client's own CLOSE_PRODUCER (or a broker-side close) is dropped, as
    Pulsar's recently-closed producers: the connection stays."""
    topic = _topic("closed-p")
    with RawConnection(standalone.port) as conn:
        conn.handshake()
        conn.create_producer(topic)
        rid = next_request_id()
        conn.send(C.close_producer(1, rid),
                  frames.encode_payload_command(C.send(1, 0), C.message_metadata("raw-p", 0, 1), b"late"))
        conn.wait_for(T.SUCCESS, lambda f: f.command.success.request_id == rid)
        assert conn.lookup(topic).response == pb.CommandLookupTopicResponse.Connect
        assert not any(f.command.type == T.SEND_ERROR for f in conn.received)


def test_cumulative_ack_past_the_end_is_ignored(standalone: Standalone) -> None:
    """Pulsar's cursor refuses a mark-delete beyond the last entry and the ack is answered
    without error: nothing is acknowledged that was never written."""
    topic = _topic("ack-past-end")
    with RawConnection(standalone.port) as conn:
        conn.handshake()
        conn.create_producer(topic)
        ids = []
        for seq in range(3):
            conn.send(frames.encode_payload_command(C.send(1, seq), C.message_metadata("raw-p", seq, 1), b"m%d" % seq))
            ids.append(conn.wait_for(T.SEND_RECEIPT).command.send_receipt.message_id)
        rid = next_request_id()
        conn.send(C.subscribe(topic, "sub", pb.CommandSubscribe.Exclusive, 1, rid,
                              initial_position=pb.CommandSubscribe.Earliest))
        conn.wait_for(T.SUCCESS, lambda f: f.command.success.request_id == rid)
        conn.send(C.flow(1, 100))
        for _ in range(3):
            conn.wait_for(T.MESSAGE)
        past = C.message_id(ids[-1].ledgerId, ids[-1].entryId + 1000)
        for cumulative in (True, False):
            rid = next_request_id()
            conn.send(C.ack(1, [past], cumulative=cumulative, request_id=rid))
            resp = conn.wait_for(T.ACK_RESPONSE, lambda f: f.command.ackResponse.request_id == rid).command.ackResponse
            assert not resp.HasField("error"), resp
        # an ordinary ack still works
        rid = next_request_id()
        conn.send(C.ack(1, [C.message_id(ids[0].ledgerId, ids[0].entryId)], cumulative=True, request_id=rid))
        resp = conn.wait_for(T.ACK_RESPONSE, lambda f: f.command.ackResponse.request_id == rid).command.ackResponse
        assert not resp.HasField("error"), resp
    stats = httpx.get(f"{standalone.admin}/admin/v2/persistent/public/default/{topic.rsplit('/', 1)[1]}/stats").json()
    assert stats["subscriptions"]["sub"]["msgBacklog"] == 2


def test_negative_protocol_version_is_clamped(standalone: Standalone) -> None:
    for asked, expected in ((-5, 0), (-(2**31), 0), (2**31 - 1, C.PROTOCOL_VERSION), (7, 7)):
        with RawConnection(standalone.port) as conn:
            assert conn.handshake(protocol_version=asked).protocol_version == expected
    assert_serving(standalone.port, standalone.proc)


def test_no_unhandled_exception_was_logged(standalone: Standalone) -> None:
    """Runs last in this module: every request above was handled, none escaped as a traceback."""
    assert_serving(standalone.port, standalone.proc)
    time.sleep(0.2)
    assert "Traceback" not in standalone.proc.log_text()


def test_connections_reset_mid_stream_are_harmless(standalone: Standalone) -> None:
    """A client that resets its connection (RST) while the broker is writing to it."""
    topic = _topic("reset")
    for i in range(5):
        conn = RawConnection(standalone.port)
        conn.handshake()
        conn.create_producer(topic, name=f"reset-{i}")
        for seq in range(50):
            conn.send(frames.encode_payload_command(C.send(1, seq), C.message_metadata("raw-p", seq, 1), b"x" * 1000))
        conn.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        conn.close()  # RST with receipts in flight
    assert_serving(standalone.port, standalone.proc)
