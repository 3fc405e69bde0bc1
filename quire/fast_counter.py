"""A Prometheus counter for hot paths: a plain number, no lock per increment.

``prometheus_client.Counter.inc`` takes a mutex and checks its labels on every call; the
broker bumps two counters per SEND, a few µs of CPU per unbatched message. This one is for
single-threaded callers (the trio thread) and is exposed the way the library exposes an
unlabelled counter (``<name>_total`` and ``<name>_created``), built when ``/metrics`` is
scraped (as quire/fast_histogram.py does for histograms).
"""

from __future__ import annotations

import time

from prometheus_client.core import CounterMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry


class FastCounter(Collector):
    def __init__(self, name: str, documentation: str, registry: CollectorRegistry) -> None:
        self.name = name
        self.documentation = documentation
        self.value = 0.0  # add to it directly on the hot path, or call inc
        self._created = time.time()
        registry.register(self)

    def inc(self, amount: float = 1.0) -> None:
        """Not thread-safe: call from one thread (the event loop's)."""
        self.value += amount

    def collect(self) -> list[CounterMetricFamily]:
        return [CounterMetricFamily(self.name, self.documentation, value=self.value, created=self._created)]

    def describe(self) -> list[CounterMetricFamily]:
        return self.collect()
