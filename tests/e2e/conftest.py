"""End-to-end fixtures: real ``quire`` processes and the official client.

``standalone`` / ``client``: one ``quire standalone`` subprocess per test module.
``node`` / ``node_client``: parametrised over ``standalone`` and ``cluster`` (real ZooKeeper,
two ``quire bookie`` processes, one ``quire broker``): the same tests run against both modes.
Session-scoped, so every module that uses ``node`` shares one of each.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pulsar
import pytest

from tests.fixtures.bookies import start_bookie
from tests.fixtures.processes import ProcessNotReadyError, QuireProcess, QuireProcesses, free_port
from tests.fixtures.zookeeper import ZooKeeperServer


def new_client(url: str, **kwargs: Any) -> pulsar.Client:
    # The C++ file logger: a Python logger called from client threads can abort at exit.
    kwargs.setdefault("operation_timeout_seconds", 15)
    return pulsar.Client(url, logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/stderr"), **kwargs)


@dataclass
class Standalone:
    proc: QuireProcess
    port: int
    web_port: int
    data_dir: Path

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def client(self, **kwargs: Any) -> pulsar.Client:
        return new_client(self.url, **kwargs)


def start_standalone(base: Path, *extra: str, ready_path: str = "/admin/v2/clusters") -> Standalone:
    """``ready_path``: what answers 200 once it serves (``/metrics`` when authentication is on)."""
    data = base / "data"
    for attempt in range(3):
        port, web = free_port(), free_port()
        proc = QuireProcess.quire(
            ["standalone", "--data-dir", str(data), "--port", str(port), "--web-port", str(web),
             "--bookie-port", "0", "--bookie-http-port", "0", "--log-level", "WARNING", *extra],
            log_path=base / f"standalone-{attempt}.log", ready_url=f"http://127.0.0.1:{web}{ready_path}",
        )
        proc.start()
        try:
            proc.wait_ready(60)
            return Standalone(proc, port, web, data)
        except ProcessNotReadyError:
            proc.kill()
            # Another process on this shared machine may have taken a "free" port meanwhile.
            if attempt == 2 or "Address already in use" not in proc.log_text():
                raise
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def standalone(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Standalone]:
    node = start_standalone(tmp_path_factory.mktemp("standalone"))
    try:
        yield node
    finally:
        node.proc.terminate()
        print(node.proc.log_tail(30))


@pytest.fixture(scope="module")
def client(standalone: Standalone) -> Iterator[pulsar.Client]:
    c = standalone.client()
    try:
        yield c
    finally:
        c.close()


# -- cluster mode: ZooKeeper + bookie processes + broker processes ------------------------------

def start_broker(procs: QuireProcesses, zk_url: str, session_ms: int = 30000, *extra: str,
                 ready_path: str = "/admin/v2/clusters") -> tuple[int, int]:
    port, web = free_port(), free_port()
    procs("broker", "--metadata-url", zk_url, "--port", str(port), "--web-port", str(web),
          "--set", f"metadata_store_session_timeout_millis={session_ms}",
          "--set", "managed_ledger_default_ensemble_size=2", "--set", "managed_ledger_default_write_quorum=2",
          "--set", "managed_ledger_default_ack_quorum=2", "--log-level", "WARNING", *extra,
          ready_url=f"http://127.0.0.1:{web}{ready_path}", timeout=60)
    return port, web


@dataclass
class Cluster:
    """Real ZooKeeper (a fresh chroot), two bookie processes and one broker process."""

    procs: QuireProcesses
    port: int
    web_port: int

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"

    def client(self, **kwargs: Any) -> pulsar.Client:
        return new_client(self.url, **kwargs)


def start_cluster(base: Path, zk: ZooKeeperServer) -> Cluster:
    if not zk.is_running:
        zk.start()
    chroot = f"/e2e-{uuid.uuid4().hex}"
    zk.ensure_path(chroot)
    procs = QuireProcesses(base / "logs")
    try:
        for i in range(2):
            start_bookie(procs, zk.url(chroot), base, i)
        port, web = start_broker(procs, zk.url(chroot))
    except BaseException:
        procs.cleanup()
        raise
    return Cluster(procs, port, web)


@pytest.fixture(scope="session", params=["standalone", "cluster"])
def node(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory,
         zk_server: ZooKeeperServer) -> Iterator[Standalone | Cluster]:
    base = tmp_path_factory.mktemp(request.param)
    if request.param == "standalone":
        node = start_standalone(base)
        try:
            yield node
        finally:
            node.proc.terminate()
            print(node.proc.log_tail(30))
    else:
        cluster = start_cluster(base, zk_server)
        try:
            yield cluster
            # SIGTERM is an orderly shutdown for `quire broker` and `quire bookie` too
            codes = [p.terminate() for p in reversed(cluster.procs.procs)]
            assert codes == [0] * len(codes), codes
        finally:
            cluster.procs.cleanup()


@pytest.fixture(scope="session")
def node_client(node: Standalone | Cluster) -> Iterator[pulsar.Client]:
    c = node.client()
    try:
        yield c
    finally:
        c.close()
