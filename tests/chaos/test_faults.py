"""Fault schedules are a pure function of the seed."""

from __future__ import annotations

from itertools import islice

from tests.chaos.faults import CLUSTER_FAULTS, STANDALONE_FAULTS, plan

TARGETS = {"bookie": ["bookie0", "bookie1", "bookie2"], "broker": ["broker0", "broker1"], "zookeeper": ["zk"]}


def test_same_seed_same_schedule_and_every_kind_drawn() -> None:
    a = list(islice(plan(7, "cluster", TARGETS, ["t1", "t2"], ["ns"]), 300))
    b = list(islice(plan(7, "cluster", TARGETS, ["t1", "t2"], ["ns"]), 300))
    c = list(islice(plan(8, "cluster", TARGETS, ["t1", "t2"], ["ns"]), 300))
    assert a == b and a != c
    assert {f.kind for f in a} == set(CLUSTER_FAULTS)
    for f in a:
        lo, hi = CLUSTER_FAULTS[f.kind][2]
        assert lo <= f.duration <= hi and f.gap > 0


def test_standalone_schedule_targets_the_standalone() -> None:
    faults = list(islice(plan(1, "standalone", {"standalone": ["standalone"]}, ["t"], ["ns"]), 100))
    assert {f.kind for f in faults} == set(STANDALONE_FAULTS)
    assert {f.target for f in faults if f.kind.endswith("_standalone")} == {"standalone"}
