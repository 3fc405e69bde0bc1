"""Admin REST API (Pulsar paths and JSON shapes), lookup and metrics on a real standalone.

The module's standalone is configured by a TOML file (broker and ``[bookie]`` tables) with
flags overriding it, so this also checks configuration layering on a real process.
"""

from __future__ import annotations

import os
import re
import signal
import time
import uuid
from pathlib import Path
from typing import Iterator

import httpx
import pulsar
import pytest

from tests.e2e.conftest import Standalone, start_standalone

CONF = """
[broker]
web_service_port = 1            # overridden by --web-port
stats_update_frequency_in_secs = 1

[bookie]
journal_pre_alloc_size_mb = 1
"""


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    base = tmp_path_factory.mktemp("admin")
    (base / "quire.toml").write_text(CONF)
    node = start_standalone(base, "--conf", str(base / "quire.toml"))
    try:
        yield node
        # Ctrl-C is an orderly shutdown too (SIGTERM is checked in test_restart)
        assert node.proc.pid is not None
        os.killpg(node.proc.pid, signal.SIGINT)
        assert node.proc.wait(30) == 0
    finally:
        node.proc.kill()
        print(node.proc.log_tail(30))


def test_toml_config_and_flags(standalone: Standalone) -> None:
    # the flag won over the file (the admin API answers on --web-port) and the [bookie]
    # table reached the embedded bookie: its journal file is preallocated with 1 MB
    journals = list(Path(standalone.data_dir, "bookkeeper", "journal", "current").glob("*.txn"))
    assert journals and all(j.stat().st_size <= 2 * 1024 * 1024 for j in journals)
    assert httpx.get(f"{standalone.admin}/admin/v2/clusters").json() == ["standalone"]


def test_tenants_namespaces_and_policies(standalone: Standalone) -> None:
    a = httpx.Client(base_url=standalone.admin)
    assert "standalone" in a.get("/admin/v2/clusters").json()
    assert a.get("/admin/v2/tenants").json() == ["public"]
    tenant = f"t{uuid.uuid4().hex[:6]}"
    assert a.put(f"/admin/v2/tenants/{tenant}", json={"allowedClusters": ["standalone"]}).status_code == 204
    assert a.put(f"/admin/v2/tenants/{tenant}", json={"allowedClusters": ["standalone"]}).status_code == 409
    assert a.put("/admin/v2/tenants/bad", json={"allowedClusters": ["nope"]}).status_code == 412
    assert a.put(f"/admin/v2/namespaces/{tenant}/ns1").status_code == 204
    assert a.put(f"/admin/v2/namespaces/{tenant}/ns1").status_code == 409
    assert a.get(f"/admin/v2/namespaces/{tenant}").json() == [f"{tenant}/ns1"]
    assert a.get(f"/admin/v2/namespaces/{tenant}/missing").status_code == 404
    pol = a.get(f"/admin/v2/namespaces/{tenant}/ns1").json()
    assert pol["bundles"]["numBundles"] == 4
    r = a.post(f"/admin/v2/namespaces/{tenant}/ns1/retention", json={"retentionTimeInMinutes": 60, "retentionSizeInMB": 100})
    assert r.status_code == 204
    assert a.get(f"/admin/v2/namespaces/{tenant}/ns1/retention").json() == {"retentionTimeInMinutes": 60, "retentionSizeInMB": 100}
    bad = a.post(f"/admin/v2/namespaces/{tenant}/ns1/retention", json={"retentionTimeInMinutes": 0, "retentionSizeInMB": 10})
    assert bad.status_code == 412 and "reason" in bad.json()
    assert a.post(f"/admin/v2/namespaces/{tenant}/ns1/messageTTL", json=120).status_code == 204
    assert a.get(f"/admin/v2/namespaces/{tenant}/ns1/messageTTL").json() == 120
    assert a.post(f"/admin/v2/namespaces/{tenant}/ns1/messageTTL", content=b"{nope").status_code == 400
    assert a.delete(f"/admin/v2/namespaces/{tenant}/ns1").status_code == 204
    assert a.delete(f"/admin/v2/tenants/{tenant}").status_code == 204


def test_topics_stats_and_subscriptions(standalone: Standalone, client: pulsar.Client) -> None:
    a = httpx.Client(base_url=standalone.admin)
    name = f"adm-{uuid.uuid4().hex[:6]}"
    base = f"/admin/v2/persistent/public/default/{name}"
    assert a.put(base).status_code == 204
    assert a.put(base).status_code == 409
    assert f"persistent://public/default/{name}" in a.get("/admin/v2/persistent/public/default").json()
    assert a.get(base + "-missing/stats").status_code == 404
    assert a.put(base + "/subscription/admin-sub", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    producer = client.create_producer(f"persistent://public/default/{name}", batching_enabled=False)
    ts_before = int(time.time() * 1000)
    for i in range(10):
        producer.send(f"{i}".encode())
    stats = a.get(base + "/stats").json()
    assert stats["msgInCounter"] == 10 and len(stats["publishers"]) == 1
    assert stats["subscriptions"]["admin-sub"]["msgBacklog"] == 10
    assert stats["backlogSize"] == stats["subscriptions"]["admin-sub"]["backlogSize"] >= 10
    internal = a.get(base + "/internalStats").json()
    assert internal["numberOfEntries"] >= 10 and "admin-sub" in internal["cursors"]
    assert a.get(base + "/subscriptions").json() == ["admin-sub"]
    assert a.post(base + "/subscription/admin-sub/skip/3").status_code == 204
    assert a.get(base + "/stats").json()["subscriptions"]["admin-sub"]["msgBacklog"] == 7
    assert a.post(base + "/subscription/admin-sub/skip_all").status_code == 204
    after_skip = a.get(base + "/stats").json()
    assert after_skip["subscriptions"]["admin-sub"]["msgBacklog"] == 0 and after_skip["backlogSize"] == 0
    assert a.post(base + f"/subscription/admin-sub/resetcursor/{ts_before}").status_code == 204
    assert a.get(base + "/stats").json()["subscriptions"]["admin-sub"]["msgBacklog"] == 10
    consumer = client.subscribe(f"persistent://public/default/{name}", "admin-sub")
    assert consumer.receive(timeout_millis=5000).data() == b"0"
    consumer.close()
    assert a.delete(base + "/subscription/nope").status_code == 404
    assert a.delete(base + "/subscription/admin-sub").status_code == 204
    lookup = a.get(f"/lookup/v2/topic/persistent/public/default/{name}").json()
    assert lookup["brokerUrl"] == standalone.url
    assert a.put(base + "/unload").status_code == 204
    producer.send(b"after-unload")  # the client reconnects after the unload
    producer.close()
    assert a.delete(base).status_code == 204
    assert a.get(base + "/stats").status_code == 404


def test_partitions_admin(standalone: Standalone) -> None:
    a = httpx.Client(base_url=standalone.admin)
    base = f"/admin/v2/persistent/public/default/p-{uuid.uuid4().hex[:6]}"
    assert a.put(base + "/partitions", json=2).status_code == 204
    assert a.put(base + "/partitions", json=2).status_code == 409
    assert a.put(base + "/partitions", content=b'"x"').status_code == 400
    assert a.post(base + "/partitions", json=1).status_code == 412
    assert a.post(base + "/partitions", json=4).status_code == 204
    assert a.get(base + "/partitions").json() == {"partitions": 4}
    assert a.delete(base + "/partitions").status_code == 204
    assert a.get(base + "/partitions").json() == {"partitions": 0}


def test_metrics(standalone: Standalone, client: pulsar.Client) -> None:
    p = client.create_producer(f"persistent://public/default/metrics-{uuid.uuid4().hex[:6]}")
    p.send(b"x")
    text = httpx.get(f"{standalone.admin}/metrics").text
    for name in ("pulsar_broker_in_messages_total", "pulsar_storage_size", "pulsar_producers_count",
                 "pulsar_msg_backlog", "pulsar_broker_publish_latency_seconds_bucket", "pulsar_active_connections",
                 "pulsar_rate_in", "pulsar_rate_out", "pulsar_broker_dispatch_latency_seconds_bucket"):
        assert name in text, name


def test_reset_cursor_by_id_and_namespace_unload(standalone: Standalone, client: pulsar.Client) -> None:
    a = httpx.Client(base_url=standalone.admin)
    name = f"adm-id-{uuid.uuid4().hex[:6]}"
    t = f"persistent://public/default/{name}"
    base = f"/admin/v2/persistent/public/default/{name}"
    producer = client.create_producer(t, batching_enabled=False)
    ids = [producer.send(str(i).encode()) for i in range(6)]
    third = {"ledgerId": ids[3].ledger_id(), "entryId": ids[3].entry_id()}
    assert a.put(base + "/subscription/from-3", json=third).status_code == 204
    assert a.get(base + "/stats").json()["subscriptions"]["from-3"]["msgBacklog"] == 3
    assert a.put(base + "/subscription/at-end").status_code == 204
    assert a.get(base + "/stats").json()["subscriptions"]["at-end"]["msgBacklog"] == 0
    assert a.post(base + "/subscription/at-end/resetcursor", json={"ledgerId": ids[1].ledger_id(),
                                                                   "entryId": ids[1].entry_id()}).status_code == 204
    consumer = client.subscribe(t, "at-end")
    assert consumer.receive(timeout_millis=5000).data() == b"1"
    assert a.post(base + "/subscription/at-end/resetcursor", content=b"").status_code == 400
    assert a.post(base + "/subscription/nope/skip/1").status_code == 404
    last = a.get(base + "/lastMessageId").json()
    assert (last["ledgerId"], last["entryId"]) == (ids[-1].ledger_id(), ids[-1].entry_id())
    assert t in a.get("/admin/v2/namespaces/public/default/topics").json()
    assert a.put("/admin/v2/namespaces/public/default/unload").status_code == 204
    assert a.put("/admin/v2/namespaces/public/default/0x00000000_0x40000000/unload").status_code == 204
    assert a.put("/admin/v2/namespaces/public/default/0x00000000_0x12345678/unload").status_code == 404
    producer.send(b"after-namespace-unload")  # clients reconnect to the reloaded topic
    assert a.get(base + "/stats").json()["msgInCounter"] == 1


def test_clusters_tenants_and_json_errors(standalone: Standalone) -> None:
    a = httpx.Client(base_url=standalone.admin)
    info = a.get("/admin/v2/clusters/standalone").json()
    assert info["brokerServiceUrl"] == standalone.url and info["serviceUrl"] == standalone.admin
    assert a.get("/admin/v2/brokers/standalone").json() == [f"127.0.0.1:{standalone.web_port}"]
    assert a.get("/admin/v2/brokers/nope").status_code == 404
    assert a.get("/admin/v2/brokers/health").text == "ok"
    missing = a.get("/admin/v2/clusters/nope")
    assert missing.status_code == 404 and "nope" in missing.json()["reason"]
    assert a.put("/admin/v2/clusters/other", json={"serviceUrl": "http://other:8080"}).status_code == 204
    assert a.put("/admin/v2/clusters/other", json={}).status_code == 409
    assert set(a.get("/admin/v2/clusters").json()) == {"standalone", "other"}
    assert a.delete("/admin/v2/clusters/other").status_code == 204
    assert a.delete("/admin/v2/clusters/other").status_code == 404
    tenant = f"t{uuid.uuid4().hex[:6]}"
    assert a.put(f"/admin/v2/tenants/{tenant}", json={"allowedClusters": ["standalone"]}).status_code == 204
    assert a.post(f"/admin/v2/tenants/{tenant}", json={"adminRoles": ["ops"], "allowedClusters": ["standalone"]}).status_code == 204
    assert a.get(f"/admin/v2/tenants/{tenant}").json()["adminRoles"] == ["ops"]
    assert a.get("/admin/v2/tenants/nope").status_code == 404
    assert a.put(f"/admin/v2/namespaces/{tenant}/ns").status_code == 204
    assert a.delete(f"/admin/v2/tenants/{tenant}").status_code == 409  # still has a namespace
    assert a.put("/admin/v2/namespaces/no-such-tenant/ns").status_code == 404
    assert a.delete(f"/admin/v2/namespaces/{tenant}/ns").status_code == 204
    assert a.delete(f"/admin/v2/tenants/{tenant}").status_code == 204
    # unknown paths and methods answer in the same JSON error shape
    for r in (a.get("/admin/v2/no-such-thing"), a.patch("/admin/v2/tenants/public")):
        assert r.status_code in (404, 405) and r.json()["reason"]
    assert a.get("/lookup/v2/topic/persistent/public/no-such-ns/t").status_code == 404


def test_namespace_deduplication_ttl_and_delete_with_topics(standalone: Standalone, client: pulsar.Client) -> None:
    a = httpx.Client(base_url=standalone.admin)
    ns = f"public/ns{uuid.uuid4().hex[:6]}"
    assert a.put(f"/admin/v2/namespaces/{ns}").status_code == 204
    assert a.get(f"/admin/v2/namespaces/{ns}/deduplication").status_code == 204  # not set
    assert a.post(f"/admin/v2/namespaces/{ns}/deduplication", json=True).status_code == 204
    assert a.get(f"/admin/v2/namespaces/{ns}/deduplication").json() is True
    assert a.post(f"/admin/v2/namespaces/{ns}/deduplication", json="yes").status_code == 400
    assert a.delete(f"/admin/v2/namespaces/{ns}/deduplication").status_code == 204
    assert a.get(f"/admin/v2/namespaces/{ns}/deduplication").status_code == 204
    assert a.post(f"/admin/v2/namespaces/{ns}/messageTTL", json=-5).status_code == 412
    assert a.post(f"/admin/v2/namespaces/{ns}/messageTTL", json=30).status_code == 204
    assert a.get(f"/admin/v2/namespaces/{ns}").json()["message_ttl_in_seconds"] == 30
    assert a.delete(f"/admin/v2/namespaces/{ns}/messageTTL").status_code == 204
    assert a.get(f"/admin/v2/namespaces/{ns}/messageTTL").status_code == 204
    assert a.post(f"/admin/v2/namespaces/{ns}/retention", json=[1, 2]).status_code == 400
    assert a.post(f"/admin/v2/namespaces/{ns}/retention", json={"retentionTimeInMinutes": -1,
                                                                "retentionSizeInMB": -1}).status_code == 204
    producer = client.create_producer(f"persistent://{ns}/t")
    producer.send(b"x")
    assert a.delete(f"/admin/v2/namespaces/{ns}").status_code == 409  # has a topic
    assert a.delete(f"/admin/v2/persistent/{ns}/t").status_code == 412  # has a producer
    producer.close()
    assert a.delete(f"/admin/v2/namespaces/{ns}").status_code == 409
    assert a.delete(f"/admin/v2/namespaces/{ns}", params={"force": "true"}).status_code == 204
    assert a.get(f"/admin/v2/namespaces/{ns}").status_code == 404


def test_partitioned_topic_admin(standalone: Standalone, client: pulsar.Client) -> None:
    a = httpx.Client(base_url=standalone.admin)
    name = f"padm-{uuid.uuid4().hex[:6]}"
    base = f"/admin/v2/persistent/public/default/{name}"
    assert a.put(base + "/partitions", json=2).status_code == 204
    assert a.put(base, json=None).status_code == 409  # a partitioned topic of that name exists
    assert f"persistent://public/default/{name}" in a.get("/admin/v2/persistent/public/default/partitioned").json()
    assert a.post(base).status_code == 204  # creates the missing partitions
    topics = a.get("/admin/v2/persistent/public/default").json()
    assert {f"persistent://public/default/{name}-partition-{i}" for i in range(2)} <= set(topics)
    assert a.put(base + "/subscription/ps", json={"ledgerId": -1, "entryId": -1}).status_code == 204
    assert a.get(base + "/subscriptions").json() == ["ps"]
    producer = client.create_producer(f"persistent://public/default/{name}", batching_enabled=False,
                                      message_routing_mode=pulsar.PartitionsRoutingMode.RoundRobinDistribution)
    for i in range(6):
        producer.send(f"{i}".encode())
    stats = a.get(base + "/partitioned-stats", params={"perPartition": "true"}).json()
    assert stats["msgInCounter"] == 6 and stats["subscriptions"]["ps"]["msgBacklog"] == 6
    assert len(stats["partitions"]) == 2 and len(stats["publishers"]) == 2
    assert a.post(base + "/subscription/ps/skip/1").status_code == 204  # one per partition
    assert a.get(base + "/partitioned-stats").json()["subscriptions"]["ps"]["msgBacklog"] == 4
    assert a.post(base + "/subscription/ps/skip_all").status_code == 204
    assert a.get(base + "/partitioned-stats").json()["subscriptions"]["ps"]["msgBacklog"] == 0
    assert a.post(base + "/subscription/ps/resetcursor/0").status_code == 204
    assert a.get(base + "/partitioned-stats").json()["subscriptions"]["ps"]["msgBacklog"] == 6
    internal = a.get(base + "-partition-0/internalStats").json()
    assert internal["cursors"]["ps"]["markDeletePosition"] and internal["ledgers"]
    assert a.post(base + "/partitions", json=3).status_code == 204
    assert len(client.get_topic_partitions(f"persistent://public/default/{name}")) == 3
    producer.close()
    assert a.delete(base + "/subscription/ps").status_code == 204
    assert a.delete(base).status_code == 412  # partitioned: use the partitions endpoint
    assert a.delete(base + "/partitions").status_code == 204
    assert a.get(base + "/partitions").json() == {"partitions": 0}


def _scrape(standalone: Standalone, topic: str) -> dict[str, float]:
    """Metric name -> value for the series of ``topic`` and the broker-wide series."""
    out: dict[str, float] = {}
    for line in httpx.get(f"{standalone.admin}/metrics").text.splitlines():
        m = re.match(r'^(\w+)(\{[^}]*\})? (\S+)$', line)
        if m and (m.group(2) is None or f'topic="{topic}"' in m.group(2) or "topic=" not in m.group(2)):
            if m.group(2) and "le=" in m.group(2):
                continue
            out[m.group(1)] = float(m.group(3))
    return out


def test_metrics_series_move(standalone: Standalone, client: pulsar.Client) -> None:
    t = f"persistent://public/default/mv-{uuid.uuid4().hex[:6]}"
    consumer = client.subscribe(t, "s")
    producer = client.create_producer(t, batching_enabled=False)
    producer.send(b"warm-up")
    consumer.acknowledge(consumer.receive(timeout_millis=5000))
    before = _scrape(standalone, t)
    # A steady trickle for longer than the rate period (stats_update_frequency_in_secs = 1):
    # the last computed rates cover part of it.
    n, end = 0, time.monotonic() + 2.2
    while time.monotonic() < end:
        producer.send(b"x" * 100)
        n += 1
        time.sleep(0.02)
    got = [consumer.receive(timeout_millis=5000) for _ in range(n)]  # dispatched already
    mid = _scrape(standalone, t)
    assert mid["pulsar_rate_in"] > 0 and mid["pulsar_throughput_in"] > 0
    assert mid["pulsar_rate_out"] > 0 and mid["pulsar_throughput_out"] > 0
    assert mid["pulsar_in_messages_total"] - before["pulsar_in_messages_total"] == n
    assert mid["pulsar_in_bytes_total"] - before["pulsar_in_bytes_total"] >= 100 * n
    assert mid["pulsar_out_messages_total"] - before["pulsar_out_messages_total"] == n
    assert mid["pulsar_broker_in_messages_total"] - before["pulsar_broker_in_messages_total"] >= n
    assert mid["pulsar_msg_backlog"] == n  # received, not yet acknowledged
    assert mid["pulsar_subscription_back_log"] == n  # (unacked counts are kept for Shared only, as Pulsar)
    assert mid["pulsar_subscription_msg_rate_out"] > 0
    assert mid["pulsar_storage_size"] >= before["pulsar_storage_size"] + 100 * n
    assert mid["pulsar_producers_count"] == 1 and mid["pulsar_consumers_count"] == 1
    assert mid["pulsar_broker_rate_in"] > 0 and mid["pulsar_broker_msg_backlog"] >= n  # broker-wide sums
    assert mid["pulsar_broker_storage_size"] >= mid["pulsar_storage_size"]
    assert mid["pulsar_broker_publish_latency_seconds_count"] - before["pulsar_broker_publish_latency_seconds_count"] >= n
    assert mid["pulsar_broker_dispatch_latency_seconds_count"] > before["pulsar_broker_dispatch_latency_seconds_count"]
    for m in got:
        consumer.acknowledge(m)
    producer.close()
    consumer.close()
    deadline = time.monotonic() + 10
    while (after := _scrape(standalone, t))["pulsar_msg_backlog"] and time.monotonic() < deadline:
        time.sleep(0.1)  # acks are grouped by the client for 100 ms
    assert after["pulsar_msg_backlog"] == 0 and after["pulsar_subscription_back_log"] == 0
    assert after["pulsar_producers_count"] == 0 and after["pulsar_consumers_count"] == 0
    assert after["pulsar_out_messages_total"] == mid["pulsar_out_messages_total"]  # counters never go back


def test_schema_of_a_topic(standalone: Standalone, client: pulsar.Client) -> None:
    import json

    from pulsar.schema import Integer, JsonSchema, Record, String

    class Point(Record):
        name = String()
        x = Integer(required=True)

    a = httpx.Client(base_url=standalone.admin)
    t = f"schema-{uuid.uuid4().hex[:8]}"
    assert a.get(f"/admin/v2/schemas/public/default/{t}/schema").status_code == 404
    p = client.create_producer(f"persistent://public/default/{t}", schema=JsonSchema(Point))
    p.send(Point(name="a", x=1))
    p.close()
    got = a.get(f"/admin/v2/schemas/public/default/{t}/schema")
    assert got.status_code == 200, got.text
    body = got.json()
    assert body["type"] == "JSON" and body["version"] == 0
    assert [f["name"] for f in json.loads(body["data"])["fields"]] == ["name", "x"]
