"""bench/bench_cluster_latency.py's bare-disk reference and quire.cpu_profile's per-process
file name (the cluster runs themselves are benchmarks, not tests)."""

from __future__ import annotations

import os
import pstats
from pathlib import Path

import pytest

from bench.bench_cluster_latency import percentiles, two_writer_dsync
from quire.cpu_profile import cpu_profile


def test_the_bare_disk_reference_times_rounds_of_two_durable_writes(tmp_path: Path) -> None:
    ref = two_writer_dsync(tmp_path, rounds=20, rate=2000)
    both, single = ref["max_of_two"], ref["single"]
    assert ref["rounds"] == 20 and isinstance(both, dict) and isinstance(single, dict)
    # a round is the slower of its two writes
    assert both["p50_us"] >= single["p50_us"] > 0 and both["p99_us"] >= both["p50_us"]
    assert list(tmp_path.iterdir()) == []  # its files are gone


def test_percentiles_in_microseconds() -> None:
    p = percentiles([i / 1e6 for i in range(1, 101)])
    assert (p["p50_us"], p["p90_us"], p["p99_us"]) == pytest.approx((51, 91, 100))


def test_cpu_profile_names_its_file_after_the_process(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QUIRE_CPROFILE", str(tmp_path / "p-{pid}.prof"))
    with cpu_profile():
        sum(range(1000))
    path = tmp_path / f"p-{os.getpid()}.prof"
    assert pstats.Stats(str(path)).total_calls > 0  # type: ignore[attr-defined]
