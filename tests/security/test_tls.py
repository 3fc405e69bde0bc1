"""TLS end to end (issue 18): a standalone with ``broker_service_port_tls`` and
``web_service_port_tls`` (certificates made by ``tests/security/certs.py``), the official
client and ``clients/`` over ``pulsar+ssl://`` with a trust file, hostname verification on
and off, ``tls_allow_insecure_connection``; client certificates as identities (role = CN);
HTTPS admin; the certificate reloaded when its files change (1 s check here)."""

from __future__ import annotations

import shutil
import socket
import ssl
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx
import pulsar
import pytest

import clients
from tests.e2e.conftest import Standalone, start_standalone
from tests.fixtures.processes import free_port
from tests.security.certs import CertificateAuthority, Issued
from tests.security.conftest import SUPERUSER, security_args, write_security_files
from quire.security.tokens import create_token


@dataclass
class TlsNode:
    node: Standalone
    tls_port: int
    web_tls_port: int
    ca: CertificateAuthority
    server: Issued
    client: Issued
    rogue: Issued
    second: Issued  # another server certificate: CN broker-2, SAN DNS:wrong.example only
    key: bytes

    @property
    def url(self) -> str:
        return f"pulsar+ssl://127.0.0.1:{self.tls_port}"

    def token(self, role: str = SUPERUSER) -> str:
        return create_token(role, secret_key=self.key)


@pytest.fixture(scope="module")
def tls(tmp_path_factory: pytest.TempPathFactory) -> Iterator[TlsNode]:
    base = tmp_path_factory.mktemp("tls")
    ca = CertificateAuthority(base)
    live = ca.issue("broker-1", "broker-1", dns=("localhost",), ips=("127.0.0.1",))
    server = Issued(base / "server.pem", base / "server.key")  # the files the broker reads
    shutil.copy(live.cert, server.cert)
    shutil.copy(live.key, server.key)
    second = ca.issue("broker-2", "broker-2", dns=("wrong.example",))
    client = ca.issue("client", "tls-client", client=True)
    rogue = CertificateAuthority(base, "rogue-ca").issue("rogue", "admin", client=True)
    key, key_file, htpasswd, _ = write_security_files(base)
    tls_port, web_tls_port = free_port(), free_port()
    node = start_standalone(
        base, *security_args(key_file, htpasswd), "--set", "authentication_providers=token,tls",
        "--set", f"broker_service_port_tls={tls_port}", "--set", f"web_service_port_tls={web_tls_port}",
        "--set", f"tls_certificate_file_path={server.cert}", "--set", f"tls_key_file_path={server.key}",
        "--set", f"tls_trust_certs_file_path={ca.file}", "--set", "tls_cert_refresh_check_duration_sec=1",
        "--log-level", "INFO", ready_path="/metrics")
    tn = TlsNode(node, tls_port, web_tls_port, ca, server, client, rogue, second, key)
    try:
        with httpx.Client(base_url=node.admin, headers={"Authorization": f"Bearer {tn.token()}"}) as a:
            r = a.post("/admin/v2/namespaces/public/default/permissions/tls-client", json=["produce", "consume"])
            assert r.status_code == 204, r.text
        yield tn
    finally:
        code = node.proc.terminate()
        print(node.proc.log_tail(30))
    assert code == 0


def official(url: str, timeout: int = 10, **kwargs: Any) -> pulsar.Client:
    return pulsar.Client(url, operation_timeout_seconds=timeout,
                         logger=pulsar.FileLogger(pulsar.LoggerLevel.Error, "/dev/null"), **kwargs)


def round_trip(client: Any, topic: str) -> None:
    consumer = client.subscribe(topic, "tls-sub", initial_position=pulsar.InitialPosition.Earliest
                                if isinstance(client, pulsar.Client) else clients.InitialPosition.Earliest)
    producer = client.create_producer(topic)
    producer.send(b"over tls")
    msg = consumer.receive(timeout_millis=15000)
    assert msg.data() == b"over tls"
    consumer.acknowledge(msg)
    producer.close()
    consumer.close()


def fails(make: Any, topic: str) -> str:
    client = make()
    try:
        client.create_producer(topic)
    except Exception as exc:  # noqa: BLE001 - the failure is what is checked
        return type(exc).__name__
    finally:
        client.close()
    raise AssertionError("expected the connection to fail")


def test_official_client_over_tls(tls: TlsNode) -> None:
    auth = pulsar.AuthenticationToken(tls.token())
    for validate in (True, False):
        c = official(tls.url, authentication=auth, tls_trust_certs_file_path=str(tls.ca.file),
                     tls_validate_hostname=validate)
        try:
            round_trip(c, f"persistent://public/default/tls-official-{validate}")
        finally:
            c.close()
    c = official(tls.url, authentication=auth, tls_allow_insecure_connection=True)
    try:
        round_trip(c, "persistent://public/default/tls-official-insecure")
    finally:
        c.close()
    # Not trusted: the broker's CA is not in the system store
    assert fails(lambda: official(tls.url, timeout=2, authentication=auth), "tls-untrusted") in ("Timeout", "ConnectError")


def test_quire_client_over_tls(tls: TlsNode) -> None:
    auth = clients.AuthenticationToken(tls.token())
    for validate in (True, False):
        c = clients.Client(tls.url, authentication=auth, tls_trust_certs_file_path=str(tls.ca.file),
                           tls_validate_hostname=validate)
        try:
            round_trip(c, f"persistent://public/default/tls-quire-{validate}")
        finally:
            c.close()
    c = clients.Client(tls.url, authentication=auth, tls_allow_insecure_connection=True)
    try:
        round_trip(c, "persistent://public/default/tls-quire-insecure")
    finally:
        c.close()
    assert fails(lambda: clients.Client(tls.url, authentication=auth, operation_timeout_seconds=3),
                 "tls-untrusted") == "ConnectError"


def test_client_certificate_is_the_role(tls: TlsNode) -> None:
    topic = "persistent://public/default/tls-client-cert"
    c = official(tls.url, authentication=pulsar.AuthenticationTLS(str(tls.client.cert), str(tls.client.key)),
                 tls_trust_certs_file_path=str(tls.ca.file))
    try:
        round_trip(c, topic)  # tls-client holds produce+consume on public/default
        with pytest.raises(pulsar.AuthorizationError):
            c.create_producer("persistent://other-tenant-none/ns/t")
    finally:
        c.close()
    q = clients.Client(tls.url, authentication=clients.AuthenticationTLS(str(tls.client.cert), str(tls.client.key)),
                       tls_trust_certs_file_path=str(tls.ca.file))
    try:
        round_trip(q, topic + "-quire")
    finally:
        q.close()
    # A certificate from another CA (CN "admin", the superuser's name) is refused in the handshake.
    rogue = clients.AuthenticationTLS(str(tls.rogue.cert), str(tls.rogue.key))
    assert fails(lambda: clients.Client(tls.url, authentication=rogue, tls_trust_certs_file_path=str(tls.ca.file),
                                        operation_timeout_seconds=3), "rogue") == "ConnectError"


def test_https_admin(tls: TlsNode) -> None:
    url = f"https://127.0.0.1:{tls.web_tls_port}"
    with httpx.Client(base_url=url, verify=ssl.create_default_context(cafile=str(tls.ca.file)), headers={"Authorization": f"Bearer {tls.token()}"}) as h:
        assert h.get("/admin/v2/clusters").json() == ["standalone"]
        lookup = h.get("/lookup/v2/topic/persistent/public/default/tls-lookup").json()
        assert lookup["brokerUrlTls"] == f"pulsar+ssl://127.0.0.1:{tls.tls_port}"
        assert lookup["httpUrlTls"] == f"https://127.0.0.1:{tls.web_tls_port}"
    with httpx.Client(base_url=url, verify=ssl.create_default_context(cafile=str(tls.ca.file))) as h:
        assert h.get("/admin/v2/clusters").status_code == 401


def https_client(tls: TlsNode, cert: Issued | None) -> httpx.Client:
    ctx = ssl.create_default_context(cafile=str(tls.ca.file))
    if cert is not None:
        ctx.load_cert_chain(str(cert.cert), str(cert.key))
    return httpx.Client(base_url=f"https://127.0.0.1:{tls.web_tls_port}", verify=ctx, timeout=10)


def test_https_admin_client_certificate_is_the_role(tls: TlsNode) -> None:
    """Pulsar's AuthenticationTLS on admin HTTPS: the CN of a certificate the handshake verified
    against tls_trust_certs_file_path is the role, checked like a token's subject."""
    superuser = tls.ca.issue("admin-client", SUPERUSER, client=True)
    topic = "/admin/v2/persistent/public/default/https-cert-topic"
    with https_client(tls, superuser) as h:
        assert h.get("/admin/v2/clusters").json() == ["standalone"]
        assert h.put(topic).status_code == 204
    with https_client(tls, tls.client) as h:  # CN tls-client: produce+consume on public/default only
        r = h.get(topic + "/subscriptions")
        assert (r.status_code, r.json()) == (200, [])
        r = h.put("/admin/v2/tenants/by-cert", json={"adminRoles": [], "allowedClusters": ["standalone"]})
        assert r.status_code == 403, r.text
        # a token still wins over the certificate: the request is the token's role
        r = h.put("/admin/v2/tenants/by-cert-token", json={"adminRoles": [], "allowedClusters": ["standalone"]},
                  headers={"Authorization": f"Bearer {tls.token()}"})
        assert r.status_code == 204, r.text
    with https_client(tls, None) as h:
        r = h.get(topic + "/subscriptions")
        assert r.status_code == 401 and "reason" in r.json()
    # a certificate of another CA (CN "admin", the superuser) never gets past the handshake
    with https_client(tls, tls.rogue) as h:
        with pytest.raises(httpx.HTTPError):
            h.get("/admin/v2/clusters")
    # plain HTTP carries no certificate: the same route wants credentials there
    assert httpx.get(tls.node.admin + topic.replace("https-cert-topic", "x") + "/subscriptions").status_code == 401


def served_cn(port: int, ca: Path) -> str:
    ctx = ssl.create_default_context(cafile=str(ca))
    ctx.check_hostname = False
    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw:
        with ctx.wrap_socket(raw) as s:
            cert = s.getpeercert()
    return next(v for rdn in cert["subject"] for k, v in rdn if k == "commonName")


def test_certificate_reload_and_hostname_verification(tls: TlsNode) -> None:
    """Last in this module: it swaps the broker's certificate for one whose name is wrong."""
    assert served_cn(tls.tls_port, tls.ca.file) == "broker-1"
    auth = clients.AuthenticationToken(tls.token())
    keep = clients.Client(tls.url, authentication=auth, tls_trust_certs_file_path=str(tls.ca.file),
                          tls_validate_hostname=True)
    try:
        producer = keep.create_producer("persistent://public/default/tls-reload")
        producer.send(b"before")
        # key first, then certificate: a check between the two writes sees a mismatched pair and keeps the old one
        shutil.copy(tls.second.key, tls.server.key)
        shutil.copy(tls.second.cert, tls.server.cert)
        deadline = time.monotonic() + 30
        while served_cn(tls.tls_port, tls.ca.file) != "broker-2" or served_cn(tls.web_tls_port, tls.ca.file) != "broker-2":
            assert time.monotonic() < deadline, "the new certificate was not picked up"
            time.sleep(0.3)
        producer.send(b"after: the open connection keeps working")
    finally:
        keep.close()
    # The new certificate names wrong.example only: with hostname verification 127.0.0.1 is refused.
    assert fails(lambda: clients.Client(tls.url, authentication=auth, tls_trust_certs_file_path=str(tls.ca.file),
                                        tls_validate_hostname=True, operation_timeout_seconds=3), "t") == "ConnectError"
    assert fails(lambda: official(tls.url, timeout=2, authentication=pulsar.AuthenticationToken(tls.token()),
                                  tls_trust_certs_file_path=str(tls.ca.file), tls_validate_hostname=True),
                 "t") in ("Timeout", "ConnectError")
    for make in (lambda: clients.Client(tls.url, authentication=auth, tls_trust_certs_file_path=str(tls.ca.file)),
                 lambda: official(tls.url, authentication=pulsar.AuthenticationToken(tls.token()),
                                  tls_trust_certs_file_path=str(tls.ca.file), tls_validate_hostname=False)):
        c = make()
        try:
            c.create_producer("persistent://public/default/tls-after-reload").send(b"x")
        finally:
            c.close()
    assert "reloaded the TLS certificate" in tls.node.proc.log_text()
