"""The shared fixtures themselves: the ZooKeeper server and the subprocess helper work."""

from __future__ import annotations

import sys

import pytest
from kazoo.client import KazooClient

from tests.fixtures.processes import ProcessNotReadyError, free_port
from tests.fixtures.zookeeper import ZooKeeperServer, four_letter_word


def test_zk_server_answers_and_chroot_exists(zk_server: ZooKeeperServer, zk_url: str, zk_chroot: str) -> None:
    assert four_letter_word(zk_server.host, zk_server.port, "ruok") == "imok"
    assert zk_url == f"zk://127.0.0.1:{zk_server.port}{zk_chroot}"
    client = KazooClient(hosts=zk_server.connect_string)
    client.start(timeout=10)
    try:
        assert client.exists(zk_chroot) is not None
        assert client.get_children(zk_chroot) == []
    finally:
        client.stop()
        client.close()


def test_quire_procs_ready_on_port_then_kill(quire_procs) -> None:
    port = free_port()
    script = (
        "import socket,time; s=socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1);"
        f"s.bind(('127.0.0.1',{port})); s.listen(); print('listening', flush=True); time.sleep(60)"
    )
    proc = quire_procs.command([sys.executable, "-c", script], name="listener", ready_port=port, ready_log="listening")
    assert proc.is_running
    proc.pause()
    proc.resume()
    proc.kill()
    assert proc.returncode == -9
    proc.restart()
    assert proc.is_running
    assert proc.terminate() == -15


def test_quire_procs_reports_early_exit_with_log(quire_procs) -> None:
    with pytest.raises(ProcessNotReadyError, match="boom"):
        quire_procs.command(
            [sys.executable, "-c", "import sys; print('boom'); sys.exit(3)"], name="crasher", ready_port=free_port()
        )


def test_quire_cli_runs_under_quire_procs(quire_procs) -> None:
    proc = quire_procs("--help", wait=False)
    assert proc.wait(timeout=30) == 0
    assert "Usage: quire" in proc.log_text()
