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
