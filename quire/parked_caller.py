"""A caller parked until a callback tells it the outcome of what it started.

The add paths of the ledger handle and of the managed ledger complete through callbacks (no
task per entry); their ``add_entry`` coroutines park the calling task on one of these. While
the call still waits in a queue (``queued.alive``), cancelling the caller drops it; once it
was handed on, it stays in flight and its outcome is ignored.
"""

from __future__ import annotations

from typing import Generic, Protocol, TypeVar

import trio

T = TypeVar("T")


class Queued(Protocol):
    alive: bool


class ParkedCaller(Generic[T]):
    __slots__ = ("task", "queued", "value", "error")

    def __init__(self, task: trio.lowlevel.Task) -> None:
        self.task: trio.lowlevel.Task | None = task
        self.queued: Queued | None = None
        self.value: T | None = None
        self.error: BaseException | None = None

    def done(self, value: T | None, error: BaseException | None) -> None:
        self.value, self.error = value, error
        task, self.task = self.task, None
        if task is not None:
            trio.lowlevel.reschedule(task)

    def abort(self, _raise_cancel: object) -> trio.lowlevel.Abort:
        q = self.queued
        if q is not None and q.alive:
            q.alive = False  # still queued: dropped, never started
        self.task = None  # else it stays in flight
        return trio.lowlevel.Abort.SUCCEEDED

    async def wait(self) -> T:
        """Park until ``done`` (a checkpoint even if it already ran); raise its error."""
        if self.task is None:
            await trio.lowlevel.checkpoint()
        else:
            await trio.lowlevel.wait_task_rescheduled(self.abort)
        if self.error is not None:
            raise self.error
        return self.value  # type: ignore[return-value]
