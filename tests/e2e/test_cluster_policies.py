"""Namespace policies reach every broker: a change made through one broker applies to the
topics of that namespace another broker serves, without a reload (each broker watches the
policies node of the namespaces it has topics of)."""

from __future__ import annotations

import time
from pathlib import Path

import httpx

from tests.e2e.conftest import new_client, start_bookie, start_broker
from tests.fixtures.processes import QuireProcesses


def test_a_policy_change_on_one_broker_reaches_a_topic_owned_by_another(
        quire_procs: QuireProcesses, zk_url: str, tmp_path: Path) -> None:
    for i in range(2):
        start_bookie(quire_procs, zk_url, tmp_path, i)
    brokers = [start_broker(quire_procs, zk_url) for _ in range(2)]
    http = httpx.Client(timeout=60)
    w0 = brokers[0][1]
    assert http.put(f"http://127.0.0.1:{w0}/admin/v2/namespaces/public/pol").status_code == 204
    client = new_client("pulsar://" + ",".join(f"127.0.0.1:{p}" for p, _ in brokers))
    try:
        producer = client.create_producer("persistent://public/pol/t", batching_enabled=False)
        producer.send(b"x")
        owner = http.get(f"http://127.0.0.1:{w0}/lookup/v2/topic/persistent/public/pol/t", follow_redirects=True).json()
        owner_web = int(owner["httpUrl"].rsplit(":", 1)[1])
        other_web = next(w for _, w in brokers if w != owner_web)
        stats = f"http://127.0.0.1:{owner_web}/admin/v2/persistent/public/pol/t/stats"
        assert http.get(stats).json()["deduplicationStatus"] == "Disabled"
        r = http.post(f"http://127.0.0.1:{other_web}/admin/v2/namespaces/public/pol/deduplication", json=True)
        assert r.status_code == 204, r.text
        changed = time.monotonic()
        while http.get(stats).json()["deduplicationStatus"] != "Enabled":
            assert time.monotonic() - changed < 10, "the owner never applied the policy changed on the other broker"
            time.sleep(0.1)
        reached_after = time.monotonic() - changed
        assert reached_after < 5  # the goal is 2 s; slack for a loaded machine
        # and back: disabling it through the other broker reaches the owner too
        assert http.delete(f"http://127.0.0.1:{other_web}/admin/v2/namespaces/public/pol/deduplication").status_code == 204
        changed = time.monotonic()
        while http.get(stats).json()["deduplicationStatus"] != "Disabled":
            assert time.monotonic() - changed < 10
            time.sleep(0.1)
        producer.send(b"y")
        # persistence and backlog quota policies, set through the other broker
        base = f"http://127.0.0.1:{other_web}/admin/v2/namespaces/public/pol"
        persistence = {"bookkeeperEnsemble": 2, "bookkeeperWriteQuorum": 2, "bookkeeperAckQuorum": 1,
                       "managedLedgerMaxMarkDeleteRate": 0.0}
        r = http.post(base + "/persistence", json=persistence)
        assert r.status_code == 204, r.text
        assert http.post(base + "/persistence", json={**persistence, "bookkeeperAckQuorum": 3}).status_code == 412
        owner_base = f"http://127.0.0.1:{owner_web}/admin/v2/namespaces/public/pol"
        assert http.get(owner_base + "/persistence").json() == persistence
        quota = {"limitSize": 1 << 30, "limitTime": -1, "policy": "producer_exception"}
        assert http.post(base + "/backlogQuota", json=quota).status_code == 204
        assert http.post(base + "/backlogQuota", json={**quota, "policy": "nope"}).status_code == 400
        assert http.get(owner_base + "/backlogQuotaMap").json() == {"destination_storage": quota}
        assert http.delete(base + "/backlogQuota").status_code == 204
        assert http.get(owner_base + "/backlogQuotaMap").json() == {}
        producer.send(b"z")
    finally:
        client.close()
