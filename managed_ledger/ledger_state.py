"""What the parts of a ManagedLedger share: its state enum and the attributes of one instance.

``ManagedLedger`` (``ledger.py``: open, cursors, background loop, close) is assembled from
parts that each hold one job: ``add_pipeline.AddPipeline`` (adds and their ordering),
``ledger_rollover.LedgerRollover`` (creating the next ledger, closing the last),
``ledger_reads.LedgerReads`` (reads through the entry cache and read handles) and
``ledger_trimming.LedgerTrimming`` (deleting ledgers retention no longer keeps). Each part
inherits :class:`ManagedLedgerState`, which only declares the instance attributes (set in
``ManagedLedger.__init__``) and, for the type checker, the methods one part calls on another.
"""

from __future__ import annotations

import time
from collections import deque
from enum import Enum
from typing import TYPE_CHECKING, Callable

import trio

from managed_ledger.config import ManagedLedgerConfig
from managed_ledger.entry_cache import EntryCache
from managed_ledger.formats import LedgerInfo
from managed_ledger.ledger_client import LedgerClient, LedgerHandleView
from managed_ledger.ledger_list import LedgerList
from managed_ledger.ledger_list_store import LedgerListStore
from managed_ledger.position import Position
from metadata.store import MetadataStore

if TYPE_CHECKING:
    from managed_ledger.add_pipeline import LedgerWrites, QueuedAdd
    from managed_ledger.cursor import ManagedCursor
    from managed_ledger.ledger import ManagedLedger

ML_ROOT = "/managed-ledgers"


def now_ms() -> int:
    return int(time.time() * 1000)


class State(Enum):
    OPENING = "Opening"
    LEDGER_OPENED = "LedgerOpened"
    CREATING_LEDGER = "CreatingLedger"
    CLOSED_LEDGER = "ClosedLedger"  # the last rollover failed; the next add retries it
    TERMINATED = "Terminated"
    FENCED = "Fenced"
    CLOSED = "Closed"


class ManagedLedgerState:
    """Declarations only (see the module docstring); ``ManagedLedger.__init__`` sets them."""

    name: str
    path: str
    config: ManagedLedgerConfig
    store: MetadataStore
    bk: LedgerClient
    cache: EntryCache
    state: State
    _list_store: LedgerListStore
    _list: LedgerList
    _terminated_position: Position | None
    properties: dict[str, str]
    _current: LedgerHandleView | None
    _current_created_ms: int
    _reserved_entries: int
    _reserved_size: int
    _writes: dict[int, "LedgerWrites"]
    _current_writes: "LedgerWrites | None"
    _read_handles: dict[int, LedgerHandleView]
    last_confirmed_entry: Position
    entries_added_counter: int
    _max_rollover_ms: int
    _max_entries: int
    _max_size_bytes: int
    _readers_waiting: int
    cursors: dict[str, "ManagedCursor"]
    _non_durable: set["ManagedCursor"]
    _add_backlog: deque["QueuedAdd"]
    _backlog_running: bool
    _slots_free: int
    _slot_waiters: deque[trio.Event]
    _ledger_ready: trio.Event
    _rollover_error: BaseException | None
    _write_epoch: int
    _metadata_lock: trio.Lock
    _cursors_recovered: bool  # no trim before every durable cursor is recovered
    _trim_lock: trio.Lock
    _new_entries: trio.Event
    _nursery: trio.Nursery | None
    on_close: Callable[["ManagedLedger"], None] | None
    ledgers_deleted_counter: int
    last_ledger_created_ms: int

    if TYPE_CHECKING:  # what one part calls on another
        def set_fenced(self, why: str) -> None: ...
        def _schedule_trim(self) -> None: ...
        def rearm_background(self) -> None: ...
        def _all_cursors(self) -> list["ManagedCursor"]: ...
        async def _write_ledger_list(self, ledgers: list[LedgerInfo]) -> None: ...
        def _set_ledgers(self, ledgers: list[LedgerInfo]) -> None: ...
        @property
        def current_ledger_id(self) -> int: ...
        def _check_writable(self) -> None: ...
        def _is_current_full(self) -> bool: ...
        def _wake_readers(self) -> None: ...
        def _start_rollover(self) -> None: ...
        async def _wait_drained(self, ledger_id: int) -> None: ...
        async def delete_ledger_quietly(self, ledger_id: int) -> bool: ...
        def _install_current(self, lh: LedgerHandleView, info: LedgerInfo) -> None: ...
        def has_position(self, pos: Position) -> bool: ...
