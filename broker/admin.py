"""Admin REST API (Pulsar's ``/admin/v2`` paths and JSON shapes), lookup and ``/metrics``.

A starlette app served by hypercorn on trio inside the broker process. Errors are JSON
``{"reason": ...}`` with Pulsar's status codes: 400/412 for bad input (every body and query
value goes through ``broker.policies``; a path name the metadata store cannot hold is 412),
413 for a body above ``http_max_request_size``, 404 for unknown resources, 409 for conflicts,
307 to the owner for a topic this broker does not serve. An unexpected exception answers 500
naming its type (its text, which may hold paths, goes to the log once); the server keeps serving.
With authentication on, ``Authorization: Bearer <token>`` or ``Basic`` identifies the caller
(401 otherwise) and each route's declared ``Access`` (``ROUTE_TABLE``) decides (403). A call
this broker passes on to another (a partition's owner, a bundle's owner) goes as this broker
(broker.broker_client) naming the caller in ``X-Original-Principal``, which the other broker
authorizes; that header from a role that is not a superuser or a proxy role answers 403.
"""

from __future__ import annotations

import json
import logging
from urllib.parse import quote
from typing import TYPE_CHECKING, Any, Awaitable, Callable, Mapping

import trio
from hypercorn.trio import serve
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, RedirectResponse, Response
from starlette.routing import Route

from broker.authorization import Access, parse_actions
from broker.broker_client import ORIGINAL_PRINCIPAL, BrokerClient
from broker.errors import (
    BadRequestError,
    ConflictError,
    BrokerError,
    NamespaceNotFoundError,
    PreconditionFailedError,
    TopicNotFoundError,
)
from quire.asgi_tls import TlsConfig, install_tls_scope, peer_cert
from quire.http_guard import guard_connections
from broker.names import NamespaceName, TopicName
from broker.ownership import bundles
from broker.schemas import schema_type_name
from broker.policies import (
    INT64_MAX,
    describe,
    int_field,
    object_field,
    parse_auto_topic_creation,
    parse_backlog_quota,
    parse_backlog_quota_type,
    parse_deduplication,
    parse_message_id,
    parse_message_ttl,
    parse_num_partitions,
    parse_persistence,
    parse_retention,
    query_flag,
    string_list_field,
)
from broker.topic import EARLIEST, LATEST, PersistentTopic
from managed_ledger import Position
from managed_ledger.errors import ManagedLedgerError
from metadata.errors import InvalidPathError, MetadataError, StoreUnavailableError
from metadata.paths import validate_path
from quire.config import naming_the_port
from quire.security.errors import SecurityError
from quire.security.tls import ServerTls

if TYPE_CHECKING:
    from broker.service import BrokerService

log = logging.getLogger(__name__)

Handler = Callable[[Request], Awaitable[Response]]


def _error(status: int, reason: str) -> JSONResponse:
    return JSONResponse({"reason": reason}, status_code=status)


def _to_owner(request: Request, owner: Mapping[str, Any], query: str | None = None) -> Response:
    """307 to the owner broker's admin URL. An HTTPS request goes on over HTTPS (Pulsar keeps
    the scheme), so its credentials are not downgraded to plain HTTP."""
    base = owner.get("httpUrlTls") if request.url.scheme == "https" else None
    url = (base or owner["httpUrl"]).rstrip("/") + request.url.path
    query = request.url.query if query is None else query
    return RedirectResponse(url + ("?" + query if query else ""), status_code=307)


class RequestTooLargeError(BrokerError):
    """A request body above ``http_max_request_size`` (HTTP 413)."""

    http_status = 413


class BodyLimit:
    """ASGI middleware capping request bodies at ``max_bytes`` (<= 0: no cap): a declared
    Content-Length above it answers 413 before any byte of the body is read, and a chunked
    body that grows past it fails the read (the route answers 413), so no route ever holds
    more than ``max_bytes`` of one request."""

    def __init__(self, app: Any, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http" or self.max_bytes <= 0:
            await self.app(scope, receive, send)
            return
        declared = dict(scope.get("headers") or []).get(b"content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > self.max_bytes):
            await _error(413, self._reason())(scope, receive, send)
            return
        seen = 0

        async def limited() -> Any:
            nonlocal seen
            message = await receive()
            if message["type"] == "http.request":
                seen += len(message.get("body", b""))
                if seen > self.max_bytes:
                    raise RequestTooLargeError(self._reason())
            return message

        await self.app(scope, limited, send)

    def _reason(self) -> str:
        return f"request body larger than http_max_request_size ({self.max_bytes} bytes)"


def _wrap(fn: Callable[["AdminApi", Request], Awaitable[Any]]) -> Callable[["AdminApi", "RouteAccess"], Handler]:
    def bind(api: "AdminApi", access: "RouteAccess") -> Handler:
        async def handler(request: Request) -> Response:
            if not api.service.ready:
                return _error(503, "the broker is starting")
            need = _access_of(access, request.method)
            try:
                role = await api.authenticate(request, need)
                roles = api.service.authz.acting_roles(role, request.headers.get(ORIGINAL_PRINCIPAL))
            except SecurityError as exc:
                return _error(exc.http_status, str(exc))
            request.state.principal = roles[-1]  # the caller a forwarded request names (broker_client)
            bad = _bad_path_param(request)
            if bad is not None:
                return _error(412, bad)
            try:
                for acting in roles:
                    await api.service.authz.check_path(acting, need, request.path_params)
                result = await fn(api, request)
            except SecurityError as exc:
                return _error(exc.http_status, str(exc))
            except BrokerError as exc:
                return _error(exc.http_status, str(exc))
            except ClientDisconnect:  # the client left before sending its whole body
                return _error(400, "the client disconnected before sending its body")
            except MetadataError as exc:
                if isinstance(exc, InvalidPathError):  # a name the store cannot hold ('..', '.')
                    return _error(412, f"invalid name: {exc}")
                # The store's text can name files on this host: it goes to the log, not the caller.
                log.warning("admin %s %s: metadata store error: %s", request.method, request.url.path, exc)
                return _error(503 if isinstance(exc, StoreUnavailableError) else 500,
                              f"metadata store error: {type(exc).__name__}")
            except ManagedLedgerError as exc:
                return _error(500, f"managed ledger error: {exc}")
            except (ValueError, KeyError) as exc:
                return _error(400, f"bad request: {exc}")
            except Exception as exc:
                # A bug, not bad input: answer (the server keeps serving) and log it once. The
                # answer names the exception type only: its text may hold paths or internals.
                log.exception("admin %s %s failed", request.method, request.url.path)
                return _error(500, f"internal error: {type(exc).__name__}")
            if isinstance(result, Response):
                return result
            if result is None:
                return Response(status_code=204)
            return JSONResponse(result)
        return handler
    return bind


# What each method of a route needs: {"GET": Access.LOOKUP, "PUT": Access.TENANT_ADMIN}. A
# route still declared as a plain list of methods has no rule: superusers only (and the
# route-table test fails until it gets one).
RouteAccess = Mapping[str, Access] | list[str]


def _access_of(access: RouteAccess, method: str) -> Access | None:
    if not isinstance(access, Mapping):
        return None
    return access.get(method) or (access.get("GET") if method == "HEAD" else None)


def _bad_path_param(request: Request) -> str | None:
    """Why a path parameter cannot name anything (it would not be a valid metadata node
    name: '.', '..', control characters), or None. Checked before any handler runs."""
    for key, value in request.path_params.items():
        if isinstance(value, str):
            try:
                validate_path("/" + value)
            except InvalidPathError:
                return f"invalid {key} name: {describe(value)}"
    return None


async def _body(request: Request, default: Any = None) -> Any:
    raw = await request.body()
    if not raw.strip():
        return default
    try:
        return json.loads(raw)
    except (ValueError, RecursionError) as exc:  # also bad UTF-8, too many digits, deep nesting
        raise BadRequestError(f"the body is not valid JSON: {exc}") from None


def _flag(request: Request, name: str) -> bool:
    return query_flag(name, request.query_params.get(name))


class AdminApi:
    def __init__(self, service: "BrokerService") -> None:
        self.service = service
        self.ns = service.namespaces

    # -- helpers ---------------------------------------------------------------------------

    async def authenticate(self, request: Request, access: Access | None) -> str | None:
        """The caller's role from ``Authorization: Bearer|Basic``, else the CN of a verified HTTPS
        client certificate (with the ``tls`` provider), else the anonymous role; None
        when authentication is off or the route needs none. AuthenticationError: 401."""
        authn = self.service.authn
        if not authn.enabled or (access is not None and not self.service.authz.needs_role(access)):
            return None
        method = "none"
        cert = peer_cert(request.scope)  # verified by the HTTPS handshake (role = CN), else None
        try:
            method, data = authn.http_credentials(request.headers.get("authorization"))
            provider = authn.provider(method)
            if provider is None:
                if cert and "tls" in authn.providers:
                    method = "tls"
                result = authn.anonymous(cert)
            elif provider.blocking:
                result = await trio.to_thread.run_sync(provider.authenticate, data, cert,
                                                       limiter=self.service.auth_limiter)
            else:
                result = provider.authenticate(data, cert)
        except SecurityError as exc:
            self.service.metrics.authentication_failed(method, str(exc))
            raise
        self.service.metrics.authenticated(result.method)
        return result.role

    def _namespace(self, request: Request) -> NamespaceName:
        p = request.path_params
        return NamespaceName.parse(f"{p['tenant']}/{p['namespace']}")

    def _topic(self, request: Request) -> TopicName:
        p = request.path_params
        domain = p.get("domain", "persistent")
        return TopicName.parse(f"{domain}://{p['tenant']}/{p['namespace']}/{p['topic']}")

    async def _owner_redirect(self, request: Request, name: TopicName) -> Response | None:
        policies = await self.ns.get_policies(name.namespace_name)
        own = self.service.ownership
        assert own is not None
        owner = await own.owner(name, policies["bundles"]["boundaries"])
        if own.is_mine(owner) or owner is None:
            return None
        return _to_owner(request, owner)

    async def _loaded(self, name: TopicName) -> PersistentTopic:
        return await self.service.get_topic(name, create=False)

    async def _foreign_owner(self, name: TopicName) -> dict[str, Any] | None:
        """The owner's data when another broker serves ``name`` (None: this broker does)."""
        policies = await self.ns.get_policies(name.namespace_name)
        own = self.service.ownership
        assert own is not None
        owner = await own.owner(name, policies["bundles"]["boundaries"])
        return None if owner is None or own.is_mine(owner) else owner

    async def _for_each(
        self, request: Request, name: TopicName, local: Callable[[TopicName], Awaitable[Any]],
        *, targets: list[TopicName] | None = None, method: str | None = None, suffix: str | None = None,
        tolerate: tuple[int, ...] = (), content: bytes | None = None,
    ) -> Response | list[Any]:
        """Run ``local`` on the topic or on each of its partitions. A non-partitioned topic of
        another broker answers 307 to its owner (as Pulsar does); a partition of another broker
        gets the request forwarded to its owner, so partitioned operations span brokers."""
        n = await self.ns.partitions(name)
        if not n and targets is None:
            redirect = await self._owner_redirect(request, name)
            return redirect if redirect is not None else [await local(name)]
        out: list[Any] = []
        client = self.service.broker_client
        async with client.http() as http:
            for p in targets if targets is not None else [name.partition(i) for i in range(n)]:
                owner = await self._foreign_owner(p)
                if owner is None:
                    out.append(await local(p))
                else:
                    out.append(await _forward(client, http, request, owner, p, method, suffix, tolerate, content))
        return out

    # -- clusters, tenants -----------------------------------------------------------------

    @_wrap
    async def clusters(self, request: Request) -> Any:
        return await self.ns.clusters()

    @_wrap
    async def cluster(self, request: Request) -> Any:
        name = request.path_params["cluster"]
        if request.method == "GET":
            data = await self.ns.get_cluster(name)
            if data is None:
                raise NamespaceNotFoundError(f"Cluster {name} does not exist")
            return data
        if request.method == "PUT":
            await self.ns.create_cluster(name, _cluster_data(await _body(request, {})))
        elif request.method == "POST":
            await self.ns.update_cluster(name, _cluster_data(await _body(request, {})))
        else:
            await self.ns.delete_cluster(name)
        return None

    @_wrap
    async def tenants(self, request: Request) -> Any:
        return await self.ns.tenants()

    @_wrap
    async def tenant(self, request: Request) -> Any:
        tenant = request.path_params["tenant"]
        if request.method == "GET":
            info = await self.ns.get_tenant(tenant)
            if info is None:
                raise NamespaceNotFoundError(f"Tenant {tenant} does not exist")
            return info
        if request.method == "PUT":
            body = _tenant_info(await _body(request, {}))
            known = await self.ns.clusters()
            for c in body.get("allowedClusters") or []:
                if c not in known:
                    raise PreconditionFailedError(f"Cluster {c} does not exist")
            await self.ns.create_tenant(tenant, body)
        elif request.method == "POST":
            await self.ns.update_tenant(tenant, _tenant_info(await _body(request, {})))
        else:
            await self.ns.delete_tenant(tenant)
        return None

    # -- namespaces ------------------------------------------------------------------------

    @_wrap
    async def namespaces(self, request: Request) -> Any:
        tenant = request.path_params["tenant"]
        if await self.ns.get_tenant(tenant) is None:
            raise NamespaceNotFoundError(f"Tenant {tenant} does not exist")
        return await self.ns.namespaces(tenant)

    @_wrap
    async def namespace(self, request: Request) -> Any:
        ns = self._namespace(request)
        if request.method == "GET":
            return await self.ns.get_policies(ns, validate=False)  # as stored, even if broken
        if request.method == "PUT":
            await self.ns.create_namespace(ns, await _body(request, None))
            return None
        topics = await self.service.list_topics(ns)
        partitioned = await self.ns.partitioned_topics(ns)
        if (topics or partitioned) and not _flag(request, "force"):
            raise ConflictError(f"Namespace {ns} still has topics")
        for t in topics:
            await self.service.delete_topic(TopicName.parse(t), force=True)
        await self.ns.delete_namespace(ns, has_topics=False)
        return None

    @_wrap
    async def namespace_topics(self, request: Request) -> Any:
        return await self.service.list_topics(self._namespace(request))

    async def _policy(self, request: Request, key: str, parse: Callable[[Any], Any]) -> Any:
        ns = self._namespace(request)
        if request.method == "GET":
            return (await self.ns.get_policies(ns)).get(key)
        value = None if request.method == "DELETE" else parse(await _body(request))
        await self.ns.set_policy(ns, key, value)
        await self.service.on_policies_changed(ns)
        return None

    @_wrap
    async def persistence(self, request: Request) -> Any:
        return await self._policy(request, "persistence", parse_persistence)

    @_wrap
    async def backlog_quota_map(self, request: Request) -> Any:
        return (await self.ns.get_policies(self._namespace(request))).get("backlog_quota_map") or {}

    @_wrap
    async def backlog_quota(self, request: Request) -> Any:
        """POST (set) / DELETE (remove) one quota type (``?backlogQuotaType=``, default
        destination_storage), as pulsar-admin namespaces set-backlog-quota does."""
        ns = self._namespace(request)
        kind = parse_backlog_quota_type(request.query_params.get("backlogQuotaType"))
        quota = None if request.method == "DELETE" else parse_backlog_quota(await _body(request))
        quotas = dict((await self.ns.get_policies(ns)).get("backlog_quota_map") or {})
        if quota is None:
            quotas.pop(kind, None)
        else:
            quotas[kind] = quota
        await self.ns.set_policy(ns, "backlog_quota_map", quotas or None)
        await self.service.on_policies_changed(ns)
        return None

    @_wrap
    async def retention(self, request: Request) -> Any:
        return await self._policy(request, "retention_policies", parse_retention)

    @_wrap
    async def deduplication(self, request: Request) -> Any:
        return await self._policy(request, "deduplicationEnabled", parse_deduplication)

    @_wrap
    async def message_ttl(self, request: Request) -> Any:
        return await self._policy(request, "message_ttl_in_seconds", parse_message_ttl)

    @_wrap
    async def auto_topic_creation(self, request: Request) -> Any:
        max_parts = self.service.config.max_num_partitions_per_partitioned_topic
        return await self._policy(request, "autoTopicCreationOverride",
                                  lambda body: parse_auto_topic_creation(body, max_parts))

    @_wrap
    async def unload_namespace(self, request: Request) -> Any:
        """Unload every bundle of the namespace, each on the broker that owns it."""
        ns = self._namespace(request)
        policies = await self.ns.get_policies(ns)
        own = self.service.ownership
        assert own is not None
        client = self.service.broker_client
        async with client.http() as http:
            for bundle in bundles(policies["bundles"]["boundaries"]):
                owner = await own.bundle_owner(ns, bundle)
                if owner is None:
                    continue
                if own.is_mine(owner):
                    await self.service.unload_bundle(ns, bundle)
                    continue
                r = await http.put(f"{client.base_url(owner)}/admin/v2/namespaces/{ns}/{bundle}/unload",
                                   headers=_forwarded_headers(client, request))
                if r.status_code >= 400 and r.status_code != 404:
                    raise ForwardedError(r.status_code, f"unloading {ns}/{bundle}: {r.text}")
        return None

    async def _bundle(self, request: Request) -> tuple[NamespaceName, str]:
        """The namespace and bundle of the path; 404 for a bundle the namespace does not have."""
        ns = self._namespace(request)
        bundle = request.path_params["bundle"]
        policies = await self.ns.get_policies(ns)
        if bundle not in bundles(policies["bundles"]["boundaries"]):
            raise NamespaceNotFoundError(f"Bundle {ns}/{bundle} does not exist")
        return ns, bundle

    @_wrap
    async def unload_bundle(self, request: Request) -> Any:
        ns, bundle = await self._bundle(request)
        own = self.service.ownership
        assert own is not None
        owner = await own.bundle_owner(ns, bundle)
        if owner is None:
            return None  # nobody serves it: nothing to unload
        if not own.is_mine(owner):
            return _to_owner(request, owner)
        await self.service.unload_bundle(ns, bundle)
        return None

    # -- permissions (grants live in the namespace policies' auth_policies) ----------------

    async def _grant(self, ns: NamespaceName, change: Callable[[dict[str, Any]], None]) -> None:
        def apply(old: Any) -> dict[str, Any]:
            auth = {k: dict(v) if isinstance(v, dict) else {} for k, v in (old or {}).items()} \
                if isinstance(old, dict) else {}
            for key in ("namespace_auth", "destination_auth", "subscription_auth_roles"):
                auth.setdefault(key, {})
            change(auth)
            return auth
        await self.ns.update_policy(ns, "auth_policies", apply)

    async def _auth_policies(self, ns: NamespaceName) -> dict[str, Any]:
        auth = (await self.ns.get_policies(ns, validate=False)).get("auth_policies")
        return auth if isinstance(auth, dict) else {}

    @_wrap
    async def namespace_permissions(self, request: Request) -> Any:
        return (await self._auth_policies(self._namespace(request))).get("namespace_auth") or {}

    @_wrap
    async def namespace_permission(self, request: Request) -> Any:
        ns, role = self._namespace(request), request.path_params["role"]
        if request.method == "POST":
            actions = parse_actions(await _body(request))
            await self._grant(ns, lambda auth: auth["namespace_auth"].__setitem__(role, actions))
        else:
            await self._grant(ns, lambda auth: auth["namespace_auth"].pop(role, None))
        return None

    @_wrap
    async def subscription_permissions(self, request: Request) -> Any:
        return (await self._auth_policies(self._namespace(request))).get("subscription_auth_roles") or {}

    @_wrap
    async def subscription_permission(self, request: Request) -> Any:
        """POST a list of roles: only they may consume the subscription (on top of consume)."""
        ns, sub = self._namespace(request), request.path_params["subscription"]
        roles = string_list_field("roles", await _body(request))
        await self._grant(ns, lambda auth: auth["subscription_auth_roles"].__setitem__(sub, sorted(set(roles))))
        return None

    @_wrap
    async def subscription_permission_revoke(self, request: Request) -> Any:
        ns, sub, role = self._namespace(request), request.path_params["subscription"], request.path_params["role"]

        def revoke(auth: dict[str, Any]) -> None:
            roles = [r for r in auth["subscription_auth_roles"].get(sub) or [] if r != role]
            if roles:
                auth["subscription_auth_roles"][sub] = roles
            else:
                auth["subscription_auth_roles"].pop(sub, None)
        await self._grant(ns, revoke)
        return None

    @_wrap
    async def topic_permissions(self, request: Request) -> Any:
        """The roles' actions on the topic: namespace grants merged with the topic's own."""
        name = self._topic(request)
        auth = await self._auth_policies(name.namespace_name)
        out: dict[str, list[str]] = {r: list(a) for r, a in (auth.get("namespace_auth") or {}).items()}
        for role, actions in ((auth.get("destination_auth") or {}).get(str(name)) or {}).items():
            out[role] = sorted(set(out.get(role, [])) | set(actions))
        return out

    @_wrap
    async def topic_permission(self, request: Request) -> Any:
        name, role = self._topic(request), request.path_params["role"]
        topic = str(name)
        if request.method == "POST":
            actions = parse_actions(await _body(request))
            await self._grant(name.namespace_name,
                              lambda auth: auth["destination_auth"].setdefault(topic, {}).__setitem__(role, actions))
        else:
            def revoke(auth: dict[str, Any]) -> None:
                grants = auth["destination_auth"].get(topic) or {}
                grants.pop(role, None)
                if grants:
                    auth["destination_auth"][topic] = grants
                else:
                    auth["destination_auth"].pop(topic, None)
            await self._grant(name.namespace_name, revoke)
        return None

    # -- load manager: bundles, split, load report -----------------------------------------

    @_wrap
    async def namespace_bundles(self, request: Request) -> Any:
        """BundlesData: ``{"boundaries": [...], "numBundles": n}``."""
        policies = await self.ns.get_policies(self._namespace(request))
        return {"boundaries": policies["bundles"]["boundaries"], "numBundles": len(policies["bundles"]["boundaries"]) - 1}

    @_wrap
    async def split_bundle(self, request: Request) -> Any:
        """Split a bundle at its midpoint on its owner (307 there; an unowned bundle is
        acquired here first); ``unload=true`` unloads the halves so lookups place them."""
        ns, bundle = await self._bundle(request)
        own = self.service.ownership
        assert own is not None
        path = own.bundle_path(ns, bundle)
        if path not in own.owned:
            owner = await own.bundle_owner_or_acquire(ns, bundle)
            if not own.is_mine(owner):
                assert owner is not None
                return _to_owner(request, owner)
        await self.service.load_manager.split(ns, bundle, unload=_flag(request, "unload"))
        return None

    @_wrap
    async def load_report(self, request: Request) -> Any:
        """This broker's load report (LocalBrokerData), fresh."""
        return await self.service.load_manager.local_report()

    # -- topics ----------------------------------------------------------------------------

    @_wrap
    async def topics(self, request: Request) -> Any:
        return await self.service.list_topics(self._namespace(request))

    @_wrap
    async def partitioned_topics(self, request: Request) -> Any:
        ns = self._namespace(request)
        await self.ns.get_policies(ns)
        return await self.ns.partitioned_topics(ns)

    @_wrap
    async def topic(self, request: Request) -> Any:
        name = self._topic(request)
        # A partitioned topic is metadata any broker handles; a plain topic belongs to its owner.
        redirect = None if await self.ns.partitions(name) else await self._owner_redirect(request, name)
        if redirect is not None:
            return redirect
        if request.method == "PUT":
            await self.ns.get_policies(name.namespace_name)
            if await self.ns.partitions(name) or await self.service.topic_exists(name):
                raise ConflictError(f"Topic {name} already exists")
            await self.service.get_topic(name, create=True)
            return None
        if request.method == "POST":  # create missing partitions
            n = await self.ns.partitions(name)
            if not n:
                raise TopicNotFoundError(f"Partitioned topic {name} does not exist")

            async def create(p: TopicName) -> None:
                await self.service.get_topic(p, create=True)
            result = await self._for_each(request, name, create, method="PUT", suffix="", tolerate=(409,))
            return result if isinstance(result, Response) else None
        # DELETE
        if await self.ns.partitions(name):
            raise PreconditionFailedError(f"{name} is a partitioned topic: delete its partitions endpoint")
        await self.service.delete_topic(name, force=_flag(request, "force"))
        return None

    @_wrap
    async def partitions(self, request: Request) -> Any:
        name = self._topic(request)
        if request.method == "GET":
            await self.ns.get_policies(name.namespace_name)
            return {"partitions": await self.ns.partitions(name)}
        if request.method == "DELETE":
            n = await self.ns.partitions(name)
            if not n:
                raise TopicNotFoundError(f"Partitioned topic {name} does not exist")

            async def delete(p: TopicName) -> None:
                if await self.service.topic_exists(p):
                    await self.service.delete_topic(p, force=_flag(request, "force"))
            await self._for_each(request, name, delete, suffix="", tolerate=(404,))
            await self.ns.delete_partitioned(name)
            await self.service.schemas.delete(name)
            return None
        body = await _body(request)
        if isinstance(body, dict):
            body = body.get("partitions")
        body = parse_num_partitions(body, self.service.config.max_num_partitions_per_partitioned_topic)
        if request.method == "PUT":
            await self.ns.get_policies(name.namespace_name)
            if await self.service.topic_exists(name):
                raise ConflictError(f"Non-partitioned topic {name} already exists")
            await self.ns.create_partitioned(name, body)
        else:
            old = await self.ns.partitions(name)
            await self.ns.update_partitioned(name, body)
            await self._extend_subscriptions(request, name, old, body)
        return None

    async def _extend_subscriptions(self, request: Request, name: TopicName, old: int, new: int) -> None:
        """New partitions get the durable subscriptions the existing ones have (as Pulsar
        does), so consumers of the partitioned topic see no gap."""
        async def names(p: TopicName) -> list[str]:
            if not await self.service.topic_exists(p):
                return []
            return [n for n, s in (await self._loaded(p)).subscriptions.items() if s.durable]
        found = await self._for_each(request, name, names, targets=[name.partition(i) for i in range(old)],
                                     method="GET", suffix="/subscriptions", tolerate=(404,))
        assert not isinstance(found, Response)  # explicit targets: answered here, never redirected
        subs = sorted({n for part in found or [] for n in part or []})
        fresh = [name.partition(i) for i in range(old, new)]
        for sub in subs:
            async def create(p: TopicName, sub: str = sub) -> None:
                topic = await self.service.get_topic(p, create=True)
                if sub not in topic.subscriptions:
                    await topic.create_subscription(sub, EARLIEST)
            await self._for_each(request, name, create, targets=fresh, method="PUT",
                                 suffix=f"/subscription/{quote(sub, safe='')}", tolerate=(409,),
                                 content=b'{"ledgerId": -1, "entryId": -1}')
        # partitions without subscriptions exist too (a producer may use them at once)
        async def touch(p: TopicName) -> None:
            await self.service.get_topic(p, create=True)
        await self._for_each(request, name, touch, targets=fresh, method="PUT", suffix="", tolerate=(409,),
                             content=b"")

    @_wrap
    async def stats(self, request: Request) -> Any:
        name = self._topic(request)
        redirect = await self._owner_redirect(request, name)
        return redirect or (await self._loaded(name)).stats()

    @_wrap
    async def internal_stats(self, request: Request) -> Any:
        name = self._topic(request)
        redirect = await self._owner_redirect(request, name)
        return redirect or (await self._loaded(name)).internal_stats()

    @_wrap
    async def partitioned_stats(self, request: Request) -> Any:
        name = self._topic(request)
        n = await self.ns.partitions(name)
        if not n:
            raise TopicNotFoundError(f"Partitioned topic {name} does not exist")

        async def stats(p: TopicName) -> Any:
            return (await self._loaded(p)).stats() if await self.service.topic_exists(p) else None
        results = await self._for_each(request, name, stats, method="GET", suffix="/stats", tolerate=(404,))
        assert isinstance(results, list)
        per = {str(name.partition(i)): st for i, st in enumerate(results) if st is not None}
        agg: dict[str, Any] = {"metadata": {"partitions": n}, "partitions": per if _flag(request, "perPartition") else {}}
        for key in ("msgRateIn", "msgThroughputIn", "msgRateOut", "msgThroughputOut", "bytesInCounter",
                    "msgInCounter", "bytesOutCounter", "msgOutCounter", "storageSize", "backlogSize"):
            agg[key] = sum(s.get(key, 0) for s in per.values())
        agg["publishers"] = [pub for s in per.values() for pub in s["publishers"]]
        subs: dict[str, Any] = {}
        for s in per.values():
            for sname, sstats in s["subscriptions"].items():
                cur = subs.setdefault(sname, {"msgBacklog": 0, "unackedMessages": 0, "msgOutCounter": 0,
                                              "type": sstats["type"], "consumers": []})
                cur["msgBacklog"] += sstats["msgBacklog"]
                cur["unackedMessages"] += sstats["unackedMessages"]
                cur["msgOutCounter"] += sstats["msgOutCounter"]
                cur["consumers"] += sstats["consumers"]
        agg["subscriptions"] = subs
        return agg

    @_wrap
    async def unload_topic(self, request: Request) -> Any:
        name = self._topic(request)
        result = await self._for_each(request, name, self.service.unload_topic, suffix="/unload")
        return result if isinstance(result, Response) else None

    @_wrap
    async def last_message_id(self, request: Request) -> Any:
        name = self._topic(request)
        redirect = await self._owner_redirect(request, name)
        if redirect is not None:
            return redirect
        topic = await self._loaded(name)
        last, batch_index = await topic.last_message_id()
        return {"ledgerId": last.ledger_id, "entryId": last.entry_id, "partitionIndex": topic.name.partition_index,
                "batchIndex": batch_index}

    @_wrap
    async def schema(self, request: Request) -> Any:
        """The topic's latest schema as Pulsar's GetSchemaResponse (any broker answers: the
        registry is in the metadata store)."""
        p = request.path_params
        name = TopicName.parse(f"persistent://{p['tenant']}/{p['namespace']}/{p['topic']}")
        entry = await self.service.schemas.get(name)
        if entry is None:
            return _error(404, "Schema not found")
        data = entry["data"]
        return {"version": entry["version"], "type": schema_type_name(entry["type"]),
                "timestamp": entry.get("timestamp", 0),
                "data": data.decode("utf-8", errors="replace") if isinstance(data, bytes) else data,
                "properties": dict(entry.get("properties") or {})}

    # -- subscriptions ---------------------------------------------------------------------

    @_wrap
    async def subscriptions(self, request: Request) -> Any:
        name = self._topic(request)

        async def names(t: TopicName) -> list[str]:
            if t != name and not await self.service.topic_exists(t):
                return []  # a partition nobody used yet
            return [n for n, s in (await self._loaded(t)).subscriptions.items() if s.durable]
        result = await self._for_each(request, name, names, suffix="/subscriptions", tolerate=(404,))
        if isinstance(result, Response):
            return result
        out: list[str] = []
        for part in result:
            out.extend(n for n in part or [] if n not in out)
        return out

    @staticmethod
    def _message_id(body: Any) -> Position:
        if body is None:
            return LATEST
        ledger_id, entry_id, _ = parse_message_id(body)
        pos = Position(ledger_id, entry_id)
        if pos.ledger_id < 0:
            return EARLIEST
        if pos.ledger_id >= LATEST.ledger_id:
            return LATEST
        return pos

    @_wrap
    async def subscription(self, request: Request) -> Any:
        name = self._topic(request)
        sub = request.path_params["subscription"]
        if request.method == "PUT":
            start = self._message_id(await _body(request, None))

            async def create(t: TopicName) -> None:
                topic = await self.service.get_topic(t, create=t.partition_index >= 0)  # partitions: on demand
                await topic.create_subscription(sub, start)
            result = await self._for_each(request, name, create)
        else:
            async def delete(t: TopicName) -> None:
                await (await self._loaded(t)).delete_subscription(sub, force=_flag(request, "force"))
            result = await self._for_each(request, name, delete)
        return result if isinstance(result, Response) else None

    @_wrap
    async def skip(self, request: Request) -> Any:
        name = self._topic(request)
        n = int_field("numMessages", request.path_params["n"], 0, INT64_MAX, precondition_below=0)
        result = await self._for_each(request, name, lambda t: self._sub_call(t, request, "skip", n))
        return result if isinstance(result, Response) else None

    @_wrap
    async def skip_all(self, request: Request) -> Any:
        name = self._topic(request)
        result = await self._for_each(request, name, lambda t: self._sub_call(t, request, "skip", -1))
        return result if isinstance(result, Response) else None

    @_wrap
    async def reset_cursor_time(self, request: Request) -> Any:
        name = self._topic(request)
        ts = int_field("timestamp", request.path_params["timestamp"], 0, INT64_MAX)
        result = await self._for_each(request, name, lambda t: self._sub_call(t, request, "reset", timestamp_ms=ts))
        return result if isinstance(result, Response) else None

    @_wrap
    async def reset_cursor_id(self, request: Request) -> Any:
        name = self._topic(request)
        body = await _body(request, None)
        if body is None:
            raise BadRequestError("resetcursor needs a message id body")
        pos = self._message_id(body)
        targets = None
        if await self.ns.partitions(name):
            _, _, idx = parse_message_id(body)
            if idx < 0:
                raise PreconditionFailedError("resetcursor by id on a partitioned topic needs partitionIndex")
            targets = [name.partition(idx)]
        result = await self._for_each(request, name, lambda t: self._sub_call(t, request, "reset", pos),
                                      targets=targets)
        return result if isinstance(result, Response) else None

    async def _sub_call(self, t: TopicName, request: Request, op: str, *args: Any, **kwargs: Any) -> None:
        sub = (await self._loaded(t)).subscription(request.path_params["subscription"])
        await getattr(sub, op)(*args, **kwargs)

    # -- lookup, health, metrics -----------------------------------------------------------

    @_wrap
    async def lookup(self, request: Request) -> Any:
        name = self._topic(request)
        owner = await self.service.lookup_owner(name, authoritative=_flag(request, "authoritative"))
        assert self.service.ownership is not None
        if owner is None or self.service.ownership.is_mine(owner):
            url, url_tls = self.service.service_url, self.service.service_url_tls
            http, http_tls = self.service.web_url, self.service.web_url_tls
        elif owner.get("assigned"):
            # The load manager placed the unowned bundle on another broker: that one acquires it.
            return _to_owner(request, owner, "authoritative=true")
        elif owner.get("leader"):
            return _to_owner(request, owner)  # the leader places it (the same lookup, not authoritative)
        else:
            url, url_tls = owner["nativeUrl"], owner.get("nativeUrlTls")
            http, http_tls = owner.get("httpUrl", ""), owner.get("httpUrlTls")
        return {"brokerUrl": url, "brokerUrlTls": url_tls or "", "httpUrl": http, "httpUrlTls": http_tls or "",
                "nativeUrl": url}

    @_wrap
    async def health(self, request: Request) -> Any:
        return Response("ok", media_type="text/plain")

    @_wrap
    async def metrics(self, request: Request) -> Any:
        return Response(self.service.metrics.render(), media_type="text/plain; version=0.0.4")

    @_wrap
    async def brokers(self, request: Request) -> Any:
        cluster = request.path_params["cluster"]
        if await self.ns.get_cluster(cluster) is None:
            raise NamespaceNotFoundError(f"Cluster {cluster} does not exist")
        # every live broker registers an ephemeral node (its session is its liveness)
        return sorted(await self.service.store.children("/loadbalance/brokers"))


_CLUSTER_URLS = ("serviceUrl", "serviceUrlTls", "brokerServiceUrl", "brokerServiceUrlTls")


def _cluster_data(body: Any) -> dict[str, Any]:
    """A ClusterData body: its URL fields (strings) and peerClusterNames; other fields are
    dropped, so nothing arbitrary reaches the metadata store."""
    data = object_field("cluster data", {} if body is None else body)
    out: dict[str, Any] = {}
    for key in _CLUSTER_URLS:
        if data.get(key) is not None:
            if not isinstance(data[key], str):
                raise BadRequestError(f"{key} must be a string, got {describe(data[key])}")
            out[key] = data[key]
    if data.get("peerClusterNames") is not None:
        out["peerClusterNames"] = string_list_field("peerClusterNames", data["peerClusterNames"])
    return out


def _tenant_info(body: Any) -> dict[str, Any]:
    """A TenantInfo body: ``adminRoles`` and ``allowedClusters`` lists of strings."""
    info = object_field("tenant info", {} if body is None else body)
    return {"adminRoles": string_list_field("adminRoles", info.get("adminRoles") or []),
            "allowedClusters": string_list_field("allowedClusters", info.get("allowedClusters") or [])}


class ForwardedError(BrokerError):
    """An error answered by the broker a partition's request was forwarded to."""

    def __init__(self, status: int, reason: str) -> None:
        super().__init__(reason)
        self.http_status = status


def _forwarded_headers(client: BrokerClient, request: Request) -> dict[str, str]:
    """Headers of a request passed on to another broker: this broker's credentials (the client's)
    naming the caller as the original principal, so the owner authorizes the same role."""
    return client.forwarded_headers(getattr(request.state, "principal", None), request.headers.get("authorization"))


async def _forward(client: BrokerClient, http: Any, request: Request, owner: dict[str, Any], partition: TopicName,
                   method: str | None, suffix: str | None, tolerate: tuple[int, ...], content: bytes | None = None) -> Any:
    """Send this request, for ``partition``, to the broker that owns it; its JSON answer."""
    parts = request.url.path.split("/")  # ['', 'admin', 'v2', domain, tenant, ns, topic, ...]
    rest = suffix if suffix is not None else ("/" + "/".join(parts[7:]) if len(parts) > 7 else "")
    url = f"{client.base_url(owner)}/admin/v2/{partition.rest_path}{rest}"
    r = await http.request(method or request.method, url, params=request.query_params,
                           content=await request.body() if content is None else content,
                           headers=_forwarded_headers(client, request))
    if r.status_code in tolerate:
        return None
    if 300 <= r.status_code < 400:  # the partition moved meanwhile: the caller may retry
        raise ForwardedError(503, f"{partition}: ownership changed during the request, retry")
    if r.status_code >= 400:
        try:
            reason = r.json().get("reason", r.text)
        except ValueError:
            reason = r.text
        raise ForwardedError(r.status_code, f"{partition}: {reason}")
    return r.json() if r.content else None


_NS = "/admin/v2/namespaces/{tenant}/{namespace}"
_TP = "/admin/v2/{domain:str}/{tenant}/{namespace}/{topic}"
_SUB = _TP + "/subscription/{subscription}"
SU, TA, NSR = Access.SUPERUSER, Access.TENANT_ADMIN, Access.NAMESPACE_READ
LOOKUP, CONSUME, ANY_ROLE = Access.LOOKUP, Access.CONSUME, Access.AUTHENTICATED
_POLICY = {"GET": TA, "POST": TA, "DELETE": TA}
# Load manager (broker/load_manager.py): bundles, split, load report. (The bundle unload
# route is older.) Kept as one block; spliced in before the topic routes, which would
# otherwise take /admin/v2/namespaces/... for a topic path.
LOAD_MANAGER_ROUTES: list[tuple[str, str, RouteAccess]] = [
    (_NS + "/bundles", "namespace_bundles", {"GET": TA}),
    (_NS + "/{bundle}/split", "split_bundle", {"PUT": SU}),
    ("/admin/v2/broker-stats/load-report", "load_report", {"GET": SU}),
]
# (path, AdminApi handler, {method: the Access it needs}): the whole admin surface. The fuzz
# test walks it; tests/security/test_access_declared.py fails on a route without a rule.
ROUTE_TABLE: list[tuple[str, str, RouteAccess]] = [
    ("/admin/v2/clusters", "clusters", {"GET": ANY_ROLE}),
    ("/admin/v2/clusters/{cluster}", "cluster", {"GET": ANY_ROLE, "PUT": SU, "POST": SU, "DELETE": SU}),
    ("/admin/v2/tenants", "tenants", {"GET": SU}),
    ("/admin/v2/tenants/{tenant}", "tenant", {"GET": TA, "PUT": SU, "POST": SU, "DELETE": SU}),
    ("/admin/v2/brokers/health", "health", {"GET": SU}),
    ("/admin/v2/brokers/{cluster}", "brokers", {"GET": SU}),
    ("/admin/v2/namespaces/{tenant}", "namespaces", {"GET": TA}),
    (_NS, "namespace", {"GET": TA, "PUT": TA, "DELETE": TA}),
    (_NS + "/topics", "namespace_topics", {"GET": NSR}),
    (_NS + "/retention", "retention", _POLICY),
    (_NS + "/deduplication", "deduplication", _POLICY),
    (_NS + "/messageTTL", "message_ttl", _POLICY),
    (_NS + "/persistence", "persistence", _POLICY),
    (_NS + "/backlogQuotaMap", "backlog_quota_map", {"GET": TA}),
    (_NS + "/backlogQuota", "backlog_quota", {"POST": TA, "DELETE": TA}),
    (_NS + "/autoTopicCreation", "auto_topic_creation", _POLICY),
    (_NS + "/permissions", "namespace_permissions", {"GET": TA}),
    (_NS + "/permissions/subscription", "subscription_permissions", {"GET": TA}),
    (_NS + "/permissions/subscription/{subscription}", "subscription_permission", {"POST": TA}),
    (_NS + "/permissions/{subscription}/subscription/{role}", "subscription_permission_revoke", {"DELETE": TA}),
    (_NS + "/permissions/{role}", "namespace_permission", {"POST": TA, "DELETE": TA}),
    (_NS + "/unload", "unload_namespace", {"PUT": SU}),
    (_NS + "/{bundle}/unload", "unload_bundle", {"PUT": SU}),
    *LOAD_MANAGER_ROUTES,
    ("/admin/v2/{domain:str}/{tenant}/{namespace}", "topics", {"GET": NSR}),
    ("/admin/v2/{domain:str}/{tenant}/{namespace}/partitioned", "partitioned_topics", {"GET": NSR}),
    (_TP, "topic", {"PUT": TA, "POST": TA, "DELETE": TA}),
    (_TP + "/partitions", "partitions", {"GET": LOOKUP, "PUT": TA, "POST": TA, "DELETE": TA}),
    (_TP + "/permissions", "topic_permissions", {"GET": TA}),
    (_TP + "/permissions/{role}", "topic_permission", {"POST": TA, "DELETE": TA}),
    (_TP + "/stats", "stats", {"GET": LOOKUP}),
    (_TP + "/internalStats", "internal_stats", {"GET": LOOKUP}),
    (_TP + "/partitioned-stats", "partitioned_stats", {"GET": LOOKUP}),
    (_TP + "/unload", "unload_topic", {"PUT": TA}),
    (_TP + "/lastMessageId", "last_message_id", {"GET": CONSUME}),
    (_TP + "/subscriptions", "subscriptions", {"GET": CONSUME}),
    (_SUB, "subscription", {"PUT": CONSUME, "DELETE": CONSUME}),
    (_SUB + "/skip/{n:int}", "skip", {"POST": CONSUME}),
    (_SUB + "/skip_all", "skip_all", {"POST": CONSUME}),
    (_SUB + "/resetcursor/{timestamp:int}", "reset_cursor_time", {"POST": CONSUME}),
    (_SUB + "/resetcursor", "reset_cursor_id", {"POST": CONSUME}),
    ("/admin/v2/schemas/{tenant}/{namespace}/{topic}/schema", "schema", {"GET": LOOKUP}),
    ("/lookup/v2/topic/{domain:str}/{tenant}/{namespace}/{topic}", "lookup", {"GET": LOOKUP}),
    ("/metrics", "metrics", {"GET": Access.METRICS}),
    ("/metrics/", "metrics", {"GET": Access.METRICS}),
]


def build_app(service: "BrokerService") -> Starlette:
    api = AdminApi(service)
    routes = [Route(path, getattr(api, handler)(access), methods=list(access))
              for path, handler, access in ROUTE_TABLE]
    from broker.admin_ops import OPS_ROUTES  # operator routes, kept in their own module

    routes += [Route(path, handler(api, access), methods=list(access)) for path, handler, access in OPS_ROUTES]
    app = Starlette(routes=routes, exception_handlers={HTTPException: _http_error, Exception: _internal_error})
    return BodyLimit(app, service.config.http_max_request_size)  # type: ignore[return-value]


async def _http_error(request: Request, exc: Exception) -> Response:
    # Unknown paths (404) and methods (405) answer in the same JSON shape as every other error.
    assert isinstance(exc, HTTPException)
    return _error(exc.status_code, f"{exc.detail}: {request.method} {request.url.path}")


async def _internal_error(request: Request, exc: Exception) -> Response:
    # Outside the routes' own handling (e.g. in the routing itself): still a JSON reason.
    return _error(500, f"internal error: {type(exc).__name__}")


async def serve_admin(service: "BrokerService", host: str, port: int, *,
                      task_status: trio.TaskStatus[int] = trio.TASK_STATUS_IGNORED) -> None:
    """Run the admin HTTP server; started() reports the bound port."""
    guard_connections()
    install_tls_scope()  # the client certificate of an HTTPS request reaches authenticate()
    config = TlsConfig()
    config.bind = [f"{host}:{port}"]
    tls_port = service.config.web_service_port_tls
    tls = ServerTls.from_config(service.config, alpn=["http/1.1"]) if tls_port >= 0 else None
    if tls is not None:  # hypercorn: "bind" is the TLS side once TLS is on, "insecure_bind" plain HTTP
        config.tls = tls
        config.insecure_bind = config.bind
        config.bind = [f"{host}:{tls_port}"]
    config.accesslog = logging.getLogger(f"{__name__}.access") if service.config.http_access_log_enabled else None
    config.errorlog = logging.getLogger(f"{__name__}.http")
    config.graceful_timeout = 1.0

    async def start(*, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        await serve(build_app(service), config, task_status=task_status)  # type: ignore[arg-type]

    with naming_the_port("web_service_port", host, port):
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(start)
            bound = next(int(b.rsplit(":", 1)[1]) for b in binds if b.startswith("http://"))
            service.web_port = bound
            for b in binds:
                if b.startswith("https://"):
                    service.web_port_tls = int(b.rsplit(":", 1)[1])
            if tls is not None:
                nursery.start_soon(tls.watch)
            task_status.started(bound)

