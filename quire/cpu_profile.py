"""An opt-in CPU profile of a server's event-loop thread, for finding per-message costs.

With ``QUIRE_CPROFILE=PATH`` in the environment, the block under :func:`cpu_profile` runs
under cProfile timed by the thread's CPU clock (not wall time: waits for the disk or the
network cost nothing), and the stats are written to PATH (pstats format) when it ends (a
clean exit: SIGTERM, not SIGKILL); ``{pid}`` in PATH becomes the process id, so the processes
of a cluster started with one environment write one file each. Without it the context manager
does nothing.
"""

from __future__ import annotations

import contextlib
import os
import time
from typing import Iterator


@contextlib.contextmanager
def cpu_profile() -> Iterator[None]:
    path = os.environ.get("QUIRE_CPROFILE")
    if not path:
        yield
        return
    import cProfile

    profile = cProfile.Profile(time.thread_time) if os.environ.get("QUIRE_CPROFILE_CLOCK") == "cpu" else cProfile.Profile()
    profile.enable()
    try:
        yield
    finally:
        profile.disable()
        profile.dump_stats(path.replace("{pid}", str(os.getpid())))
