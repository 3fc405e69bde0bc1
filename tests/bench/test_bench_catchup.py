"""bench/bench_catchup.py and bench/bench_catchup_read.py at CI size: a real standalone (an
in-process bookie and managed ledger for the second), a few thousand messages, every message of
every phase consumed and the JSON written (the figures themselves are not judged: a shared CI
machine's timings say nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]


def _run(tmp_path: Path, script: str, *args: str) -> Any:
    out = tmp_path / "result.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, str(REPO / "bench" / script), *args, "--out", str(out)], cwd=REPO, env=env,
                   check=True, timeout=300, capture_output=True)
    return json.loads(out.read_text())


def test_bench_catchup_runs_at_ci_size(tmp_path: Path) -> None:
    result = _run(tmp_path, "bench_catchup.py", "--messages", "3000", "--cached", "1000")
    assert result["catch_up"]["messages"] == 3000
    assert result["caught_up"]["messages"] == result["caught_up_after"]["messages"] == 1000
    # cpu_ratio may be 0 at this size: /proc CPU times tick in 10 ms (a full run had 0.0)
    assert result["ratio"] > 0 and result["cpu_ratio"] >= 0 and result["goal_ratio"] == 0.8


def test_bench_catchup_read_runs_at_ci_size(tmp_path: Path) -> None:
    """Every entry read from the entry cache and again from the entry logs (read ahead)."""
    result = _run(tmp_path, "bench_catchup_read.py", "--entries", "3000", "--rounds", "1")
    (rounds,) = result["rounds"].values()
    assert rounds[0]["entries"] == 3000
    assert rounds[0]["catch_up_cpu_us"] >= 0 and rounds[0]["cached_cpu_us"] >= 0
