"""Fixtures for broker tests: an in-process broker on a memory metadata store and the
in-memory managed-ledger stand-in, and a helper to run blocking official-client code."""

from __future__ import annotations

import itertools
import logging
from pathlib import Path
from typing import Any, AsyncIterator, Callable

import pytest
import trio

from broker.config import BrokerConfig
from broker.service import BrokerService
from metadata import open_store
from tests.broker.memory_ml import MemoryManagedLedgerFactory

_ids = itertools.count()


async def start_broker(nursery: trio.Nursery, **overrides: Any) -> BrokerService:
    """An in-process broker on a fresh memory store and in-memory managed ledgers."""
    store = await open_store(f"memory://broker-test-{next(_ids)}")
    config = BrokerConfig(**{"broker_service_port": 0, "web_service_port": 0, "advertised_address": "127.0.0.1",
                             "bind_address": "127.0.0.1", **overrides})
    service = BrokerService(config, store, MemoryManagedLedgerFactory())
    await nursery.start(service.run)
    return service


async def start_real_broker(nursery: trio.Nursery, data_dir: Path, **overrides: Any) -> BrokerService:
    """The real stack in this process: RocksDB metadata, a bookie, ledger client, managed ledgers."""
    from broker.standalone import run_standalone

    config = BrokerConfig(broker_service_port=0, web_service_port=0, advertised_address="127.0.0.1",
                          bind_address="127.0.0.1", **overrides)
    return await nursery.start(run_standalone, data_dir, config, {"bookie_port": 0, "http_server_port": 0,
                                                                   "journal_pre_alloc_size_mb": 1,
                                                                   "db_storage_write_cache_max_size_mb": 16,
                                                                   "db_storage_read_ahead_cache_max_size_mb": 16,
                                                                   "disk_usage_threshold": 0.999,
                                                                   "disk_usage_lwm_threshold": 0.998})


@pytest.fixture(params=["memory-ml", "real-ml"])
async def broker(request: pytest.FixtureRequest, nursery: trio.Nursery, tmp_path: Path) -> AsyncIterator[BrokerService]:
    """Each protocol test runs twice: on the in-memory managed ledger and on the real stack."""
    if request.param == "memory-ml":
        yield await start_broker(nursery)
    else:
        yield await start_real_broker(nursery, tmp_path / "node")
    nursery.cancel_scope.cancel()


def pulsar_logger() -> Any:
    log = logging.getLogger("pulsar-client")
    log.setLevel(logging.ERROR)
    return log


def client_for(service: BrokerService) -> Any:
    import pulsar

    return pulsar.Client(f"pulsar://127.0.0.1:{service.port}", operation_timeout_seconds=10,
                         logger=pulsar_logger())


async def in_thread(fn: Callable[[], Any]) -> Any:
    return await trio.to_thread.run_sync(fn)
