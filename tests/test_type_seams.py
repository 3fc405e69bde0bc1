"""The type checker passes on the seams between packages (config: ``[tool.mypy]`` in pyproject).

A fake that drifts from the real implementation (tests/managed_ledger/fake_bk.py vs
bookie.client, tests/broker/memory_ml.py vs managed_ledger) fails here.
"""

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_mypy_passes_on_the_typed_seams() -> None:
    out = subprocess.run([sys.executable, "-m", "mypy", "--no-incremental"], cwd=ROOT,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout + out.stderr
