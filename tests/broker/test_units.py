"""Unit tests of the broker's pure pieces: names, config, routers, trackers, dedup rules."""

from __future__ import annotations

from pathlib import Path

import pytest

from broker.config import BrokerConfig
from broker.consumer import Consumer, Delivery
from broker.dedup import Deduplication, DupStatus
from broker.delayed_delivery import DelayedDeliveryTracker
from broker.router_key_shared import AUTO_SPLIT, STICKY, ConsumerAssignError, KeySharedRouter, murmur3_32
from broker.router_shared import SharedRouter
from broker.router_single_active import FAILOVER, SingleActiveRouter
from broker.errors import ConsumerBusyError, InvalidTopicNameError
from broker.names import NamespaceName, TopicName
from broker.namespaces import bundle_boundaries
from broker.ownership import bundle_of
from managed_ledger import Position


class _Peer:
    address = "test"


def consumer(name: str, permits: int = 100, priority: int = 0, ranges: list[tuple[int, int]] | None = None) -> Consumer:
    c = Consumer(subscription=None, peer=_Peer(), consumer_id=hash(name) & 0xFFFF, name=name,  # type: ignore[arg-type]
                 sub_type=1, priority_level=priority, key_ranges=ranges)
    c.permits = permits
    return c


def d(i: int, n: int = 1, h: int = -1) -> Delivery:
    return Delivery(Position(1, i), b"", n, sticky_hash=h)


def test_topic_names() -> None:
    t = TopicName.parse("my-topic")
    assert str(t) == "persistent://public/default/my-topic" and t.partition_index == -1
    p = TopicName.parse("persistent://acme/ns/orders-partition-3")
    assert p.partition_index == 3 and str(p.partitioned_topic_name) == "persistent://acme/ns/orders"
    assert str(TopicName.parse("acme/ns/x").partition(2)) == "persistent://acme/ns/x-partition-2"
    assert TopicName.parse("persistent://a/b/c d").managed_ledger_name == "a/b/persistent/c%20d"
    assert TopicName.from_managed_ledger_name("a/b/persistent/c%20d").local_name == "c d"
    for bad in ["", "a/b", "ftp://a/b/c", "persistent://a/b", "persistent://a/b/"]:
        with pytest.raises(InvalidTopicNameError):
            TopicName.parse(bad)
    assert str(NamespaceName.parse("public/default")) == "public/default"


def test_bundles_cover_the_hash_range() -> None:
    bounds = bundle_boundaries(4)
    assert bounds[0] == "0x00000000" and bounds[-1] == "0xffffffff" and len(bounds) == 5
    seen = {bundle_of(TopicName.parse(f"t{i}"), bounds) for i in range(200)}
    assert len(seen) == 4


def test_config_from_toml_and_overrides(tmp_path: Path) -> None:
    f = tmp_path / "broker.toml"
    f.write_text('[broker]\nbroker_service_port = 7000\nmax_unacked_messages_per_consumer = 7\n[bookie]\nbookie_port = 1\n')
    c = BrokerConfig.load(f, web_service_port=9000)
    assert (c.broker_service_port, c.web_service_port, c.max_unacked_messages_per_consumer) == (7000, 9000, 7)
    f.write_text("no_such_key = 1\n")
    with pytest.raises(ValueError):
        BrokerConfig.load(f)


def test_murmur3_matches_reference_vectors() -> None:
    assert murmur3_32(b"") == 0
    assert murmur3_32(b"hello") == 0x248BFA47
    assert murmur3_32(b"The quick brown fox jumps over the lazy dog") == 0x2E4FF723


def test_shared_router_round_robin_respects_permits() -> None:
    r = SharedRouter(round_robin_batch=2)
    a, b = consumer("a", permits=3), consumer("b", permits=10)
    r.add_consumer(a)
    r.add_consumer(b)
    out, left = r.assign([d(i) for i in range(10)], set())
    assert sum(x.num_messages for x in out[a]) <= 3
    assert len(out[a]) + len(out[b]) == 10 and not left
    out, left = r.assign([d(i, n=20) for i in range(3)], set())
    assert left  # nobody has room for 20-message batches beyond one each


def test_failover_picks_by_priority_and_partition() -> None:
    r = SingleActiveRouter(FAILOVER, partition_index=1)
    a, b, c = consumer("a"), consumer("b"), consumer("c", priority=1)
    for x in (a, b, c):
        r.add_consumer(x)
    _, active = r.pick_active()
    assert active is b  # partition 1 of the two top-priority consumers (a, b)
    exclusive = SingleActiveRouter(0, -1)
    exclusive.add_consumer(a)
    with pytest.raises(ConsumerBusyError):
        exclusive.add_consumer(b)


def test_key_shared_auto_split_and_sticky() -> None:
    r = KeySharedRouter(AUTO_SPLIT)
    cs = [consumer(n) for n in "abc"]
    for c in cs:
        r.add_consumer(c)
    covered = sorted(rng for c in cs for rng in (c.key_ranges or []))
    assert covered[0][0] == 0 and covered[-1][1] == 65535
    assert all(covered[i][1] + 1 == covered[i + 1][0] for i in range(len(covered) - 1))
    r.remove_consumer(cs[1])
    assert all(r.owner(h) in (cs[0], cs[2]) for h in (0, 20000, 40000, 65535))
    s = KeySharedRouter(STICKY)
    s.add_consumer(consumer("x", ranges=[(0, 100)]))
    with pytest.raises(ConsumerAssignError):
        s.add_consumer(consumer("y", ranges=[(50, 200)]))
    # a held consumer keeps later entries of its keys back (ordering)
    x = s.owner(10)
    out, left = s.assign([d(1, h=10), d(2, h=11)], {x})  # type: ignore[arg-type]
    assert not out and len(left) == 2


def test_delayed_tracker_orders_by_time() -> None:
    t = DelayedDeliveryTracker(tick_ms=10)
    t.add(Position(1, 2), 2000)
    t.add(Position(1, 1), 1000)
    t.remove(Position(1, 2))
    assert t.next_due_ms() == 1000
    assert t.pop_due(1500) == [(Position(1, 1), -1)]
    assert t.pop_due(5000) == [] and len(t) == 0


def test_dedup_rules() -> None:
    dd = Deduplication(ml=None)
    assert dd.check("p", 0, 0) is DupStatus.NEW
    assert dd.check("p", 0, 0) is DupStatus.UNKNOWN  # pushed, not yet persisted
    dd.persisted_ok("p", 0, 0)
    assert dd.check("p", 0, 0) is DupStatus.DUP
    assert dd.check("p", 5, 7) is DupStatus.NEW
    dd.failed("p")
    assert dd.check("p", 5, 7) is DupStatus.NEW  # a failed send may be retried
    assert dd.last_sequence_id("p") == 0


def test_cli_config_layers(tmp_path: Path) -> None:
    from broker.cli import build_config

    f = tmp_path / "b.toml"
    f.write_text("broker_service_port = 7001\ndelayed_delivery_tick_time_millis = 50\n")
    c = build_config(str(f), {"web_service_port": 9001, "cluster_name": None},
                     ("max_unacked_messages_per_consumer=3", "broker_deduplication_enabled=true"))
    assert (c.broker_service_port, c.web_service_port, c.delayed_delivery_tick_time_millis) == (7001, 9001, 50)
    assert c.max_unacked_messages_per_consumer == 3 and c.broker_deduplication_enabled is True
    from quire.config import ConfigError

    with pytest.raises(ConfigError, match="no_such"):
        build_config(None, {}, ("no_such=1",))
    with pytest.raises(ConfigError, match="did you mean broker_deduplication_enabled"):
        build_config(None, {}, ("broker_deduplication_enable=true",))
    with pytest.raises(ConfigError, match="max_unacked_messages_per_consumer"):
        build_config(None, {}, ("max_unacked_messages_per_consumer=many",))


def test_standalone_and_broker_commands_are_listed() -> None:
    import subprocess
    import sys

    out = subprocess.run([sys.executable, "-m", "quire", "standalone", "--help"], capture_output=True, text=True,
                         check=True).stdout
    for flag in ("--data-dir", "--port", "--web-port", "--bookie-port", "--bookie-http-port", "--conf"):
        assert flag in out
    out = subprocess.run([sys.executable, "-m", "quire", "broker", "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "--metadata-url" in out


def test_shared_router_prefers_higher_priority() -> None:
    r = SharedRouter(round_robin_batch=1)
    low, high1, high2 = consumer("low", permits=100, priority=5), consumer("h1", permits=2), consumer("h2", permits=2)
    for c in (low, high1, high2):
        r.add_consumer(c)
    out, left = r.assign([d(i) for i in range(6)], set())
    assert len(out[high1]) == 2 and len(out[high2]) == 2 and len(out[low]) == 2 and not left
    assert [x.position.entry_id for x in out[high1]] != [x.position.entry_id for x in out[high2]]


def test_dedup_partly_stored_batch_is_new() -> None:
    dd = Deduplication(ml=None)
    assert dd.check("p", 0, 9) is DupStatus.NEW
    dd.persisted_ok("p", 0, 9)
    assert dd.check("p", 3, 9) is DupStatus.DUP  # every id stored
    assert dd.check("p", 5, 14) is DupStatus.NEW  # 10..14 are new: dropping the batch loses them
    assert dd.check("p", 12, 20) is DupStatus.UNKNOWN  # overlaps 10..14, not yet persisted
    dd.persisted_ok("p", 5, 14)
    assert dd.check("p", 14, 0) is DupStatus.DUP and dd.check("p", 15, 0) is DupStatus.NEW
