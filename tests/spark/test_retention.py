"""A streaming query's commits let retention delete the ledgers it has consumed (small ledgers:
a standalone with ``managed_ledger_max_entries_per_ledger=10``)."""

from __future__ import annotations

import time
from typing import Any, Iterator

import pytest

from tests.e2e.conftest import Standalone, start_standalone
from tests.spark.conftest import admin_call
from tests.spark.test_streaming import produce


@pytest.fixture(scope="module")
def small_ledgers(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    node = start_standalone(tmp_path_factory.mktemp("spark-retention"),
                            "--set", "managed_ledger_max_entries_per_ledger=10")
    try:
        yield node
    finally:
        node.proc.terminate()


def test_commits_free_consumed_ledgers(spark: Any, small_ledgers: Standalone, tmp_path: Any) -> None:
    node, topic = small_ledgers, "spark-retention"
    path = f"/admin/v2/persistent/public/default/{topic}"
    admin_call(node, "PUT", path)
    admin_call(node, "PUT", path + "/subscription/holder", {"ledgerId": -1, "entryId": -1})
    produce(node, topic, [b"r-%03d" % i for i in range(100)])
    before: Any = admin_call(node, "GET", path + "/internalStats")
    assert len([li for li in before["ledgers"] if li["entries"]]) >= 9
    q = (spark.readStream.format("pulsar").option("service.url", node.url).option("admin.url", node.admin)
         .option("topic", topic).option("startingOffsets", "earliest").option("maxEntriesPerTrigger", "20")
         .load().writeStream.format("parquet").option("path", str(tmp_path / "out"))
         .option("checkpointLocation", str(tmp_path / "ckpt")).trigger(availableNow=True).start())
    deadline = time.monotonic() + 60
    while len(admin_call(node, "GET", path + "/subscriptions")) < 2 and time.monotonic() < deadline:  # type: ignore[arg-type]
        time.sleep(0.1)
    admin_call(node, "DELETE", path + "/subscription/holder")  # only the query's subscription is left
    q.awaitTermination(180)
    assert q.exception() is None
    assert spark.read.parquet(str(tmp_path / "out")).count() == 100
    after: Any = admin_call(node, "GET", path + "/internalStats")
    first_before = before["ledgers"][0]["ledgerId"]
    kept = [li for li in after["ledgers"] if li["entries"]]
    # everything was committed (backlog 0) and every full consumed ledger deleted: at most the
    # last ledger (10 entries) is left
    assert after["ledgers"][0]["ledgerId"] > first_before
    assert sum(li["entries"] for li in kept) <= 10
    stats: Any = admin_call(node, "GET", path + "/stats")
    assert [s["msgBacklog"] for s in stats["subscriptions"].values()] == [0]
