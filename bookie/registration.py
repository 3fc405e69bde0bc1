"""Registration: the bookie's ephemeral node in the metadata store, and the disk checker.

A writable bookie is ``/ledgers/available/<host:port>``; a read-only one (its disks over
``disk_usage_threshold``) moves to ``/ledgers/available/readonly/<host:port>`` and refuses adds
with READ_ONLY until usage drops below ``disk_usage_lwm_threshold``. The node is re-created
when the store reports the session lost (its ephemeral nodes are gone then).
"""

from __future__ import annotations

import logging
import time
from typing import Callable

import trio

from bookie.config import BookieConfig
from bookie.metrics import BookieMetrics
from metadata.errors import AlreadyExistsError, MetadataError, NotFoundError
from metadata.store import MetadataStore
from metadata.values import pack

log = logging.getLogger(__name__)

AVAILABLE_PATH = "/ledgers/available"
READONLY_PATH = "/ledgers/available/readonly"


class BookieState:
    """What /api/v1/bookie/state reports and what the request handler consults."""

    def __init__(self) -> None:
        self.running = False
        self.read_only = False
        self.shutting_down = False
        self.started_at = time.time()
        self.manual_read_only = False  # PUT /api/v1/bookie/state/readonly: the disk checker leaves it


class Registration:
    def __init__(
        self,
        config: BookieConfig,
        store: MetadataStore | None,
        state: BookieState,
        metrics: BookieMetrics,
        disk_usage: Callable[[], tuple[int, int]],
    ) -> None:
        self.config = config
        self.store = store
        self.state = state
        self.metrics = metrics
        self.disk_usage = disk_usage
        self._registered_path: str | None = None
        self._session_lost = trio.Event()

    def _path(self, read_only: bool) -> str:
        return f"{READONLY_PATH if read_only else AVAILABLE_PATH}/{self.config.bookie_id}"

    def _info(self) -> bytes:
        return pack({"bookie_id": self.config.bookie_id, "http_port": self.config.http_server_port,
                     "read_only": self.state.read_only, "started_at": self.state.started_at})

    async def register(self) -> None:
        """(Re-)create the ephemeral node for the current mode, removing the other one."""
        if self.store is None:
            return
        path = self._path(self.state.read_only)
        other = self._path(not self.state.read_only)
        for stale in (other, path) if self._registered_path != path else (other,):
            try:
                # A node left by our previous incarnation (session not expired yet).
                await self.store.delete(stale)
            except NotFoundError:
                pass
        try:
            await self.store.create(path, self._info(), ephemeral=True, make_parents=True)
        except AlreadyExistsError:
            await self.store.delete(path)
            await self.store.create(path, self._info(), ephemeral=True, make_parents=True)
        self._registered_path = path
        log.info("bookie %s registered at %s", self.config.bookie_id, path)

    async def unregister(self) -> None:
        if self.store is None or self._registered_path is None:
            return
        try:
            await self.store.delete(self._registered_path)
        except MetadataError:
            pass
        self._registered_path = None

    def check_disks(self) -> bool:
        """Update read-only mode from disk usage; True if the mode changed."""
        free, total = self.disk_usage()
        used = 1.0 - (free / total) if total else 0.0
        if self.state.manual_read_only:
            return False
        if not self.state.read_only and used >= self.config.disk_usage_threshold:
            log.warning("disk usage %.1f%% over threshold: going read-only", used * 100)
            self.state.read_only = True
        elif self.state.read_only and used < self.config.disk_usage_lwm_threshold:
            log.info("disk usage %.1f%% below low-water mark: writable again", used * 100)
            self.state.read_only = False
        else:
            return False
        self.metrics.read_only.set(1 if self.state.read_only else 0)
        return True

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """Disk checker + re-registration loop (owned by the bookie's nursery)."""
        if self.store is not None:
            self.store.on_session_lost(self._session_lost.set)
        task_status.started()
        interval = self.config.disk_check_interval_ms / 1000.0
        while True:
            with trio.move_on_after(interval):
                await self._session_lost.wait()
            changed = await trio.to_thread.run_sync(self.check_disks)
            if self._session_lost.is_set():
                self._session_lost = trio.Event()
                if self.store is not None:
                    self.store.on_session_lost(self._session_lost.set)
                changed = True
            if changed and self.store is not None:
                try:
                    await self.register()
                except MetadataError as exc:
                    log.warning("re-registration failed (will retry): %s", exc)
                    self._session_lost.set()
                    await trio.sleep(1.0)
