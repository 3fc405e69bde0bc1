"""``AutoRecovery``: the auditor (elected) and a replication worker on one ledger client
(BookKeeper's ``AutoRecoveryMain``).

Run inside a bookie (``autorecovery_daemon_enabled``; the bookie reaches itself in process) or
on its own (``quire autorecovery``); ``quire bookie-shell decommission`` runs one too when the
cluster has no auditor. Every process runs a worker; one of them is also the auditor.
"""

from __future__ import annotations

import logging
import os
import uuid
from typing import TYPE_CHECKING, Mapping

import trio
from prometheus_client import CollectorRegistry

from bookie.autorecovery.auditor import Auditor
from bookie.autorecovery.metrics import AutoRecoveryMetrics
from bookie.autorecovery.replication_worker import ReplicationWorker
from bookie.client.bookkeeper import BookKeeper
from bookie.client.config import ClientConfig
from metadata.store import MetadataStore

if TYPE_CHECKING:
    from bookie.client.local_bookie import RequestHandler
    from bookie.config import BookieConfig

__all__ = ["AutoRecovery"]

log = logging.getLogger(__name__)


class AutoRecovery:
    def __init__(self, store: MetadataStore, config: "BookieConfig", *, client_config: ClientConfig | None = None,
                 registry: CollectorRegistry | None = None, name: str = "",
                 local_bookies: Mapping[str, "RequestHandler"] | None = None) -> None:
        self.store = store
        self.config = config
        self.client_config = client_config or ClientConfig()
        self.metrics = AutoRecoveryMetrics(registry)
        # unique per process run: a restarted process is a new candidate
        self.id = f"{name or 'autorecovery'}/{os.getpid()}/{uuid.uuid4().hex[:8]}"
        self.local_bookies = dict(local_bookies or {})
        self.auditor: Auditor | None = None
        self.worker: ReplicationWorker | None = None

    async def run(self, *, task_status: trio.TaskStatus["AutoRecovery"] = trio.TASK_STATUS_IGNORED) -> None:
        """Run until cancelled. A failure (a bug, an error nobody expected) is logged and the
        whole service restarted after ``rw_rereplicate_backoff_ms``: it must never take the
        bookie it runs in down with it."""
        started = False
        while True:
            try:
                async with BookKeeper(self.store, self.client_config, local_bookies=self.local_bookies) as bk:
                    self.worker = ReplicationWorker(bk, self.config, self.metrics, self.id)
                    self.auditor = Auditor(bk, self.config, self.metrics, self.id, on_marked=self.worker.kick)
                    async with trio.open_nursery() as nursery:
                        await nursery.start(self.auditor.run)
                        await nursery.start(self.worker.run)
                        if not started:
                            started = True
                            task_status.started(self)
            except Exception:
                log.exception("auto-recovery failed; restarting it")
            await trio.sleep(self.config.rw_rereplicate_backoff_ms / 1000)
