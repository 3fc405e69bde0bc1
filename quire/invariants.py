"""Invariants checked inside the code where a bug would otherwise be silent.

Each check is one comparison on a path that already does far more work, so it is on by
default (tests always run with it; `QUIRE_INVARIANTS=0` turns it off for a benchmark that wants
the last microsecond). A violation raises `InvariantViolation` (an `AssertionError`: it is a
bug in quire, never a condition a caller handles) and is counted, so the chaos harness can
report violations that an error boundary swallowed. A leaf module: standard library only, so
every package may import it (see docs/architecture.md).
"""

from __future__ import annotations

import logging
import os

log = logging.getLogger("quire.invariants")

ENABLED = os.environ.get("QUIRE_INVARIANTS", "1") != "0"
violations = 0  # process-wide count, exported by the metrics of the process that checks


class InvariantViolation(AssertionError):
    """An internal invariant failed: a bug, reported loudly rather than served silently."""


def violated(what: str) -> None:
    """Record and raise a violation (call only after the cheap check failed)."""
    global violations
    violations += 1
    log.error("invariant violated: %s", what)
    raise InvariantViolation(what)
