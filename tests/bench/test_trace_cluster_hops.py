"""bench/trace_cluster_hops.py's hop breakdown from made-up trace rows (no processes), and the
trace module's row format, so the latency tool keeps working between the runs that use it."""

from __future__ import annotations

import atexit
import gc
import importlib
from pathlib import Path

import pytest

from bench.trace_cluster_hops import HOPS, analyse, load

US = 1000  # ns


def test_one_message_is_split_into_its_hops_on_the_slower_bookie() -> None:
    key = 7 << 32 | 3  # ledger 7, entry 3
    broker, fast_bookie, slow_bookie = 100, 201, 202
    rows = {
        broker: [
            (10 * US, "b.send", 42, 0), (15 * US, "b.push", key, 0),
            (16 * US, "b.bkq", key, 3181), (17 * US, "b.bkq", key, 3182),
            (20 * US, "b.bkout", 3181, 80), (22 * US, "b.bkout", 3182, 80),
            (300 * US, "b.bkrx", 3181, 40), (500 * US, "b.bkrx", 3182, 40),
            (510 * US, "b.aq", key, 0), (520 * US, "b.receipt", 42, key),
        ],
        fast_bookie: [(50 * US, "k.rx", key, 40 * US), (60 * US, "k.flush", 1, 0), (200 * US, "k.ack", key, 0),
                      (210 * US, "k.out", 0, 40)],
        slow_bookie: [(60 * US, "k.rx", key, 55 * US), (70 * US, "k.flush", 1, 0), (450 * US, "k.ack", key, 0),
                      (460 * US, "k.out", 0, 40)],
    }
    hops = analyse([(42, 0, 600 * US)], rows, broker, {fast_bookie: 3181, slow_bookie: 3182})
    assert len(hops) == 1
    h = hops[0]
    assert sum(h[name] for name in HOPS[:-1]) == h["total"] == 600
    assert h["client->b.send"] == 10 and h["b.send->push"] == 5
    # the slow bookie's chain (its reply completed the AQ): sent at 22, received at 55
    assert h["push->bk.sent"] == 7 and h["bk.sent->k.rx"] == 33
    assert h["k.rx->k.flush"] == 15 and h["k.flush->k.ack"] == 380 and h["k.ack->k.out"] == 10
    assert h["k.out->b.bkrx"] == 40 and h["b.bkrx->aq"] == 10 and h["aq->receipt"] == 10
    assert h["receipt->client"] == 80


def test_hop_trace_writes_its_rows_at_exit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import quire.hop_trace as hop_trace

    monkeypatch.setenv("QUIRE_HOP_TRACE", str(tmp_path))
    traced = importlib.reload(hop_trace)
    try:
        traced.mark("b.push", 5, 6)
        traced.dump()
        rows = load(tmp_path)
        assert [(h, a, b) for rows_of_pid in rows.values() for _, h, a, b in rows_of_pid
                if not h.startswith("gc.")] == [("b.push", 5, 6)]
    finally:
        atexit.unregister(traced.dump)
        gc.callbacks[:] = [cb for cb in gc.callbacks if getattr(cb, "__module__", "") != "quire.hop_trace"]
        monkeypatch.delenv("QUIRE_HOP_TRACE")
        importlib.reload(hop_trace)
    assert not hop_trace.ENABLED
