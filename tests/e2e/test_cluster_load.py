"""The load manager on a real cluster: lookups spread bundles over the brokers, a hot bundle
splits and part of it moves, load reports and the admin routes around them."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import httpx
import pulsar

from broker.names import TopicName
from broker.ownership import bundle_of
from tests.e2e.conftest import new_client, start_bookie, start_broker
from tests.fixtures.processes import QuireProcesses

FAST = ("--set", "load_balancer_report_update_min_interval_millis=500")


def _topics_per_bundle(ns: str, boundaries: list[str]) -> dict[str, str]:
    """One topic name falling into each bundle."""
    out: dict[str, str] = {}
    i = 0
    while len(out) < len(boundaries) - 1:
        name = f"persistent://{ns}/t{i}"
        out.setdefault(bundle_of(TopicName.parse(name), boundaries), name)
        i += 1
    return out


def test_lookups_spread_60_bundles_over_3_brokers(quire_procs: QuireProcesses, zk_url: str) -> None:
    brokers = [start_broker(quire_procs, zk_url, 30000, *FAST) for _ in range(3)]
    web = brokers[0][1]
    http = httpx.Client(timeout=60)
    assert http.put(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/spread",
                    json={"bundles": {"numBundles": 60}}).status_code == 204
    bundles = http.get(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/spread/bundles").json()
    assert bundles["numBundles"] == 60 and len(bundles["boundaries"]) == 61
    topics = _topics_per_bundle("public/spread", bundles["boundaries"])
    owners: dict[str, str] = {}
    for bundle, topic in topics.items():  # every lookup goes to the same broker
        r = http.get(f"http://127.0.0.1:{web}/lookup/v2/topic/persistent/public/spread/{topic.rsplit('/', 1)[1]}",
                     follow_redirects=True)
        assert r.status_code == 200, r.text
        owners[bundle] = r.json()["brokerUrl"]
    counts = Counter(owners.values())
    assert set(counts) == {f"pulsar://127.0.0.1:{p}" for p, _ in brokers}
    even = 60 / 3
    assert max(counts.values()) <= 1.5 * even and min(counts.values()) >= even / 1.5, counts
    # the placement is ownership: asked again (any broker), every bundle has the same owner
    for bundle, topic in list(topics.items())[:10]:
        r = http.get(f"http://127.0.0.1:{brokers[2][1]}/lookup/v2/topic/persistent/public/spread/{topic.rsplit('/', 1)[1]}",
                     follow_redirects=True)
        assert r.json()["brokerUrl"] == owners[bundle]
    # each broker's load report lists what it owns, and every broker is registered
    deadline = time.monotonic() + 20
    while True:
        reports = [http.get(f"http://127.0.0.1:{w}/admin/v2/broker-stats/load-report").json() for _, w in brokers]
        if sum(r["numBundles"] for r in reports) >= 60 or time.monotonic() > deadline:
            break
        time.sleep(0.5)
    for (p, _), report in zip(brokers, reports):
        assert report["pulsarServiceUrl"] == f"pulsar://127.0.0.1:{p}"
        spread = [b for b in report["bundles"] if b.startswith("public/spread/")]
        assert len(spread) == counts[f"pulsar://127.0.0.1:{p}"]
        for key in ("cpu", "memory", "bandwidthIn", "bandwidthOut"):
            assert set(report[key]) == {"usage", "limit"}
    registered = http.get(f"http://127.0.0.1:{web}/admin/v2/brokers/standalone").json()
    assert registered == sorted(f"127.0.0.1:{w}" for _, w in brokers)


def test_a_hot_bundle_splits_and_part_of_it_moves(quire_procs: QuireProcesses, zk_url: str, tmp_path: Path) -> None:
    for i in range(2):
        start_bookie(quire_procs, zk_url, tmp_path, i)
    split = ("--set", "load_balancer_split_interval_minutes=0.02",  # every 1.2 s
             "--set", "load_balancer_namespace_bundle_max_topics=4", "--set", "load_balancer_shedding_enabled=false")
    brokers = [start_broker(quire_procs, zk_url, 30000, *FAST, *split) for _ in range(2)]
    web = brokers[0][1]
    http = httpx.Client(timeout=60)
    assert http.put(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/hot",
                    json={"bundles": {"numBundles": 1}}).status_code == 204
    client = new_client("pulsar://" + ",".join(f"127.0.0.1:{p}" for p, _ in brokers), operation_timeout_seconds=60)
    topics = [f"persistent://public/hot/t{i}" for i in range(8)]
    try:
        for t in topics:  # durable subscriptions: retention keeps what is published
            client.subscribe(t, "keep").close()
        producers = [client.create_producer(t, batching_enabled=False, send_timeout_millis=0) for t in topics]
        first = {http.get(f"http://127.0.0.1:{web}/lookup/v2/topic/persistent/public/hot/t{i}",
                          follow_redirects=True).json()["brokerUrl"] for i in range(8)}
        assert len(first) == 1  # one bundle: one broker serves all 8 topics
        # 8 topics > 4: the owner splits the bundle and unloads the halves; lookups place them
        deadline = time.monotonic() + 60
        sent = 0
        while True:
            for p in producers:
                p.send(f"m{sent}".encode())
            sent += 1
            n = http.get(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/hot/bundles").json()["numBundles"]
            owners = {http.get(f"http://127.0.0.1:{web}/lookup/v2/topic/persistent/public/hot/t{i}",
                               follow_redirects=True).json()["brokerUrl"] for i in range(8)}
            if n >= 2 and len(owners) == 2:
                break
            assert time.monotonic() < deadline, f"{n} bundles, owners {owners}"
            time.sleep(0.3)
        for p in producers:  # every producer carries on at the topic's new owner
            p.send(b"last")
        for t in topics:
            reader = client.create_reader(t, pulsar.MessageId.earliest)
            got = []
            while reader.has_message_available():
                got.append(reader.read_next(timeout_millis=15000).data())
            assert got == [f"m{i}".encode() for i in range(sent)] + [b"last"]
            reader.close()
        # the admin split route: split a bundle of public/hot by hand (any broker; 307 to its owner)
        bounds = http.get(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/hot/bundles").json()["boundaries"]
        bundle = f"{bounds[0]}_{bounds[1]}"
        r = http.put(f"http://127.0.0.1:{brokers[1][1]}/admin/v2/namespaces/public/hot/{bundle}/split",
                     params={"unload": "true"}, follow_redirects=True)
        assert r.status_code == 204, r.text
        after = http.get(f"http://127.0.0.1:{web}/admin/v2/namespaces/public/hot/bundles").json()
        assert after["numBundles"] >= len(bounds) and bundle not in {f"{a}_{b}" for a, b in zip(after["boundaries"], after["boundaries"][1:])}
    finally:
        client.close()


def test_a_new_broker_takes_load_from_an_overloaded_one(quire_procs: QuireProcesses, zk_url: str,
                                                        tmp_path: Path) -> None:
    """Threshold shedder: one broker carries 8 busy bundles; a second one starts and, within a
    few shedding rounds, serves some of them (the leader unloads the overloaded broker's
    busiest bundles; their next lookups place them on the idle broker). A tiny assumed NIC
    speed makes this modest traffic count as high bandwidth usage."""
    for i in range(2):
        start_bookie(quire_procs, zk_url, tmp_path, i)
    shed = ("--set", "load_balancer_shedding_interval_minutes=0.03",  # every 1.8 s
            "--set", "load_balancer_override_broker_nic_speed_gbps=0.0001",
            "--set", "load_balancer_history_resource_percentage=0.5",
            "--set", "load_balancer_auto_bundle_split_enabled=false")
    p1, w1 = start_broker(quire_procs, zk_url, 30000, *FAST, *shed)
    http = httpx.Client(timeout=60)
    assert http.put(f"http://127.0.0.1:{w1}/admin/v2/namespaces/public/busy",
                    json={"bundles": {"numBundles": 8}}).status_code == 204
    bounds = http.get(f"http://127.0.0.1:{w1}/admin/v2/namespaces/public/busy/bundles").json()["boundaries"]
    topics = list(_topics_per_bundle("public/busy", bounds).values())
    client = new_client(f"pulsar://127.0.0.1:{p1}", operation_timeout_seconds=60)
    try:
        producers = [client.create_producer(t, batching_enabled=False, send_timeout_millis=0) for t in topics]
        payload = b"x" * 1024
        for _ in range(10):
            for p in producers:
                p.send(payload)
        p2, w2 = start_broker(quire_procs, zk_url, 30000, *FAST, *shed)
        deadline = time.monotonic() + 90
        while True:
            for p in producers:
                p.send_async(payload, lambda *_: None)
            time.sleep(0.05)
            owners = Counter(http.get(f"http://127.0.0.1:{w1}/lookup/v2/topic/persistent/public/busy/{t.rsplit('/', 1)[1]}",
                                      follow_redirects=True).json()["brokerUrl"] for t in topics)
            if owners[f"pulsar://127.0.0.1:{p2}"] >= 1:
                break
            assert time.monotonic() < deadline, f"the new broker took no bundle: {owners}"
        for p in producers:
            p.flush()
            p.send(b"last")  # every producer carries on, wherever its topic went
    finally:
        client.close()
