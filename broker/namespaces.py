"""Clusters, tenants, namespaces and partitioned-topic metadata in the metadata store.

Paths follow Pulsar: ``/admin/clusters/<c>``, ``/admin/policies/<tenant>``,
``/admin/policies/<tenant>/<ns>`` (the namespace Policies object),
``/admin/partitioned-topics/<tenant>/<ns>/persistent/<topic>`` (``{"partitions": N}``).
Values are msgpack dicts with Pulsar's JSON field names, so the admin API returns them as is.
"""

from __future__ import annotations

from typing import Any, Callable
from urllib.parse import unquote

from broker.errors import ConflictError, NamespaceNotFoundError, NotAllowedError, PreconditionFailedError
from broker.names import NamespaceName, TopicName, check_name_part
from broker.policies import bundle_boundaries, check_stored, parse_namespace_policies
from metadata import values
from metadata.errors import AlreadyExistsError, BadVersionError, NotFoundError
from metadata.store import MetadataStore


def default_policies(num_bundles: int, cluster: str) -> dict[str, Any]:
    return {
        "bundles": {"boundaries": bundle_boundaries(num_bundles), "numBundles": num_bundles},
        "replication_clusters": [cluster],
        "auth_policies": {"namespace_auth": {}, "destination_auth": {}, "subscription_auth_roles": {}},
        "retention_policies": None,
        "message_ttl_in_seconds": None,
        "deduplicationEnabled": None,
        "autoTopicCreationOverride": None,
        "deleted": False,
    }


class NamespaceResources:
    def __init__(self, store: MetadataStore, cluster: str, num_bundles: int = 4) -> None:
        self.store = store
        self.cluster = cluster
        self.num_bundles = num_bundles

    async def _get(self, path: str) -> Any:
        try:
            raw, _ = await self.store.get(path)
        except NotFoundError:
            return None
        return values.unpack(raw) if raw else {}

    async def _children(self, path: str) -> list[str]:
        try:
            return await self.store.children(path)
        except NotFoundError:
            return []

    # -- clusters --------------------------------------------------------------------------

    async def clusters(self) -> list[str]:
        return await self._children("/admin/clusters")

    async def get_cluster(self, name: str) -> dict[str, Any] | None:
        return await self._get(f"/admin/clusters/{name}")

    async def create_cluster(self, name: str, data: dict[str, Any], exist_ok: bool = False) -> None:
        check_name_part("cluster", name)
        try:
            await self.store.create(f"/admin/clusters/{name}", values.pack(data), make_parents=True)
        except AlreadyExistsError:
            if not exist_ok:
                raise ConflictError(f"Cluster {name} already exists") from None

    async def update_cluster(self, name: str, data: dict[str, Any]) -> None:
        if await self.get_cluster(name) is None:
            raise NamespaceNotFoundError(f"Cluster {name} does not exist")
        await self.store.put(f"/admin/clusters/{name}", values.pack(data))

    async def delete_cluster(self, name: str) -> None:
        try:
            await self.store.delete(f"/admin/clusters/{name}")
        except NotFoundError:
            raise NamespaceNotFoundError(f"Cluster {name} does not exist") from None

    # -- tenants ---------------------------------------------------------------------------

    async def tenants(self) -> list[str]:
        return await self._children("/admin/policies")

    async def get_tenant(self, tenant: str) -> dict[str, Any] | None:
        return await self._get(f"/admin/policies/{tenant}")

    async def create_tenant(self, tenant: str, info: dict[str, Any], exist_ok: bool = False) -> None:
        check_name_part("tenant", tenant)
        info = {"adminRoles": info.get("adminRoles", []), "allowedClusters": info.get("allowedClusters") or [self.cluster]}
        try:
            await self.store.create(f"/admin/policies/{tenant}", values.pack(info), make_parents=True)
        except AlreadyExistsError:
            if not exist_ok:
                raise ConflictError(f"Tenant {tenant} already exists") from None

    async def update_tenant(self, tenant: str, info: dict[str, Any]) -> None:
        if await self.get_tenant(tenant) is None:
            raise NamespaceNotFoundError(f"Tenant {tenant} does not exist")
        await self.store.put(f"/admin/policies/{tenant}", values.pack(info))

    async def delete_tenant(self, tenant: str) -> None:
        if await self.get_tenant(tenant) is None:
            raise NamespaceNotFoundError(f"Tenant {tenant} does not exist")
        if await self.namespaces(tenant):
            raise ConflictError(f"Tenant {tenant} still has namespaces")
        await self.store.delete(f"/admin/policies/{tenant}")

    # -- namespaces ------------------------------------------------------------------------

    async def namespaces(self, tenant: str) -> list[str]:
        return [f"{tenant}/{n}" for n in await self._children(f"/admin/policies/{tenant}")]

    async def get_policies(self, ns: NamespaceName, validate: bool = True) -> dict[str, Any]:
        """The namespace's policies; with ``validate``, InvalidPoliciesError when a stored
        field is malformed (so lookups and topic loads fail for this namespace only)."""
        policies = await self._get(f"/admin/policies/{ns}")
        if policies is None:
            raise NamespaceNotFoundError(f"Namespace {ns} does not exist")
        return check_stored(ns, policies) if validate else policies

    async def namespace_exists(self, ns: NamespaceName) -> bool:
        return await self.store.exists(f"/admin/policies/{ns}") is not None

    async def create_namespace(self, ns: NamespaceName, policies: dict[str, Any] | None = None, exist_ok: bool = False) -> None:
        if await self.get_tenant(ns.tenant) is None:
            raise NamespaceNotFoundError(f"Tenant {ns.tenant} does not exist")
        merged = default_policies(self.num_bundles, self.cluster)
        if policies is not None:
            merged.update(parse_namespace_policies(policies))
        try:
            await self.store.create(f"/admin/policies/{ns}", values.pack(merged))
        except AlreadyExistsError:
            if not exist_ok:
                raise ConflictError(f"Namespace {ns} already exists") from None

    async def set_policy(self, ns: NamespaceName, key: str, value: Any) -> dict[str, Any]:
        return await self.update_policy(ns, key, lambda _old: value)

    async def update_policy(self, ns: NamespaceName, key: str, change: Callable[[Any], Any]) -> dict[str, Any]:
        """Set ``key`` to ``change(old value)`` with a version check (retried on a concurrent
        update), so two admins editing one nested policy (grants) never lose either edit."""
        while True:
            try:
                raw, stat = await self.store.get(f"/admin/policies/{ns}")
            except NotFoundError:
                raise NamespaceNotFoundError(f"Namespace {ns} does not exist") from None
            policies = values.unpack(raw)
            policies[key] = change(policies.get(key))
            try:
                await self.store.put(f"/admin/policies/{ns}", values.pack(policies), stat.version)
                return policies
            except BadVersionError:
                continue  # lost a concurrent update: read again

    async def delete_namespace(self, ns: NamespaceName, has_topics: bool) -> None:
        await self.get_policies(ns, validate=False)  # a namespace with broken policies can go
        if has_topics:
            raise ConflictError(f"Namespace {ns} still has topics")
        await self.store.delete_recursive(f"/admin/partitioned-topics/{ns}")
        await self.store.delete(f"/admin/policies/{ns}")

    # -- partitioned topics ----------------------------------------------------------------

    @staticmethod
    def partitioned_path(topic: TopicName) -> str:
        return f"/admin/partitioned-topics/{topic.tenant}/{topic.namespace}/{topic.domain}/{topic.encoded_local_name}"

    async def partitions(self, topic: TopicName) -> int:
        """Partition count of a partitioned topic, 0 if it is not partitioned."""
        if topic.partition_index >= 0:
            return 0
        meta = await self._get(self.partitioned_path(topic))
        return int(meta["partitions"]) if meta else 0

    async def create_partitioned(self, topic: TopicName, partitions: int) -> None:
        if partitions <= 0:
            raise PreconditionFailedError("The number of partitions must be more than 0")
        try:
            await self.store.create(self.partitioned_path(topic), values.pack({"partitions": partitions}), make_parents=True)
        except AlreadyExistsError:
            raise ConflictError(f"Partitioned topic {topic} already exists") from None

    async def update_partitioned(self, topic: TopicName, partitions: int) -> None:
        current = await self.partitions(topic)
        if current == 0:
            raise NamespaceNotFoundError(f"Partitioned topic {topic} does not exist")
        if partitions <= current:
            raise NotAllowedError("The number of partitions can only be increased")
        await self.store.put(self.partitioned_path(topic), values.pack({"partitions": partitions}))

    async def delete_partitioned(self, topic: TopicName) -> None:
        try:
            await self.store.delete(self.partitioned_path(topic))
        except NotFoundError:
            raise NamespaceNotFoundError(f"Partitioned topic {topic} does not exist") from None

    async def partitioned_topics(self, ns: NamespaceName) -> list[str]:
        names = await self._children(f"/admin/partitioned-topics/{ns}/persistent")
        return [f"persistent://{ns}/{unquote(n)}" for n in names]
