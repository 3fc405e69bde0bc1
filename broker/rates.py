"""Rates (per second) derived from monotonically growing counters at each stats update.

Pulsar computes ``msgRateIn``/``msgThroughputOut``/... once per ``stats_update_frequency_in_secs``
from counter deltas; objects keep a ``Rates`` and expose its values in their stats.
"""

from __future__ import annotations

import time


class Rates:
    __slots__ = ("_last", "_at", "values")

    def __init__(self) -> None:
        self._last: dict[str, int] = {}
        self._at = time.monotonic()
        self.values: dict[str, float] = {}

    def update(self, counters: dict[str, int]) -> None:
        """``counters`` maps a rate name to its counter's current value."""
        now = time.monotonic()
        dt = now - self._at
        if dt <= 0:
            return
        for name, value in counters.items():
            self.values[name] = max(0.0, (value - self._last.get(name, value)) / dt)
            self._last[name] = value
        self._at = now

    def get(self, name: str) -> float:
        return self.values.get(name, 0.0)
