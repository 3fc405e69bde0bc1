"""Registration: the bookie's ephemeral node in the metadata store, and the disk checker.

A writable bookie is ``/ledgers/available/<host:port>``; a read-only one (its disks over
``disk_usage_threshold``) moves to ``/ledgers/available/readonly/<host:port>`` and refuses adds
with READ_ONLY until usage drops below ``disk_usage_lwm_threshold``. Running out of space
(ENOSPC in the journal, an entry log, an index) turns it read-only the same way, at once
(:meth:`Registration.disk_full`); it becomes writable again once usage is under the low-water
mark and every bookie dir has ``disk_full_min_free_mb`` free (ledger dirs: at least a whole
write cache, so the next checkpoint fits). The node is re-created
when the store reports the session lost (its ephemeral nodes are gone then).
"""

from __future__ import annotations

import logging
import os
import time
from typing import Callable

import trio

from bookie.config import MB, BookieConfig
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
        self.disk_full = ""  # why the bookie ran out of space ("" = it did not)
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
        self.http_port = 0  # set by the bookie once its HTTP server is bound
        self.local_socket = ""  # its abstract Unix socket's name, once bound ("" = none)
        self._session_lost = trio.Event()
        self._mode_changed = trio.Event()

    def disk_full(self, reason: str) -> None:
        """A write failed for lack of space: read-only now (synchronous, any task may call it)."""
        if not self.state.disk_full:
            log.error("out of disk space, bookie read-only: %s", reason)
        self.state.disk_full = reason
        self.metrics.disk_full.set(1)
        if not self.state.read_only:
            self.state.read_only = True
            self.metrics.read_only.set(1)
            self._mode_changed.set()  # re-register under readonly/ now, not at the next check

    def _room_again(self) -> bool:
        """Every bookie dir has ``disk_full_min_free_mb`` free, and each ledger dir room for a
        whole write cache too: less would let the next checkpoint fill the disk again at once."""
        cfg = self.config
        need = cfg.disk_full_min_free_mb * MB
        dirs = [(cfg.journal_directory, need)]
        dirs += [(d, max(need, cfg.db_storage_write_cache_max_size_mb * MB)) for d in cfg.ledger_directories]
        for d, want in dirs:
            try:
                st = os.statvfs(d)
            except OSError:
                return False
            if st.f_bavail * st.f_frsize < want:
                return False
        return True

    def _path(self, read_only: bool) -> str:
        return f"{READONLY_PATH if read_only else AVAILABLE_PATH}/{self.config.bookie_id}"

    def _info(self) -> bytes:
        # The bound HTTP port (the configured one may be 0 = any): `quire cluster-status` asks it for disk usage.
        # http_tls: the HTTP port speaks HTTPS (http_server_tls_enable).
        # local_socket: a ledger client on this host connects there instead of to the TCP port.
        info = {"bookie_id": self.config.bookie_id, "http_port": self.http_port or self.config.http_server_port,
                "http_tls": self.config.http_server_tls_enable,
                "read_only": self.state.read_only, "started_at": self.state.started_at}
        if self.local_socket:
            info["local_socket"] = self.local_socket
        return pack(info)

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
        if self.state.disk_full:
            if used >= self.config.disk_usage_lwm_threshold or not self._room_again():
                return False
            log.info("%d MB free again after running out of space: writable again", free // MB)
            self.state.disk_full = ""
            self.metrics.disk_full.set(0)
            self.state.read_only = False
        elif not self.state.read_only and used >= self.config.disk_usage_threshold:
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
                async with trio.open_nursery() as wake:  # whichever comes first
                    for event in (self._session_lost, self._mode_changed):
                        wake.start_soon(_set_then_cancel, event, wake.cancel_scope)
            changed = self._mode_changed.is_set()
            self._mode_changed = trio.Event()
            changed = await trio.to_thread.run_sync(self.check_disks) or changed
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


async def _set_then_cancel(event: trio.Event, scope: trio.CancelScope) -> None:
    await event.wait()
    scope.cancel()
