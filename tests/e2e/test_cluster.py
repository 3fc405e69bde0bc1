"""Cluster mode: real ZooKeeper, bookie processes and two broker processes.

Topics are served by the owner of their namespace bundle; a client that asks the other broker
is redirected by LOOKUP, and the admin API answers 307 to the owner.
"""

from __future__ import annotations

import logging
import time
from pathlib import Path

import httpx
import pulsar

from tests.e2e.conftest import new_client, start_bookie, start_broker
from tests.fixtures.processes import QuireProcesses


def test_two_brokers_two_bookies_on_zookeeper(quire_procs: QuireProcesses, zk_url: str, tmp_path: Path) -> None:
    for i in range(2):
        start_bookie(quire_procs, zk_url, tmp_path, i)
    (p1, w1), (p2, w2) = start_broker(quire_procs, zk_url), start_broker(quire_procs, zk_url)
    log = logging.getLogger("pulsar-client")
    log.setLevel(logging.ERROR)
    topics = [f"persistent://public/default/cluster-{i}" for i in range(6)]
    # The load manager places bundles on the less loaded broker, whoever is asked.
    c2 = pulsar.Client(f"pulsar://127.0.0.1:{p2}", operation_timeout_seconds=15, logger=log)
    for t in topics[:3]:
        c2.create_producer(t).close()
    c1 = pulsar.Client(f"pulsar://127.0.0.1:{p1}", operation_timeout_seconds=15, logger=log)
    try:
        for t in topics:
            consumer = c1.subscribe(t, "s", initial_position=pulsar.InitialPosition.Earliest)
            producer = c1.create_producer(t, batching_enabled=False)
            for i in range(5):
                producer.send(f"{t}-{i}".encode())
            got = [consumer.receive(timeout_millis=10000).data() for _ in range(5)]
            assert got == [f"{t}-{i}".encode() for i in range(5)]
        owners = {httpx.get(f"http://127.0.0.1:{w1}/lookup/v2/topic/persistent/public/default/{t.rsplit('/', 1)[1]}").json()["brokerUrl"]
                  for t in topics}
        assert owners <= {f"pulsar://127.0.0.1:{p1}", f"pulsar://127.0.0.1:{p2}"}
        # Admin calls on a topic owned by the other broker are redirected (307) to the owner.
        name = topics[0].rsplit("/", 1)[1]
        owner = httpx.get(f"http://127.0.0.1:{w1}/lookup/v2/topic/persistent/public/default/{name}").json()
        other = w1 if owner["httpUrl"].endswith(f":{w2}") else w2
        r = httpx.get(f"http://127.0.0.1:{other}/admin/v2/persistent/public/default/{name}/stats")
        assert r.status_code == 307 and r.headers["location"].startswith(owner["httpUrl"])
        stats = httpx.get(f"http://127.0.0.1:{other}/admin/v2/persistent/public/default/{name}/stats",
                          follow_redirects=True).json()
        assert stats["msgInCounter"] == 5
        brokers = httpx.get(f"http://127.0.0.1:{w1}/admin/v2/brokers/standalone").json()
        assert brokers == sorted([f"127.0.0.1:{w1}", f"127.0.0.1:{w2}"])
        r = httpx.post(f"http://127.0.0.1:{other}/admin/v2/persistent/public/default/{name}/subscription/s/skip_all")
        assert r.status_code == 307  # every operation on a foreign topic, not only stats
        check_partitioned_admin_across_brokers(c1, (p1, w1), (p2, w2))
        check_namespace_unload_moves_bundles(c1, (p1, w1), (p2, w2))
    finally:
        c1.close()
        c2.close()


def check_partitioned_admin_across_brokers(client: pulsar.Client, b1: tuple[int, int], b2: tuple[int, int]) -> None:
    """Partitions live in bundles of both brokers (here: partitions 1, 5, 9 on broker 1, the
    others on broker 2, fixed by crc32 of their names); admin operations on the partitioned
    topic sent to one broker reach every partition, forwarded to its owner."""
    http = httpx.Client(verify=False)  # one client: building a TLS context per call is slow
    base = f"http://127.0.0.1:{b1[1]}/admin/v2/persistent/public/default/spread"
    assert http.put(base + "/partitions", json=8).status_code == 204
    assert http.post(base).status_code == 204  # creates each partition on its owner
    lookup = f"http://127.0.0.1:{b1[1]}/lookup/v2/topic/persistent/public/default/spread-partition-"
    owners = [http.get(f"{lookup}{i}").json()["brokerUrl"] for i in range(8)]
    assert set(owners) == {f"pulsar://127.0.0.1:{b1[0]}", f"pulsar://127.0.0.1:{b2[0]}"}
    assert http.put(base + "/subscription/sub", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    producer = client.create_producer("persistent://public/default/spread", batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(16):
        producer.send(f"{i}".encode())
    producer.close()

    def backlog() -> int:
        stats = http.get(base + "/partitioned-stats").json()
        assert stats["msgInCounter"] == 16
        return int(stats["subscriptions"]["sub"]["msgBacklog"])

    assert backlog() == 16
    assert http.get(base + "/subscriptions").json() == ["sub"]
    assert http.post(base + "/subscription/sub/skip_all").status_code == 204
    assert backlog() == 0
    assert http.post(base + "/subscription/sub/resetcursor/0").status_code == 204
    assert backlog() == 16
    # new partitions (some on each broker) get the subscription too
    assert http.post(base + "/partitions", json=10).status_code == 204
    other = f"http://127.0.0.1:{b2[1]}/admin/v2/persistent/public/default/spread"
    for i in (8, 9):
        assert http.get(f"{other}-partition-{i}/subscriptions", follow_redirects=True).json() == ["sub"]
    consumer = client.subscribe("persistent://public/default/spread", "sub")
    got = sorted(int(consumer.receive(timeout_millis=10000).data()) for _ in range(16))
    assert got == list(range(16))
    consumer.close()
    assert http.delete(base + "/partitions", params={"force": "true"}).status_code == 204
    assert http.get(f"{other}/partitions").json() == {"partitions": 0}


def test_killed_owner_is_replaced_and_fenced(quire_procs: QuireProcesses, zk_url: str, tmp_path: Path) -> None:
    """SIGKILL the broker that owns a topic: once its metadata session expires the other broker
    takes the bundle over, recovers the managed ledger and serves every acknowledged message."""
    for i in range(2):
        start_bookie(quire_procs, zk_url, tmp_path, i)
    pa, _ = start_broker(quire_procs, zk_url, session_ms=4000)
    pb_, _ = start_broker(quire_procs, zk_url, session_ms=4000)
    broker_a = quire_procs.procs[-2]
    log = logging.getLogger("pulsar-client")
    log.setLevel(logging.ERROR)
    t = "persistent://public/default/handoff"
    ca = pulsar.Client(f"pulsar://127.0.0.1:{pa}", operation_timeout_seconds=30, logger=log)
    ca.subscribe(t, "s").close()
    producer = ca.create_producer(t, batching_enabled=False)
    for i in range(20):
        producer.send(f"m{i}".encode())
    broker_a.kill()
    cb = pulsar.Client(f"pulsar://127.0.0.1:{pb_}", operation_timeout_seconds=40, logger=log)
    try:
        consumer = cb.subscribe(t, "s")
        got = [consumer.receive(timeout_millis=30000).data() for _ in range(20)]
        assert got == [f"m{i}".encode() for i in range(20)]
        p2 = cb.create_producer(t, batching_enabled=False)
        p2.send(b"after-handoff")
        assert consumer.receive(timeout_millis=10000).data() == b"after-handoff"
    finally:
        cb.close()
        try:
            ca.close()
        except pulsar.PulsarException:
            pass


def check_namespace_unload_moves_bundles(client: pulsar.Client, b1: tuple[int, int], b2: tuple[int, int]) -> None:
    """A namespace unload (sent to either broker) releases every bundle on its owner; the next
    lookup elects a new owner, and clients carry on there."""
    http = httpx.Client(verify=False)
    t = "persistent://public/default/cluster-0"
    lookup = f"http://127.0.0.1:{b1[1]}/lookup/v2/topic/persistent/public/default/cluster-0"
    assert http.get(lookup, follow_redirects=True).json()["brokerUrl"] in {f"pulsar://127.0.0.1:{b[0]}" for b in (b1, b2)}
    consumer = client.subscribe(t, "moved", initial_position=pulsar.InitialPosition.Earliest)
    producer = client.create_producer(t, batching_enabled=False)
    producer.send(b"before-unload")
    bundles_before = httpx.get(f"http://127.0.0.1:{b1[1]}/admin/v2/namespaces/public/default/bundles").json()
    assert http.put(f"http://127.0.0.1:{b1[1]}/admin/v2/namespaces/public/default/unload").status_code == 204
    # every bundle was released; the next lookup places it again (the load manager picks the broker)
    assert http.get(lookup, follow_redirects=True).json()["brokerUrl"] in {f"pulsar://127.0.0.1:{b[0]}" for b in (b1, b2)}
    assert httpx.get(f"http://127.0.0.1:{b2[1]}/admin/v2/namespaces/public/default/bundles").json() == bundles_before
    producer.send(b"after-unload")  # the client reconnects to the new owner
    got = [consumer.receive(timeout_millis=15000).data() for _ in range(7)]
    assert got[-2:] == [b"before-unload", b"after-unload"]


def test_cluster_sigkill_everything_and_restart(quire_procs: QuireProcesses, zk_url: str, tmp_path: Path) -> None:
    """SIGKILL the broker and both bookies at once, start them again: every acknowledged
    message and the subscription's exact position are still there (ZooKeeper keeps the
    metadata, the bookies' journals the data)."""
    for i in range(2):
        start_bookie(quire_procs, zk_url, tmp_path, i)
    port, web = start_broker(quire_procs, zk_url, session_ms=4000)
    t = "persistent://public/default/cluster-restart"
    client = new_client(f"pulsar://127.0.0.1:{port}")
    consumer = client.subscribe(t, "keep", consumer_type=pulsar.ConsumerType.Shared)
    producer = client.create_producer(t, batching_enabled=False)
    for i in range(100):
        producer.send(f"m{i}".encode())
    for _ in range(40):
        consumer.acknowledge(consumer.receive(timeout_millis=10000))
    # The acks reached the broker (backlog 60) and their cursor-ledger writes are done (the
    # cursor ledger's last entry stopped moving): only then is the position durable.
    http = httpx.Client(verify=False)
    internal = f"http://127.0.0.1:{web}/admin/v2/persistent/public/default/cluster-restart/internalStats"
    stats = internal.replace("internalStats", "stats")
    deadline = time.monotonic() + 20
    last, stable_since = None, time.monotonic()
    while True:
        assert time.monotonic() < deadline
        entry = http.get(internal).json()["cursors"]["keep"]["cursorLedgerLastEntry"]
        if entry != last:
            last, stable_since = entry, time.monotonic()
        elif time.monotonic() - stable_since > 1.0 and http.get(stats).json()["subscriptions"]["keep"]["msgBacklog"] == 60:
            break
        time.sleep(0.1)
    for proc in quire_procs.procs:
        proc.kill()
    try:
        client.close()  # everything it talked to is dead: closing its producer may fail, as it may
    except pulsar.PulsarException:
        pass
    for proc in quire_procs.procs:
        proc.start()
    for proc in quire_procs.procs:
        proc.wait_ready(60)
    client = new_client(f"pulsar://127.0.0.1:{port}", operation_timeout_seconds=30)
    try:
        consumer = client.subscribe(t, "keep", consumer_type=pulsar.ConsumerType.Shared)
        rest = []
        while True:
            try:
                rest.append(consumer.receive(timeout_millis=2000).data())
            except pulsar.Timeout:
                break
        assert sorted(rest) == sorted(f"m{i}".encode() for i in range(40, 100))
        reader = client.create_reader(t, pulsar.MessageId.earliest)
        everything = []
        while reader.has_message_available():
            everything.append(reader.read_next(timeout_millis=10000).data())
        assert everything == [f"m{i}".encode() for i in range(100)]
    finally:
        client.close()
