"""Fixtures for client tests: one real ``quire standalone`` for the package, client factories, the
scripted fake broker (``fake``)."""

from __future__ import annotations

import json
import logging
import time
import urllib.request
import uuid
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import trio

from tests.clients.fake_broker import FakeBroker
from tests.fixtures.processes import QuireProcess, free_port


@dataclass
class Broker:
    proc: QuireProcess
    port: int
    web_port: int
    data_dir: Path

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin_url(self) -> str:
        return f"http://127.0.0.1:{self.web_port}"


def start_broker(base: Path, port: int | None = None, web_port: int | None = None) -> Broker:
    port, web_port = port or free_port(), web_port or free_port()
    data = base / "data"
    proc = QuireProcess.quire(
        ["standalone", "--data-dir", str(data), "--port", str(port), "--web-port", str(web_port),
         "--bind-address", "127.0.0.1", "--advertised-address", "127.0.0.1",
         "--bookie-port", "0", "--bookie-http-port", "0", "--log-level", "WARNING"],
        log_path=base / "standalone.log",
        ready_url=f"http://127.0.0.1:{web_port}/admin/v2/clusters",
    )
    proc.start()
    proc.wait_ready(60)
    wait_for_default_namespace(web_port)
    return Broker(proc, port, web_port, data)


def wait_for_default_namespace(web_port: int, timeout_s: float = 30.0) -> None:
    """The admin API answers before the broker has created public/default: wait for it too."""
    deadline = time.monotonic() + timeout_s
    url = f"http://127.0.0.1:{web_port}/admin/v2/namespaces/public"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as resp:
                if "public/default" in json.loads(resp.read()):
                    return
        except (OSError, ValueError):
            pass
        time.sleep(0.1)
    raise TimeoutError("public/default was not created")


@pytest.fixture(scope="package")  # torn down once tests/clients is done, not at session end
def broker(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Broker]:
    node = start_broker(tmp_path_factory.mktemp("client-broker"))
    try:
        yield node
    finally:
        node.proc.terminate()
        print(node.proc.log_tail(30))


@pytest.fixture
def topic() -> str:
    return f"persistent://public/default/c-{uuid.uuid4().hex[:12]}"


@pytest.fixture
def client(broker: Broker) -> Iterator[Any]:
    import clients

    c = clients.Client(broker.url, operation_timeout_seconds=15)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
def official(broker: Broker) -> Iterator[Any]:
    import pulsar

    log = logging.getLogger("pulsar-client")
    log.setLevel(logging.ERROR)
    c = pulsar.Client(broker.url, operation_timeout_seconds=15, logger=log)
    try:
        yield c
    finally:
        c.close()


@pytest.fixture
async def fake(nursery: trio.Nursery) -> AsyncIterator[FakeBroker]:
    broker = FakeBroker()
    await nursery.start(broker.run)
    yield broker
    broker.stop()
