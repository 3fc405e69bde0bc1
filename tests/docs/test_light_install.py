"""`pip install .` without extras gives a working `quire standalone`: no Java, ZooKeeper client,
Spark or official client is imported on that path (they stay in the extras: test, spark).

The quick test checks the imports of the standalone's path in this venv; the slow one
(``-m slow``) builds a fresh venv, installs the package without extras and runs a node."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from tests.fixtures.processes import free_port

ROOT = Path(__file__).resolve().parents[2]
HEAVY = ("kazoo", "pyspark", "pulsar", "pyarrow", "pandas", "spark_connector")


def test_the_standalone_path_imports_nothing_heavy() -> None:
    code = ("import sys, quire.cli, broker.cli, broker.standalone, broker.service, quire.client_cli, quire.admin_cli; "
            f"print([m for m in {HEAVY!r} if m in sys.modules])")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT).stdout
    assert out.strip() == "[]"


@pytest.mark.slow
def test_pip_install_without_extras_runs_a_standalone(tmp_path: Path) -> None:
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    subprocess.run([str(venv / "bin" / "pip"), "install", "-q", str(ROOT)], check=True, timeout=900)
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
    env["PATH"] = f"{venv / 'bin'}:/usr/bin:/bin"
    port, web = free_port(), free_port()
    node = subprocess.Popen(["quire", "standalone", "--data-dir", str(tmp_path / "data"), "--port", str(port),
                             "--web-port", str(web), "--bookie-port", "0", "--bookie-http-port", "0"],
                            env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        url = f"pulsar://127.0.0.1:{port}"
        deadline = time.monotonic() + 60
        while True:
            res = subprocess.run(["quire", "produce", "light", "-m", "hi", "--url", url], env=env, cwd=tmp_path,
                                 capture_output=True, text=True, timeout=60)
            if res.returncode == 0 or time.monotonic() > deadline:
                break
            time.sleep(1)
        assert res.returncode == 0, res.stderr
        got = subprocess.run(["quire", "read", "light", "-n", "1", "--url", url], env=env, cwd=tmp_path,
                             capture_output=True, text=True, timeout=60)
        assert got.stdout.rstrip().endswith("content:hi"), got.stderr
    finally:
        node.send_signal(signal.SIGINT)
        _, err = node.communicate(timeout=60)
    assert node.returncode == 0, err
