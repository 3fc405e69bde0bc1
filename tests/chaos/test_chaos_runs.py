"""Short fixed-seed chaos runs against real processes (about a minute each).

Each starts its own ZooKeeper/bookies/brokers (or a standalone) on free loopback ports, runs
the mixed workload under the seed's fault schedule, drains and checks. `-m slow` adds a
five-minute cluster run; `bench/chaos.py` runs any length.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from tests.chaos.run import run_chaos, summary


def assert_clean(result: dict[str, Any], min_faults: int) -> None:
    print(summary(result))
    assert result["leftover_processes"] == []
    assert result["failures"] == []
    assert result["faults"] >= min_faults, result["fault_log"]
    totals = result["totals"]
    assert totals["acked"] > 100 and totals["distinct"] >= totals["acked"]


def test_standalone_under_faults(tmp_path: Path) -> None:
    assert_clean(run_chaos("standalone", 40, seed=3, base=tmp_path), min_faults=4)


def test_cluster_under_faults(tmp_path: Path) -> None:
    assert_clean(run_chaos("cluster", 45, seed=2, base=tmp_path), min_faults=4)


@pytest.mark.slow
@pytest.mark.timeout(900)
def test_cluster_five_minutes(tmp_path: Path) -> None:
    assert_clean(run_chaos("cluster", 300, seed=11, base=tmp_path), min_faults=25)
