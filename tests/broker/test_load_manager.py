"""The load manager's decisions: placement score and placement (over fake reports), split
reasons and boundaries, and the threshold shedder's picks."""

from __future__ import annotations

from types import SimpleNamespace
from typing import Any, Callable

import pytest

from broker.config import BrokerConfig
from broker.errors import NamespaceNotFoundError, PreconditionFailedError
from broker.load_manager import LoadManager, SplitLimits, bundles_to_shed, score, split_boundaries, split_reasons, usage_percent
from broker.names import NamespaceName
from broker.policies import bundle_boundaries


def _report(bundles: dict[str, float], cpu: float = 0.0) -> dict:
    """A report whose bundles carry these throughputs (bytes/s in)."""
    stats = {b: {"msgThroughputIn": t, "msgThroughputOut": 0.0} for b, t in bundles.items()}
    total = sum(bundles.values())
    return {"bundles": sorted(bundles), "lastStats": stats, "msgThroughputIn": total, "msgThroughputOut": 0.0,
            "cpu": {"usage": cpu, "limit": 100.0}, "bandwidthIn": {"usage": total / 1024, "limit": 1000.0}}


def test_score_counts_bundles_and_traffic() -> None:
    assert score({"bundles": ["a", "b"]}) == 2
    assert score({"bundles": ["a"]}, extra_bundles=2) == 3
    assert score({"bundles": [], "msgRateIn": 500.0, "msgRateOut": 500.0}) == pytest.approx(1.0)


def test_usage_is_the_highest_resource_percentage() -> None:
    assert usage_percent({"cpu": {"usage": 50.0, "limit": 200.0}, "memory": {"usage": 10.0, "limit": 100.0}}) == 25.0
    assert usage_percent({"bandwidthIn": {"usage": 1.0, "limit": 0.0}}) == 0.0  # unknown limit: not counted


def test_split_reasons_follow_each_limit() -> None:
    limits = SplitLimits(max_topics=4, max_sessions=10, max_msg_rate=100.0, max_bandwidth_mbytes=1.0)
    assert split_reasons({"topics": 4, "producerCount": 5, "consumerCount": 5}, limits) == []
    assert len(split_reasons({"topics": 5}, limits)) == 1
    assert len(split_reasons({"producerCount": 6, "consumerCount": 5}, limits)) == 1
    assert len(split_reasons({"msgRateIn": 60.0, "msgRateOut": 41.0}, limits)) == 1
    assert len(split_reasons({"msgThroughputIn": 2 * 1024 * 1024}, limits)) == 1


def test_split_boundaries_halve_one_bundle() -> None:
    bounds = bundle_boundaries(2)  # 0x00000000, 0x80000000, 0xffffffff
    assert split_boundaries(bounds, f"{bounds[0]}_{bounds[1]}") == [bounds[0], "0x40000000", bounds[1], bounds[2]]
    with pytest.raises(NamespaceNotFoundError):
        split_boundaries(bounds, f"{bounds[0]}_{bounds[2]}")  # not one bundle
    with pytest.raises(PreconditionFailedError):
        split_boundaries(["0x00000000", "0x00000001", "0xffffffff"], "0x00000000_0x00000001")


def test_the_threshold_shedder_moves_load_off_the_overloaded_broker_only() -> None:
    busy = _report({"ns/b1": 600.0, "ns/b2": 300.0, "ns/b3": 100.0})
    idle = _report({})
    picks = bundles_to_shed({"busy": busy, "idle": idle}, {"busy": 80.0, "idle": 0.0}, 10.0, set())
    # excess = 80 - 40 - 10 + 5 = 35 % of 1000 B/s: the busiest bundle (600) covers it
    assert picks == [("busy", "ns/b1")]
    # a bundle moved recently (grace period) is left alone: the next busiest ones go
    picks = bundles_to_shed({"busy": busy, "idle": idle}, {"busy": 80.0, "idle": 0.0}, 10.0, {"ns/b1"})
    assert picks == [("busy", "ns/b2"), ("busy", "ns/b3")]
    # within the threshold of the average: nothing moves; a broker's last bundle never moves
    assert bundles_to_shed({"busy": busy, "idle": idle}, {"busy": 15.0, "idle": 0.0}, 10.0, set()) == []
    single = _report({"ns/b1": 1000.0})
    assert bundles_to_shed({"busy": single, "idle": idle}, {"busy": 90.0, "idle": 0.0}, 10.0, set()) == []
    assert bundles_to_shed({"busy": busy}, {"busy": 90.0}, 10.0, set()) == []  # one broker: nowhere to go



def _idle_pair() -> tuple[Any, Callable[[], dict]]:
    """A load manager on broker "a" and the reports of "a" and "b", both idle."""
    svc = SimpleNamespace(config=BrokerConfig(), store=None, broker_id="a", ownership=SimpleNamespace(owned=set()))
    lm = LoadManager(svc)  # type: ignore[arg-type]
    lm._report = {"pulsarServiceUrl": "pulsar://a:6650", "webServiceUrl": "http://a:8080", "bundles": []}
    other = {"pulsarServiceUrl": "pulsar://b:6650", "webServiceUrl": "http://b:8080", "bundles": []}
    return lm, lambda: {"a": dict(lm._report), "b": dict(other)}


async def test_a_bundle_this_broker_just_kept_counts_until_it_owns_it() -> None:
    """Two halves of a split looked up at once at the old owner: the first tie keeps one here,
    the second must go to the other broker, though this broker does not own the first yet
    (test_a_hot_bundle_splits_and_part_of_it_moves kept both halves on one broker twice)."""
    lm, reports = _idle_pair()
    ns = NamespaceName.parse("public/hot")
    assert lm.place(ns, "0x00000000_0x80000000", reports()) is None  # a tie: kept here
    second = lm.place(ns, "0x80000000_0xffffffff", reports())
    assert second is not None and second["nativeUrl"] == "pulsar://b:6650"


async def test_a_stale_report_of_the_split_owner_does_not_count_the_old_bundle() -> None:
    """The halves of a split looked up at the other broker (clients reconnect to any) while the
    old owner's last report still lists the bundle before the split: the first half stays here,
    the second goes to the old owner (test_a_hot_bundle_splits_and_part_of_it_moves kept both
    halves on the new broker under load)."""
    from types import SimpleNamespace

    from broker.config import BrokerConfig
    from broker.load_manager import LoadManager, _holds
    from broker.names import NamespaceName

    svc = SimpleNamespace(config=BrokerConfig(), store=None, broker_id="b", ownership=SimpleNamespace(owned=set()))
    lm = LoadManager(svc)  # type: ignore[arg-type]
    lm._report = {"pulsarServiceUrl": "pulsar://b:6650", "webServiceUrl": "http://b:8080", "bundles": []}
    stale = {"pulsarServiceUrl": "pulsar://a:6650", "webServiceUrl": "http://a:8080",
             "bundles": ["public/hot/0x00000000_0xffffffff"]}

    def reports() -> dict:
        return {"a": dict(stale), "b": dict(lm._report)}

    ns = NamespaceName.parse("public/hot")
    assert lm.place(ns, "0x00000000_0x80000000", reports()) is None  # a tie: kept here
    second = lm.place(ns, "0x80000000_0xffffffff", reports())
    assert second is not None and second["nativeUrl"] == "pulsar://a:6650"
    # only a bundle of the same namespace that covers the one placed is the report's past
    assert _holds("public/hot/0x00000000_0xffffffff", ns, "0x80000000_0xffffffff")
    assert not _holds("public/other/0x00000000_0xffffffff", ns, "0x80000000_0xffffffff")
    assert not _holds("public/hot/0x00000000_0x80000000", ns, "0x80000000_0xffffffff")


async def test_a_stale_report_listing_both_halves_does_not_count_the_one_placed_here() -> None:
    """The split's old owner owned both halves for a moment and reported them: placing the
    first half here, then the second, the report's first half is this broker's now and must not
    count for the old owner (the tie kept the second half here too)."""
    from types import SimpleNamespace

    from broker.config import BrokerConfig
    from broker.load_manager import LoadManager
    from broker.names import NamespaceName

    svc = SimpleNamespace(config=BrokerConfig(), store=None, broker_id="b", ownership=SimpleNamespace(owned=set()))
    lm = LoadManager(svc)  # type: ignore[arg-type]
    lm._report = {"pulsarServiceUrl": "pulsar://b:6650", "webServiceUrl": "http://b:8080", "bundles": []}
    stale = {"pulsarServiceUrl": "pulsar://a:6650", "webServiceUrl": "http://a:8080",
             "bundles": ["public/hot/0x00000000_0x80000000", "public/hot/0x80000000_0xffffffff"]}

    def reports() -> dict:
        return {"a": dict(stale), "b": dict(lm._report)}

    ns = NamespaceName.parse("public/hot")
    assert lm.place(ns, "0x00000000_0x80000000", reports()) is None  # a: 1 (the other half) > b: 0
    second = lm.place(ns, "0x80000000_0xffffffff", reports())
    assert second is not None and second["nativeUrl"] == "pulsar://a:6650"
    # and once this broker owns the first half (no longer pending), it still does not count for a
    svc.ownership.owned.add("/namespace/public/hot/0x00000000_0x80000000")
    lm._pending.clear()
    third = lm.place(ns, "0x80000000_0xffffffff", reports())
    assert third is not None and third["nativeUrl"] == "pulsar://a:6650"


async def test_a_broker_that_does_not_lead_sends_the_lookup_to_the_leader_while_it_answers() -> None:
    """Placement is the leader's (Pulsar's centralized load manager): two brokers placing the
    halves of a split at once, each from reports seconds old, could both pick the same idle
    broker. A broker that does not lead redirects the lookup to the leader, not authoritative;
    while the leader does not answer it places the bundle itself."""
    from types import SimpleNamespace

    from broker.config import BrokerConfig
    from broker.load_manager import LoadManager
    from broker.names import NamespaceName
    from metadata import values
    from metadata.errors import AlreadyExistsError

    a = {"pulsarServiceUrl": "pulsar://a:6650", "webServiceUrl": "http://a:8080", "bundles": []}
    alive = {"pulsar://a:6650": True}

    class Store:
        async def create(self, path: str, data: bytes, **kw: object) -> None:
            raise AlreadyExistsError(path)

        async def get(self, path: str) -> tuple[bytes, None]:
            if path == "/loadbalance/brokers/a":
                return values.pack(a), None
            return values.pack({"brokerId": "a", "serviceUrl": "http://a:8080"}), None

    async def live(url: str) -> bool:
        return alive[url]

    svc = SimpleNamespace(config=BrokerConfig(), store=Store(), broker_id="b", web_url="http://b:8080",
                          ownership=SimpleNamespace(owned={"/namespace/x/y/0x00000000_0xffffffff"}, live=live))
    lm = LoadManager(svc)  # type: ignore[arg-type]
    lm._report = {"pulsarServiceUrl": "pulsar://b:6650", "webServiceUrl": "http://b:8080", "bundles": []}

    async def reports() -> dict:
        return {"a": dict(a)}

    lm.reports = reports  # type: ignore[method-assign]
    ns = NamespaceName.parse("public/hot")
    target = await lm.assign(ns, "0x00000000_0x80000000")
    assert target is not None and target["leader"] and target["nativeUrl"] == "pulsar://a:6650"
    assert not lm._pending  # nothing placed here: the leader decides
    alive["pulsar://a:6650"] = False  # killed, its session not expired yet: placed here (on a: b owns one)
    target = await lm.assign(ns, "0x00000000_0x80000000")
    assert target is not None and target.get("assigned") and target["nativeUrl"] == "pulsar://a:6650"


async def test_a_bundle_looked_up_again_while_it_is_being_acquired_gets_the_same_answer() -> None:
    """The leader placed the bundle before the split here (pending, then owned, then split and
    released) and keeps the first half (a tie: the old bundle, gone in the split, is no load).
    A second client's lookup of that half must get the same answer: re-placed, it counted its
    own pending placement and went to b, while the first lookup's client acquired it here, and
    the second half followed it (test_a_hot_bundle_splits_and_part_of_it_moves, both halves
    on one broker)."""
    lm, reports = _idle_pair()
    ns = NamespaceName.parse("public/hot")
    assert lm.place(ns, "0x00000000_0xffffffff", reports()) is None  # kept here, then split
    assert lm.place(ns, "0x00000000_0x80000000", reports()) is None
    assert lm.place(ns, "0x00000000_0x80000000", reports()) is None
    second = lm.place(ns, "0x80000000_0xffffffff", reports())  # a: 1 (the first half), b: 0
    assert second is not None and second["nativeUrl"] == "pulsar://b:6650"
