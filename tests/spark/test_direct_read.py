"""``readMode=direct`` (executors read ledgers from the bookies) against a real cluster on ZooKeeper:
the same rows as ``readMode=broker``."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any, Iterator

import pytest

from tests.e2e.conftest import Cluster, start_broker
from tests.fixtures.bookies import start_bookie
from tests.fixtures.processes import QuireProcesses
from tests.fixtures.zookeeper import ZooKeeperServer
from tests.spark.test_batch_read import produce_mixed


@pytest.fixture(scope="module")
def zk_cluster(tmp_path_factory: pytest.TempPathFactory, zk_server: ZooKeeperServer) -> Iterator[tuple[Cluster, str]]:
    base: Path = tmp_path_factory.mktemp("spark-cluster")
    if not zk_server.is_running:
        zk_server.start()
    chroot = f"/spark-{uuid.uuid4().hex}"
    zk_server.ensure_path(chroot)
    procs = QuireProcesses(base / "logs")
    try:
        for i in range(2):
            start_bookie(procs, zk_server.url(chroot), base, i)
        port, web = start_broker(procs, zk_server.url(chroot), 30000, "--set", "max_message_size=65536")
        yield Cluster(procs, port, web), zk_server.url(chroot)
    finally:
        procs.cleanup()


def test_direct_mode_reads_the_same_rows_as_broker_mode(spark: Any, zk_cluster: tuple[Cluster, str]) -> None:
    cluster, zk_url = zk_cluster
    check_same_rows(spark, cluster, zk_url, "spark-direct")


def test_direct_mode_on_a_standalone_reads_a_metadata_snapshot(spark: Any, pulsar_node: Any) -> None:
    check_same_rows(spark, pulsar_node, f"rocksdb://{pulsar_node.data_dir / 'metadata'}", "spark-direct-sa")


def check_same_rows(spark: Any, cluster: Any, zk_url: str, topic: str) -> None:
    from tests.spark.conftest import admin_call

    admin_call(cluster, "PUT", f"/admin/v2/persistent/public/default/{topic}/partitions", 2)
    sent = produce_mixed(cluster, topic)

    def rows(mode: str, **extra: str) -> list[tuple]:
        r = (spark.read.format("pulsar").option("service.url", cluster.url).option("admin.url", cluster.admin)
             .option("topic", topic).option("readMode", mode))
        if mode == "direct":
            r = r.option("metadata.url", zk_url)
        for k, v in extra.items():
            r = r.option(k, v)
        out = [tuple(bytes(v) if isinstance(v, (bytes, bytearray)) else v for v in
                     (r["value"], r["__key"], r["__topic"], r["__messageId"], r["__publishTime"], r["__eventTime"],
                      tuple(sorted(dict(r["__messageProperties"]).items()))))
               for r in r.load().collect()]
        return sorted(out, key=lambda t: (t[2], t[3]))

    broker = rows("broker")
    direct = rows("direct")
    assert len(direct) == len(sent)
    assert direct == broker
    assert rows("direct", entriesPerPartition="7") == broker  # many small ranges


def test_packed_tasks_are_cut_even_and_both_modes_read_the_same_rows(spark: Any, pulsar_node: Any) -> None:
    """Partitions of 50/20/10/20% of the rows packed into two tasks would be 70/30; the plan cuts
    the second partition at an entry so both tasks read about half, in either read mode."""
    from tests.spark.conftest import admin_call, create_partitioned

    topic, counts = "spark-even-tasks", [500, 200, 100, 200]
    create_partitioned(pulsar_node, topic, 4)
    c = pulsar_node.client()
    try:
        for i, n in enumerate(counts):
            p = c.create_producer(f"persistent://public/default/{topic}-partition-{i}", batching_enabled=True,
                                  batching_max_messages=10, batching_max_publish_delay_ms=1000)
            for j in range(n):
                p.send_async(b"%d-%04d-" % (i, j) + b"x" * 100, None)
            p.flush()
            p.close()
    finally:
        c.close()
    total = sum(int(li.get("size", 0)) for i in range(4) for li in admin_call(  # type: ignore[attr-defined]
        pulsar_node, "GET", f"/admin/v2/persistent/public/default/{topic}-partition-{i}/internalStats")["ledgers"])
    sent = sorted(b"%d-%04d-" % (i, j) + b"x" * 100 for i, n in enumerate(counts) for j in range(n))
    for mode in ("broker", "direct"):
        df = (spark.read.format("pulsar").option("service.url", pulsar_node.url).option("admin.url", pulsar_node.admin)
              .option("topic", topic).option("readMode", mode).option("bytesPerPartition", str(total * 3 // 4))
              .option("metadata.url", f"rocksdb://{pulsar_node.data_dir / 'metadata'}").load())
        per_task = df.rdd.mapPartitions(lambda rows: [sum(1 for _ in rows)]).collect()
        assert len(per_task) == 2 and abs(per_task[0] - per_task[1]) <= 100, per_task  # not 700 / 300
        assert sorted(bytes(r.value) for r in df.collect()) == sent
