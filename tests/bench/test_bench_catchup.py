"""bench/bench_catchup.py at CI size: a real standalone, a few thousand messages, every
message of every phase consumed and the JSON written (the figures themselves are not judged:
a shared CI machine's timings say nothing)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_bench_catchup_runs_at_ci_size(tmp_path: Path) -> None:
    out = tmp_path / "catchup.json"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    subprocess.run([sys.executable, str(REPO / "bench" / "bench_catchup.py"), "--messages", "3000", "--cached", "1000",
                    "--out", str(out)], cwd=REPO, env=env, check=True, timeout=300, capture_output=True)
    result = json.loads(out.read_text())
    assert result["catch_up"]["messages"] == 3000
    assert result["caught_up"]["messages"] == result["caught_up_after"]["messages"] == 1000
    # cpu_ratio may be 0 at this size: /proc CPU times tick in 10 ms (a full run had 0.0)
    assert result["ratio"] > 0 and result["cpu_ratio"] >= 0 and result["goal_ratio"] == 0.8
