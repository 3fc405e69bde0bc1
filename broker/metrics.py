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

if TYPE_CHECKING:
    from broker.service import BrokerService

LATENCY_BUCKETS = (0.0005, 0.001, 0.005, 0.01, 0.02, 0.05, 0.1, 0.2, 1.0, float("inf"))


class _TopicCollector(Collector):
    def __init__(self, service: "BrokerService") -> None:
        self.service = service

    def collect(self) -> Iterable[GaugeMetricFamily]:
        labels = ["cluster", "namespace", "topic"]
        fams = {
            "pulsar_producers_count": GaugeMetricFamily("pulsar_producers_count", "producers of the topic", labels=labels),
            "pulsar_consumers_count": GaugeMetricFamily("pulsar_consumers_count", "consumers of the topic", labels=labels),
            "pulsar_subscriptions_count": GaugeMetricFamily("pulsar_subscriptions_count", "subscriptions", labels=labels),
            "pulsar_storage_size": GaugeMetricFamily("pulsar_storage_size", "bytes stored for the topic", labels=labels),
            "pulsar_msg_backlog": GaugeMetricFamily("pulsar_msg_backlog", "entries not yet acked, all subscriptions", labels=labels),
            "pulsar_in_messages_total": GaugeMetricFamily("pulsar_in_messages_total", "messages received", labels=labels),
            "pulsar_in_bytes_total": GaugeMetricFamily("pulsar_in_bytes_total", "bytes received", labels=labels),
            "pulsar_out_messages_total": GaugeMetricFamily("pulsar_out_messages_total", "messages dispatched", labels=labels),
            "pulsar_out_bytes_total": GaugeMetricFamily("pulsar_out_bytes_total", "bytes dispatched", labels=labels),
            "pulsar_rate_in": GaugeMetricFamily("pulsar_rate_in", "messages/s published", labels=labels),
            "pulsar_rate_out": GaugeMetricFamily("pulsar_rate_out", "messages/s dispatched", labels=labels),
            "pulsar_throughput_in": GaugeMetricFamily("pulsar_throughput_in", "bytes/s published", labels=labels),
            "pulsar_throughput_out": GaugeMetricFamily("pulsar_throughput_out", "bytes/s dispatched", labels=labels),
        }
        sub_labels = labels + ["subscription"]
        sub_fams = {
            name: GaugeMetricFamily(name, doc, labels=sub_labels) for name, doc in (
                ("pulsar_subscription_back_log", "entries not yet acked by the subscription"),
                ("pulsar_subscription_delayed", "messages held for delayed delivery"),
                ("pulsar_subscription_unacked_messages", "messages delivered and not yet acked"),
                ("pulsar_subscription_msg_rate_out", "messages/s dispatched to the subscription"),
                ("pulsar_subscription_blocked_on_unacked_messages", "1 while the unacked limit holds dispatch"),
            )
        }
        cluster = self.service.config.cluster_name
        for topic in list(self.service.topics.values()):
            lv = [cluster, str(topic.name.namespace_name), str(topic.name)]
            subs = list(topic.subscriptions.values())
            fams["pulsar_producers_count"].add_metric(lv, len(topic.producers))
            fams["pulsar_consumers_count"].add_metric(lv, sum(len(s.consumers) for s in subs))
            fams["pulsar_subscriptions_count"].add_metric(lv, len(subs))
            fams["pulsar_storage_size"].add_metric(lv, topic.ml.total_size)
            fams["pulsar_msg_backlog"].add_metric(lv, sum(s.cursor.number_of_entries_in_backlog for s in subs))
            fams["pulsar_in_messages_total"].add_metric(lv, topic.msg_in)
            fams["pulsar_in_bytes_total"].add_metric(lv, topic.bytes_in)
            consumers = [c for s in subs for c in s.consumers]
            for sub in subs:
                st = sub.stats()
                sv = lv + [sub.name]
                sub_fams["pulsar_subscription_back_log"].add_metric(sv, st["msgBacklog"])
                sub_fams["pulsar_subscription_delayed"].add_metric(sv, st["msgDelayed"])
                sub_fams["pulsar_subscription_unacked_messages"].add_metric(sv, st["unackedMessages"])
                sub_fams["pulsar_subscription_msg_rate_out"].add_metric(sv, st["msgRateOut"])
                sub_fams["pulsar_subscription_blocked_on_unacked_messages"].add_metric(
                    sv, int(st["blockedSubscriptionOnUnackedMsgs"]))
            fams["pulsar_out_messages_total"].add_metric(
                lv, sum(s.msg_out_closed for s in subs) + sum(c.msg_out for c in consumers))
            fams["pulsar_out_bytes_total"].add_metric(
                lv, sum(s.bytes_out_closed for s in subs) + sum(c.bytes_out for c in consumers))
            fams["pulsar_rate_in"].add_metric(lv, topic.rates.get("msgRateIn"))
            fams["pulsar_throughput_in"].add_metric(lv, topic.rates.get("msgThroughputIn"))
            fams["pulsar_rate_out"].add_metric(lv, sum(c.rates.get("msgRateOut") for c in consumers))
            fams["pulsar_throughput_out"].add_metric(lv, sum(c.rates.get("msgThroughputOut") for c in consumers))
        yield from fams.values()
        yield from sub_fams.values()


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        r = self.registry
        self._msg_in = Counter("pulsar_broker_in_messages", "messages published", registry=r)
        self._bytes_in = Counter("pulsar_broker_in_bytes", "bytes published", registry=r)
        self._msg_out = Counter("pulsar_broker_out_messages", "messages dispatched", registry=r)
        self._bytes_out = Counter("pulsar_broker_out_bytes", "bytes dispatched", registry=r)
        self._entries_out = Counter("pulsar_broker_out_entries", "entries dispatched", registry=r)
        self._connections = Gauge("pulsar_active_connections", "open client connections", registry=r)
        self._conn_total = Counter("pulsar_connection_created", "client connections accepted", registry=r)
        self.publish_latency = Histogram(
            "pulsar_broker_publish_latency_seconds", "time from SEND to a stored entry", buckets=LATENCY_BUCKETS, registry=r)
        self.dispatch_latency = Histogram(
            "pulsar_broker_dispatch_latency_seconds", "time to read and send one dispatch round",
            buckets=LATENCY_BUCKETS, registry=r)
        self.topics_gauge = Gauge("pulsar_broker_topics_count", "topics loaded", registry=r)

    def attach(self, service: "BrokerService") -> None:
        self.registry.register(_TopicCollector(service))
        self.topics_gauge.set_function(lambda: len(service.topics))

    def published(self, messages: int, nbytes: int) -> None:
        self._msg_in.inc(messages)
        self._bytes_in.inc(nbytes)

    def dispatched(self, entries: int, messages: int, nbytes: int) -> None:
        self._entries_out.inc(entries)
        self._msg_out.inc(messages)
        self._bytes_out.inc(nbytes)

    def connections_opened(self) -> None:
        self._connections.inc()
        self._conn_total.inc()

    def connections_closed(self) -> None:
        self._connections.dec()

    def render(self) -> bytes:
        return generate_latest(self.registry)
