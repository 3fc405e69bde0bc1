"""The broker's error boundaries (issue 10 item 2) on an in-process broker: a bug in one
command's handler or in one topic's tasks is logged and answered, and the broker goes on;
plus the pure rules behind them (topic names, SEND metadata, topic patterns)."""

from __future__ import annotations

import logging
from typing import Any

import pulsar
import pytest
import trio

from broker.errors import InvalidMessageError, InvalidTopicNameError, InvalidTopicsPatternError
from broker.names import TopicName
from broker.producer import check_message
from broker.subscription import Subscription
from broker.topic_pattern import compile_topics_pattern
from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from tests.broker.conftest import client_for, in_thread, start_broker

T = pb.BaseCommand


class TrioRawConnection:
    """Raw frames over a trio stream (the broker runs in this process)."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = frames.FrameDecoder()
        self.received: list[frames.Frame] = []

    @classmethod
    async def open(cls, port: int) -> "TrioRawConnection":
        conn = cls(await trio.open_tcp_stream("127.0.0.1", port))
        await conn.send(C.connect("boundary-test"))
        await conn.wait_for(T.CONNECTED)
        return conn

    async def send(self, command: pb.BaseCommand) -> None:
        await self.stream.send_all(frames.encode_command(command))

    async def wait_for(self, kind: int) -> frames.Frame:
        with trio.fail_after(10):
            while True:
                for i, f in enumerate(self.received):
                    if f.command.type == kind:
                        return self.received.pop(i)
                data = await self.stream.receive_some(65536)
                assert data, "connection closed"
                self.received.extend(self.decoder.feed(data))


async def test_unexpected_error_in_a_handler_is_answered_and_logged_once(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture) -> None:
    broker = await start_broker(nursery)
    calls = []

    async def broken_lookup(*args: Any, **kwargs: Any) -> Any:
        calls.append(args)
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(broker, "lookup_urls", broken_lookup)  # what LOOKUP calls
    conn = await TrioRawConnection.open(broker.port)
    with caplog.at_level(logging.ERROR, logger="broker.connection"):
        await conn.send(C.lookup("persistent://public/default/t", 7))
        reply = (await conn.wait_for(T.LOOKUP_RESPONSE)).command.lookupTopicResponse
    assert (reply.request_id, reply.response, reply.error) == (7, pb.CommandLookupTopicResponse.Failed,
                                                                pb.ServerError.UnknownError)
    assert "ZeroDivisionError" in reply.message
    bugs = [r for r in caplog.records if r.exc_info and r.exc_info[0] is ZeroDivisionError]
    assert len(bugs) == 1 and "LOOKUP (request 7)" in bugs[0].getMessage()
    # the same connection goes on
    monkeypatch.undo()
    await conn.send(C.lookup("persistent://public/default/t", 8))
    reply = (await conn.wait_for(T.LOOKUP_RESPONSE)).command.lookupTopicResponse
    assert reply.response == pb.CommandLookupTopicResponse.Connect


async def test_a_failing_topic_task_closes_that_topic_not_the_broker(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    broker = await start_broker(nursery)
    original = Subscription._dispatch_loop
    failures = [RuntimeError("dispatch bug")]

    async def flaky_dispatch(self: Subscription) -> None:
        if failures:
            raise failures.pop()
        await original(self)

    monkeypatch.setattr(Subscription, "_dispatch_loop", flaky_dispatch)

    def work() -> list[bytes]:
        client = client_for(broker)
        try:
            producer = client.create_producer("t-boundary", batching_enabled=False)
            # the subscription's first dispatch task fails: the topic is closed, both clients
            # reconnect, and the reloaded topic serves them
            consumer = client.subscribe("t-boundary", "s", initial_position=pulsar.InitialPosition.Earliest)
            for i in range(3):
                producer.send(b"m%d" % i)
            got: list[bytes] = []
            while len(set(got)) < 3:  # what was delivered before the close may come again
                msg = consumer.receive(timeout_millis=15000)
                got.append(msg.data())
                consumer.acknowledge(msg)
            return sorted(set(got))
        finally:
            client.close()

    assert await in_thread(work) == [b"m0", b"m1", b"m2"]
    assert not failures
    assert broker.ready and "persistent://public/default/t-boundary" in broker.topics


async def test_large_namespaces_are_filtered_off_the_event_loop(
        nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch) -> None:
    import threading

    import broker.service as service_module

    broker = await start_broker(nursery)
    threads: list[threading.Thread] = []
    real = service_module.filter_topics

    def recording(topics: list[str], matches: Any) -> list[str]:
        threads.append(threading.current_thread())
        return real(topics, matches)

    monkeypatch.setattr(service_module, "filter_topics", recording)
    monkeypatch.setattr(service_module, "FILTER_IN_THREAD_ABOVE", 1)
    conn = await TrioRawConnection.open(broker.port)
    for i, local in enumerate(("big-a", "big-b", "other")):
        await conn.send(C.producer(f"persistent://public/default/{local}", i, 100 + i))
        await conn.wait_for(T.PRODUCER_SUCCESS)
    await conn.send(C.get_topics_of_namespace(9, "public/default", pattern="public/default/big-.*"))
    r = (await conn.wait_for(T.GET_TOPICS_OF_NAMESPACE_RESPONSE)).command.getTopicsOfNamespaceResponse
    assert r.filtered and sorted(r.topics) == ["persistent://public/default/big-a", "persistent://public/default/big-b"]
    assert threads and threads[0] is not threading.main_thread()


# -- pure rules --------------------------------------------------------------------------------


def test_partition_index_rules() -> None:
    assert TopicName.parse("t-partition-2147483647").partition_index == 2**31 - 1
    for bad in ("t-partition-2147483648", "t-partition-99999999999999999999"):
        with pytest.raises(InvalidTopicNameError, match="partition index"):
            TopicName.parse(bad)
    # not canonical decimals: ordinary topics, as Pulsar's TopicName.getPartitionIndex
    for plain in ("t-partition-01", "t-partition-x", "t-partition--1", "t-partition-\u0663"):
        t = TopicName.parse(plain)
        assert t.partition_index == -1 and t.partitioned_topic_name == t
    with pytest.raises(InvalidTopicNameError):
        TopicName.parse("t").partition(2**31)
    with pytest.raises(InvalidTopicNameError):
        TopicName.parse("persistent://caf\u00e9/ns/t")  # tenant names are ASCII, as Java's \w


def _frame(entry: bytes | None) -> frames.Frame:
    cmd = C.send(1, 0)
    return frames.decode_frame(frames.encode_command(cmd)[4:] if entry is None
                               else frames.frame_with_entry(cmd, entry)[4:])


def _entry(meta: bytes, payload: bytes = b"p") -> bytes:
    return frames.encode_entry(meta, payload)


def test_check_message() -> None:
    check_message(_frame(_entry(C.message_metadata("p", 0, 1).SerializeToString())))
    check_message(_frame(_entry(C.message_metadata("p", 0, 1, num_messages_in_batch=3).SerializeToString())))
    bad = [None, _entry(b"\xff\xff"), _entry(b""),
           _entry(C.message_metadata("p", 0, 1, num_messages_in_batch=0).SerializeToString())]
    for entry in bad:
        with pytest.raises(InvalidMessageError):
            check_message(_frame(entry))


def test_topics_pattern() -> None:
    match = compile_topics_pattern("persistent://public/default/(a+)+$", 50)
    assert match is not None
    assert match("persistent://public/default/" + "a" * 10_000)
    assert not match("persistent://public/default/" + "a" * 10_000 + "!")  # linear time
    assert match("persistent://public/default/aaa-partition-7")  # partitions match by their topic
    assert not match("persistent://public/default/xaaa")  # the whole name must match
    assert compile_topics_pattern("public/default/" + "(" * 30 + "a" + ")" * 30, 50) is None  # too long
    assert compile_topics_pattern("public/default/(?!x).*", 50) is None  # RE2 has no look-ahead
    with pytest.raises(InvalidTopicsPatternError):
        compile_topics_pattern("public/default/[", 50)
