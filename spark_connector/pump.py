"""Run an async fetcher on its own trio loop thread and hand its chunks to the Spark task's thread.

Both read modes fetch with trio code (our ``clients`` / ledger client) while Spark pulls record
batches from a plain generator: the fetcher ``put``s lists of entries into a bounded queue
(read-ahead of ``depth`` chunks while the task decodes) and stops when ``stop`` is set.

A task that reads several ranges one after another chains their fetchers (``FetchChain``): the
next range's fetcher starts as soon as the one before has fetched everything and is being read,
so its connect, lookup and first reads overlap the decoding of this range's last chunks instead
of following it, while at most two ranges hold fetched chunks (``depth`` each at most, unless
the first is being drained).
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Awaitable, Callable, Iterator

from .task_trace import mark

Put = Callable[[list[Any]], Awaitable[None]]
Fetch = Callable[[Put, threading.Event], Awaitable[None]]


class Pump:
    """One fetcher on its own thread, started by ``start()`` or by iterating; ``close()`` stops it."""

    def __init__(self, fetch: Fetch, name: str, depth: int = 4) -> None:
        self._fetch = fetch
        self._chunks: queue.Queue[Any] = queue.Queue(maxsize=depth)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._lock = threading.Lock()
        self._started = self._closed = self._fetched = self._reading = False
        # called once the fetcher has fetched all and the reader has begun reading (the next range's start)
        self._then: Callable[[], None] | None = None

    def start(self) -> None:
        with self._lock:
            if self._started or self._stop.is_set():
                return
            self._started = True
        mark("range_start")
        self._thread.start()

    def _run(self) -> None:
        import trio

        async def put(chunk: list[Any]) -> None:
            try:
                self._chunks.put_nowait(chunk)
            except queue.Full:
                await trio.to_thread.run_sync(self._chunks.put, chunk)

        try:
            trio.run(self._fetch, put, self._stop)
            mark("fetch_done")
        except BaseException as exc:  # handed to the reading thread
            self._chunks.put(exc)
            return
        self._step(fetched=True)
        self._chunks.put(None)

    def then_start(self, nxt: "Pump") -> None:
        """Start ``nxt`` once this one is fetched and being read (at once if it is already)."""
        with self._lock:
            self._then = nxt.start
        self._step()

    def _step(self, *, fetched: bool = False, reading: bool = False) -> None:
        """Start the next range once this one is both fetched and being read (whichever is last):
        a range fetched but not yet read does not pull the one after it in."""
        with self._lock:
            self._fetched = self._fetched or fetched
            self._reading = self._reading or reading
            then = self._then if self._fetched and self._reading and not self._stop.is_set() else None
            if then is not None:
                self._then = None
        if then is not None:
            then()

    def items(self) -> Iterator[Any]:
        """The items of every chunk the fetcher puts, in order; its exception is raised here."""
        self.start()
        self._step(reading=True)
        first = True
        try:
            while True:
                item = self._chunks.get()
                if first:
                    mark("first_chunk")
                    first = False
                if item is None:
                    return
                if isinstance(item, BaseException):
                    raise item
                yield from item
        finally:
            self.close()

    def close(self) -> None:
        with self._lock:
            if self._closed:
                return
            self._stop.set()
            self._closed = True
            started = self._started
        mark("close_start")
        while started and self._thread.is_alive():  # unblock a fetcher waiting on the full queue
            try:
                self._chunks.get_nowait()
            except queue.Empty:
                self._thread.join(0.01)
        mark("close_end")


class FetchChain:
    """The fetchers of one task's ranges, in reading order: each starts when the one before has
    fetched everything and is being read (the first at once); ``close()`` stops those still
    running or waiting."""

    def __init__(self) -> None:
        self._pumps: list[Pump] = []

    def add(self, pump: Pump) -> None:
        if self._pumps:
            self._pumps[-1].then_start(pump)
        else:
            pump.start()
        self._pumps.append(pump)

    def close(self) -> None:
        for p in self._pumps:
            p.close()


def pumped(fetch: Fetch, name: str, depth: int = 4, chain: FetchChain | None = None) -> Iterator[Any]:
    """The items of every chunk ``fetch`` puts, in order (fetched from now on when in ``chain``)."""
    pump = Pump(fetch, name, depth)
    if chain is not None:
        chain.add(pump)
    return pump.items()
