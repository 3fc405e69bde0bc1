"""BrokerService: the topics this broker owns and the binary-protocol listener.

Owns one nursery for everything long-lived: the listener, every connection, every loaded
topic (each with its subscriptions' dispatch tasks) and periodic housekeeping (message TTL,
rate stats). Topics load on first use: ownership of the namespace bundle is checked (and
acquired) in the metadata store, then the managed ledger is opened and existing durable
subscriptions and dedup state are restored.
"""

from __future__ import annotations

import functools

import itertools
import logging
import time
from typing import Any, Awaitable, Callable, Mapping

import trio

from bookie.client import BookKeeper, ClientConfig
from bookie.client.local_bookie import RequestHandler
from broker import backlog_quota
from broker.admin import serve_admin
from broker.authorization import Authorizer
from broker.broker_client import BrokerClient
from broker.config import BrokerConfig, managed_ledger_config
from broker.connection import ServerConnection
from broker.errors import (
    BrokerError,
    ConflictError,
    NamespaceNotFoundError,
    NotAllowedError,
    ServiceNotReadyError,
    TopicFencedError,
    TopicNotFoundError,
)
from broker.metrics import BrokerMetrics
from broker.names import NamespaceName, TopicName
from broker.namespaces import NamespaceResources
from broker.load_manager import LoadManager
from broker.ownership import OwnershipCache, bundle_of
from broker.schemas import SchemaRegistry
from broker.topic import PersistentTopic
from broker.topic_pattern import filter_topics
from managed_ledger.config import ManagedLedgerConfig
from managed_ledger.factory import ManagedLedgerFactory
from managed_ledger.errors import (
    ManagedLedgerClosedError,
    ManagedLedgerError,
    ManagedLedgerFencedError,
    ManagedLedgerNotFoundError,
)
from managed_ledger.interfaces import ManagedLedgerFactoryView, ManagedLedgerView
from metadata.errors import MetadataError, NotFoundError
from metadata.store import MetadataStore
from quire.config import naming_the_port
from quire.security.providers import AuthenticationService
from quire.security.tls import ServerTls

log = logging.getLogger(__name__)

# GET_TOPICS pattern matching over more topics than this runs in a worker thread.
FILTER_IN_THREAD_ABOVE = 1000
POLICY_WATCH_RECHECK_S = 30.0  # how often a policies watch checks it is still needed


class BrokerService:
    def __init__(self, config: BrokerConfig, store: MetadataStore, ml_factory: ManagedLedgerFactoryView) -> None:
        self.config = config
        self.store = store
        self.factory = ml_factory
        # The ledger client's settings (TLS trust, bookie token): also how the bookies' HTTP API is called.
        self.ledger_client_config = ClientConfig()
        self.namespaces = NamespaceResources(store, config.cluster_name, config.default_number_of_namespace_bundles)
        self.schemas = SchemaRegistry(store)
        self.authn = AuthenticationService.from_config(config)
        self.authz = Authorizer(config, self.namespaces)
        self.broker_client = BrokerClient(config)  # calling other brokers' admin API as this broker
        # bcrypt checks run in threads; two at a time keeps a login storm from starving the loop
        self.auth_limiter = trio.CapacityLimiter(2)
        tls_wanted = config.broker_service_port_tls >= 0 or config.web_service_port_tls >= 0
        self.tls = ServerTls.from_config(config) if tls_wanted else None
        self.tls_port: int | None = None
        self.web_port_tls: int | None = None
        self.metrics = BrokerMetrics()
        self.metrics.attach(self)
        self.topics: dict[str, PersistentTopic] = {}
        self._loading: dict[str, trio.Event] = {}
        self._nursery: trio.Nursery | None = None
        self._producer_ids = itertools.count()
        self.port = config.broker_service_port
        self.web_port = config.web_service_port
        self.ownership: OwnershipCache | None = None
        self.load_manager = LoadManager(self)
        # Last time (trio clock) a metadata request was sent that the store then answered: the
        # server heard this session then, so it cannot expire before this + the session timeout.
        self._session_ok_at = 0.0  # set when the broker starts
        self._session_given_up = False
        self.started_at = time.time()
        self.ready = False  # the admin API answers 503 until the broker serves clients
        self.pattern_limiter = trio.CapacityLimiter(2)
        self._policy_watches: set[NamespaceName] = set()  # namespaces whose policies node we follow

    # -- identity --------------------------------------------------------------------------

    @property
    def broker_id(self) -> str:
        return f"{self.config.advertised_address}:{self.web_port}"

    @property
    def service_url(self) -> str:
        return f"pulsar://{self.config.advertised_address}:{self.port}"

    @property
    def web_url(self) -> str:
        return f"http://{self.config.advertised_address}:{self.web_port}"

    @property
    def service_url_tls(self) -> str | None:
        return f"pulsar+ssl://{self.config.advertised_address}:{self.tls_port}" if self.tls_port is not None else None

    @property
    def web_url_tls(self) -> str | None:
        return f"https://{self.config.advertised_address}:{self.web_port_tls}" if self.web_port_tls is not None else None

    def new_producer_name(self) -> str:
        return f"{self.config.cluster_name}-{self.port}-{next(self._producer_ids)}"

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self, *, task_status: trio.TaskStatus["BrokerService"] = trio.TASK_STATUS_IGNORED) -> None:
        """Listen for clients until cancelled; topics close cleanly on the way out."""
        with naming_the_port("broker_service_port", self.config.bind_address, self.config.broker_service_port):
            listeners = await trio.open_tcp_listeners(self.config.broker_service_port, host=self.config.bind_address)
        self.port = listeners[0].socket.getsockname()[1]
        all_listeners: list[Any] = list(listeners)
        if self.tls is not None and self.config.broker_service_port_tls >= 0:
            with naming_the_port("broker_service_port_tls", self.config.bind_address, self.config.broker_service_port_tls):
                tls_listeners = await trio.open_tcp_listeners(self.config.broker_service_port_tls,
                                                              host=self.config.bind_address)
            self.tls_port = tls_listeners[0].socket.getsockname()[1]
            all_listeners += [trio.SSLListener(tl, self.tls.context, https_compatible=False) for tl in tls_listeners]
        self._session_ok_at = trio.current_time()
        self.ownership = OwnershipCache(self.store, self.service_url, self.web_url, self.service_url_tls,
                                        self.web_url_tls, wait_s=min(self.session_timeout_s + 2.0, 20.0))
        self.ownership.on_change = self.load_manager.bundles_changed
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                await self.ensure_defaults()
                await self._register()
                self.store.on_session_lost(self._session_lost)
                if self.store.session_expires_by_timeout:
                    nursery.start_soon(self._session_watchdog)
                self.ready = True
                nursery.start_soon(self._housekeeping)
                nursery.start_soon(self._backlog_quota_loop)
                nursery.start_soon(self._update_stats)
                nursery.start_soon(self.load_manager.run)
                nursery.start_soon(trio.serve_listeners, self._serve_connection, all_listeners)
                if self.tls is not None:
                    nursery.start_soon(self.tls.watch)
                task_status.started(self)
                await trio.sleep_forever()
        finally:
            with trio.CancelScope(shield=True):
                await self.shutdown()

    async def shutdown(self) -> None:
        with trio.move_on_after(15):
            for topic in list(self.topics.values()):
                await topic.close(disconnect_clients=True, reason="the broker is shutting down")
        if self.ownership is not None:
            with trio.move_on_after(2):
                try:
                    await self.ownership.release_all()
                except MetadataError:
                    pass

    async def _register(self) -> None:
        """Our ephemeral ``/loadbalance/brokers/<host:port>`` node, holding our load report."""
        await self.load_manager.register()

    @property
    def session_timeout_s(self) -> float:
        return self.config.metadata_store_session_timeout_millis / 1000.0

    def session_fresh(self) -> bool:
        """May this broker still hold its metadata session (and so its bundles)? False once
        the session timeout has passed since the store last answered: by then the server may
        have expired it and another broker may own those bundles."""
        if not self.store.session_expires_by_timeout:
            return True
        return not self._session_given_up and trio.current_time() - self._session_ok_at < self.session_timeout_s

    async def _session_watchdog(self) -> None:
        """Learn of a lost session without waiting for the store to say so: ZooKeeper tells
        a client its session expired only once it reconnects, so a broker cut off from it (or
        paused) would otherwise go on serving bundles that another broker owns by now."""
        timeout = self.session_timeout_s
        interval = min(max(timeout / 10, 0.1), 2.0)

        async def ping() -> None:
            while True:
                sent = trio.current_time()
                try:
                    with trio.move_on_after(timeout):
                        await self.store.exists("/")
                        self._session_ok_at = max(self._session_ok_at, sent)
                        if self._session_given_up:
                            self._session_given_up = False
                            log.warning("metadata store answering again: re-registering, bundles re-acquired on lookup")
                            self.spawn(self._reregister)
                except MetadataError:
                    pass
                await trio.sleep(interval)

        async def check() -> None:
            while True:
                # Asleep until the session would turn stale unless a ping answers meanwhile
                # (then back to sleep): ~one wake-up per session timeout instead of one per
                # half ping interval, with the loss noticed as early as before (at least
                # interval / 2 apart while it stays lost).
                stale_at = self._session_ok_at + timeout
                await trio.sleep(max(stale_at - trio.current_time(), interval / 2))
                if not self._session_given_up and not self.session_fresh():
                    log.warning("no answer from the metadata store for %.1f s (session timeout): "
                                "giving up every bundle", trio.current_time() - self._session_ok_at)
                    self._session_lost()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(ping)
            nursery.start_soon(check)

    def _session_lost(self) -> None:
        """The session expired (or may have): stop serving every bundle at once. Topics are
        fenced now (no publish accepted from here on) and closed; lookups acquire anew."""
        log.warning("metadata session lost: closing every topic")
        self._session_given_up = True
        if self.ownership is not None:
            self.ownership.forget_all()
        for topic in list(self.topics.values()):
            topic.fenced = True
            self.spawn(functools.partial(topic.close, reason="the metadata session was lost"))
        self.spawn(self._reregister)

    async def _reregister(self) -> None:
        """After a session loss the store reconnects with a new session: announce us again."""
        while True:
            try:
                await self._register()
                self._session_ok_at = trio.current_time()
                self._session_given_up = False
                return
            except MetadataError as exc:
                log.warning("re-registering the broker failed (%r); retrying", exc)
                await trio.sleep(1)

    def spawn(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        if self._nursery is not None:
            self._nursery.start_soon(fn, *args)

    async def _serve_connection(self, stream: trio.abc.Stream) -> None:
        sock_stream = stream if isinstance(stream, trio.SocketStream) else stream.transport_stream  # type: ignore[attr-defined]
        try:
            sock_stream.setsockopt(6, 1, 1)  # TCP_NODELAY: receipts must not wait for Nagle
        except OSError:
            pass
        peer_cert = None
        if isinstance(stream, trio.SSLStream):
            try:
                with trio.fail_after(10):
                    await stream.do_handshake()
                peer_cert = stream.getpeercert() or None
            except (trio.BrokenResourceError, trio.TooSlowError, OSError) as exc:
                log.info("TLS handshake failed: %s", exc.__cause__ or exc)
                await trio.aclose_forcefully(stream)
                return
        try:
            conn = ServerConnection(self, stream)
            conn.peer_cert = peer_cert
            await conn.serve()
        except Exception:
            # Last resort: one connection's failure must never end the listener (and with it
            # the process); ServerConnection.serve already handles everything it expects.
            log.exception("connection handler failed")

    async def _update_stats(self) -> None:
        while True:
            await trio.sleep(max(1, self.config.stats_update_frequency_in_secs))
            for topic in list(self.topics.values()):
                topic.update_rates()

    async def _housekeeping(self) -> None:
        """Message TTL: expire (acknowledge) messages older than the namespace's TTL."""
        interval = max(1, self.config.message_expiry_check_interval_in_minutes * 60)
        while True:
            await trio.sleep(interval)
            for topic in list(self.topics.values()):
                try:
                    await self.expire_messages(topic)
                except (BrokerError, ManagedLedgerError, MetadataError) as exc:
                    log.warning("message expiry on %s failed: %r", topic.name, exc)
                except Exception:
                    # e.g. an entry stored before SENDs were validated: this topic is skipped,
                    # the others and the broker go on.
                    log.exception("message expiry on %s failed unexpectedly", topic.name)

    async def _backlog_quota_loop(self) -> None:
        """Pulsar's BacklogQuotaManager: every interval, each topic over its quota is acted on."""
        if not self.config.backlog_quota_check_enabled:
            return
        while True:
            await trio.sleep(max(1, self.config.backlog_quota_check_interval_in_seconds))
            for topic in list(self.topics.values()):
                try:
                    await backlog_quota.enforce(topic)
                except (BrokerError, ManagedLedgerError, MetadataError) as exc:
                    log.warning("backlog quota check of %s failed: %r", topic.name, exc)

    async def expire_messages(self, topic: PersistentTopic) -> None:
        ttl = topic.policies.get("message_ttl_in_seconds")
        if ttl is None:
            ttl = self.config.ttl_duration_default_in_seconds
        if not ttl:
            return
        cutoff = int(time.time() * 1000) - int(ttl) * 1000
        for sub in list(topic.subscriptions.values()):
            if sub.durable and await sub.expire_before(cutoff):
                sub.msg_expired += 1

    # -- topics ----------------------------------------------------------------------------

    async def _auto_creation(self, ns: NamespaceName) -> tuple[bool, str, int]:
        policies = await self.namespaces.get_policies(ns)
        override = policies.get("autoTopicCreationOverride") or {}
        allowed = override.get("allowAutoTopicCreation", self.config.allow_auto_topic_creation)
        kind = override.get("topicType", self.config.allow_auto_topic_creation_type)
        parts = override.get("defaultNumPartitions", self.config.default_num_partitions)
        return bool(allowed), kind, int(parts or 1)

    async def partitioned_metadata(self, name: TopicName) -> int:
        """Partition count for PARTITIONED_METADATA (auto-creating a partitioned topic when
        the namespace asks for that type)."""
        if not await self.namespaces.namespace_exists(name.namespace_name):
            raise NamespaceNotFoundError(f"Namespace {name.namespace_name} does not exist")
        n = await self.namespaces.partitions(name)
        if n or name.partition_index >= 0:
            return n
        allowed, kind, parts = await self._auto_creation(name.namespace_name)
        if allowed and kind == "partitioned" and not await self.topic_exists(name):
            try:
                await self.namespaces.create_partitioned(name, parts)
            except ConflictError:
                pass
            return await self.namespaces.partitions(name)
        return 0

    async def lookup(self, name: TopicName, authoritative: bool = False) -> tuple[str, bool]:
        """(broker URL, redirect?) for LOOKUP: this broker unless another owns the bundle."""
        url, _, redirect, _ = await self.lookup_urls(name, authoritative)
        return url, redirect

    async def lookup_urls(self, name: TopicName, authoritative: bool = False) -> tuple[str, str | None, bool, bool]:
        """(pulsar:// URL, pulsar+ssl:// URL or None, redirect?, authoritative?) of the broker
        serving ``name``. An unowned bundle goes to the broker the load manager picks
        (``authoritative``: the lookup was redirected here to acquire it, so this broker takes
        it); a redirect to the leader, which places it, is not authoritative."""
        owner = await self.lookup_owner(name, authoritative)
        assert self.ownership is not None
        if self.ownership.is_mine(owner) or owner is None:
            return self.service_url, self.service_url_tls, False, True
        return owner["nativeUrl"], owner.get("nativeUrlTls"), True, not owner.get("leader")

    async def lookup_owner(self, name: TopicName, authoritative: bool = False) -> dict[str, Any] | None:
        """The owner's (or the chosen broker's) data for a lookup of ``name``."""
        if not self.session_fresh():
            raise ServiceNotReadyError("this broker lost its metadata session: it serves no bundle until it re-acquires it")
        policies = await self.namespaces.get_policies(name.namespace_name)
        assert self.ownership is not None
        assign = None if authoritative else self.load_manager.assign
        return await self.ownership.owner(name, policies["bundles"]["boundaries"], assign=assign, wait=True)

    async def topic_exists(self, name: TopicName) -> bool:
        if str(name) in self.topics:
            return True
        names = await self.factory.list_names(name.managed_ledger_name)
        return name.managed_ledger_name in names

    async def get_topic(self, name: TopicName, create: bool = True) -> PersistentTopic:
        key = str(name)
        while True:
            topic = self.topics.get(key)
            if topic is not None:
                if not topic.closed:
                    return topic
                await topic.close_done.wait()  # unloading: reopen only once it is closed
                continue
            loading = self._loading.get(key)
            if loading is None:
                break
            await loading.wait()
        ev = trio.Event()
        self._loading[key] = ev
        try:
            return await self._load_topic(name, create)
        finally:
            del self._loading[key]
            ev.set()

    async def get_available_topic(self, name: TopicName, create: bool = True) -> PersistentTopic:
        """``get_topic`` for PRODUCER and SUBSCRIBE: a topic found unloading (fenced, or its
        managed ledger closed under it) is waited out and loaded again here. Answering
        "retryable" instead is not enough: the official C++ client does not retry a refused
        SUBSCRIBE while its connection stays up ("already connected")."""
        for _ in range(3):
            topic = await self.get_topic(name, create)
            if topic.available():
                return topic
            with trio.move_on_after(15):
                await topic.close_done.wait()
        raise TopicFencedError("Topic is temporarily unavailable")

    async def _load_topic(self, name: TopicName, create: bool) -> PersistentTopic:
        if not name.persistent:
            raise NotAllowedError("non-persistent topics are not supported")
        ns = name.namespace_name
        if not self.session_fresh():
            raise ServiceNotReadyError("this broker lost its metadata session: please redo the lookup")
        policies = await self.namespaces.get_policies(ns)
        assert self.ownership is not None
        owner = await self.ownership.owner(name, policies["bundles"]["boundaries"])
        if not self.ownership.is_mine(owner):
            raise ServiceNotReadyError(f"Namespace bundle for topic {name} not served by this instance. Please redo the lookup")
        bundle_path = self.ownership.path(name, policies["bundles"]["boundaries"])
        if await self.namespaces.partitions(name) > 0:
            raise NotAllowedError(f"{name} is a partitioned topic: use its partitions")
        if not await self.topic_exists(name):
            allowed, _, _ = await self._auto_creation(ns)
            if name.partition_index >= 0:
                base = name.partitioned_topic_name
                n = await self.namespaces.partitions(base)
                allowed = allowed or (n > name.partition_index)
            if not (create and allowed):
                raise TopicNotFoundError(f"Topic {name} does not exist")
        ml = await self._open_ledger(name, policies, bundle_path)
        topic = PersistentTopic(self, name, ml, policies)
        topic.publish_latency = self.metrics.publish_latency.observe
        assert self._nursery is not None
        await self._nursery.start(topic.run)
        try:
            await topic.initialize()
        except BaseException:
            await topic.close(disconnect_clients=False, reason="its initialization failed")
            raise
        self.topics[str(name)] = topic
        self.watch_policies(ns)
        log.info("loaded topic %s (%d subscriptions)", name, len(topic.subscriptions))
        return topic

    async def _open_ledger(self, name: TopicName, policies: dict[str, Any], bundle_path: str) -> ManagedLedgerView:
        """Open (recover) the topic's managed ledger. A failure that may pass (bookies briefly
        short, the metadata store slow) is retried with back-off for up to
        ``topic_load_timeout_seconds`` while this broker still owns the bundle; clients asking
        meanwhile wait for this one load instead of each failing in turn."""
        deadline = trio.current_time() + self.config.topic_load_timeout_seconds
        delay = 0.1
        while True:
            try:
                return await self.factory.open(name.managed_ledger_name, self.ml_config(policies))
            except (ManagedLedgerNotFoundError, ManagedLedgerFencedError, ManagedLedgerClosedError):
                raise
            except ManagedLedgerError as exc:
                assert self.ownership is not None
                if trio.current_time() + delay > deadline or bundle_path not in self.ownership.owned:
                    raise
                log.warning("opening %s failed (%r); retrying in %.1f s", name, exc, delay)
            await trio.sleep(delay)
            delay = min(delay * 2, 5.0)

    def ml_config(self, policies: dict[str, Any]) -> ManagedLedgerConfig:
        return managed_ledger_config(self.config, policies)

    def forget_topic(self, topic: PersistentTopic) -> None:
        if self.topics.get(str(topic.name)) is topic:
            del self.topics[str(topic.name)]

    async def list_topics(self, ns: NamespaceName) -> list[str]:
        """Persistent topics of a namespace (partitions listed as ``-partition-N``)."""
        await self.namespaces.get_policies(ns, validate=False)  # listable even with broken policies
        prefix = f"{ns}/persistent/"
        names = await self.factory.list_names(prefix)
        found = {str(TopicName.from_managed_ledger_name(n)) for n in names if n.startswith(prefix)}
        found.update(str(t.name) for t in self.topics.values() if t.name.namespace_name == ns)
        # A partitioned topic's partitions are listed from its creation on, as in Pulsar (which
        # creates them eagerly), not only once a client has used them.
        for parent in await self.namespaces.partitioned_topics(ns):
            name = TopicName.parse(parent)
            found.update(str(name.partition(i)) for i in range(await self.namespaces.partitions(name)))
        return sorted(found)

    async def filter_topics(self, topics: list[str], matches: Callable[[str], bool]) -> list[str]:
        """Topics that ``matches``; a large namespace is filtered off the event loop."""
        if len(topics) <= FILTER_IN_THREAD_ABOVE:
            return filter_topics(topics, matches)
        return await trio.to_thread.run_sync(filter_topics, topics, matches, limiter=self.pattern_limiter)

    async def unload_topic(self, name: TopicName) -> None:
        topic = self.topics.get(str(name))
        if topic is None:
            if not await self.topic_exists(name):
                raise TopicNotFoundError(f"Topic {name} not found")
            return
        await topic.close(disconnect_clients=True, reason="unload requested (admin)")

    async def unload_bundle(self, ns: NamespaceName, bundle: str) -> None:
        """Pulsar's bundle unload: stop taking lookups for it, close its topics (cursors
        persisted, clients disconnected), then release the ownership node."""
        own = self.ownership
        assert own is not None
        policies = await self.namespaces.get_policies(ns)
        path = own.bundle_path(ns, bundle)
        try:
            await own.disable(path)  # the node says disabled: true until it is released
            closing = [t for t in self.topics.values() if t.name.namespace_name == ns
                       and bundle_of(t.name, policies["bundles"]["boundaries"]) == bundle]
            async with trio.open_nursery() as nursery:  # all at once: the bundle is dark meanwhile
                for topic in closing:
                    nursery.start_soon(functools.partial(topic.close, True, reason=f"its bundle {ns}/{bundle} is unloading"))
        finally:
            await own.release(path)

    async def delete_topic(self, name: TopicName, force: bool = False) -> None:
        if not await self.topic_exists(name):
            raise TopicNotFoundError(f"Topic {name} not found")
        topic = self.topics.get(str(name))
        if topic is not None:
            if not force and (topic.producers or any(s.consumers for s in topic.subscriptions.values())):
                raise NotAllowedError("Topic has active producers/subscriptions")
            await topic.close(disconnect_clients=True, reason="deleted (admin)")
        await self.factory.delete(name.managed_ledger_name)

    async def on_policies_changed(self, ns: NamespaceName) -> None:
        policies = await self.namespaces.get_policies(ns)
        for topic in list(self.topics.values()):
            if topic.name.namespace_name == ns:
                await topic.apply_policies(policies)

    def watch_policies(self, ns: NamespaceName) -> None:
        """Follow the namespace's policies node while this broker has topics of it, so a
        change made through any broker applies here without a reload."""
        if ns not in self._policy_watches:
            self._policy_watches.add(ns)
            self.spawn(self._follow_policies, ns)

    async def _follow_policies(self, ns: NamespaceName) -> None:
        path = f"/admin/policies/{ns}"
        fired = trio.Event()

        def on_change(_event: object) -> None:  # one callback object: the store registers it once
            fired.set()

        version: int | None = None
        try:
            while any(t.name.namespace_name == ns for t in list(self.topics.values())):
                fired = trio.Event()
                try:
                    _, stat = await self.store.get(path, watch=on_change)
                except NotFoundError:
                    return  # the namespace was deleted
                if version is not None and stat.version != version:
                    try:
                        await self.on_policies_changed(ns)
                    except (BrokerError, MetadataError) as exc:
                        log.warning("applying the new policies of %s failed: %r", ns, exc)
                version = stat.version
                # a re-check now and then ends the loop once no topic of ns is loaded here
                with trio.move_on_after(POLICY_WATCH_RECHECK_S):
                    await fired.wait()
        except MetadataError as exc:
            log.warning("watching the policies of %s failed: %r; watched again at the next load", ns, exc)
        finally:
            self._policy_watches.discard(ns)

    # -- bootstrap -------------------------------------------------------------------------

    async def ensure_defaults(self) -> None:
        """Cluster, tenant ``public`` and namespace ``public/default`` (first start)."""
        c = self.config
        await self.namespaces.create_cluster(
            c.cluster_name, {"serviceUrl": self.web_url, "brokerServiceUrl": self.service_url}, exist_ok=True)
        await self.namespaces.create_tenant("public", {"allowedClusters": [c.cluster_name]}, exist_ok=True)
        await self.namespaces.create_namespace(NamespaceName("public", "default"), exist_ok=True)


async def run_broker(
    config: BrokerConfig, store: MetadataStore, *, client_config: ClientConfig | None = None,
    local_bookies: Mapping[str, RequestHandler] | None = None,
    task_status: trio.TaskStatus[BrokerService] = trio.TASK_STATUS_IGNORED,
) -> None:
    """A broker on an open metadata store, for both entry points (``quire broker`` and
    ``quire standalone``): ledger client (``client_config``, the ``[bookkeeper_client]`` table),
    managed-ledger factory (``managed_ledger_config``), protocol and admin listeners; runs until
    cancelled. ``local_bookies``: bookies of this process, reached without a socket (standalone)."""
    async with BookKeeper(store, client_config or ClientConfig(), local_bookies=local_bookies) as bk:
        async with ManagedLedgerFactory(store, bk, managed_ledger_config(config)) as factory:
            service = BrokerService(config, store, factory)
            service.ledger_client_config = bk.config
            async with trio.open_nursery() as nursery:
                await nursery.start(serve_admin, service, config.bind_address, config.web_service_port)
                await nursery.start(service.run)
                log.info("broker serving %s and %s", service.service_url, service.web_url)
                task_status.started(service)
                await trio.sleep_forever()
