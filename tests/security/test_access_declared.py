"""Every admin route and every protocol command declares the access it needs (issue 18).

Other engineers add routes and commands: this walk fails until the new one names its
``Access`` in ``broker.admin.ROUTE_TABLE`` / ``broker.authorization.COMMAND_ACCESS``. (At
runtime an undeclared one is refused to everyone but superusers.) The Authorizer's decisions
are checked here on an in-memory view of tenants and policies.
"""

from __future__ import annotations

import inspect
import re
from collections.abc import Mapping
from types import SimpleNamespace
from typing import Any

import pytest

from broker import connection
from broker.admin import ROUTE_TABLE, AdminApi, _access_of
from broker.admin_ops import OPS_ROUTES
from broker.authorization import COMMAND_ACCESS, Access, Authorizer
from clients.protocol import pulsar_api_pb2 as pb
from quire.security.errors import AuthenticationError, AuthorizationError

PROTOCOL_ONLY = {Access.CONNECTION, Access.OPEN_HANDLE, Access.NOT_SERVED}


def test_every_admin_route_declares_its_access() -> None:
    missing = []
    for path, handler, access in ROUTE_TABLE:
        assert hasattr(AdminApi, handler), f"{path}: no AdminApi.{handler}"
        if not isinstance(access, Mapping) or not access:
            missing.append(f"{path}: methods {access} without a {{method: Access}} map")
            continue
        for method, need in access.items():
            if not isinstance(need, Access) or need in PROTOCOL_ONLY:
                missing.append(f"{method} {path}: {need!r} is not an admin Access")
    for path, _handler, access in OPS_ROUTES:
        if not isinstance(access, Mapping) or not access:
            missing.append(f"{path}: methods {access} without a {{method: Access}} map")
            continue
        for method, need in access.items():
            if not isinstance(need, Access) or need in PROTOCOL_ONLY:
                missing.append(f"{method} {path}: {need!r} is not an admin Access")
    assert not missing, "admin routes without a declared access check:\n" + "\n".join(missing)


def test_routes_scoped_by_tenant_are_not_open_to_everyone() -> None:
    # A route naming a tenant/namespace/topic must not be AUTHENTICATED/PUBLIC: any role would
    # reach another tenant's data.
    for path, _, access in [*ROUTE_TABLE, *OPS_ROUTES]:
        if "{tenant}" in path:
            assert isinstance(access, Mapping)
            for method, need in access.items():
                assert need not in (Access.PUBLIC, Access.AUTHENTICATED, Access.METRICS), (method, path)


def test_every_protocol_command_declares_its_access() -> None:
    names = pb.BaseCommand.Type.keys()
    missing = [n for n in names if pb.BaseCommand.Type.Value(n) not in COMMAND_ACCESS]
    assert not missing, f"protocol commands without a declared access: {missing}"


def test_commands_the_broker_handles_are_served() -> None:
    # Whatever ServerConnection._handle dispatches must not be declared NOT_SERVED, and the ones
    # naming a topic or namespace must be checked against it.
    source = inspect.getsource(connection.ServerConnection._handle)
    handled = set(re.findall(r"t == T\.([A-Z_]+)", source))
    assert {"LOOKUP", "PRODUCER", "SUBSCRIBE", "GET_TOPICS_OF_NAMESPACE", "PARTITIONED_METADATA"} <= handled
    for name in handled:
        access = COMMAND_ACCESS[pb.BaseCommand.Type.Value(name)]
        assert access is not Access.NOT_SERVED, name
    for name in ("LOOKUP", "PARTITIONED_METADATA", "PRODUCER", "SUBSCRIBE", "GET_TOPICS_OF_NAMESPACE",
                 "GET_SCHEMA", "GET_OR_CREATE_SCHEMA"):
        assert COMMAND_ACCESS[pb.BaseCommand.Type.Value(name)] not in PROTOCOL_ONLY, name


class FakeNamespaces:
    def __init__(self) -> None:
        self.tenants: dict[str, dict[str, Any]] = {"acme": {"adminRoles": ["acme-admin"]}, "other": {"adminRoles": []}}
        self.policies: dict[str, dict[str, Any]] = {
            "acme/ns": {"auth_policies": {
                "namespace_auth": {"writer": ["produce"], "reader": ["consume"], "junk": "not-a-list"},
                "destination_auth": {"persistent://acme/ns/pt": {"topic-only": ["consume"]}},
                "subscription_auth_roles": {"locked": ["reader"]}}},
            "other/ns": {"auth_policies": {}},
        }

    async def get_tenant(self, tenant: str) -> dict[str, Any] | None:
        return self.tenants.get(tenant)

    async def get_policies(self, ns: Any, validate: bool = True) -> dict[str, Any]:
        return self.policies[str(ns)]


def _authorizer(**overrides: Any) -> Authorizer:
    config = SimpleNamespace(authorization_enabled=True, authentication_enabled=True, superuser_roles=["root"],
                             authenticate_metrics_endpoint=False)
    for k, v in overrides.items():
        setattr(config, k, v)
    return Authorizer(config, FakeNamespaces())  # type: ignore[arg-type]


async def _allowed(a: Authorizer, role: str | None, access: Access | None, **scope: Any) -> bool:
    try:
        await a.check(role, access, **scope)
        return True
    except AuthorizationError:
        return False


async def test_authorizer_decisions() -> None:
    a = _authorizer()
    t = "persistent://acme/ns/t"
    assert await _allowed(a, "root", Access.SUPERUSER)
    assert await _allowed(a, "root", None)  # undeclared: superusers only
    assert not await _allowed(a, "acme-admin", None, topic=t)
    assert await _allowed(a, "acme-admin", Access.PRODUCE, topic=t)
    assert await _allowed(a, "acme-admin", Access.TENANT_ADMIN, namespace="acme/ns")
    assert not await _allowed(a, "acme-admin", Access.TENANT_ADMIN, namespace="other/ns")
    assert not await _allowed(a, "acme-admin", Access.SUPERUSER)
    assert await _allowed(a, "writer", Access.PRODUCE, topic=t)
    assert await _allowed(a, "writer", Access.LOOKUP, topic=t)
    assert not await _allowed(a, "writer", Access.CONSUME, topic=t)
    assert await _allowed(a, "writer", Access.NAMESPACE_READ, namespace="acme/ns")
    assert not await _allowed(a, "writer", Access.TENANT_ADMIN, namespace="acme/ns")
    assert await _allowed(a, "reader", Access.CONSUME, topic=t, subscription="s")
    assert await _allowed(a, "reader", Access.CONSUME, topic=t, subscription="locked")
    assert not await _allowed(a, "reader", Access.PRODUCE, topic=t)
    # topic-level grants, inherited by the partitions of a partitioned topic
    assert await _allowed(a, "topic-only", Access.CONSUME, topic="persistent://acme/ns/pt")
    assert await _allowed(a, "topic-only", Access.CONSUME, topic="persistent://acme/ns/pt-partition-3")
    assert not await _allowed(a, "topic-only", Access.CONSUME, topic=t)
    assert not await _allowed(a, "topic-only", Access.CONSUME, topic="persistent://acme/ns/pt", subscription="locked")
    assert not await _allowed(a, "topic-only", Access.NAMESPACE_READ, namespace="acme/ns")
    assert not await _allowed(a, "junk", Access.PRODUCE, topic=t)  # a malformed stored grant grants nothing
    assert not await _allowed(a, "writer", Access.PRODUCE, topic="persistent://other/ns/t")
    assert await _allowed(a, "anyone", Access.AUTHENTICATED)
    with pytest.raises(AuthenticationError):
        await a.check(None, Access.LOOKUP, topic=t)


async def test_authorization_disabled_allows_every_role() -> None:
    a = _authorizer(authorization_enabled=False)
    assert await _allowed(a, "stranger", Access.SUPERUSER)
    assert await _allowed(a, None, None)


def test_undeclared_route_has_no_access() -> None:
    assert _access_of(["GET"], "GET") is None
    assert _access_of({"GET": Access.LOOKUP}, "HEAD") is Access.LOOKUP
    assert _access_of({"GET": Access.LOOKUP}, "PUT") is None


def test_which_accesses_need_credentials() -> None:
    a = _authorizer()
    assert not a.needs_role(Access.PUBLIC) and not a.needs_role(Access.METRICS)
    assert a.needs_role(Access.AUTHENTICATED) and a.needs_role(Access.LOOKUP)
    assert _authorizer(authenticate_metrics_endpoint=True).needs_role(Access.METRICS)
    assert not _authorizer(authentication_enabled=False).needs_role(Access.SUPERUSER)


def test_original_principal_counts_from_superusers_and_proxy_roles_only() -> None:
    """X-Original-Principal (Pulsar's isValidOriginalPrincipal): a superuser (another broker)
    acts as the caller it names; a proxy role and its caller must both be allowed; anyone else
    naming a principal is refused; without a role (authentication off) the header means nothing."""
    a = _authorizer(proxy_roles=["proxy"])
    assert a.acting_roles("writer", None) == ["writer"]
    assert a.acting_roles("root", "writer") == ["writer"]
    assert a.acting_roles("proxy", "writer") == ["proxy", "writer"]
    assert a.acting_roles(None, "root") == [None]
    for role, original in (("writer", "root"), ("proxy", "proxy"), ("root", " ")):
        with pytest.raises(AuthorizationError):
            a.acting_roles(role, original)
