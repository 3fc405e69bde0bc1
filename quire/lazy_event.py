"""A wake-up for trio waiters that costs nothing while nobody waits.

The add path signals on every message or group (the LAC advanced, journal space freed, publish
room made) but is rarely awaited; a fresh ``trio.Event`` per signal cost a few µs each. This
one makes its Event only when a task waits, and ``set`` wakes the tasks waiting now and
starts over (a pulse): waiters re-check their condition in a loop. A leaf module (trio only).
"""

from __future__ import annotations

import trio


class LazyEvent:
    """``await wait()`` until the next ``set()``; ``set()`` with no waiter does nothing."""

    __slots__ = ("_event",)

    def __init__(self) -> None:
        self._event: trio.Event | None = None

    async def wait(self) -> None:
        event = self._event
        if event is None:
            event = self._event = trio.Event()
        await event.wait()

    def set(self) -> None:
        event = self._event
        if event is not None:
            self._event = None
            event.set()
