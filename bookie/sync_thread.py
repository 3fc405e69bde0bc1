"""SyncThread: the coordinated checkpoint (BookKeeper's SyncThread, as a trio task).

Every ``flush_interval_ms``, or sooner when the write cache fills: flush the write cache to
the entry logs + index of every ledger dir, then persist the LastLogMark (in every ledger
dir, never backwards), then delete journal files older than the mark beyond
``journal_max_backups``. Only this task advances the mark, because it spans all dirs.

A checkpoint that runs out of disk space reports it (``on_disk_full``: the bookie turns
read-only) and is not retried until the bookie is writable again: the write cache keeps the
entries and the journal still holds them, so nothing acknowledged is lost.
"""

from __future__ import annotations

import logging
from typing import Callable

import trio

from bookie import log_mark
from bookie.config import BookieConfig
from bookie.errors import DiskFullError, is_disk_full
from bookie.journal import Journal
from bookie.ledger_storage import LedgerStorage, ledger_dirs_current
from bookie.log_mark import LogMark
from quire import invariants

log = logging.getLogger(__name__)


class SyncThread:
    def __init__(self, config: BookieConfig, storage: LedgerStorage, journal: Journal, persisted: LogMark) -> None:
        self.config = config
        self.storage = storage
        self.journal = journal
        self.persisted_mark = persisted
        self._requested = trio.Event()
        self._lock = trio.Lock()
        self.checkpoints = 0
        storage.request_flush = self.request_flush
        self.on_disk_full: Callable[[str], None] = lambda reason: None
        self.disk_is_full: Callable[[], bool] = lambda: False
        self._out_of_space = False  # the last checkpoint failed for lack of space

    def request_flush(self) -> None:
        self._requested.set()

    async def run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        interval = self.config.flush_interval_ms / 1000.0
        task_status.started()
        while True:
            with trio.move_on_after(interval):
                await self._requested.wait()
            self._requested = trio.Event()
            if self._out_of_space and self.disk_is_full():
                continue  # no room to write into: wait until the disk checker sees space again
            try:
                await self.checkpoint()
                self._out_of_space = False
            except DiskFullError as exc:
                self._out_of_space = True
                log.warning("checkpoint postponed until disk space returns: %s", exc)
            except Exception:
                # The flushing half stays in memory and is retried next round; the journal
                # still holds every entry, so nothing acknowledged is lost.
                log.exception("checkpoint failed; will retry")
                await trio.sleep(1.0)

    def _advance_persisted(self, mark: LogMark) -> None:
        if invariants.ENABLED and mark < self.persisted_mark:
            invariants.violated(f"lastMark moving back from {self.persisted_mark} to {mark}")
        self.persisted_mark = mark

    async def checkpoint(self) -> LogMark:
        """One full checkpoint; returns the persisted mark."""
        async with self._lock:
            try:
                mark = await self.storage.checkpoint(self.journal)
                if mark is not None and mark > self.persisted_mark:
                    await trio.to_thread.run_sync(log_mark.write_mark, ledger_dirs_current(self.config), mark)
            except Exception as exc:
                if not is_disk_full(exc):
                    raise
                self.on_disk_full(str(exc))
                raise DiskFullError(str(exc)) from exc
            if mark is not None and mark > self.persisted_mark:
                # A checkpoint may compute a mark behind the persisted one (nothing newer was
                # flushed; journals rolled since): it is then not written. What is persisted
                # only ever moves forward.
                self._advance_persisted(mark)
                await trio.to_thread.run_sync(self.journal.gc_journals, mark)
            self.checkpoints += 1
            return self.persisted_mark
