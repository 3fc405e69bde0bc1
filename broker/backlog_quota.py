"""Backlog quotas (Pulsar's BacklogQuotaManager), size-based (``destination_storage``).

A topic's backlog is the estimated bytes its slowest durable subscription has not acknowledged
(the ``backlogSize`` of its stats). Over the quota of its namespace (``backlog_quota_map``) or
the broker default (``backlog_quota_default_limit_bytes``), the policy decides:

- ``producer_request_hold``: new producers are refused with ProducerBlockedQuotaExceededError
  (the client keeps its messages and retries) and the periodic check disconnects the
  connected ones, so they wait too;
- ``producer_exception``: the same with ProducerBlockedQuotaExceededException (sends fail);
- ``consumer_backlog_eviction``: the periodic check skips the oldest entries of the slowest
  subscriptions until the backlog fits (producers are never blocked).

The periodic check runs every ``backlog_quota_check_interval_in_seconds`` (60, as Pulsar). The
time-based quota (``message_age``) is stored but not enforced.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from broker.errors import ProducerBlockedQuotaExceededError, ProducerBlockedQuotaExceededException

if TYPE_CHECKING:
    from broker.config import BrokerConfig
    from broker.subscription import Subscription
    from broker.topic import PersistentTopic

log = logging.getLogger(__name__)


def quota_of(policies: dict[str, Any], config: BrokerConfig) -> tuple[int, str]:
    """(limit in bytes, policy) for a namespace's policies; limit < 0 = no quota."""
    q = (policies.get("backlog_quota_map") or {}).get("destination_storage")
    if q:
        return int(q.get("limitSize", -1)), str(q.get("policy", "producer_request_hold"))
    return config.backlog_quota_default_limit_bytes, config.backlog_quota_default_retention_policy


def subscription_backlog_bytes(sub: Subscription) -> int:
    return sub.backlog_size(sub.cursor.number_of_entries_in_backlog)


def backlog_bytes(topic: PersistentTopic) -> int:
    """The topic's backlog: what its slowest durable subscription has left to read."""
    return max((subscription_backlog_bytes(s) for s in topic.subscriptions.values() if s.durable), default=0)


def check_new_producer(topic: PersistentTopic) -> None:
    """Refuse a producer while the backlog is over a producer-blocking quota."""
    limit, policy = quota_of(topic.policies, topic.config)
    if limit < 0 or policy == "consumer_backlog_eviction":
        return
    size = backlog_bytes(topic)
    if size > limit:
        error = ProducerBlockedQuotaExceededError if policy == "producer_request_hold" else ProducerBlockedQuotaExceededException
        raise error(f"Cannot create producer on topic with backlog quota exceeded ({size} > {limit} bytes)")


async def enforce(topic: PersistentTopic) -> bool:
    """One periodic check of a topic; True when its quota was exceeded (and acted on)."""
    limit, policy = quota_of(topic.policies, topic.config)
    if limit < 0 or topic.closed:
        return False
    size = backlog_bytes(topic)
    if size <= limit:
        return False
    if policy == "consumer_backlog_eviction":
        await _evict(topic, limit)
    else:
        log.info("backlog quota of %s exceeded (%d > %d bytes, %s): disconnecting its producers",
                 topic.name, size, limit, policy)
        for p in list(topic.producers.values()):
            p.peer.send_close_producer(p.producer_id)
            topic.remove_producer(p)
    return True


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
