"""Spark connector fixtures: one ``quire standalone`` and one local SparkSession per test session.

The JVM start is slow, so the session is shared; Python workers get this worktree on PYTHONPATH
and the venv's interpreter so they import ``spark_connector`` and ``clients``.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path
from typing import Iterator

import pytest

from tests.e2e.conftest import Standalone, start_standalone

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def pulsar_node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    # a small max message size so chunked messages stay small
    node = start_standalone(tmp_path_factory.mktemp("spark-standalone"), "--set", "max_message_size=65536")
    try:
        yield node
    finally:
        node.proc.terminate()


@pytest.fixture(scope="session")
def spark(tmp_path_factory: pytest.TempPathFactory) -> Iterator["object"]:
    pytest.importorskip("pyspark")
    from pyspark.sql import SparkSession

    from spark_connector import PulsarDataSource

    path = os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]).rstrip(os.pathsep)
    os.environ["PYTHONPATH"] = path
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    session = (
        SparkSession.builder.master("local[2,3]")  # 2 threads, a failed task is retried (maxFailures 3)
        .appName("quire-spark-tests")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.executorEnv.PYTHONPATH", path)
        .config("spark.sql.warehouse.dir", str(tmp_path_factory.mktemp("warehouse")))
        .config("spark.driver.memory", "1g")
        .getOrCreate()
    )
    session.sparkContext.setLogLevel("ERROR")
    session.dataSource.register(PulsarDataSource)
    try:
        yield session
    finally:
        session.stop()


def admin_call(node: Standalone, method: str, path: str, body: object = None) -> object:
    import json
    import urllib.request

    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(node.admin + path, data=data, method=method,
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=30) as resp:
        raw = resp.read()
    return json.loads(raw) if raw.strip() else None


def create_partitioned(node: Standalone, topic: str, n: int) -> None:
    admin_call(node, "PUT", f"/admin/v2/persistent/public/default/{topic}/partitions", n)
