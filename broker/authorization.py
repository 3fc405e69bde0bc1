"""Authorization the Pulsar way: who may do what, declared once per admin route and per
protocol command, checked in one place.

Roles: ``superuser_roles`` may do everything; a tenant's ``adminRoles`` manage that tenant's
namespaces and topics (and may produce and consume there); other roles need a grant of
``produce`` / ``consume`` / ``functions`` / ``packages`` / ``sources`` / ``sinks`` on the
namespace or on the topic (stored in the namespace policies' ``auth_policies`` as Pulsar does:
``namespace_auth`` {role: [actions]}, ``destination_auth`` {topic: {role: [actions]}},
``subscription_auth_roles`` {subscription: [roles]}: a subscription with a role list may only be
consumed by those roles). With ``authorization_enabled`` off everything authenticated is
allowed. Every admin route (``broker.admin.ROUTE_TABLE``) and every protocol command
(``COMMAND_ACCESS``) names its ``Access``; something without a declaration is refused
(superuser only), and ``tests/security/test_access_declared.py`` fails on it.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Mapping

from broker.errors import NamespaceNotFoundError
from broker.names import NamespaceName, TopicName
from clients.protocol import pulsar_api_pb2 as pb
from quire.security.errors import AuthenticationError, AuthorizationError

if TYPE_CHECKING:
    from broker.namespaces import NamespaceResources

ACTIONS = ("produce", "consume", "functions", "packages", "sources", "sinks")


class Access(enum.Enum):
    """What a route or command needs (the scope comes from its tenant/namespace/topic)."""

    PUBLIC = "public"                # no credentials at all (nothing tenant-specific)
    METRICS = "metrics"              # public unless authenticate_metrics_endpoint
    AUTHENTICATED = "authenticated"  # any authenticated role
    SUPERUSER = "superuser"
    TENANT_ADMIN = "tenant_admin"    # superuser or one of the tenant's adminRoles
    NAMESPACE_READ = "namespace_read"  # tenant admin or a produce/consume grant on the namespace
    LOOKUP = "lookup"                # tenant admin or produce or consume on the topic
    PRODUCE = "produce"
    CONSUME = "consume"
    CONNECTION = "connection"        # protocol: part of the connection itself (PING, AUTH_RESPONSE)
    OPEN_HANDLE = "open_handle"      # protocol: acts on a producer/consumer authorized when created
    NOT_SERVED = "not_served"        # protocol: a broker-to-client command, refused from a client


T = pb.BaseCommand
# Every command type of the protocol and what a client needs to send it. A command missing here
# is refused at runtime; the route/command walk test fails until it is declared.
COMMAND_ACCESS: dict[int, Access] = {
    T.CONNECT: Access.CONNECTION, T.AUTH_RESPONSE: Access.CONNECTION, T.PING: Access.CONNECTION,
    T.PONG: Access.CONNECTION,
    T.LOOKUP: Access.LOOKUP, T.PARTITIONED_METADATA: Access.LOOKUP, T.GET_SCHEMA: Access.LOOKUP,
    T.GET_OR_CREATE_SCHEMA: Access.PRODUCE,
    T.PRODUCER: Access.PRODUCE, T.SUBSCRIBE: Access.CONSUME,
    T.GET_TOPICS_OF_NAMESPACE: Access.NAMESPACE_READ,
    T.SEND: Access.OPEN_HANDLE, T.FLOW: Access.OPEN_HANDLE, T.ACK: Access.OPEN_HANDLE,
    T.REDELIVER_UNACKNOWLEDGED_MESSAGES: Access.OPEN_HANDLE, T.CLOSE_PRODUCER: Access.OPEN_HANDLE,
    T.CLOSE_CONSUMER: Access.OPEN_HANDLE, T.UNSUBSCRIBE: Access.OPEN_HANDLE, T.SEEK: Access.OPEN_HANDLE,
    T.GET_LAST_MESSAGE_ID: Access.OPEN_HANDLE, T.CONSUMER_STATS: Access.OPEN_HANDLE,
    # Answers the broker sends, and features this broker does not serve (transactions, topic
    # watchers, ...): a client sending one gets no handler, whatever its role.
    **{getattr(T, name): Access.NOT_SERVED for name in (
        "CONNECTED", "SEND_RECEIPT", "SEND_ERROR", "MESSAGE", "SUCCESS", "ERROR", "PRODUCER_SUCCESS",
        "PARTITIONED_METADATA_RESPONSE", "LOOKUP_RESPONSE", "CONSUMER_STATS_RESPONSE",
        "REACHED_END_OF_TOPIC", "GET_LAST_MESSAGE_ID_RESPONSE", "ACTIVE_CONSUMER_CHANGE",
        "GET_TOPICS_OF_NAMESPACE_RESPONSE", "GET_SCHEMA_RESPONSE", "AUTH_CHALLENGE", "ACK_RESPONSE",
        "GET_OR_CREATE_SCHEMA_RESPONSE", "NEW_TXN", "NEW_TXN_RESPONSE", "ADD_PARTITION_TO_TXN",
        "ADD_PARTITION_TO_TXN_RESPONSE", "ADD_SUBSCRIPTION_TO_TXN", "ADD_SUBSCRIPTION_TO_TXN_RESPONSE",
        "END_TXN", "END_TXN_RESPONSE", "END_TXN_ON_PARTITION", "END_TXN_ON_PARTITION_RESPONSE",
        "END_TXN_ON_SUBSCRIPTION", "END_TXN_ON_SUBSCRIPTION_RESPONSE", "TC_CLIENT_CONNECT_REQUEST",
        "TC_CLIENT_CONNECT_RESPONSE", "WATCH_TOPIC_LIST", "WATCH_TOPIC_LIST_SUCCESS", "WATCH_TOPIC_UPDATE",
        "WATCH_TOPIC_LIST_CLOSE", "TOPIC_MIGRATED") if hasattr(T, name)},
}


def command_scope(command: pb.BaseCommand) -> tuple[str | None, str | None]:
    """(topic, namespace) a command names, for its access check."""
    t = command.type
    if t == T.GET_TOPICS_OF_NAMESPACE:
        return None, command.getTopicsOfNamespace.namespace
    sub = {T.LOOKUP: "lookupTopic", T.PARTITIONED_METADATA: "partitionMetadata", T.PRODUCER: "producer",
           T.SUBSCRIBE: "subscribe", T.GET_SCHEMA: "getSchema", T.GET_OR_CREATE_SCHEMA: "getOrCreateSchema"}.get(t)
    return (getattr(command, sub).topic, None) if sub else (None, None)


def parse_actions(body: Any) -> list[str]:
    """A grant body: a JSON list of Pulsar AuthAction names."""
    from broker.errors import BadRequestError
    if not isinstance(body, list) or not all(isinstance(a, str) for a in body):
        raise BadRequestError(f"permissions must be a list of actions ({', '.join(ACTIONS)})")
    bad = [a for a in body if a not in ACTIONS]
    if bad:
        raise BadRequestError(f"unknown action {bad[0][:40]!r} (one of {', '.join(ACTIONS)})")
    return sorted(set(body))


def _object(value: Any) -> dict[str, Any]:
    return value if isinstance(value, dict) else {}  # stored policies are not trusted blindly


def _strings(value: Any) -> set[str]:
    return {v for v in value if isinstance(v, str)} if isinstance(value, list) else set()


class Authorizer:
    """Decides one role's access to one scope; reads tenants and namespace policies."""

    def __init__(self, config: Any, namespaces: "NamespaceResources") -> None:
        self.enabled = bool(config.authorization_enabled)
        self.superusers = set(config.superuser_roles or [])
        self.proxy_roles = set(getattr(config, "proxy_roles", None) or [])
        self.authenticate_metrics = bool(getattr(config, "authenticate_metrics_endpoint", False))
        self.authentication_enabled = bool(config.authentication_enabled)
        self.namespaces = namespaces

    def needs_role(self, access: Access) -> bool:
        """Whether a request without credentials is refused before its check (401, not 403)."""
        if not self.authentication_enabled:
            return False
        if access is Access.PUBLIC or access is Access.NOT_SERVED:
            return False
        if access is Access.METRICS:
            return self.authenticate_metrics
        return True

    def acting_roles(self, role: str | None, original: str | None) -> list[str | None]:
        """The roles a request is authorized as, given the ``X-Original-Principal`` it carries
        (Pulsar's isValidOriginalPrincipal): a superuser (another broker forwarding a call) acts
        as the original principal; a ``proxy_roles`` role and the original principal must both be
        allowed; anyone else naming an original principal is refused (403), so a client cannot
        impersonate another. Without authentication (no role) the header means nothing."""
        if original is None or role is None:
            return [role]
        original = original.strip()
        if not original:
            raise AuthorizationError("an empty X-Original-Principal")
        if role in self.superusers:
            return [original]
        if role in self.proxy_roles:
            if original in self.proxy_roles:
                raise AuthorizationError(f"a proxy role cannot be the original principal ({original:.80})")
            return [role, original]
        raise AuthorizationError(f"{role:.80} may not act for another role (X-Original-Principal): "
                                 "not a superuser or one of the proxy_roles")

    async def check(self, role: str | None, access: Access | None, *, topic: str | TopicName | None = None,
                    namespace: str | NamespaceName | None = None, tenant: str | None = None,
                    subscription: str | None = None) -> None:
        """Return if ``role`` may do it; AuthorizationError (AuthenticationError without a role) if not."""
        if access in (Access.PUBLIC, Access.METRICS, Access.CONNECTION, Access.OPEN_HANDLE):
            return
        if access is Access.NOT_SERVED:
            raise AuthorizationError("this command is not served by the broker")
        if not self.enabled:
            return
        if role is None:
            raise AuthenticationError("authentication required")
        if role in self.superusers:
            return
        if access is None:
            raise AuthorizationError("no access rule is declared for this operation: superusers only")
        if access is Access.AUTHENTICATED:
            return
        if access is Access.SUPERUSER:
            raise AuthorizationError(f"{role:.80} is not a superuser")
        tn = TopicName.parse(str(topic)) if topic is not None else None
        ns = tn.namespace_name if tn is not None else (
            NamespaceName.parse(str(namespace)) if namespace is not None else None)
        tenant = ns.tenant if ns is not None else tenant
        if tenant is not None and await self._tenant_admin(role, tenant):
            return
        if access is Access.TENANT_ADMIN or ns is None:
            raise AuthorizationError(f"{role:.80} is not an admin of tenant {tenant}")
        try:
            policies = await self.namespaces.get_policies(ns, validate=False)
        except NamespaceNotFoundError:
            policies = {}  # refused like any ungranted namespace: whether it exists is no one's business
        auth = _object(policies.get("auth_policies"))
        granted = _strings(_object(auth.get("namespace_auth")).get(role))
        if access is Access.NAMESPACE_READ:
            if granted & {"produce", "consume"}:
                return
            raise AuthorizationError(f"{role:.80} has no produce or consume permission on namespace {ns}")
        assert tn is not None
        topics = _object(auth.get("destination_auth"))
        for name in {str(tn), str(tn.partitioned_topic_name)}:
            granted |= _strings(_object(topics.get(name)).get(role))
        if access is Access.PRODUCE and "produce" in granted:
            return
        if access is Access.CONSUME and "consume" in granted:
            roles = _strings(_object(auth.get("subscription_auth_roles")).get(subscription)) if subscription else None
            if roles and role not in roles:
                raise AuthorizationError(f"{role:.80} may not consume subscription {subscription:.80}")
            return
        if access is Access.LOOKUP and granted & {"produce", "consume", "functions"}:
            return
        raise AuthorizationError(f"{role:.80} is not authorized to {access.value} on {tn}")

    async def _tenant_admin(self, role: str, tenant: str) -> bool:
        info = await self.namespaces.get_tenant(tenant)
        return info is not None and role in (info.get("adminRoles") or [])

    async def check_path(self, role: str | None, access: Access | None, params: Mapping[str, Any]) -> None:
        """The check for an admin route, scoped by its path parameters."""
        topic = namespace = None
        if "tenant" in params and "namespace" in params:
            namespace = f"{params['tenant']}/{params['namespace']}"
            if "topic" in params:
                topic = f"{params.get('domain', 'persistent')}://{namespace}/{params['topic']}"
        await self.check(role, access, topic=topic, namespace=namespace, tenant=params.get("tenant"),
                         subscription=params.get("subscription"))
