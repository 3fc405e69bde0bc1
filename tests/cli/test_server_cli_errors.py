"""Server commands fail fast and in one line when what they need is not there."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

from tests.fixtures.processes import free_port

ROOT = Path(__file__).resolve().parents[2]


def test_broker_with_zookeeper_unreachable_fails_within_seconds() -> None:
    port = free_port()
    started = time.monotonic()
    res = subprocess.run([sys.executable, "-m", "quire", "broker", "--metadata-url", f"zk://127.0.0.1:{port}/q",
                          "--port", "0", "--web-port", "0"], capture_output=True, text=True, timeout=60, cwd=ROOT)
    assert time.monotonic() - started < 10
    assert res.returncode == 1 and "Traceback" not in res.stderr
    line = next(ln for ln in res.stderr.splitlines() if ln.startswith("error:"))
    assert f"cannot connect to ZooKeeper at 127.0.0.1:{port}" in line and "is ZooKeeper running?" in line
    assert "Connection refused" not in res.stderr  # no kazoo retry warnings


def _assert_port_in_use_is_named(base_args: list[str], cases: list[tuple[str, str]]) -> None:
    """For each (flag, config key): the command with that flag set to a port another socket holds
    fails with one line naming the port, the key and the flag to change."""
    import socket

    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        for flag, key in cases:
            args = [a.replace("{case}", flag.strip("-")) for a in base_args]
            args[args.index(flag) + 1] = str(port)
            res = subprocess.run([sys.executable, "-m", "quire", *args], capture_output=True, text=True,
                                 timeout=60, cwd=ROOT)
            assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
            assert res.stderr.startswith(f"error: port {port} on 127.0.0.1 ({key}) is already in use"), res.stderr
            assert f"choose another with {flag}" in res.stderr.splitlines()[0]


def test_port_in_use_names_the_port_and_the_flag(tmp_path: Path) -> None:
    _assert_port_in_use_is_named(
        ["standalone", "--data-dir", str(tmp_path / "{case}"), "--port", "0", "--web-port", "0",
         "--bookie-port", "0", "--bookie-http-port", "0", "--log-level", "WARNING"],
        [("--port", "broker_service_port"), ("--web-port", "web_service_port"),
         ("--bookie-port", "bookie_port"), ("--bookie-http-port", "http_server_port")],
    )


def test_bookie_port_in_use_names_the_port_and_the_flag(tmp_path: Path) -> None:
    _assert_port_in_use_is_named(
        ["bookie", "--journal-dir", str(tmp_path / "{case}" / "journal"), "--ledger-dirs",
         str(tmp_path / "{case}" / "ledgers"), "--port", "0", "--http-port", "0", "--log-level", "WARNING"],
        [("--port", "bookie_port"), ("--http-port", "http_server_port")],
    )


def test_bookie_config_errors_are_one_line_with_the_key_meant(tmp_path: Path) -> None:
    conf = tmp_path / "bookie.toml"
    conf.write_text("[bookie]\njournalMaxGroupWaitMs = 5\n")
    base = [sys.executable, "-m", "quire", "bookie", "--journal-dir", str(tmp_path / "j"),
            "--ledger-dirs", str(tmp_path / "l"), "--port", "0", "--http-port", "0"]
    for extra, expected in (
        (["--conf", str(conf)], "did you mean journal_max_group_wait_ms?"),
        (["--set", "jornal_sync_data=false"], "did you mean journal_sync_data?"),
        (["--set", "journal_max_group_wait_ms=soon"], "journal_max_group_wait_ms"),
    ):
        res = subprocess.run([*base, *extra], capture_output=True, text=True, timeout=60, cwd=ROOT)
        assert res.returncode == 1 and "Traceback" not in res.stderr, res.stderr
        first = res.stderr.splitlines()[0]
        assert first.startswith("error: ") and expected in first, res.stderr
