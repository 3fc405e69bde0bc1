"""Admin REST API (Pulsar paths and JSON shapes), lookup and metrics on a real standalone."""

from __future__ import annotations

import time
import uuid

import httpx
import pulsar

from tests.e2e.conftest import Standalone


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
    internal = a.get(base + "/internalStats").json()
    assert internal["numberOfEntries"] >= 10 and "admin-sub" in internal["cursors"]
    assert a.get(base + "/subscriptions").json() == ["admin-sub"]
    assert a.post(base + "/subscription/admin-sub/skip/3").status_code == 204
    assert a.get(base + "/stats").json()["subscriptions"]["admin-sub"]["msgBacklog"] == 7
    assert a.post(base + "/subscription/admin-sub/skip_all").status_code == 204
    assert a.get(base + "/stats").json()["subscriptions"]["admin-sub"]["msgBacklog"] == 0
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
    producer.send(b"after-namespace-unload")  # clients reconnect to the reloaded topic
    assert a.get(base + "/stats").json()["msgInCounter"] == 1
