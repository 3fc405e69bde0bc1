"""Broker metrics in Prometheus format, with Pulsar's metric names.

Counters are bumped on the hot path (one call per frame batch, not per message); per-topic
gauges (backlog, storage size, producers, consumers) are collected when ``/metrics`` is
scraped, so an idle broker does no metrics work.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Iterable

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from quire.fast_counter import FastCounter
from quire.fast_histogram import FastHistogram

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.topic import PersistentTopic

LATENCY_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 1.0, float("inf"))


# Per-topic gauges: name -> help. Each also exists broker-wide as ``pulsar_broker_<name>``
# (summed over topics), as Pulsar exports when topic-level metrics are off.
_TOPIC_GAUGES = {
    "producers_count": "producers of the topic",
    "consumers_count": "consumers of the topic",
    "subscriptions_count": "subscriptions",
    "storage_size": "bytes stored for the topic",
    "msg_backlog": "entries not yet acked, all subscriptions",
    "in_messages_total": "messages received",
    "in_bytes_total": "bytes received",
    "out_messages_total": "messages dispatched",
    "out_bytes_total": "bytes dispatched",
    "rate_in": "messages/s published",
    "rate_out": "messages/s dispatched",
    "throughput_in": "bytes/s published",
    "throughput_out": "bytes/s dispatched",
}
_BROKER_COUNTERS = {"in_messages_total", "in_bytes_total", "out_messages_total", "out_bytes_total"}
_SUBSCRIPTION_GAUGES = {
    "pulsar_subscription_back_log": ("msgBacklog", "entries not yet acked by the subscription"),
    "pulsar_subscription_delayed": ("msgDelayed", "messages held for delayed delivery"),
    "pulsar_subscription_unacked_messages": ("unackedMessages", "messages delivered and not yet acked"),
    "pulsar_subscription_msg_rate_out": ("msgRateOut", "messages/s dispatched to the subscription"),
    "pulsar_subscription_blocked_on_unacked_messages": (
        "blockedSubscriptionOnUnackedMsgs", "1 while the unacked limit holds dispatch"),
}


_PROVIDER = {"token": "AuthenticationProviderToken", "basic": "AuthenticationProviderBasic",
             "tls": "AuthenticationProviderTls", "anonymous": "anonymous"}
_AUTH_REASONS = {"authentication required", "malformed token", "token signature verification failed", "token expired",
                 "unknown user or wrong password", "empty token", "no verified client certificate"}


def _topic_values(topic: "PersistentTopic") -> dict[str, float]:
    subs = list(topic.subscriptions.values())
    consumers = [c for s in subs for c in s.consumers]
    return {
        "producers_count": len(topic.producers),
        "consumers_count": len(consumers),
        "subscriptions_count": len(subs),
        "storage_size": topic.ml.total_size,
        "msg_backlog": sum(s.cursor.number_of_entries_in_backlog for s in subs),
        "in_messages_total": topic.msg_in,
        "in_bytes_total": topic.bytes_in,
        "out_messages_total": sum(s.msg_out_closed for s in subs) + sum(c.msg_out for c in consumers),
        "out_bytes_total": sum(s.bytes_out_closed for s in subs) + sum(c.bytes_out for c in consumers),
        "rate_in": topic.rates.get("msgRateIn"),
        "rate_out": sum(c.rates.get("msgRateOut") for c in consumers),
        "throughput_in": topic.rates.get("msgThroughputIn"),
        "throughput_out": sum(c.rates.get("msgThroughputOut") for c in consumers),
    }


class _TopicCollector(Collector):
    def __init__(self, service: "BrokerService") -> None:
        self.service = service

    def collect(self) -> Iterable[GaugeMetricFamily]:
        config = self.service.config
        per_topic = config.expose_topic_level_metrics_in_prometheus
        labels = ["cluster", "namespace", "topic"]
        fams = {k: GaugeMetricFamily(f"pulsar_{k}", doc, labels=labels) for k, doc in _TOPIC_GAUGES.items()}
        sub_fams = {k: GaugeMetricFamily(k, doc, labels=labels + ["subscription"])
                    for k, (_, doc) in _SUBSCRIPTION_GAUGES.items()}
        totals = dict.fromkeys(_TOPIC_GAUGES, 0.0)
        cluster = config.cluster_name
        for topic in list(self.service.topics.values()):
            lv = [cluster, str(topic.name.namespace_name), str(topic.name)]
            for key, value in _topic_values(topic).items():
                totals[key] += value
                if per_topic:
                    fams[key].add_metric(lv, value)
            if per_topic:
                for sub in list(topic.subscriptions.values()):
                    st = sub.stats()
                    for name, (field, _) in _SUBSCRIPTION_GAUGES.items():
                        sub_fams[name].add_metric(lv + [sub.name], float(st[field]))
        for key, value in totals.items():
            if key in _BROKER_COUNTERS:
                continue  # broker-wide, these are the pulsar_broker_{in,out}_* counters
            broker = GaugeMetricFamily(f"pulsar_broker_{key}", f"{_TOPIC_GAUGES[key]} (all topics)", labels=["cluster"])
            broker.add_metric([cluster], value)
            yield broker
        if per_topic:
            yield from fams.values()
            yield from sub_fams.values()


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        # Bumped per SEND on the event loop: lock-free counters (quire/fast_counter.py).
        self._msg_in = FastCounter("pulsar_broker_in_messages", "messages published", registry=r)
        self._bytes_in = FastCounter("pulsar_broker_in_bytes", "bytes published", registry=r)
        self._msg_out = Counter("pulsar_broker_out_messages", "messages dispatched", registry=r)
        self._bytes_out = Counter("pulsar_broker_out_bytes", "bytes dispatched", registry=r)
        self._entries_out = Counter("pulsar_broker_out_entries", "entries dispatched", registry=r)
        self._connections = Gauge("pulsar_active_connections", "open client connections", registry=r)
        self._conn_total = Counter("pulsar_connection_created", "client connections accepted", registry=r)
        self.publish_latency = FastHistogram(
            "pulsar_broker_publish_latency_seconds", "time from SEND to a stored entry", buckets=LATENCY_BUCKETS, registry=r)
        self.dispatch_latency = Histogram(
            "pulsar_broker_dispatch_latency_seconds", "time to read and send one dispatch round",
            buckets=LATENCY_BUCKETS, registry=r)
        self.undecodable_entries = Counter(
            "pulsar_broker_dispatch_undecodable_entries",
            "stored entries whose message metadata does not parse, skipped (acknowledged) by a dispatcher",
            registry=r)
        self.topics_gauge = Gauge("pulsar_broker_topics_count", "topics loaded", registry=r)
        # Pulsar's AuthenticationMetrics names; the reason is one of a fixed few (never client text)
        self._auth_ok = Counter("pulsar_authentication_success", "authentications that proved a role",
                                ["provider_name", "auth_method"], registry=r)
        self._auth_failed = Counter("pulsar_authentication_failures", "authentications refused",
                                    ["provider_name", "auth_method", "reason"], registry=r)

    def attach(self, service: "BrokerService") -> None:
        self.registry.register(_TopicCollector(service))
        self.topics_gauge.set_function(lambda: len(service.topics))

    def published(self, messages: int, nbytes: int) -> None:
        self._msg_in.value += messages
        self._bytes_in.value += nbytes

    def dispatched(self, entries: int, messages: int, nbytes: int) -> None:
        self._entries_out.inc(entries)
        self._msg_out.inc(messages)
        self._bytes_out.inc(nbytes)

    def connections_opened(self) -> None:
        self._connections.inc()
        self._conn_total.inc()

    def connections_closed(self) -> None:
        self._connections.dec()

    def authenticated(self, method: str) -> None:
        self._auth_ok.labels(_PROVIDER.get(method, "none"), method if method in _PROVIDER else "none").inc()

    def authentication_failed(self, method: str, reason: str) -> None:
        label = method if method in _PROVIDER else "none"
        self._auth_failed.labels(_PROVIDER.get(method, "none"), label,
                                 reason if reason in _AUTH_REASONS else "invalid credentials").inc()

    def render(self) -> bytes:
        return generate_latest(self.registry)
