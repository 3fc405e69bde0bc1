"""Bookie: wires journal, ledger storage, checkpoint, server, registration and HTTP together.

Start-up order (each step must succeed before the next): cookies -> open storage (entry logs,
RocksDB) -> replay the journal from the LastLogMark -> open a new journal file -> checkpoint
(the replayed data reaches entry logs; the mark moves past it) -> start the journal writer,
sync thread, request server, HTTP -> register in the metadata store. Graceful close reverses
it: unregister, stop accepting requests, flush the journal, final checkpoint, close files.

Embeddable: ``await bookie.start(nursery)`` / ``await bookie.close()``, or
``await nursery.start(run_bookie, config, store)``.
"""

from __future__ import annotations

import logging
from typing import Any
from functools import partial
from typing import Any

import trio

from bookie import cookie, log_mark
from bookie import journal_format as jf
from bookie.auth import authenticator
from quire.security.tls import ServerTls
from bookie.config import MB, BookieConfig
from bookie.garbage_collector import GarbageCollector, check_gc_config
from bookie.entry_format import HEADER_SIZE as ENTRY_HEADER_SIZE, entry_lac
from bookie.errors import DiskFullError, is_disk_full
from bookie.journal import Journal, replay_records, trim_preallocated
from bookie.ledger_storage import LedgerStorage, ledger_dirs_current
from bookie.metrics import BookieMetrics
from bookie.registration import BookieState, Registration
from bookie.request_processor import RequestProcessor
from bookie.server import ReceiveBudget, serve_connection
from bookie.sync_thread import SyncThread
from metadata.ledger_ids import ledger_path
from metadata.store import MetadataStore
from quire import local_socket
from quire.config import naming_the_port

log = logging.getLogger(__name__)


class Bookie:
    def __init__(self, config: BookieConfig, store: MetadataStore | None = None) -> None:
        self.config = config
        self.store = store
        self.metrics = BookieMetrics()
        self.state = BookieState()
        self.storage = LedgerStorage(config, self.metrics)
        self.journal = Journal(config, self.metrics)
        self.sync_thread: SyncThread | None = None
        self.gc: list[GarbageCollector] = []  # one per ledger dir, created once storage is open
        check_gc_config(config)
        self.authenticator = authenticator(config)  # None: no identity required of clients
        self.processor = RequestProcessor(
            config, self.storage, self.journal, self.state, self.metrics,
            self._ledger_exists if store is not None else None,
        )
        self.registration = Registration(config, store, self.state, self.metrics, self.storage.disk_usage)
        self.receive_budget = ReceiveBudget(config.max_request_buffer_size_mb * MB, self.metrics)
        self.journal.on_disk_full = self.registration.disk_full
        self.port = 0
        self.http_port = 0
        self.replayed_records = 0
        self._cancel = trio.CancelScope()
        self._server_scope = trio.CancelScope()
        self._autorecovery_scope = trio.CancelScope()
        self.autorecovery: Any = None  # bookie.autorecovery.service.AutoRecovery when enabled
        self._http_shutdown = trio.Event()
        self._stopped = trio.Event()
        self._opened = False
        self._listeners: list[trio.SocketListener] = []

    @property
    def bookie_id(self) -> str:
        return self.config.bookie_id

    @property
    def address(self) -> tuple[str, int]:
        return (self.config.advertised_address or self.config.listening_interface, self.port)

    def publish_metrics(self) -> None:
        self.processor.publish_metrics()
        self.metrics.write_cache_size.set(self.storage.write_cache.active.size)
        self.metrics.read_cache_size.set(self.storage.read_cache.size)
        self.metrics.receive_buffered_bytes.set(self.receive_budget.used)

    async def _ledger_exists(self, ledger_id: int) -> bool:
        assert self.store is not None
        return await self.store.exists(ledger_path(ledger_id)) is not None

    # --- start-up --------------------------------------------------------------------------

    async def start(self, nursery: trio.Nursery) -> None:
        """Recover and start serving; returns once the bookie accepts requests."""
        # Bind first: with bookie_port 0 the real port is part of the bookie id and cookie.
        cfg = self.config
        with naming_the_port("bookie_port", cfg.listening_interface, cfg.bookie_port):
            self._listeners = await trio.open_tcp_listeners(cfg.bookie_port, host=cfg.listening_interface)
        self.port = self._listeners[0].socket.getsockname()[1]
        self.tls = None
        if cfg.tls_provider_factory_class:  # every connection on the bookie port speaks TLS
            self.tls = ServerTls(cfg.tls_certificate_path, cfg.tls_key_store, cfg.tls_trust_store,
                                 require_client_cert=cfg.tls_client_authentication,
                                 refresh_seconds=cfg.tls_cert_files_refresh_duration_seconds)
        if cfg.bookie_port == 0:
            cfg.bookie_port = self.port
        if cfg.local_socket_enabled and self.tls is None and local_socket.SUPPORTED:
            name = local_socket.new_name("bookie")
            try:
                self._listeners.append(await local_socket.listen(name))
            except OSError as exc:  # TCP still serves everyone
                log.warning("no local socket for co-located clients: %r", exc)
            else:
                self.registration.local_socket = name
        try:
            await cookie.verify_and_write(self.config, self.store)
            await trio.to_thread.run_sync(self.storage.open)
            self._opened = True
            self.gc = [GarbageCollector(cfg, self.storage, i, self.store, self.metrics) for i in range(len(self.storage.dirs))]
            if self.storage.disk_full_at_open:
                self.registration.disk_full(self.storage.disk_full_at_open)
            mark = await trio.to_thread.run_sync(log_mark.read_mark, ledger_dirs_current(self.config))
            await self._replay(mark)
            # Earlier files' unused preallocation goes back to the disk before a new file takes some.
            freed = await trio.to_thread.run_sync(trim_preallocated, self.journal.current_dir, 1 << 62)
            if freed:
                log.info("gave back %d bytes of unused journal preallocation", freed)
            try:
                await trio.to_thread.run_sync(self.journal.open_new_file)
            except OSError as exc:
                if not is_disk_full(exc):
                    raise
                # Start read-only; the journal creates its file at its first write.
                self.registration.disk_full(f"journal: {exc}")
            self.sync_thread = SyncThread(self.config, self.storage, self.journal, mark)
            self.sync_thread.on_disk_full = self.registration.disk_full
            self.sync_thread.disk_is_full = lambda: bool(self.state.disk_full)
            try:
                await self.sync_thread.checkpoint()
            except DiskFullError:
                # Start read-only: the replayed entries stay in the write cache and the journal.
                pass
            await trio.to_thread.run_sync(self.registration.check_disks)
        except BaseException:
            self._close_files()
            for listener in self._listeners:
                await trio.aclose_forcefully(listener)
            raise
        await nursery.start(self._run)
        self.registration.http_port = self.http_port
        await self.registration.register()
        if self.store is not None and cfg.bookie_rack:
            # rack-aware placement reads it (persistent: a down bookie's rack still counts)
            await self.store.put(f"/bookies/{self.bookie_id}/rack", cfg.bookie_rack.encode(), None, make_parents=True)
        if self.store is not None and cfg.autorecovery_daemon_enabled:
            await nursery.start(self._run_autorecovery)
        self.state.running = True
        log.info("bookie %s serving on port %d (http %d)", self.bookie_id, self.port, self.http_port)

    async def _replay(self, mark: log_mark.LogMark) -> None:
        """Apply every journal record after the mark: data, master keys, fences, LACs."""
        storage = self.storage
        n = 0
        no_flush = False  # the disk is full: the rest stays in memory (and in the journal)
        for rec in replay_records(self.journal.current_dir, mark):
            lid, eid = rec.ledger_id, rec.entry_id
            if eid >= 0:
                if storage.is_deleted(lid) or len(rec.payload) < ENTRY_HEADER_SIZE:
                    continue
                if storage.states.get(lid) is None:
                    storage.create_ledger(lid, b"")
                lac = entry_lac(rec.payload)
                while not storage.try_add(lid, eid, rec.payload, lac, force=no_flush):
                    try:
                        await storage.checkpoint(None)  # flush only: the mark must not move yet
                    except DiskFullError as exc:
                        # Start read-only rather than not at all: the entries left to replay
                        # go past the write cache's limit (no more than the cache and the
                        # journal held before the restart); the journal keeps them until a
                        # checkpoint succeeds once space returns.
                        log.warning("journal replay cannot flush (%s): the rest stays in memory", exc)
                        self.registration.disk_full(str(exc))
                        no_flush = True
            elif eid == jf.ENTRY_ID_MASTER_KEY:
                if not storage.is_deleted(lid):
                    storage.set_master_key(lid, rec.body)
            elif eid == jf.ENTRY_ID_FENCE:
                if not storage.is_deleted(lid):
                    storage.set_fenced(lid)
            elif eid == jf.ENTRY_ID_EXPLICIT_LAC:
                if not storage.is_deleted(lid):
                    lac, body = rec.explicit_lac()
                    storage.set_explicit_lac(lid, lac, body)
            n += 1
            if n % 1000 == 0:
                await trio.sleep(0)
        self.replayed_records = n
        if n:
            log.info("replayed %d journal records after %s", n, mark)

    async def _run(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        try:
            with self._cancel:
                async with trio.open_nursery() as nursery:
                    await nursery.start(self.journal.run)
                    assert self.sync_thread is not None
                    await nursery.start(self.sync_thread.run)
                    await nursery.start(self.registration.run)
                    for gc in self.gc:
                        await nursery.start(gc.run)
                    self.port = await nursery.start(self._serve)
                    if self.config.http_server_enabled:
                        from bookie.http import serve_http  # hypercorn + starlette: import only if used

                        self.http_port = await nursery.start(
                            serve_http, self, self.config.listening_interface, self.config.http_server_port,
                            self._http_shutdown,
                        )
                    task_status.started()
        finally:
            with trio.CancelScope(shield=True):
                self._close_files()
                self._stopped.set()

    async def _run_autorecovery(self, *, task_status: trio.TaskStatus[None] = trio.TASK_STATUS_IGNORED) -> None:
        """The auditor candidate + replication worker (BookKeeper's autoRecoveryDaemonEnabled).
        A ledger-client application: imported only when enabled; it reaches this bookie in process."""
        from bookie.autorecovery.service import AutoRecovery

        assert self.store is not None
        self.autorecovery = AutoRecovery(self.store, self.config, registry=self.metrics.registry, name=self.bookie_id,
                                         local_bookies={self.bookie_id: self.processor})
        with self._autorecovery_scope:
            await self.autorecovery.run(task_status=task_status)

    async def _serve(self, *, task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
        cfg = self.config
        handler = partial(
            serve_connection,
            processor=self.processor,
            metrics=self.metrics,
            max_frame_size=cfg.netty_max_frame_size_bytes,
            max_pending=cfg.max_pending_requests_per_connection,
            budget=self.receive_budget,
            high_water=cfg.server_write_buffer_high_water_mark,
            low_water=cfg.server_write_buffer_low_water_mark,
            stall_timeout=cfg.connection_stall_timeout_ms / 1000.0,
            auth=self.authenticator,
        )
        with self._server_scope:
            async with trio.open_nursery() as nursery:
                listeners: list[Any] = list(self._listeners)
                if self.tls is not None:
                    listeners = [trio.SSLListener(ln, self.tls.context, https_compatible=False) for ln in listeners]
                    nursery.start_soon(self.tls.watch)
                await nursery.start(trio.serve_listeners, handler, listeners)
                task_status.started(self.port)

    # --- shutdown --------------------------------------------------------------------------

    async def close(self) -> None:
        """Graceful shutdown: stop serving, make everything durable, close files."""
        if self.state.shutting_down:
            await self._stopped.wait()
            return
        self.state.shutting_down = True
        with trio.CancelScope(shield=True):
            self._autorecovery_scope.cancel()  # stop copying before the bookie stops serving
            try:
                await self.registration.unregister()
            except Exception:
                log.exception("unregister failed")
            self._server_scope.cancel()
            self._http_shutdown.set()
            for gc in self.gc:
                gc.stop()  # a compaction copy must not hold the shutdown back
            if self.state.running:
                try:
                    await self.journal.flush()
                    if self.sync_thread is not None and not self.state.disk_full:
                        await self.sync_thread.checkpoint()
                except Exception:
                    log.exception("final flush failed; the journal still holds the data")
            self._cancel.cancel()
            if self.state.running:
                await self._stopped.wait()
            else:
                self._close_files()
            self.state.running = False

    def _close_files(self) -> None:
        self.journal.close()
        if self._opened:
            self.storage.close()
            self._opened = False


async def run_bookie(
    config: BookieConfig,
    store: MetadataStore | None = None,
    *,
    task_status: trio.TaskStatus[Bookie] = trio.TASK_STATUS_IGNORED,
) -> None:
    """Run a bookie until cancelled (then shut it down gracefully); started() gets the Bookie."""
    async with trio.open_nursery() as nursery:
        bookie = Bookie(config, store)
        try:
            await bookie.start(nursery)
            task_status.started(bookie)
            await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await bookie.close()
