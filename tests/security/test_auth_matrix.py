"""The issue-18 matrix against one real secured standalone: {no credentials, malformed token,
bad signature, expired token, wrong role (token and basic), tenant admin, granted role (token
and basic), superuser} x {lookup, produce, consume, list topics, admin read, admin write, admin
on another tenant}, with ``clients/`` and with the official client; refusals are
AuthenticationError / AuthorizationError on the wire and 401 / 403 with a JSON reason over HTTP.

The official C++ client retries a connection the broker refused at CONNECT until its operation
timeout, so for the four unauthenticated rows it runs one operation (a lookup, with a short
timeout) and the broker's log must show the refusal; every other row runs every operation.
"""

from __future__ import annotations

import re
import uuid
from typing import Any, Callable

import httpx
import pulsar
import pytest

import clients
from quire.security.tokens import create_secret_key
from tests.security.conftest import SUPERUSER, SecureNode, basic_header

TOPIC = "persistent://acme/ns/matrix"
OPS = ["lookup", "produce", "consume", "list_topics", "admin_read", "admin_write", "admin_other"]
UNAUTHENTICATED = ["none", "malformed", "bad_signature", "expired"]
ROLES = ["wrong_role", "wrong_role_basic", "tenant_admin", "granted", "granted_basic", "superuser"]
ok, authn, authz = "ok", "authn", "authz"
EXPECTED: dict[str, list[str]] = {
    **{name: [authn] * 7 for name in UNAUTHENTICATED},
    "wrong_role": [authz] * 7,
    "wrong_role_basic": [authz] * 7,
    "tenant_admin": [ok] * 6 + [authz],
    "granted": [ok] * 4 + [authz] * 3,
    "granted_basic": [ok] * 4 + [authz] * 3,
    "superuser": [ok] * 7,
}


def credentials(sn: SecureNode) -> dict[str, tuple[str, str] | None]:
    """identity -> (method, secret) where secret is the token or "user:password"."""
    return {
        "none": None,
        "malformed": ("token", "not-a-jwt"),
        "bad_signature": ("token", sn.token(SUPERUSER, key=create_secret_key())),
        "expired": ("token", sn.token(SUPERUSER, expiry_seconds=-60)),
        "wrong_role": ("token", sn.token("stranger")),
        "wrong_role_basic": ("basic", f"stranger-basic:{sn.passwords['stranger-basic']}"),
        "tenant_admin": ("token", sn.token("acme-admin")),
        "granted": ("token", sn.token("granted")),
        "granted_basic": ("basic", f"granted-basic:{sn.passwords['granted-basic']}"),
        "superuser": ("token", sn.token(SUPERUSER)),
    }


def http_headers(cred: tuple[str, str] | None) -> dict[str, str]:
    if cred is None:
        return {}
    method, secret = cred
    if method == "token":
        return {"Authorization": f"Bearer {secret}"}
    user, _, password = secret.partition(":")
    return basic_header(user, password)


def outcome(exc: BaseException | None) -> str:
    if exc is None:
        return ok
    name = type(exc).__name__
    return {"AuthenticationError": authn, "AuthorizationError": authz}.get(name, f"{name}: {exc}")


def admin_ops(sn: SecureNode, cred: tuple[str, str] | None) -> dict[str, str]:
    out = {}
    with httpx.Client(base_url=sn.node.admin, headers=http_headers(cred), timeout=30) as http:
        calls = {"admin_read": lambda: http.get("/admin/v2/namespaces/acme/ns/retention"),
                 "admin_write": lambda: http.post("/admin/v2/namespaces/acme/ns/messageTTL", json=3600),
                 "admin_other": lambda: http.get("/admin/v2/namespaces/other/ns/retention")}
        for op, call in calls.items():
            r = call()
            if r.status_code in (401, 403):
                reason = r.json()["reason"]  # a JSON reason, never the credential
                assert reason and (cred is None or cred[1] not in reason and cred[1] not in r.text)
                out[op] = authn if r.status_code == 401 else authz
            else:
                assert r.status_code in (200, 204), r.text
                out[op] = ok
    return out


def protocol_ops(lib: Any, make_auth: Callable[[tuple[str, str] | None], Any], url: str,
                 cred: tuple[str, str] | None, ops: list[str], timeout: int) -> dict[str, str]:
    out: dict[str, str] = {}
    kwargs: dict[str, Any] = {"operation_timeout_seconds": timeout}
    if lib is pulsar:
        kwargs["logger"] = pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null")
    client = lib.Client(url, authentication=make_auth(cred), **kwargs)
    sub = f"s-{uuid.uuid4().hex[:8]}"
    try:
        for op in ops:
            try:
                if op == "lookup":
                    client.get_topic_partitions(TOPIC)
                elif op == "produce":
                    producer = client.create_producer(TOPIC)
                    producer.send(b"from the matrix")
                    producer.close()
                elif op == "consume":
                    consumer = client.subscribe(TOPIC, sub, initial_position=lib.InitialPosition.Earliest)
                    msg = consumer.receive(timeout_millis=15000)
                    consumer.acknowledge(msg)
                    consumer.close()
                elif op == "list_topics":  # GET_TOPICS_OF_NAMESPACE behind a pattern subscription
                    consumer = client.subscribe(re.compile("persistent://acme/ns/matrix.*"), sub + "-p")
                    consumer.close()
                out[op] = ok
            except Exception as exc:  # noqa: BLE001 - the outcome is the assertion
                out[op] = outcome(exc)
    finally:
        client.close()
    return out


def auth_for(lib: Any) -> Callable[[tuple[str, str] | None], Any]:
    """The authentication object of ``lib`` (``pulsar`` or ``clients``: the same names) for a credential."""
    def make(cred: tuple[str, str] | None) -> Any:
        if cred is None:
            return None
        method, secret = cred
        if method == "token":
            return lib.AuthenticationToken(secret)
        user, _, password = secret.partition(":")
        return lib.AuthenticationBasic(user, password)
    return make


def seed(secure: SecureNode) -> None:
    """Ten messages on the matrix topic for the consume column."""
    c = clients.Client(secure.node.url, authentication=clients.AuthenticationToken(secure.token(SUPERUSER)))
    try:
        p = c.create_producer(TOPIC)
        for _ in range(10):
            p.send(b"seed")
        p.close()
    finally:
        c.close()


@pytest.fixture(scope="module")
def seeded(secure: SecureNode) -> SecureNode:
    seed(secure)
    return secure


def quire_matrix(sn: SecureNode) -> dict[str, list[str]]:
    """Every identity x every operation with clients/ and the admin API."""
    results = {}
    for name, cred in credentials(sn).items():
        row = protocol_ops(clients, auth_for(clients), sn.node.url, cred, OPS[:4], timeout=10)
        row.update(admin_ops(sn, cred))
        results[name] = row
    return grid(results)


def grid(results: dict[str, dict[str, str]]) -> dict[str, list[str]]:
    return {name: [row.get(op, "-") for op in OPS] for name, row in results.items()}


def test_matrix_with_quire_client(seeded: SecureNode) -> None:
    assert quire_matrix(seeded) == EXPECTED
    metrics = httpx.get(f"{seeded.node.admin}/metrics").text  # public unless authenticate_metrics_endpoint
    for reason in ("authentication required", "malformed token", "token signature verification failed",
                   "token expired"):
        assert re.search(r'pulsar_authentication_failures_total\{auth_method="\w+",provider_name="\w+",'
                         rf'reason="{reason}"\}} [1-9]', metrics), reason
    assert re.search(r'pulsar_authentication_success_total\{auth_method="basic",'
                     r'provider_name="AuthenticationProviderBasic"\} [1-9]', metrics)


def test_matrix_with_official_client(seeded: SecureNode) -> None:
    results = {}
    creds = credentials(seeded)
    for name in ROLES:
        row = protocol_ops(pulsar, auth_for(pulsar), seeded.node.url, creds[name], OPS[:4], timeout=10)
        row.update(admin_ops(seeded, creds[name]))
        results[name] = row
    # The C++ client reports an ERROR AuthorizationError answering GET_TOPICS_OF_NAMESPACE (what
    # Pulsar sends too) as a failed pattern lookup: LookupError.
    for name in ("wrong_role", "wrong_role_basic"):
        assert results[name]["list_topics"] == "LookupError: Pulsar error: LookupError", results[name]
        results[name]["list_topics"] = authz
    assert grid(results) == {name: EXPECTED[name] for name in ROLES}
    log_before = len(seeded.node.proc.log_text())
    for name in UNAUTHENTICATED:
        row = protocol_ops(pulsar, auth_for(pulsar), seeded.node.url, creds[name], ["lookup"], timeout=2)
        # The C++ client retries a refused CONNECT until its timeout (Timeout), or reports it.
        assert row["lookup"] in (authn, "Timeout: Pulsar error: TimeOut"), (name, row)
    log = seeded.node.proc.log_text()[log_before:]
    for reason in ("authentication required", "malformed token", "token signature verification failed",
                   "token expired"):
        assert f"failed authentication" in log and reason in log, reason


def test_secrets_never_reach_the_log_or_stats(seeded: SecureNode) -> None:
    with seeded.admin() as a:
        stats = [a.get(f"/admin/v2/persistent/acme/ns/matrix/{what}").text for what in ("stats", "internalStats")]
        stats.append(a.get("/metrics").text)
        stats.append(a.get("/admin/v2/namespaces/acme/ns").text)  # policies with the grants
    log = seeded.node.proc.log_text() + "".join(stats)
    for name, cred in credentials(seeded).items():
        if cred is not None:
            secret = cred[1].split(":", 1)[1] if cred[0] == "basic" else cred[1]
            if len(secret) > 8:
                assert secret not in log, name
    assert seeded.secret_key.hex() not in log
