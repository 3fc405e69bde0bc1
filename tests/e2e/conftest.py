"""End-to-end fixtures: a real ``quire standalone`` subprocess and the official client."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import pulsar
import pytest

from tests.fixtures.processes import ProcessNotReadyError, QuireProcess, free_port


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
        log = logging.getLogger("pulsar-client")
        log.setLevel(logging.ERROR)
        kwargs.setdefault("operation_timeout_seconds", 15)
        return pulsar.Client(self.url, logger=log, **kwargs)


def start_standalone(base: Path, *extra: str) -> Standalone:
    data = base / "data"
    for attempt in range(3):
        port, web = free_port(), free_port()
        proc = QuireProcess.quire(
            ["standalone", "--data-dir", str(data), "--port", str(port), "--web-port", str(web),
             "--bookie-port", "0", "--bookie-http-port", "0", "--log-level", "WARNING", *extra],
            log_path=base / f"standalone-{attempt}.log", ready_url=f"http://127.0.0.1:{web}/admin/v2/clusters",
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
