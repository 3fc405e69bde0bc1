"""Namespace policies reach every broker, and backlog quotas are enforced.

Cluster: a policy set through broker A applies to a topic owned by broker B within 2 s (B
follows the policies node with a watch; nothing is reloaded). Standalone: the three backlog
quota policies with a 1 s check interval, and the persistence policy's validation.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pulsar
import pytest

from tests.e2e.conftest import Standalone, start_bookie, start_broker, start_standalone
from tests.fixtures.processes import QuireProcesses

NS = "public/quota"
LOG = logging.getLogger("pulsar-client")
LOG.setLevel(logging.CRITICAL)


def _client(port: int) -> pulsar.Client:
    return pulsar.Client(f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=10, logger=LOG)


def _fill_backlog(client: pulsar.Client, topic: str, n: int = 50, size: int = 1000) -> None:
    client.subscribe(topic, "slow", initial_position=pulsar.InitialPosition.Earliest).close()
    p = client.create_producer(topic, batching_enabled=False)
    for i in range(n):
        p.send(bytes([i % 256]) * size)
    p.close()


def _producer_refused(client: pulsar.Client, topic: str) -> type[Exception] | None:
    try:
        client.create_producer(topic, send_timeout_millis=2000).close()
        return None
    except (pulsar.ProducerBlockedQuotaExceededException, pulsar.ProducerBlockedQuotaExceededError) as exc:
        return type(exc)


def _until(what: str, check, timeout: float) -> float:
    start = time.monotonic()
    while not check():
        if time.monotonic() - start > timeout:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.1)
    return time.monotonic() - start


def test_a_policy_set_through_one_broker_reaches_a_topic_owned_by_the_other(
        quire_procs: QuireProcesses, zk_url: str, tmp_path: Path) -> None:
    for i in range(2):
        start_bookie(quire_procs, zk_url, tmp_path, i)
    (p1, w1), (p2, w2) = start_broker(quire_procs, zk_url), start_broker(quire_procs, zk_url)
    assert httpx.put(f"http://127.0.0.1:{w1}/admin/v2/namespaces/{NS}", json={}).status_code == 204
    topic = f"persistent://{NS}/followed"
    c2 = _client(p2)
    try:
        _fill_backlog(c2, topic)
        # the load manager chose the owner: the quota goes through the other broker
        owner = httpx.get(f"http://127.0.0.1:{w1}/lookup/v2/topic/persistent/{NS}/followed",
                          follow_redirects=True).json()["brokerUrl"]
        assert owner in (f"pulsar://127.0.0.1:{p1}", f"pulsar://127.0.0.1:{p2}")
        other_web = w1 if owner.endswith(f":{p2}") else w2
        quota = f"http://127.0.0.1:{other_web}/admin/v2/namespaces/{NS}/backlogQuota"  # not the owner
        r = httpx.post(quota, json={"limitSize": 1000, "policy": "producer_exception"})
        assert r.status_code == 204, r.text
        took = _until("quota reaches broker 2",
                      lambda: _producer_refused(c2, topic) is pulsar.ProducerBlockedQuotaExceededException, 2.0)
        assert httpx.delete(quota).status_code == 204
        took_back = _until("quota removal reaches broker 2", lambda: _producer_refused(c2, topic) is None, 2.0)
        print(f"policy propagation: set {took:.2f} s, removed {took_back:.2f} s")
        owner_web = w2 if other_web == w1 else w1
        got = httpx.get(f"http://127.0.0.1:{owner_web}/admin/v2/namespaces/{NS}/backlogQuotaMap").json()
        assert got == {}
    finally:
        c2.close()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    n = start_standalone(tmp_path_factory.mktemp("quota"), "--set", "backlog_quota_check_interval_in_seconds=1")
    yield n
    n.proc.terminate()


def _admin(node: Standalone, method: str, path: str, **kw) -> httpx.Response:
    return httpx.request(method, f"http://127.0.0.1:{node.web_port}/admin/v2/{path}", timeout=10, **kw)


def _set_quota(node: Standalone, ns: str, kind: str, quota: dict, stored: dict) -> None:
    """POST one backlog quota type of namespace ``ns``; the namespace's map then holds ``stored``."""
    query = "" if kind == "destination_storage" else f"?backlogQuotaType={kind}"  # the default type goes without
    r = _admin(node, "POST", f"namespaces/{ns}/backlogQuota{query}", json=quota)
    assert r.status_code == 204, r.text
    assert _admin(node, "GET", f"namespaces/{ns}/backlogQuotaMap").json() == {kind: stored}


def _consuming_lifts_the_block(client: pulsar.Client, topic: str, n: int) -> None:
    c = client.subscribe(topic, "slow")
    for _ in range(n):
        c.acknowledge(c.receive(timeout_millis=10_000))
    _until("backlog consumed", lambda: _producer_refused(client, topic) is None, 10)


@pytest.mark.parametrize("policy", ["producer_request_hold", "producer_exception", "consumer_backlog_eviction"])
def test_backlog_quota_policies(node: Standalone, policy: str) -> None:
    ns = f"{NS}-{policy.replace('_', '-')}"
    assert _admin(node, "PUT", f"namespaces/{ns}", json={}).status_code == 204
    topic = f"persistent://{ns}/t"
    client = _client(node.port)
    try:
        _fill_backlog(client, topic, n=50, size=1000)
        producer = client.create_producer(topic, batching_enabled=False)  # before the quota
        _set_quota(node, ns, "destination_storage", {"limitSize": 10_000, "policy": policy},
                   {"limitSize": 10_000, "limitTime": -1, "policy": policy})
        stats = f"persistent/{ns}/t/stats"
        if policy == "consumer_backlog_eviction":
            # the check skips the oldest entries until about 10 KB (10 entries) are left
            _until("eviction", lambda: _admin(node, "GET", stats).json()["subscriptions"]["slow"]["msgBacklog"] <= 11, 10)
            assert _producer_refused(client, topic) is None
            producer.send(b"still accepted")
        else:
            expected = (pulsar.ProducerBlockedQuotaExceededError if policy == "producer_request_hold"
                        else pulsar.ProducerBlockedQuotaExceededException)
            assert _producer_refused(client, topic) is expected
            # the periodic check disconnects the producer that was already there
            _until("producer disconnected", lambda: _admin(node, "GET", stats).json()["publishers"] == [], 10)
            _consuming_lifts_the_block(client, topic, 50)
    finally:
        client.close()


@pytest.mark.parametrize("policy", ["producer_exception", "consumer_backlog_eviction"])
def test_message_age_backlog_quota(node: Standalone, policy: str) -> None:
    """The time-based quota: the age of the oldest unacknowledged message against limitTime."""
    ns = f"{NS}-age-{policy.replace('_', '-')}"
    assert _admin(node, "PUT", f"namespaces/{ns}", json={}).status_code == 204
    topic = f"persistent://{ns}/t"
    client = _client(node.port)
    try:
        _set_quota(node, ns, "message_age", {"limitTime": 3, "policy": policy},
                   {"limitSize": -1, "limitTime": 3, "policy": policy})
        _fill_backlog(client, topic, n=20, size=100)
        # young messages: under the quota, a producer is accepted and nothing is skipped
        assert _producer_refused(client, topic) is None
        stats = f"persistent/{ns}/t/stats"
        assert _admin(node, "GET", stats).json()["subscriptions"]["slow"]["msgBacklog"] == 20
        producer = client.create_producer(topic, batching_enabled=False)
        if policy == "consumer_backlog_eviction":
            # once older than 3 s, the check acknowledges them; a fresh message stays
            time.sleep(3.5)
            producer.send(b"fresh")
            _until("eviction", lambda: _admin(node, "GET", stats).json()["subscriptions"]["slow"]["msgBacklog"] == 1, 10)
            c = client.subscribe(topic, "slow")
            assert c.receive(timeout_millis=10_000).data() == b"fresh"
            assert _producer_refused(client, topic) is None
        else:
            _until("producer disconnected", lambda: _admin(node, "GET", stats).json()["publishers"] == [], 10)
            assert _producer_refused(client, topic) is pulsar.ProducerBlockedQuotaExceededException
            _consuming_lifts_the_block(client, topic, 20)
    finally:
        client.close()


def test_backlog_quota_and_persistence_validation(node: Standalone) -> None:
    ns = f"{NS}-validation"
    assert _admin(node, "PUT", f"namespaces/{ns}", json={}).status_code == 204
    bad = _admin(node, "POST", f"namespaces/{ns}/backlogQuota", json={"limitSize": 1, "policy": "drop_everything"})
    assert bad.status_code == 400 and "policy must be one of" in bad.json()["reason"]
    bad = _admin(node, "POST", f"namespaces/{ns}/backlogQuota?backlogQuotaType=nope", json={"limitSize": 1})
    assert bad.status_code == 400 and "backlogQuotaType" in bad.json()["reason"]
    bad = _admin(node, "POST", f"namespaces/{ns}/persistence",
                 json={"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1})
    assert bad.status_code == 412 and "Ensemble (E) >= WriteQuorum" in bad.json()["reason"]
    good = {"bookkeeperEnsemble": 1, "bookkeeperWriteQuorum": 1, "bookkeeperAckQuorum": 1,
            "managedLedgerMaxMarkDeleteRate": 0.0}
    assert _admin(node, "POST", f"namespaces/{ns}/persistence", json=good).status_code == 204
    assert _admin(node, "GET", f"namespaces/{ns}/persistence").json() == good
    assert _admin(node, "DELETE", f"namespaces/{ns}/persistence").status_code == 204
    unset = _admin(node, "GET", f"namespaces/{ns}/persistence")
    assert unset.status_code in (200, 204) and not unset.content.strip(b"null")
