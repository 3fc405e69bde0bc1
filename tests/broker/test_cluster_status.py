"""broker.cluster_status reads what the cluster wrote in the metadata store: brokers with their
load reports, writable and read-only bookies, bundle owners, the auditor's under-replicated
ledgers (unit test on an in-memory store)."""

from __future__ import annotations

from broker.cluster_status import UNDER_REPLICATED, collect, render
from metadata import open_store
from metadata.ledger_ids import ledger_path
from metadata.values import pack


async def test_collect_and_render_what_the_store_holds() -> None:
    store = await open_store("memory://cluster-status")
    try:
        await store.create("/loadbalance/brokers/b1:8080", pack({"pulsarServiceUrl": "pulsar://b1:6650",
                                                                 "cpu": 12.5, "topics": 3}), make_parents=True)
        await store.create("/loadbalance/brokers/b2:8080", pack({"pulsarServiceUrl": "pulsar://b2:6650"}))
        await store.create("/ledgers/available/k1:3181", pack({"bookie_id": "k1:3181", "http_port": 0}),
                           make_parents=True)
        await store.create("/ledgers/available/readonly/k2:3181", pack({"bookie_id": "k2:3181"}), make_parents=True)
        await store.create("/namespace/public/default/0x00000000_0x40000000",
                           pack({"nativeUrl": "pulsar://b1:6650", "httpUrl": "http://b1:8080", "disabled": True}),
                           make_parents=True)
        await store.create(ledger_path(7, UNDER_REPLICATED), pack({"missing_replicas": ["k3:3181"], "ctime_ms": 1}),
                           make_parents=True)
        status = await collect(store)
    finally:
        await store.close()
    assert [b["id"] for b in status["brokers"]] == ["b1:8080", "b2:8080"]
    assert [(b["id"], b["state"], b["disk"]) for b in status["bookies"]] == [
        ("k1:3181", "writable", None), ("k2:3181", "read-only", None)]
    assert status["bundles"] == [{"namespace": "public/default", "bundle": "0x00000000_0x40000000",
                                  "owner": "http://b1:8080", "disabled": True}]
    assert status["underReplicatedLedgers"] == [{"ledger": 7, "missingReplicas": ["k3:3181"]}]
    text = render(status)
    assert "cpu=12.50, topics=3" in text and "(no load report)" in text
    assert "bookies (2, 1 writable)" in text
    assert "(unloading)" in text and "ledger 7" in text and "k3:3181" in text
