"""quire.fast_counter and quire.fast_histogram expose what prometheus_client's own Counter
and Histogram expose for the same observations."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Histogram, generate_latest

from quire.fast_counter import FastCounter
from quire.fast_histogram import FastHistogram


def _lines(registry: CollectorRegistry) -> list[str]:
    # _created holds each metric's creation time: compare that it is there, not its value
    return [line.rsplit(" ", 1)[0] if "_created " in line else line
            for line in generate_latest(registry).decode().splitlines()]


def test_fast_counter_exposition_is_the_librarys() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    fast = FastCounter("quire_things", "things", registry=ours)
    lib = Counter("quire_things", "things", registry=theirs)
    for amount in (1, 2.5, 100):
        fast.inc(amount)
        lib.inc(amount)
    fast.value += 7  # the hot path's form
    lib.inc(7)
    assert _lines(ours) == _lines(theirs)


def test_fast_histogram_exposition_is_the_librarys() -> None:
    ours, theirs = CollectorRegistry(), CollectorRegistry()
    buckets = (0.001, 0.01, 0.1, 1.0)
    fast = FastHistogram("quire_seconds", "seconds", buckets=buckets, registry=ours)
    lib = Histogram("quire_seconds", "seconds", buckets=buckets, registry=theirs)
    for v in (0.0005, 0.001, 0.05, 0.5, 3.0, 0.05):
        fast.observe(v)
        lib.observe(v)
    assert [line for line in _lines(ours) if "_created" not in line] == \
        [line for line in _lines(theirs) if "_created" not in line]
