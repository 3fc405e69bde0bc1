"""Handing watch and session callbacks to the trio loop that registered them.

Callbacks may be triggered from other threads (kazoo's, RocksDB workers); they always run on
the owner's loop via its trio token, and a failing callback is logged, never allowed to
crash that loop.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import trio

log = logging.getLogger(__name__)


def deliver(token: trio.lowlevel.TrioToken, callback: Callable[..., Any], *args: Any) -> None:
    """Run `callback(*args)` soon on the loop behind `token` (safe from any thread)."""

    def run() -> None:
        try:
            callback(*args)
        except Exception:  # a user callback's bug must not take the event loop down
            log.exception("metadata callback %r failed", callback)

    try:
        token.run_sync_soon(run)
    except trio.RunFinishedError:
        pass  # that loop is gone: nobody is left to notify
