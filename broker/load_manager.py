"""Load manager: load reports, where an unowned bundle goes, bundle splits and load shedding.

Each broker publishes its load (Pulsar's LocalBrokerData: CPU, memory, bandwidth in/out, message
rates, topics, bundles and per-bundle stats) in its ephemeral registration node
``/loadbalance/brokers/<host:port>`` every ``load_balancer_report_update_min_interval_millis``
and whenever its bundles change.

- Assignment: a lookup of an unowned bundle picks the live broker with the lowest score
  (``score``: bundles owned, plus one per 1000 msg/s and per MB/s it carries); the receiver
  redirects the client there (authoritative) and that broker acquires the bundle. Bundles
  assigned since the target's last report count too, so a burst of lookups spreads. As in
  Pulsar's centralized load manager, the leader (below) makes every placement: a lookup of an
  unowned bundle at another broker is redirected to it (not authoritative). One broker then
  sees every placement it just made, where two brokers placing at once from reports seconds
  old could both pick the same idle broker (the two halves of a split, looked up at once, went
  to one broker). While the leader does not answer (killed, its session not yet expired), a
  broker places by itself.
- Split: every ``load_balancer_split_interval_minutes`` a broker splits each of its bundles over
  ``load_balancer_namespace_bundle_max_topics`` / ``..._max_sessions`` / ``..._max_msg_rate`` /
  ``..._max_bandwidth_mbytes`` in two at its midpoint (``load_balancer_auto_bundle_split_enabled``,
  at most ``load_balancer_namespace_maximum_bundles``) and unloads the halves
  (``load_balancer_auto_unload_split_bundles_enabled``), so the next lookups place them.
- Shedding (``load_balancer_shedding_enabled``): the leader (holder of the ephemeral
  ``/loadbalance/leader``) runs Pulsar's ThresholdShedder every
  ``load_balancer_shedding_interval_minutes``: a broker whose usage (the highest of CPU,
  memory, bandwidth in/out percentages, smoothed by ``load_balancer_history_resource_percentage``)
  is above the average by more than ``load_balancer_broker_threshold_shedder_percentage``
  unloads its busiest bundles (not one moved within ``load_balancer_shedding_grace_period_minutes``)
  until the traffic it gives up covers the excess plus 5 %.
"""

from __future__ import annotations

import logging
import os
import random
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import httpx
import trio

from broker.errors import ConflictError, NamespaceNotFoundError, PreconditionFailedError
from broker.names import NamespaceName
from broker.ownership import bundle_of
from broker.policies import MAX_BUNDLES, parse_boundaries
from metadata import values
from metadata.errors import AlreadyExistsError, BadVersionError, MetadataError, NotFoundError

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topic import PersistentTopic

log = logging.getLogger(__name__)

BROKERS_PATH = "/loadbalance/brokers"
LEADER_PATH = "/loadbalance/leader"
ADDITIONAL_OFFLOAD_PERCENT = 5.0  # ThresholdShedder's extra margin over the excess
MSG_RATE_PER_BUNDLE = 1000.0  # score: this many msg/s weigh as much as one more bundle
MB = 1024 * 1024


def score(report: dict[str, Any], extra_bundles: int = 0) -> float:
    """How loaded a broker looks for placing one more bundle (lower is better)."""
    rates = float(report.get("msgRateIn", 0.0)) + float(report.get("msgRateOut", 0.0))
    mbytes = (float(report.get("msgThroughputIn", 0.0)) + float(report.get("msgThroughputOut", 0.0))) / MB
    return len(report.get("bundles") or []) + extra_bundles + rates / MSG_RATE_PER_BUNDLE + mbytes


def _holds(listed: str, ns: object, bundle: str) -> bool:
    """Whether ``listed`` (``ns/lo_hi`` from a load report) covers ``bundle`` of ``ns``."""
    prefix, _, rng = listed.rpartition("/")
    if prefix != str(ns):
        return False
    try:
        lo, hi = (int(x, 16) for x in rng.split("_"))
        a, b = (int(x, 16) for x in bundle.split("_"))
    except ValueError:
        return False
    return lo <= a and b <= hi


def _redirect(report: dict[str, Any], **flag: bool) -> dict[str, Any]:
    """Where a lookup goes next: the URLs of the broker that sent ``report``, and why
    (``assigned``: it acquires the bundle; ``leader``: it places it)."""
    return {"nativeUrl": report["pulsarServiceUrl"], "httpUrl": report["webServiceUrl"],
            "httpUrlTls": report.get("webServiceUrlTls"), "disabled": False, **flag}


def usage_percent(report: dict[str, Any]) -> float:
    """ThresholdShedder's broker usage: the highest resource percentage."""
    usages = [0.0]
    for key in ("cpu", "memory", "bandwidthIn", "bandwidthOut"):
        r = report.get(key) or {}
        limit = float(r.get("limit") or 0.0)
        if limit > 0:
            usages.append(100.0 * float(r.get("usage") or 0.0) / limit)
    return max(usages)


def bundles_to_shed(reports: dict[str, dict[str, Any]], usage: dict[str, float], threshold: float,
                    recently_unloaded: set[str]) -> list[tuple[str, str]]:
    """ThresholdShedder: (broker, bundle) pairs to unload. ``usage`` = smoothed usage % per
    broker; a broker above the average by more than ``threshold`` gives up its busiest bundles
    (never its last one) until their traffic covers its excess plus 5 %."""
    if len(usage) < 2:
        return []
    avg = sum(usage.values()) / len(usage)
    out: list[tuple[str, str]] = []
    for broker, u in sorted(usage.items()):
        if u <= avg + threshold:
            continue
        report = reports[broker]
        stats: dict[str, dict[str, Any]] = report.get("lastStats") or {}
        if len(stats) < 2:
            continue
        percent = u - avg - threshold + ADDITIONAL_OFFLOAD_PERCENT
        total = float(report.get("msgThroughputIn", 0.0)) + float(report.get("msgThroughputOut", 0.0))
        need = total * percent / 100.0
        by_traffic = sorted(stats.items(), key=lambda kv: -(kv[1].get("msgThroughputIn", 0.0) + kv[1].get("msgThroughputOut", 0.0)))
        moved = 0.0
        kept = len(by_traffic)
        for bundle, st in by_traffic:
            if moved >= need and moved > 0 or kept <= 1:
                break
            if bundle in recently_unloaded:
                continue
            out.append((broker, bundle))
            moved += st.get("msgThroughputIn", 0.0) + st.get("msgThroughputOut", 0.0)
            kept -= 1
    return out


def split_reasons(st: dict[str, Any], limits: "SplitLimits") -> list[str]:
    """Why a bundle with these stats should be split (empty: it should not)."""
    reasons = []
    if limits.max_topics > 0 and st.get("topics", 0) > limits.max_topics:
        reasons.append(f"{st['topics']} topics > {limits.max_topics}")
    sessions = st.get("producerCount", 0) + st.get("consumerCount", 0)
    if limits.max_sessions > 0 and sessions > limits.max_sessions:
        reasons.append(f"{sessions} sessions > {limits.max_sessions}")
    rate = st.get("msgRateIn", 0.0) + st.get("msgRateOut", 0.0)
    if limits.max_msg_rate > 0 and rate > limits.max_msg_rate:
        reasons.append(f"{rate:.0f} msg/s > {limits.max_msg_rate}")
    mbytes = (st.get("msgThroughputIn", 0.0) + st.get("msgThroughputOut", 0.0)) / MB
    if limits.max_bandwidth_mbytes > 0 and mbytes > limits.max_bandwidth_mbytes:
        reasons.append(f"{mbytes:.1f} MB/s > {limits.max_bandwidth_mbytes}")
    return reasons


@dataclass
class SplitLimits:
    max_topics: int
    max_sessions: int
    max_msg_rate: float
    max_bandwidth_mbytes: float


def split_boundaries(boundaries: list[str], bundle: str) -> list[str]:
    """The boundaries with ``bundle`` (``0xLOW_0xHIGH``) split at its midpoint."""
    lo_s, _, hi_s = bundle.partition("_")
    lo, hi = int(lo_s, 16), int(hi_s, 16)
    bounds = parse_boundaries(boundaries)
    if lo not in bounds or hi not in bounds or bounds.index(hi) != bounds.index(lo) + 1:
        raise NamespaceNotFoundError(f"Bundle {bundle} does not exist")
    mid = (lo + hi) // 2
    if mid == lo:
        raise PreconditionFailedError(f"Bundle {bundle} is too small to split")
    if len(bounds) - 1 >= MAX_BUNDLES:
        raise PreconditionFailedError(f"the namespace has {MAX_BUNDLES} bundles already")
    new = sorted(bounds + [mid])
    return [f"0x{b:08x}" for b in new]


class _TopicCounters:
    __slots__ = ("at", "msg_in", "bytes_in", "msg_out", "bytes_out")

    def __init__(self, at: float, counters: tuple[int, int, int, int]) -> None:
        self.at = at
        self.msg_in, self.bytes_in, self.msg_out, self.bytes_out = counters


def _counters(topic: "PersistentTopic") -> tuple[int, int, int, int]:
    msg_out = bytes_out = 0
    for sub in topic.subscriptions.values():
        msg_out += sub.msg_out_closed + sum(c.msg_out for c in sub.consumers)
        bytes_out += sub.bytes_out_closed + sum(c.bytes_out for c in sub.consumers)
    return topic.msg_in, topic.bytes_in, msg_out, bytes_out


class LoadManager:
    def __init__(self, service: "BrokerService") -> None:
        self.service = service
        self.config = service.config
        self.store = service.store
        self._version: int | None = None  # of our registration node
        self._registering = trio.Lock()  # a session loss and the watchdog may both re-register
        self._changed = trio.Event()  # bundles changed: report now
        self._prev: dict[str, _TopicCounters] = {}
        self._cpu_at = (time.monotonic(), time.process_time())
        self._report: dict[str, Any] = {}
        # broker id -> [(monotonic time, bundle)] assigned by this broker since its last report
        self._pending: dict[str, list[tuple[float, str]]] = {}
        self._usage: dict[str, float] = {}  # smoothed usage per broker (leader)
        self._unloaded_at: dict[str, float] = {}  # bundle -> when the shedder last moved it
        self.splits = 0
        self.shed = 0

    @property
    def path(self) -> str:
        return f"{BROKERS_PATH}/{self.service.broker_id}"

    @property
    def report_interval_s(self) -> float:
        return max(0.05, self.config.load_balancer_report_update_min_interval_millis / 1000.0)

    def bundles_changed(self) -> None:
        self._changed.set()

    # -- the report ------------------------------------------------------------------------

    async def local_report(self) -> dict[str, Any]:
        """This broker's LocalBrokerData, with rates since the previous report."""
        svc = self.service
        now = time.monotonic()
        cores = os.cpu_count() or 1
        wall, cpu = self._cpu_at
        cpu_now = time.process_time()
        cpu_pct = 100.0 * (cpu_now - cpu) / max(now - wall, 1e-3)
        self._cpu_at = (now, cpu_now)
        boundaries: dict[NamespaceName, list[str]] = {}
        stats: dict[str, dict[str, Any]] = {}
        own = svc.ownership
        for path in sorted(own.owned if own is not None else ()):
            stats[path.removeprefix("/namespace/")] = _empty_bundle_stats()
        totals = {"msgRateIn": 0.0, "msgRateOut": 0.0, "msgThroughputIn": 0.0, "msgThroughputOut": 0.0}
        producers = consumers = 0
        seen: set[str] = set()
        for topic in list(svc.topics.values()):
            key = str(topic.name)
            seen.add(key)
            counters = _counters(topic)
            prev = self._prev.get(key)
            self._prev[key] = _TopicCounters(now, counters)
            dt = now - prev.at if prev is not None else 0.0
            rates = {"msgRateIn": 0.0, "msgThroughputIn": 0.0, "msgRateOut": 0.0, "msgThroughputOut": 0.0}
            if prev is not None and dt > 0:
                rates = {"msgRateIn": max(0, counters[0] - prev.msg_in) / dt,
                         "msgThroughputIn": max(0, counters[1] - prev.bytes_in) / dt,
                         "msgRateOut": max(0, counters[2] - prev.msg_out) / dt,
                         "msgThroughputOut": max(0, counters[3] - prev.bytes_out) / dt}
            ns = topic.name.namespace_name
            if ns not in boundaries:
                try:
                    boundaries[ns] = (await svc.namespaces.get_policies(ns))["bundles"]["boundaries"]
                except Exception:  # a namespace deleted or broken meanwhile: not counted
                    boundaries[ns] = []
            if not boundaries[ns]:
                continue
            bundle = f"{ns}/{bundle_of(topic.name, boundaries[ns])}"
            st = stats.setdefault(bundle, _empty_bundle_stats())
            st["topics"] += 1
            p = len(topic.producers)
            c = sum(len(s.consumers) for s in topic.subscriptions.values())
            st["producerCount"] += p
            st["consumerCount"] += c
            producers += p
            consumers += c
            for k, v in rates.items():
                st[k] += v
                totals[k] += v
        for key in [k for k in self._prev if k not in seen]:
            del self._prev[key]
        nic = self.config.load_balancer_override_broker_nic_speed_gbps * 1e9 / 8 / 1024  # KB/s
        rss, total_mem = _memory_mb()
        report = {
            "webServiceUrl": svc.web_url,
            "webServiceUrlTls": svc.web_url_tls,
            "pulsarServiceUrl": svc.service_url,
            "brokerVersionString": "quire-0.1",
            "startTimestamp": int(svc.started_at * 1000),
            "lastUpdate": int(time.time() * 1000),
            "cpu": {"usage": cpu_pct, "limit": 100.0 * cores},
            "memory": {"usage": rss, "limit": total_mem},
            "bandwidthIn": {"usage": totals["msgThroughputIn"] / 1024, "limit": nic},
            "bandwidthOut": {"usage": totals["msgThroughputOut"] / 1024, "limit": nic},
            **totals,
            "numTopics": len(svc.topics),
            "numBundles": len(stats),
            "numProducers": producers,
            "numConsumers": consumers,
            "bundles": sorted(stats),
            "lastStats": stats,
        }
        self._report = report
        return report

    @property
    def last_report(self) -> dict[str, Any]:
        return self._report

    async def register(self) -> None:
        """(Re)create our ephemeral registration node with a fresh report."""
        async with self._registering:
            data = values.pack(await self.local_report())
            try:
                await self.store.delete(self.path)
            except MetadataError:
                pass
            await self.store.create(self.path, data, ephemeral=True, make_parents=True)
            self._version = 0

    async def update(self) -> None:
        data = values.pack(await self.local_report())
        if self._version is None:
            return  # not registered (yet, or again): the broker's re-registration writes it
        try:
            self._version = (await self.store.put(self.path, data, self._version)).version
        except (NotFoundError, BadVersionError):
            self._version = None
            self.service.spawn(self.service._reregister)

    # -- the tasks -------------------------------------------------------------------------

    async def run(self) -> None:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._report_loop)
            if self.config.load_balancer_enabled:
                nursery.start_soon(self._split_loop)
                nursery.start_soon(self._shed_loop)

    async def _report_loop(self) -> None:
        while True:
            with trio.move_on_after(self.report_interval_s):
                await self._changed.wait()
                await trio.sleep(0.05)  # coalesce a burst of acquisitions
            self._changed = trio.Event()
            try:
                if self.service.session_fresh():
                    await self.update()
            except MetadataError as exc:
                log.debug("load report not written: %r", exc)

    async def _split_loop(self) -> None:
        while True:
            await trio.sleep(max(0.1, self.config.load_balancer_split_interval_minutes * 60))
            if not self.config.load_balancer_auto_bundle_split_enabled:
                continue
            limits = SplitLimits(self.config.load_balancer_namespace_bundle_max_topics,
                                 self.config.load_balancer_namespace_bundle_max_sessions,
                                 self.config.load_balancer_namespace_bundle_max_msg_rate,
                                 self.config.load_balancer_namespace_bundle_max_bandwidth_mbytes)
            for name, st in dict(self._report.get("lastStats") or {}).items():
                reasons = split_reasons(st, limits)
                if not reasons:
                    continue
                tenant, ns, bundle = name.split("/")
                try:
                    policies = await self.service.namespaces.get_policies(NamespaceName(tenant, ns))
                    if len(policies["bundles"]["boundaries"]) - 1 >= self.config.load_balancer_namespace_maximum_bundles:
                        continue
                    log.info("splitting bundle %s: %s", name, ", ".join(reasons))
                    await self.split(NamespaceName(tenant, ns), bundle,
                                     unload=self.config.load_balancer_auto_unload_split_bundles_enabled)
                except Exception as exc:  # one bundle's failure must not stop the others
                    log.warning("splitting bundle %s failed: %r", name, exc)

    async def _shed_loop(self) -> None:
        while True:
            await trio.sleep(max(0.1, self.config.load_balancer_shedding_interval_minutes * 60))
            try:
                if await self._is_leader() and self.config.load_balancer_shedding_enabled:
                    await self.shed_once()
            except MetadataError as exc:
                log.debug("load shedding skipped: %r", exc)

    async def _is_leader(self) -> bool:
        return await self._leader_id() == self.service.broker_id

    async def _leader_id(self) -> str | None:
        """The broker id of the leader; this broker takes the lead when nobody holds it."""
        me = self.service.broker_id
        try:
            await self.store.create(LEADER_PATH, values.pack({"brokerId": me, "serviceUrl": self.service.web_url}),
                                    ephemeral=True, make_parents=True)
            log.info("this broker leads load balancing")
            return me
        except AlreadyExistsError:
            try:
                raw, _ = await self.store.get(LEADER_PATH)
            except NotFoundError:
                return None  # it just went: the next call takes the lead
            leader = values.unpack(raw).get("brokerId")
            return leader if isinstance(leader, str) else None

    # -- placement -------------------------------------------------------------------------

    async def reports(self) -> dict[str, dict[str, Any]]:
        """Every live broker's last report, by broker id."""
        out: dict[str, dict[str, Any]] = {}
        try:
            names = await self.store.children(BROKERS_PATH)
        except NotFoundError:
            return out
        for name in names:
            report = await self._report_of(name)
            if report is not None:
                out[name] = report
        return out

    async def _report_of(self, broker: str) -> dict[str, Any] | None:
        """``broker``'s last report; None if it is not registered."""
        try:
            raw, _ = await self.store.get(f"{BROKERS_PATH}/{broker}")
        except NotFoundError:
            return None
        data = values.unpack(raw) if raw else {}
        return data if isinstance(data, dict) and data.get("pulsarServiceUrl") else None

    async def assign(self, ns: NamespaceName, bundle: str) -> dict[str, Any] | None:
        """The broker an unowned bundle goes to: None for this one, else its
        ``nativeUrl``/``httpUrl`` (the lookup redirects there, authoritative), or the leader's
        with ``"leader": True`` when another broker leads and answers (the lookup is redirected
        there, not authoritative, and the leader places the bundle)."""
        if not self.config.load_balancer_enabled:
            return None
        try:
            leader = await self._leader_id()
        except MetadataError:
            leader = None
        if leader is not None and leader != self.service.broker_id:
            r = await self._report_of(leader)
            own = self.service.ownership
            if r is not None and own is not None and await own.live(r["pulsarServiceUrl"]):
                return _redirect(r, leader=True)
        return self.place(ns, bundle, await self.reports())

    def place(self, ns: NamespaceName, bundle: str, reports: dict[str, dict[str, Any]]) -> dict[str, Any] | None:
        """The placement itself (``assign`` on the leader, or on any broker while the leader
        does not answer): None to keep the bundle here, else the chosen broker's URLs."""
        me = self.service.broker_id
        reports[me] = self._report or {}
        own = self.service.ownership
        now = time.monotonic()
        horizon = 2 * self.report_interval_s + 1.0
        key = f"{ns}/{bundle}"
        mine = {p.removeprefix("/namespace/") for p in (own.owned if own is not None else ())}
        for broker in list(self._pending):
            self._pending[broker] = [(t, b) for t, b in self._pending[broker] if now - t < horizon]
        placed = {b: broker for broker, lst in self._pending.items() for _, b in lst}
        chosen = placed.get(key)
        if chosen is None or (chosen != me and chosen not in reports):
            chosen = self._least_loaded(ns, bundle, reports, mine, placed)
            self._pending.setdefault(chosen, []).append((now, key))
        # else: looked up again (another client of the bundle) while the first placement is
        # being acquired: the same answer, or both lookups' acquisitions race
        if chosen == me:
            return None
        # "assigned": not an owner yet; the lookup sends the client there to acquire it
        return _redirect(reports[chosen], assigned=True)

    def _least_loaded(self, ns: NamespaceName, bundle: str, reports: dict[str, dict[str, Any]], mine: set[str],
                      placed: dict[str, str]) -> str:
        me = self.service.broker_id
        best: list[str] = []
        best_score = float("inf")
        for broker, report in reports.items():
            # Placed on it and not acquired yet (not in its report, or for this broker not owned
            # yet), except a bundle holding the one placed now: that one is split and gone.
            pending = [b for _, b in self._pending.get(broker, []) if not _holds(b, ns, bundle)]
            if broker == me:
                live = dict(report)
                live["bundles"] = sorted(mine)
                s = score(live, sum(1 for b in pending if b not in mine))
            else:
                listed = set(report.get("bundles") or [])
                # A report is seconds old: what it lists and this broker now owns or just placed
                # elsewhere is no longer its broker's, nor a bundle holding the one placed now (a
                # bundle being placed is unowned: the report predates its split). Counted, they
                # made a split's old owner look busier than the broker that took one half, which
                # then took both.
                gone = sum(1 for b in listed if b in mine or placed.get(b, broker) != broker or _holds(b, ns, bundle))
                s = score(report, sum(1 for b in pending if b not in listed) - gone)
            if s < best_score - 1e-9:
                best, best_score = [broker], s
            elif abs(s - best_score) <= 1e-9:
                best.append(broker)
        # A tie that includes this broker is kept here: its own count is live, while the others'
        # reports may be a few seconds old (a bundle another broker just took is not in them yet,
        # so sending this one there too would stack both on it).
        return me if (me in best or not best) else random.choice(best)

    # -- split -----------------------------------------------------------------------------

    async def split(self, ns: NamespaceName, bundle: str, unload: bool = True) -> list[str]:
        """Split a bundle this broker owns at its midpoint: both halves are owned here first,
        then the namespace's boundaries change (CAS), then the old node goes; with ``unload``
        the halves are unloaded so lookups place them. Returns the two new bundle names."""
        svc = self.service
        own = svc.ownership
        assert own is not None
        old_path = own.bundle_path(ns, bundle)
        if old_path not in own.owned:
            raise ConflictError(f"Bundle {ns}/{bundle} is not owned by this broker")
        policy_path = f"/admin/policies/{ns}"
        raw, stat = await self.store.get(policy_path)
        policies = values.unpack(raw)
        new_bounds = split_boundaries(policies["bundles"]["boundaries"], bundle)
        lo, hi = bundle.split("_")
        mid = next(b for b in new_bounds if int(lo, 16) < int(b, 16) < int(hi, 16))
        halves = [f"{lo}_{mid}", f"{mid}_{hi}"]
        made: list[str] = []
        try:
            for half in halves:
                path = own.bundle_path(ns, half)
                await self.store.create(path, values.pack(own._mine()), ephemeral=True, make_parents=True)
                own.owned.add(path)
                made.append(path)
            policies["bundles"] = {"boundaries": new_bounds, "numBundles": len(new_bounds) - 1}
            await self.store.put(policy_path, values.pack(policies), stat.version)
        except (AlreadyExistsError, BadVersionError):
            for path in made:
                await own.release(path)
            raise ConflictError(f"Bundle {ns}/{bundle} changed meanwhile; retry the split") from None
        await own.release(old_path)
        self.splits += 1
        log.info("split %s/%s into %s", ns, bundle, halves)
        if unload:
            for half in halves:
                await svc.unload_bundle(ns, half)
        self.bundles_changed()
        return halves

    # -- shedding --------------------------------------------------------------------------

    async def shed_once(self) -> list[tuple[str, str]]:
        """One ThresholdShedder round (leader): unload what ``bundles_to_shed`` picks."""
        reports = await self.reports()
        history = self.config.load_balancer_history_resource_percentage
        usage: dict[str, float] = {}
        for broker, report in reports.items():
            u = usage_percent(report)
            prev = self._usage.get(broker)
            usage[broker] = u if prev is None else prev * history + u * (1 - history)
        self._usage = usage
        now = time.monotonic()
        grace = self.config.load_balancer_shedding_grace_period_minutes * 60
        recent = {b for b, t in self._unloaded_at.items() if now - t < grace}
        picks = bundles_to_shed(reports, usage, self.config.load_balancer_broker_threshold_shedder_percentage, recent)
        if not picks:
            return []
        svc_client = self.service.broker_client
        async with svc_client.http() as http:  # as this broker: with authentication on, as a superuser
            for broker, name in picks:
                url = f"{svc_client.base_url(reports[broker])}/admin/v2/namespaces/{name}/unload"
                try:
                    r = await http.put(url)
                except httpx.HTTPError as exc:
                    log.warning("shedding %s from %s failed: %r", name, broker, exc)
                    continue
                if r.status_code < 300:
                    log.info("shed bundle %s from %s (usage %.0f%%)", name, broker, usage[broker])
                    self._unloaded_at[name] = now
                    self.shed += 1
        return picks


def _empty_bundle_stats() -> dict[str, Any]:
    return {"topics": 0, "producerCount": 0, "consumerCount": 0, "msgRateIn": 0.0, "msgRateOut": 0.0,
            "msgThroughputIn": 0.0, "msgThroughputOut": 0.0}


def _memory_mb() -> tuple[float, float]:
    """(this process's resident MB, the machine's MB)."""
    page = os.sysconf("SC_PAGE_SIZE")
    try:
        with open("/proc/self/statm") as f:
            rss = int(f.read().split()[1]) * page
    except (OSError, ValueError, IndexError):
        rss = 0
    return rss / MB, os.sysconf("SC_PHYS_PAGES") * page / MB
