"""Run an async fetcher on its own trio loop thread and hand its chunks to the Spark task's thread.

Both read modes fetch with trio code (our ``clients`` / ledger client) while Spark pulls record
batches from a plain generator: the fetcher ``put``s lists of entries into a bounded queue
(read-ahead of ``depth`` chunks while the task decodes) and stops when ``stop`` is set.
"""

from __future__ import annotations

import queue
import threading
from typing import Any, Awaitable, Callable, Iterator

Put = Callable[[list[Any]], Awaitable[None]]


def pumped(fetch: Callable[[Put, threading.Event], Awaitable[None]], name: str, depth: int = 4) -> Iterator[Any]:
    """The items of every chunk ``fetch`` puts, in order; its exception is raised here."""
    import trio

    chunks: queue.Queue[Any] = queue.Queue(maxsize=depth)
    stop = threading.Event()

    async def put(chunk: list[Any]) -> None:
        try:
            chunks.put_nowait(chunk)
        except queue.Full:
            await trio.to_thread.run_sync(chunks.put, chunk)

    def run() -> None:
        try:
            trio.run(fetch, put, stop)
            chunks.put(None)
        except BaseException as exc:  # handed to the reading thread
            chunks.put(exc)

    thread = threading.Thread(target=run, name=name, daemon=True)
    thread.start()
    try:
        while True:
            item = chunks.get()
            if item is None:
                return
            if isinstance(item, BaseException):
                raise item
            yield from item
    finally:
        stop.set()
        while thread.is_alive():  # unblock a fetcher waiting on the full queue
            try:
                chunks.get(timeout=0.1)
            except queue.Empty:
                pass
