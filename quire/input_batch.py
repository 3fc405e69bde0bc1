"""Work deferred to the end of a connection reader's batch of input, in the same task step.

A broker connection reader that decodes a run of SENDs from one socket read opens a batch
(:func:`begin`) and closes it (:func:`end`) after the last one and before anything that may
yield to the scheduler. Meanwhile the journal, instead of waking its writer task for a new
group, registers itself (:func:`defer`) and writes the group from :func:`end`: the SENDs of
the read still form one group, and the durable write, the completions and the receipts
happen in the reader's own task step, without another task switch and event-loop round per
message. Outside a batch (any other task, or once the reader may yield) :func:`defer`
returns False and the caller wakes its task as usual.

The reader must call :func:`end` before every await while a batch is open: a deferred flush
left open across a yield would hold durable writes (and so receipts) until the reader runs
again; with invariants on (quire/invariants.py) a batch met by another task is a violation.
Event-loop thread only.
"""

from __future__ import annotations

from typing import Protocol

import trio

from quire import invariants


class Deferred(Protocol):
    def flush_deferred(self) -> None:
        """Called once by :func:`end` for each registration made in the batch."""


_open = False
_owner: object = None  # the task that opened the batch (checked with invariants on)
_deferred: list[Deferred] = []


def begin() -> None:
    """Open a batch (no-op if one is open)."""
    global _open, _owner
    if not _open:
        _open = True
        if invariants.ENABLED:
            _owner = trio.lowlevel.current_task()


def defer(target: Deferred) -> bool:
    """Inside a batch: run ``target.flush_deferred()`` at its end (the caller registers once
    per batch) and return True; outside one, False."""
    if not _open:
        return False
    if invariants.ENABLED and trio.lowlevel.current_task() is not _owner:
        invariants.violated("an input batch was left open across a yield (another task met it)")
    _deferred.append(target)
    return True


def end() -> None:
    """Close the batch (no-op if none is open) and run what was deferred to it, in order."""
    global _open, _deferred
    if not _open:
        return
    _open = False
    if _deferred:
        todo, _deferred = _deferred, []
        for target in todo:
            target.flush_deferred()
