"""bench/bench_catchup_read.py at CI size: a real in-process bookie and managed ledger, every
entry read from the entry cache and again from the entry logs, the JSON written (the CPU
figures themselves are not judged: a shared CI machine's timings say nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_catchup_read_runs_at_ci_size(tmp_path: Path) -> None:
    out = tmp_path / "catchup_read.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, str(REPO / "bench" / "bench_catchup_read.py"), "--entries", "3000", "--rounds", "1",
                    "--out", str(out)], cwd=REPO, env=env, check=True, timeout=300, capture_output=True)
    result = json.loads(out.read_text())
    (rounds,) = result["rounds"].values()
    assert rounds[0]["entries"] == 3000
    assert rounds[0]["catch_up_cpu_us"] >= 0 and rounds[0]["cached_cpu_us"] >= 0
