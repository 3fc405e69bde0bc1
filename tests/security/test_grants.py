"""Grant and revoke over the admin API, checked by what the roles can then do on the wire:
namespace grants, topic grants (GET merges the namespace's), subscription-level roles, and
tenant admins granting inside their own tenant only."""

from __future__ import annotations

import httpx

import clients

from tests.security.conftest import SecureNode


def produce(sn: SecureNode, role: str, topic: str) -> str:
    c = clients.Client(sn.node.url, authentication=clients.AuthenticationToken(sn.token(role)), operation_timeout_seconds=10)
    try:
        c.create_producer(topic).send(b"x")
        return "ok"
    except (clients.AuthorizationError, clients.AuthenticationError) as exc:
        return type(exc).__name__
    finally:
        c.close()


def subscribe(sn: SecureNode, role: str, topic: str, sub: str) -> str:
    c = clients.Client(sn.node.url, authentication=clients.AuthenticationToken(sn.token(role)), operation_timeout_seconds=10)
    try:
        c.subscribe(topic, sub).close()
        return "ok"
    except clients.AuthorizationError as exc:
        return type(exc).__name__
    finally:
        c.close()


def test_topic_grants(secure: SecureNode) -> None:
    topic, other = "persistent://acme/ns/granted-topic", "persistent://acme/ns/not-granted"
    path = "/admin/v2/persistent/acme/ns/granted-topic/permissions"
    with secure.admin() as a:
        assert produce(secure, "topic-writer", topic) == "AuthorizationError"
        assert a.post(f"{path}/topic-writer", json=["produce"]).status_code == 204
        perms = a.get(path).json()
        assert perms["topic-writer"] == ["produce"] and perms["granted"] == ["consume", "produce"]  # + namespace grants
        assert produce(secure, "topic-writer", topic) == "ok"
        assert produce(secure, "topic-writer", other) == "AuthorizationError"
        assert subscribe(secure, "topic-writer", topic, "s") == "AuthorizationError"  # produce only
        assert a.delete(f"{path}/topic-writer").status_code == 204
        assert "topic-writer" not in a.get(path).json()
        assert produce(secure, "topic-writer", topic) == "AuthorizationError"
        bad = a.post(f"{path}/topic-writer", json=["produce", "admin-everything"])
        assert bad.status_code == 400 and "unknown action" in bad.json()["reason"]


def test_namespace_grants_and_tenant_admins(secure: SecureNode) -> None:
    ns_path = "/admin/v2/namespaces/acme/ns/permissions"
    with secure.admin() as a:
        assert a.get(ns_path).json()["granted"] == ["consume", "produce"]
    acme_admin = {"Authorization": f"Bearer {secure.token('acme-admin')}"}
    with httpx.Client(base_url=secure.node.admin, headers=acme_admin) as h:
        assert h.post(f"{ns_path}/late-writer", json=["produce"]).status_code == 204  # a tenant admin grants
        assert produce(secure, "late-writer", "persistent://acme/ns/late") == "ok"
        assert h.delete(f"{ns_path}/late-writer").status_code == 204
        assert produce(secure, "late-writer", "persistent://acme/ns/late") == "AuthorizationError"
        # ... but not in another tenant
        assert h.post("/admin/v2/namespaces/other/ns/permissions/late-writer", json=["produce"]).status_code == 403


def test_subscription_roles(secure: SecureNode) -> None:
    topic = "persistent://acme/ns/sub-roles"
    with secure.admin() as a:
        r = a.post("/admin/v2/namespaces/acme/ns/permissions/subscription/locked", json=["granted-basic"])
        assert r.status_code == 204, r.text
        assert a.get("/admin/v2/namespaces/acme/ns/permissions/subscription").json()["locked"] == ["granted-basic"]
        # "granted" has consume on the namespace, but the locked subscription is granted-basic's only
        assert subscribe(secure, "granted", topic, "locked") == "AuthorizationError"
        assert subscribe(secure, "granted", topic, "open") == "ok"
        assert subscribe(secure, "acme-admin", topic, "locked") == "ok"  # tenant admins may
        r = a.delete("/admin/v2/namespaces/acme/ns/permissions/locked/subscription/granted-basic")
        assert r.status_code == 204
        assert subscribe(secure, "granted", topic, "locked") == "ok"


def test_anonymous_role() -> None:
    from quire.security.providers import AuthenticationService
    svc = AuthenticationService(True, [], anonymous_role="anon")
    assert svc.anonymous().role == "anon" and svc.anonymous().method == "anonymous"
