"""``quire standalone``: embedded metadata store + one bookie + one broker in one process.

Data lives under ``--data-dir`` (``metadata/`` RocksDB store, ``bookkeeper/journal`` and
``bookkeeper/ledgers``). The bookie runs with E=WQ=AQ=1 ledgers, the broker on 6650/8080. The
first start creates cluster ``standalone``, tenant ``public`` and namespace ``public/default``;
a restart (also after SIGKILL) recovers everything from the journal and the metadata store.
Shutdown order is the reverse of start-up: broker (topics closed, cursors persisted), managed
ledgers, ledger client, bookie (journal flushed, final checkpoint), metadata store.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
from pathlib import Path
from typing import Any, Mapping

import trio

from bookie.bookie import Bookie
from bookie.client import BookKeeper, ClientConfig
from bookie.client.local_bookie import RequestHandler
from bookie.config import BookieConfig
from broker.admin import serve_admin
from broker.config import BrokerConfig
from broker.service import BrokerService
from managed_ledger import ManagedLedgerConfig, ManagedLedgerFactory
from metadata import open_store

log = logging.getLogger(__name__)


def standalone_configs(
    data_dir: str | Path, broker: BrokerConfig, bookie_overrides: dict[str, Any] | None = None
) -> tuple[BrokerConfig, BookieConfig, str]:
    """The broker and bookie configs of a standalone node rooted at ``data_dir``."""
    root = Path(data_dir).resolve()
    store_url = f"rocksdb://{root / 'metadata'}"
    broker = dataclasses.replace(
        broker,
        metadata_store_url=store_url,
        managed_ledger_default_ensemble_size=1,
        managed_ledger_default_write_quorum=1,
        managed_ledger_default_ack_quorum=1,
    )
    values: dict[str, Any] = {
        "bookie_port": 3181,
        "http_server_port": 8000,
        "listening_interface": "127.0.0.1",
        "journal_directory": str(root / "bookkeeper" / "journal"),
        "ledger_directories": [str(root / "bookkeeper" / "ledgers")],
        "metadata_service_uri": store_url,
        # One process, one client: do not hold a lone add back for group commit (BookKeeper's
        # journalFlushWhenQueueEmpty); under load the queue is never empty and groups still form.
        "journal_flush_when_queue_empty": True,
    }
    values.update({k: v for k, v in (bookie_overrides or {}).items() if v is not None})
    return broker, BookieConfig.from_dict(values), store_url


async def run_standalone(
    data_dir: str | Path,
    broker_config: BrokerConfig,
    bookie_overrides: dict[str, Any] | None = None,
    *,
    stop: trio.Event | None = None,
    task_status: trio.TaskStatus[BrokerService] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run until ``stop`` is set (or cancelled). A stop shuts the broker down first (topics
    closed, cursors persisted) and only then the bookie (journal flushed, checkpoint)."""
    broker_config, bookie_config, store_url = standalone_configs(data_dir, broker_config, bookie_overrides)
    Path(data_dir).mkdir(parents=True, exist_ok=True)
    # The bookie's port is part of its identity (cookie, ledger ensembles): a node started
    # with port 0 keeps the port it got the first time.
    port_file = Path(data_dir) / "bookie_port"
    if bookie_config.bookie_port == 0 and port_file.exists():
        bookie_config.bookie_port = int(port_file.read_text().strip())
    stop = stop if stop is not None else trio.Event()
    store = await open_store(store_url)
    try:
        async with trio.open_nursery() as outer:
            bookie = Bookie(bookie_config, store)
            await bookie.start(outer)
            port_file.write_text(f"{bookie.port}\n")
            log.info("standalone bookie %s ready", bookie.bookie_id)
            # The broker's ledger client reaches this bookie in-process (same request
            # processor and journal fsync before every ack, no loopback socket hop); other
            # clients still use its port.
            local = {bookie.bookie_id: bookie.processor}
            async with trio.open_nursery() as inner:
                service = await inner.start(functools.partial(run_broker, broker_config, store, local_bookies=local))
                task_status.started(service)
                await stop.wait()
                log.info("stopping the broker")
                inner.cancel_scope.cancel()
            log.info("stopping the bookie")
            with trio.CancelScope(shield=True):
                await bookie.close()
            outer.cancel_scope.cancel()
    finally:
        with trio.CancelScope(shield=True):
            await store.close()


async def run_broker(
    config: BrokerConfig, store: Any, *, local_bookies: Mapping[str, RequestHandler] | None = None,
    task_status: trio.TaskStatus[BrokerService] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A broker on an open metadata store (bookies found through it); runs until cancelled.
    ``local_bookies``: bookies of this process, reached without a socket (standalone)."""
    ml_config = ManagedLedgerConfig(
        ensemble_size=config.managed_ledger_default_ensemble_size,
        write_quorum=config.managed_ledger_default_write_quorum,
        ack_quorum=config.managed_ledger_default_ack_quorum,
        metadata_ensemble_size=config.managed_ledger_default_ensemble_size,
        metadata_write_quorum=config.managed_ledger_default_write_quorum,
        metadata_ack_quorum=config.managed_ledger_default_ack_quorum,
    )
    async with BookKeeper(store, ClientConfig(), local_bookies=local_bookies) as bk:
        async with ManagedLedgerFactory(store, bk, ml_config) as factory:
            service = BrokerService(config, store, factory)
            async with trio.open_nursery() as nursery:
                await nursery.start(serve_admin, service, config.bind_address, config.web_service_port)
                await nursery.start(service.run)
                log.info("broker serving %s and %s", service.service_url, service.web_url)
                task_status.started(service)
                await trio.sleep_forever()
