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
            errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]  # after any warning
            assert len(errors) == 1, res.stderr
            assert errors[0].startswith(f"error: port {port} on 127.0.0.1 ({key}) is already in use"), res.stderr
            assert f"choose another with {flag}" in errors[0]


def quire(*args: str, cwd: Path = ROOT, timeout: float = 60) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "quire", *args], capture_output=True, text=True, timeout=timeout,
                          cwd=cwd)


def one_line_error(res: subprocess.CompletedProcess[str], code: int = 1) -> str:
    """The error line of a failed command: exit ``code``, no traceback."""
    assert res.returncode == code, res.stderr
    assert "Traceback" not in res.stderr and "ExceptionGroup" not in res.stderr, res.stderr
    lines = [ln for ln in res.stderr.splitlines() if ln.startswith(("error:", "Error:"))]
    assert len(lines) == 1, res.stderr
    return lines[0]


def test_data_dir_that_cannot_be_written_is_one_line(tmp_path: Path) -> None:
    in_the_way = tmp_path / "a-file"
    in_the_way.write_text("")
    line = one_line_error(quire("standalone", "--data-dir", str(in_the_way), "--port", "0", "--web-port", "0"))
    assert line == f"error: data dir {in_the_way} is a file, not a directory: choose another with --data-dir"
    import os

    if os.geteuid() != 0:  # root writes anywhere
        ro = tmp_path / "ro"
        ro.mkdir(mode=0o555)
        line = one_line_error(quire("standalone", "--data-dir", str(ro / "data"), "--port", "0", "--web-port", "0"))
        assert "cannot create data dir" in line and "choose another with --data-dir" in line


def test_config_mistakes_name_the_key_file_and_line(tmp_path: Path) -> None:
    camel = tmp_path / "camel.toml"
    camel.write_text("brokerServicePort = 6651\n")
    line = one_line_error(quire("broker", "--conf", str(camel)))
    assert "unknown broker config key 'brokerServicePort' (did you mean broker_service_port?" in line
    line = one_line_error(quire("broker", "--set", "managedLedgerMaxEntriesPerLedger=10"))
    assert "did you mean managed_ledger_max_entries_per_ledger?" in line
    bad = tmp_path / "bad.toml"
    bad.write_text("cluster_name = 'a'\nweb_service_port = = 1\n")
    line = one_line_error(quire("standalone", "--conf", str(bad), "--data-dir", str(tmp_path / "d")))
    assert line.startswith(f"error: {bad}:2:") and "not valid TOML" in line
    for command in ("broker", "standalone", "bookie"):
        line = one_line_error(quire(command, "--log-level", "LOUD"), code=2)
        assert "'LOUD' is not one of" in line


def test_a_bookie_without_a_metadata_url_warns(tmp_path: Path) -> None:
    import signal

    proc = subprocess.Popen([sys.executable, "-m", "quire", "bookie", "--port", "0", "--http-port", "0",
                             "--journal-dir", str(tmp_path / "j"), "--ledger-dirs", str(tmp_path / "l"),
                             "--log-level", "WARNING"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            cwd=ROOT)
    try:
        assert proc.stderr is not None
        first = proc.stderr.readline()
        assert first.startswith("warning: no --metadata-url: this bookie registers nowhere, so no broker can find it")
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.communicate(timeout=60)


def test_bookie_shell_on_a_wrong_dir_is_one_line(tmp_path: Path) -> None:
    line = one_line_error(quire("bookie-shell", "list-ledgers", "--ledger-dirs", str(tmp_path)))
    assert line == (f"Error: {tmp_path} is not a bookie ledger dir (no current/ inside): give the bookie's "
                    "--ledger-dirs (a standalone's: DATA_DIR/bookkeeper/ledgers)")


def test_metadata_url_is_the_store_flag_of_quire_metadata_too() -> None:
    port = free_port()
    line = one_line_error(quire("metadata", "ls", "/", "--metadata-url", f"zk://127.0.0.1:{port}/x", "--timeout", "3"))
    assert f"cannot connect to ZooKeeper at 127.0.0.1:{port}" in line


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
        errors = [ln for ln in res.stderr.splitlines() if ln.startswith("error: ")]  # after any warning
        assert len(errors) == 1 and expected in errors[0], res.stderr
