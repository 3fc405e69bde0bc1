"""Pure helpers of the client: topic names, key hashing, CLI message ids, perf percentiles,
service URLs; and a property test of batch payload round trips."""

from __future__ import annotations

from array import array

import pytest
from hypothesis import given
from hypothesis import strategies as st

from quire.client_cli import parse_message_id
from clients.connection_pool import parse_service_url
from clients.errors import InvalidTopicName, InvalidUrl
from clients.lookup import Backoff
from clients.message_id import MessageId
from clients.protocol.murmur3 import murmur3_32
from quire.perf import percentiles
from clients.protocol import batch
from clients.protocol import commands as c
from clients.topic_name import (
    base_topic,
    fully_qualified,
    namespace_of,
    partition_index,
    partition_name,
)


def test_topic_names() -> None:
    assert fully_qualified("x") == "persistent://public/default/x"
    assert fully_qualified("t/ns/x") == "persistent://t/ns/x"
    assert fully_qualified("non-persistent://t/ns/x") == "non-persistent://t/ns/x"
    for bad in ("a/b", "", "http://t/ns/x", "persistent://t/x"):
        with pytest.raises(InvalidTopicName):
            fully_qualified(bad)
    p = partition_name("persistent://t/ns/x", 3)
    assert p == "persistent://t/ns/x-partition-3"
    assert base_topic(p) == "persistent://t/ns/x" and partition_index(p) == 3
    assert partition_index("persistent://t/ns/x") == -1 and base_topic("persistent://t/ns/x-partition-y").endswith("-y")
    assert namespace_of("persistent://t/ns/x") == "t/ns"


def test_murmur3_known_values() -> None:
    # Reference values of MurmurHash3_x86_32 with seed 0.
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"hello") == 0x248BFA47
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


def test_service_urls() -> None:
    assert parse_service_url("pulsar://localhost:6650") == [("localhost", 6650)]
    assert parse_service_url("pulsar://a:1,b:2") == [("a", 1), ("b", 2)]
    assert parse_service_url("pulsar://host") == [("host", 6650)]
    for bad in ("http://x:1", "pulsar://x:notaport"):
        with pytest.raises(InvalidUrl):
            parse_service_url(bad)


def test_reconnect_backoff_doubles_to_a_cap_and_resets() -> None:
    backoff = Backoff()
    delays = [backoff.next() for _ in range(12)]
    assert delays[:4] == [0.1, 0.2, 0.4, 0.8] and delays[-1] == 30.0
    assert all(b == min(2 * a, 30.0) for a, b in zip(delays, delays[1:]))
    backoff.reset()
    assert backoff.next() == 0.1


def test_cli_message_ids() -> None:
    assert parse_message_id("earliest").is_earliest() and parse_message_id("latest").is_latest()
    assert parse_message_id("3:4") == MessageId(-1, 3, 4, -1)
    assert parse_message_id("3:4:1:7") == MessageId(1, 3, 4, 7)


def test_percentiles() -> None:
    samples = array("d", [i / 1000 for i in range(1, 101)])  # 1..100 ms
    p = percentiles(samples)
    assert p["p50"] == 50.0 and p["p99"] == 99.0 and p["max"] == 100.0 and p["mean"] == 50.5
    assert percentiles(array("d"))["p99"] == 0.0


_texts = st.text(max_size=8)


@given(st.lists(st.tuples(st.binary(max_size=64), st.dictionaries(_texts, _texts, max_size=3),
                          st.one_of(st.none(), _texts), st.one_of(st.none(), st.integers(0, 2**63))),
                max_size=20))
def test_batch_round_trip(items: list) -> None:  # type: ignore[type-arg]
    payload = batch.serialize_batch(
        (c.single_message_metadata(0, properties=props, partition_key=key, sequence_id=seq), data)
        for data, props, key, seq in items
    )
    parsed = batch.parse_batch(payload, len(items))
    for (data, props, key, seq), (meta, body) in zip(items, parsed, strict=True):
        assert bytes(body) == data and meta.payload_size == len(data)
        assert {kv.key: kv.value for kv in meta.properties} == props
        assert meta.partition_key == (key or "") and meta.HasField("sequence_id") == (seq is not None)
