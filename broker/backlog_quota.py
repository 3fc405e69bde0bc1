"""Backlog quotas (Pulsar's BacklogQuotaManager): by size (``destination_storage``) and by age
(``message_age``).

A topic's backlog is what its slowest durable subscription has not acknowledged: its size is
the estimated ``backlogSize`` of the topic's stats; its age is the age of the oldest unacknowledged
message (the publish time of the entry after the slowest mark-delete position: Pulsar's
``preciseTimeBasedBacklogQuotaCheck``, one entry read per check). Over the quota of its namespace
(``backlog_quota_map``) or the broker default (``backlog_quota_default_limit_bytes``,
``backlog_quota_default_limit_second``), the policy decides:

- ``producer_request_hold``: new producers are refused with ProducerBlockedQuotaExceededError
  (the client keeps its messages and retries) and the periodic check disconnects the
  connected ones, so they wait too;
- ``producer_exception``: the same with ProducerBlockedQuotaExceededException (sends fail);
- ``consumer_backlog_eviction``: the periodic check skips the oldest entries of the slowest
  subscriptions until the backlog fits: by size, an estimated count of entries; by age, every
  entry published before now minus the limit (producers are never blocked).

The periodic check runs every ``backlog_quota_check_interval_in_seconds`` (60, as Pulsar).
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from broker.entry_meta import parse_metadata
from broker.errors import ProducerBlockedQuotaExceededError, ProducerBlockedQuotaExceededException

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.subscription import Subscription
    from broker.topic import PersistentTopic

log = logging.getLogger(__name__)

EVICTION = "consumer_backlog_eviction"


@dataclass(frozen=True)
class Quota:
    kind: str  # destination_storage | message_age
    limit: int  # bytes or seconds; < 0 = no quota
    policy: str


def quotas_of(policies: dict[str, Any], config: BrokerConfig) -> list[Quota]:
    """The topic's effective quotas, size first (limits < 0 left out)."""
    qmap = policies.get("backlog_quota_map") or {}
    out = []
    for kind, field, default in (("destination_storage", "limitSize", config.backlog_quota_default_limit_bytes),
                                 ("message_age", "limitTime", config.backlog_quota_default_limit_second)):
        q = qmap.get(kind)
        if q:
            quota = Quota(kind, int(q.get(field, -1)), str(q.get("policy", "producer_request_hold")))
        else:
            quota = Quota(kind, default, config.backlog_quota_default_retention_policy)
        if quota.limit >= 0:
            out.append(quota)
    return out


def subscription_backlog_bytes(sub: Subscription) -> int:
    return sub.backlog_size(sub.cursor.number_of_entries_in_backlog)


def backlog_bytes(topic: PersistentTopic) -> int:
    """The topic's backlog: what its slowest durable subscription has left to read."""
    return max((subscription_backlog_bytes(s) for s in topic.subscriptions.values() if s.durable), default=0)


async def oldest_unacked_publish_ms(sub: Subscription) -> int | None:
    """Publish time of the subscription's oldest unacknowledged entry (None: no backlog)."""
    cursor = sub.cursor
    if cursor.number_of_entries_in_backlog <= 0:
        return None
    ml = sub.topic.ml
    pos = ml.next_valid_position(cursor.mark_delete_position)
    if pos > ml.last_confirmed_entry:
        return None
    return parse_metadata((await ml.read_entry(pos)).data).publish_time


async def backlog_age_s(topic: PersistentTopic) -> float:
    """Age in seconds of the oldest message a durable subscription has not acknowledged."""
    slowest = [s for s in topic.subscriptions.values() if s.durable and s.cursor.number_of_entries_in_backlog > 0]
    if not slowest:
        return 0.0
    sub = min(slowest, key=lambda s: s.cursor.mark_delete_position)
    published = await oldest_unacked_publish_ms(sub)
    return 0.0 if published is None else max(0.0, time.time() - published / 1000)


async def _usage(topic: PersistentTopic, quota: Quota) -> float:
    return backlog_bytes(topic) if quota.kind == "destination_storage" else await backlog_age_s(topic)


def _unit(quota: Quota) -> str:
    return "bytes" if quota.kind == "destination_storage" else "s"


async def check_new_producer(topic: PersistentTopic) -> None:
    """Refuse a producer while the backlog is over a producer-blocking quota."""
    for quota in quotas_of(topic.policies, topic.config):
        if quota.policy == EVICTION:
            continue
        used = await _usage(topic, quota)
        if used > quota.limit:
            error = (ProducerBlockedQuotaExceededError if quota.policy == "producer_request_hold"
                     else ProducerBlockedQuotaExceededException)
            raise error(f"Cannot create producer on topic with backlog quota exceeded "
                        f"({quota.kind}: {used:.0f} > {quota.limit} {_unit(quota)})")


async def enforce(topic: PersistentTopic) -> bool:
    """One periodic check of a topic; True when a quota was exceeded (and acted on)."""
    exceeded = False
    for quota in quotas_of(topic.policies, topic.config):
        if topic.closed:
            break
        used = await _usage(topic, quota)
        if used <= quota.limit:
            continue
        exceeded = True
        if quota.policy == EVICTION:
            if quota.kind == "destination_storage":
                await _evict(topic, quota.limit)
            else:
                await _evict_older_than(topic, quota.limit)
        else:
            log.info("backlog quota of %s exceeded (%s: %.0f > %d %s, %s): disconnecting its producers",
                     topic.name, quota.kind, used, quota.limit, _unit(quota), quota.policy)
            for p in list(topic.producers.values()):
                p.peer.send_close_producer(p.producer_id)
                topic.remove_producer(p)
    return exceeded


async def _evict_older_than(topic: PersistentTopic, limit_s: int) -> None:
    """Acknowledge, for every durable subscription, the entries published over ``limit_s`` ago."""
    cutoff = int(time.time() * 1000) - limit_s * 1000
    for sub in list(topic.subscriptions.values()):
        if sub.durable and await sub.expire_before(cutoff):
            log.info("backlog quota of %s exceeded (message_age %d s): subscription %s skipped its "
                     "entries published before %d", topic.name, limit_s, sub.name, cutoff)


async def _evict(topic: PersistentTopic, limit: int) -> None:
    """Skip the oldest entries of every durable subscription over the limit (Pulsar moves the
    slowest cursors forward the same way)."""
    ml = topic.ml
    avg = ml.total_size / ml.number_of_entries if ml.number_of_entries else 0.0
    if avg <= 0:
        return
    for sub in list(topic.subscriptions.values()):
        if not sub.durable:
            continue
        over = subscription_backlog_bytes(sub) - limit
        if over <= 0:
            continue
        n = min(sub.cursor.number_of_entries_in_backlog, int(over / avg) + 1)
        log.info("backlog quota of %s exceeded: subscription %s skips its %d oldest entries",
                 topic.name, sub.name, n)
        await sub.skip(n)
