"""Backlog quotas (a namespace's ``backlog_quota_map``): producer_exception and
producer_request_hold refuse new producers while the backlog is over the limit (and the
periodic check disconnects the connected ones); consumer_backlog_eviction drops the oldest
entries of the subscriptions over it. Persistence policies set the next ledgers' quorums."""

from __future__ import annotations

import time

import pulsar
import pytest
import trio

from broker.config import managed_ledger_config
from broker.errors import PreconditionFailedError
from broker.names import NamespaceName
from broker.policies import parse_persistence
from tests.broker.conftest import client_for, in_thread, start_broker

NS = NamespaceName("public", "default")


async def _quota(broker, policy: str, limit: int) -> None:  # type: ignore[no-untyped-def]
    await broker.namespaces.set_policy(NS, "backlog_quota_map",
                                       {"destination_storage": {"limitSize": limit, "limitTime": -1, "policy": policy}})
    await broker.on_policies_changed(NS)


@pytest.mark.parametrize("policy", ["producer_exception", "producer_request_hold"])
async def test_producers_are_refused_while_the_backlog_is_over_the_quota(nursery: trio.Nursery, policy: str) -> None:
    broker = await start_broker(nursery, backlog_quota_check_interval_in_seconds=0.2)
    topic = f"persistent://public/default/quota-{policy}"

    def fill() -> None:
        client = client_for(broker)
        try:
            client.subscribe(topic, "slow").close()  # a durable subscription that never reads
            p = client.create_producer(topic, batching_enabled=False)
            for i in range(20):
                p.send(b"x" * 200)
            p.close()
        finally:
            client.close()

    await in_thread(fill)
    await _quota(broker, policy, 1000)
    t = broker.topics[topic]
    assert t.quota_exceeded() is not None

    def refused() -> str:
        client = client_for(broker)
        try:
            with pytest.raises(pulsar.PulsarException) as exc:
                client.create_producer(topic, batching_enabled=False, send_timeout_millis=2000)
            return str(exc.value)
        finally:
            client.close()

    await in_thread(refused)
    # the backlog drains (the subscription skips it): producers are welcome again
    await t.subscriptions["slow"].skip(-1)
    assert t.quota_exceeded() is None

    def accepted() -> None:
        client = client_for(broker)
        try:
            client.create_producer(topic, batching_enabled=False).send(b"ok")
        finally:
            client.close()

    await in_thread(accepted)


async def test_the_check_disconnects_a_producer_once_the_quota_is_exceeded(nursery: trio.Nursery) -> None:
    broker = await start_broker(nursery, backlog_quota_check_interval_in_seconds=0.2)
    topic = "persistent://public/default/quota-disconnect"
    await _quota(broker, "producer_exception", 1000)

    def work() -> None:
        client = client_for(broker)
        try:
            client.subscribe(topic, "slow").close()
            p = client.create_producer(topic, batching_enabled=False, send_timeout_millis=3000)
            failed = False
            deadline = time.monotonic() + 10
            while time.monotonic() < deadline:
                try:
                    p.send(b"x" * 200)
                except pulsar.PulsarException:
                    failed = True
                    break
                time.sleep(0.01)
            assert failed, "the producer kept publishing past the quota"
        finally:
            client.close()

    await in_thread(work)
    assert broker.topics[topic].producers == {}


async def test_consumer_backlog_eviction_drops_the_oldest_entries(nursery: trio.Nursery) -> None:
    broker = await start_broker(nursery, backlog_quota_check_interval_in_seconds=0.2)
    topic = "persistent://public/default/quota-evict"

    def fill() -> None:
        client = client_for(broker)
        try:
            client.subscribe(topic, "slow").close()
            p = client.create_producer(topic, batching_enabled=False)
            for i in range(20):
                p.send(f"{i:03d}".encode() + b"x" * 197)
        finally:
            client.close()

    await in_thread(fill)
    await _quota(broker, "consumer_backlog_eviction", 1000)
    t = broker.topics[topic]
    with trio.fail_after(10):
        while t.quota_exceeded() is not None:
            await trio.sleep(0.1)
    sub = t.subscriptions["slow"]
    assert 0 < sub.cursor.number_of_entries_in_backlog <= 5  # 1000 B of 200 B entries

    def newest_kept() -> bytes:
        client = client_for(broker)
        try:
            c = client.subscribe(topic, "slow")
            return c.receive(timeout_millis=5000).data()[:3]
        finally:
            client.close()

    assert int(await in_thread(newest_kept)) >= 15  # the oldest went, the newest stayed


def test_persistence_policies_set_the_next_ledgers_quorums() -> None:
    from broker.config import BrokerConfig

    policies = {"persistence": parse_persistence({"bookkeeperEnsemble": 3, "bookkeeperWriteQuorum": 2,
                                                  "bookkeeperAckQuorum": 2})}
    ml = managed_ledger_config(BrokerConfig(), policies)
    assert (ml.ensemble_size, ml.write_quorum, ml.ack_quorum) == (3, 2, 2)
    with pytest.raises(PreconditionFailedError):
        parse_persistence({"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1})
