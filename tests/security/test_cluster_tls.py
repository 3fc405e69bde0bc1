"""TLS and credentials across a cluster (issue 18): real ZooKeeper, two ``quire bookie``
processes (TLS on the bookie port, HTTPS on the HTTP port, a token required of clients) and two
``quire broker`` processes (token authentication and authorization, ``pulsar+ssl://`` and
``https://`` listeners, a ledger client that trusts the bookies' CA and presents the broker
token). Checked: the bookie HTTP API and its internal caller (cluster status) over HTTPS; an
admin request sent to the broker that does not own the topic reaches the owner with the
caller's credentials (``quire admin`` re-sends them on the 307); a binary lookup over TLS on
the non-owner answers the owner's ``brokerServiceUrlTls`` and both clients follow it."""

from __future__ import annotations

import json
import os
import ssl
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import httpx
import pulsar
import pytest

import clients
from clients.protocol import commands as C
from quire.admin_cli import AdminClient
from quire.security.tokens import create_token
from tests.e2e.conftest import new_client, start_broker
from tests.e2e.raw_protocol import RawConnection, T, next_request_id
from tests.fixtures.bookies import start_bookie
from tests.fixtures.processes import QuireProcesses, free_port
from tests.fixtures.zookeeper import ZooKeeperServer
from tests.security.conftest import cluster_base
from tests.security import hostile
from tests.security.certs import CertificateAuthority, Issued
from tests.security.test_tls import round_trip

SUPERUSER = "admin"
BROKER_ROLE = "cluster-broker"  # how the brokers authenticate to each other


@dataclass
class Broker:
    port: int
    web: int
    tls_port: int
    web_tls: int

    @property
    def admin(self) -> str:
        return f"http://127.0.0.1:{self.web}"

    @property
    def admin_tls(self) -> str:
        return f"https://127.0.0.1:{self.web_tls}"

    @property
    def url_tls(self) -> str:
        return f"pulsar+ssl://127.0.0.1:{self.tls_port}"


@dataclass
class TlsCluster:
    procs: QuireProcesses
    brokers: list[Broker]
    bookie_http: list[int]
    ca_file: str
    client_key: bytes
    bookie_key: bytes
    rogue: Issued  # a client certificate of another CA
    ca: CertificateAuthority

    def token(self, role: str = SUPERUSER) -> str:
        return create_token(role, secret_key=self.client_key)

    def https(self) -> ssl.SSLContext:
        return ssl.create_default_context(cafile=self.ca_file)


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_server: ZooKeeperServer) -> Iterator[TlsCluster]:
    base: Path = tmp_path_factory.mktemp("cluster-tls")
    zk_url, client_key, bookie_key = cluster_base(base, zk_server, "cluster-tls")
    ca = CertificateAuthority(base)
    bookie_cert = ca.issue("bookie-tls", "bookie", ips=("127.0.0.1",))
    broker_cert = ca.issue("broker-tls", "broker", ips=("127.0.0.1",))
    (base / "bookie.toml").write_text(
        'bookie_auth_provider_factory_class = "token"\n'
        f'bookie_auth_token_secret_key = "file://{base / "bookie.key"}"\n'
        'bookie_auth_allowed_roles = ["broker"]\n'
        f'tls_provider_factory_class = "OpenSSL"\ntls_certificate_path = "{bookie_cert.cert}"\n'
        f'tls_key_store = "{bookie_cert.key}"\nhttp_server_tls_enable = true\n')
    (base / "broker.toml").write_text(
        "authentication_enabled = true\nauthentication_providers = [\"token\", \"tls\"]\n"
        f"authorization_enabled = true\nsuperuser_roles = [\"{SUPERUSER}\", \"{BROKER_ROLE}\"]\n"
        # the brokers call each other as BROKER_ROLE, over HTTPS (trusting tls_trust_certs_file_path)
        'broker_client_authentication_plugin = "org.apache.pulsar.client.impl.auth.AuthenticationToken"\n'
        f'broker_client_authentication_parameters = "token:{create_token(BROKER_ROLE, secret_key=client_key)}"\n'
        "broker_client_tls_enabled = true\n"
        f'token_secret_key = "file://{base / "client.key"}"\n'
        f'tls_certificate_file_path = "{broker_cert.cert}"\ntls_key_file_path = "{broker_cert.key}"\n'
        f'tls_trust_certs_file_path = "{ca.file}"\n'
        "[bookkeeper_client]\nclient_auth_provider_factory_class = \"token\"\n"
        f'tls_provider_factory_class = "OpenSSL"\ntls_trust_store = "{ca.file}"\n'
        f'client_auth_token = "{create_token("broker", secret_key=bookie_key)}"\n')
    procs = QuireProcesses(base / "logs")
    try:
        bookie_http = []
        for i in range(2):
            bookie_http.append(free_port())
            start_bookie(procs, zk_url, base, i, "--conf", str(base / "bookie.toml"), http_port=bookie_http[-1])
        brokers = []
        for _ in range(2):
            tls_port, web_tls = free_port(), free_port()
            port, web = start_broker(procs, zk_url, 30000, "--conf", str(base / "broker.toml"),
                                     "--set", f"broker_service_port_tls={tls_port}",
                                     "--set", f"web_service_port_tls={web_tls}", ready_path="/metrics")
            brokers.append(Broker(port, web, tls_port, web_tls))
        rogue = CertificateAuthority(base, "rogue-ca").issue("rogue", SUPERUSER, client=True)
        yield TlsCluster(procs, brokers, bookie_http, str(ca.file), client_key, bookie_key, rogue, ca)
        codes = [p.terminate() for p in reversed(procs.procs)]
        assert codes == [0] * len(codes), codes
    finally:
        procs.cleanup()


def test_bookie_http_api_over_https(cluster: TlsCluster) -> None:
    broker_token = create_token("broker", secret_key=cluster.bookie_key)
    for port in cluster.bookie_http:
        with httpx.Client(base_url=f"https://127.0.0.1:{port}", verify=cluster.https(), timeout=10) as h:
            r = h.get("/api/v1/bookie/state", headers={"Authorization": f"Bearer {broker_token}"})
            assert r.status_code == 200 and r.json()["running"] is True, r.text
            assert h.get("/api/v1/bookie/state").status_code == 401  # the bookie token is still wanted
            assert "bookie_" in h.get("/metrics").text  # scrapers need no token, only TLS
        with pytest.raises(httpx.HTTPError):  # HTTPS only: a plain request gets no answer
            httpx.get(f"http://127.0.0.1:{port}/metrics", timeout=5)
        with pytest.raises(httpx.HTTPError):  # not trusted without the CA
            httpx.get(f"https://127.0.0.1:{port}/metrics", timeout=5)
    # The broker asks the bookies' HTTP API (disk usage) over HTTPS with its ledger client's trust and token.
    r = httpx.get(cluster.brokers[0].admin + "/admin/v2/quire/cluster-status", timeout=30,
                  headers={"Authorization": f"Bearer {cluster.token()}"})
    assert r.status_code == 200, r.text
    bookies = r.json()["bookies"]
    assert len(bookies) == 2 and all(b["info"]["http_tls"] for b in bookies)
    assert all(b["disk"] is not None and b["disk"]["totalBytes"] > 0 for b in bookies), bookies


def _owner_and_other(cluster: TlsCluster, topic: str) -> tuple[Broker, Broker]:
    """The broker that owns ``topic`` (a lookup places it) and the other one."""
    lookup = AdminClient(cluster.brokers[0].admin, cluster.token()).call(
        "GET", f"/lookup/v2/topic/persistent/public/default/{topic}")
    owner = next(b for b in cluster.brokers if lookup["brokerUrl"].endswith(f":{b.port}"))
    assert lookup["brokerUrlTls"] == f"pulsar+ssl://127.0.0.1:{owner.tls_port}"
    return owner, next(b for b in cluster.brokers if b is not owner)


def _produce(cluster: TlsCluster, topic: str, count: int = 1) -> None:
    """``count`` messages to ``topic`` through the first broker, as the superuser."""
    c = new_client(f"pulsar://127.0.0.1:{cluster.brokers[0].port}",
                   authentication=pulsar.AuthenticationToken(cluster.token()))
    try:
        producer = c.create_producer(topic)
        for i in range(count):
            producer.send(b"m%d" % i)
    finally:
        c.close()


def test_admin_credentials_reach_the_owner(cluster: TlsCluster) -> None:
    topic = "creds-forwarded"
    _produce(cluster, f"persistent://public/default/{topic}")
    owner, other = _owner_and_other(cluster, topic)
    path = f"/admin/v2/persistent/public/default/{topic}/stats"
    bearer = {"Authorization": f"Bearer {cluster.token()}"}
    r = httpx.get(other.admin + path, headers=bearer)
    assert r.status_code == 307 and r.headers["location"] == owner.admin + path
    # httpx drops Authorization on a redirect to another port (a new origin): the owner says 401
    assert httpx.get(other.admin + path, headers=bearer, follow_redirects=True).status_code == 401
    # quire's admin client re-sends the credentials to the owner, over HTTP and HTTPS alike
    assert AdminClient(other.admin, cluster.token()).call("GET", path)["msgInCounter"] == 1
    over_tls = AdminClient(other.admin_tls, cluster.token(), tls_trust_certs_file_path=cluster.ca_file)
    assert over_tls._request("GET", path, None).url == httpx.URL(owner.admin_tls + path)  # the scheme is kept
    assert over_tls.call("GET", path)["msgInCounter"] == 1
    # the CLI, as an operator runs it
    out = subprocess.run([sys.executable, "-m", "quire", "admin", "--admin-url", other.admin,
                          "--auth-token", cluster.token(), "topics", "stats", f"persistent://public/default/{topic}"],
                         capture_output=True, text=True, timeout=60, env={**os.environ})
    assert out.returncode == 0, out.stderr
    assert json.loads(out.stdout)["msgInCounter"] == 1
    # without credentials the redirect leads nowhere either
    with pytest.raises(Exception, match="401|authentication"):
        AdminClient(other.admin).call("GET", path)


def _tls_lookup(port: int, ca_file: str, token: str, topic: str) -> Any:
    """A LOOKUP over ``pulsar+ssl://`` with the raw protocol: what the broker answers."""
    with RawConnection(port) as raw:
        raw.sock = ssl.create_default_context(cafile=ca_file).wrap_socket(raw.sock, server_hostname="127.0.0.1")
        raw.send(C.connect("raw-tls", auth_method_name="token", auth_data=token.encode()))
        raw.wait_for(T.CONNECTED)
        rid = next_request_id()
        raw.send(C.lookup(topic, rid))
        return raw.wait_for(T.LOOKUP_RESPONSE,
                            lambda f: f.command.lookupTopicResponse.request_id == rid).command.lookupTopicResponse


def test_tls_lookup_redirects_to_the_owner_tls_url(cluster: TlsCluster) -> None:
    name = "tls-redirected"
    topic = f"persistent://public/default/{name}"
    owner, other = _owner_and_other(cluster, name)
    answer = _tls_lookup(other.tls_port, cluster.ca_file, cluster.token(), topic)
    assert answer.response == 0  # Redirect
    assert answer.brokerServiceUrlTls == owner.url_tls
    for make in (lambda: new_client(other.url_tls, authentication=pulsar.AuthenticationToken(cluster.token()),
                                    tls_trust_certs_file_path=cluster.ca_file, tls_validate_hostname=True),
                 lambda: clients.Client(other.url_tls, authentication=clients.AuthenticationToken(cluster.token()),
                                        tls_trust_certs_file_path=cluster.ca_file, tls_validate_hostname=True)):
        client: Any = make()
        try:
            round_trip(client, topic)
        finally:
            client.close()
    stats = AdminClient(owner.admin, cluster.token()).call("GET", f"/admin/v2/persistent/public/default/{name}/stats")
    assert stats["msgInCounter"] == 2  # both producers reached the owner
    assert _owner_and_other(cluster, name)[0] is owner  # and it did not move meanwhile


def test_hostile_connections_leave_brokers_and_bookies_serving(cluster: TlsCluster) -> None:
    """Garbage instead of a ClientHello, resets before/during/after the handshake, plain HTTP on
    the HTTPS port, an untrusted client certificate: on the brokers' HTTPS and HTTP ports and the
    bookies' HTTPS ports. Each process keeps serving and logs no traceback."""
    ca = Path(cluster.ca_file)
    targets = [(b.web_tls, True) for b in cluster.brokers] + [(b.web, False) for b in cluster.brokers]
    targets += [(port, True) for port in cluster.bookie_http]
    for port, tls in targets:
        for attack in hostile.attacks(port, ca, cluster.rogue, tls=tls):
            attack()
    bearer = {"Authorization": f"Bearer {cluster.token()}"}
    for b in cluster.brokers:
        with httpx.Client(base_url=b.admin_tls, verify=cluster.https(), headers=bearer, timeout=10) as h:
            assert h.get("/admin/v2/clusters").status_code == 200
        assert httpx.get(b.admin + "/admin/v2/clusters", headers=bearer, timeout=10).status_code == 200
    broker_token = create_token("broker", secret_key=cluster.bookie_key)
    for port in cluster.bookie_http:
        r = httpx.get(f"https://127.0.0.1:{port}/api/v1/bookie/state", verify=cluster.https(), timeout=10,
                      headers={"Authorization": f"Bearer {broker_token}"})
        assert r.status_code == 200, r.text
    for proc in cluster.procs.procs:
        assert proc.is_running, proc.log_tail(30)
        assert "Traceback" not in proc.log_text(), proc.log_tail(60)


def _spread_partitioned_topic(cluster: TlsCluster, admin: AdminClient, partitions: int = 4) -> str:
    """A partitioned topic whose partitions both brokers own (lookups place them; a name whose
    partitions all land on one broker is left and another tried)."""
    for attempt in range(8):
        name = f"cert-fanout-{attempt}"
        admin.call("PUT", f"/admin/v2/persistent/public/default/{name}/partitions", partitions)
        owners = {admin.call("GET", f"/lookup/v2/topic/persistent/public/default/{name}-partition-{i}")["brokerUrl"]
                  for i in range(partitions)}
        if len(owners) == len(cluster.brokers):
            return name
    raise AssertionError("the partitions never spread over both brokers")


def test_a_certificate_identity_reaches_the_partitions_owners(cluster: TlsCluster) -> None:
    """A caller authenticated by its HTTPS client certificate asks one broker for a partitioned
    topic's stats: the broker asks the partitions' owners as itself (broker_client_*, over
    HTTPS) naming the caller in X-Original-Principal, and each owner authorizes the caller. Before,
    only an Authorization header was passed on: the certificate's role got 401 from the other broker."""
    admin = AdminClient(cluster.brokers[0].admin, cluster.token())
    name = _spread_partitioned_topic(cluster, admin)
    topic = f"persistent://public/default/{name}"
    _produce(cluster, topic, 8)
    admin.call("POST", "/admin/v2/namespaces/public/default/permissions/cert-reader", ["consume"])
    superuser = cluster.ca.issue("cert-admin", SUPERUSER, client=True)
    reader = cluster.ca.issue("cert-reader", "cert-reader", client=True)
    nobody = cluster.ca.issue("cert-nobody", "cert-nobody", client=True)
    path = f"/admin/v2/persistent/public/default/{name}/partitioned-stats"
    for b in cluster.brokers:
        for cert in (superuser, reader):
            ctx = cluster.https()
            ctx.load_cert_chain(str(cert.cert), str(cert.key))
            r = httpx.get(b.admin_tls + path, verify=ctx, timeout=30)
            assert r.status_code == 200, (cert.cert.name, r.text)
            assert r.json()["msgInCounter"] == 8  # every partition's owner answered
        ctx = cluster.https()
        ctx.load_cert_chain(str(nobody.cert), str(nobody.key))
        assert httpx.get(b.admin_tls + path, verify=ctx, timeout=30).status_code == 403


def test_only_trusted_roles_may_name_an_original_principal(cluster: TlsCluster) -> None:
    """X-Original-Principal counts from another broker (a superuser) or a proxy role only: a
    client naming the superuser there is refused, and a broker acting for a caller gets that
    caller's rights, not its own."""
    url = cluster.brokers[1].admin + "/admin/v2/tenants"

    def get(role: str, original: str | None) -> int:
        headers = {"Authorization": f"Bearer {cluster.token(role)}"}
        if original is not None:
            headers["X-Original-Principal"] = original
        return httpx.get(url, headers=headers, timeout=30).status_code

    assert get("someone", None) == 403
    assert get("someone", SUPERUSER) == 403  # no impersonation
    assert get(BROKER_ROLE, SUPERUSER) == 200
    assert get(BROKER_ROLE, "someone") == 403  # the original principal is what is authorized
    assert get(SUPERUSER, None) == 200


def test_spark_admin_calls_carry_credentials_through_a_307(cluster: TlsCluster) -> None:
    """spark_connector's admin client (clients.admin_http, as quire admin): the connector's token on
    every call, and a PUT/POST answered 307 by the broker that does not own the topic followed to
    the owner with the token re-sent (urllib sent none and does not follow a 307 on POST)."""
    from spark_connector.admin import AdminClient as SparkAdmin
    from spark_connector.errors import PulsarAdminError

    name = "spark-admin-307"
    _produce(cluster, f"persistent://public/default/{name}")
    owner, other = _owner_and_other(cluster, name)
    admin = SparkAdmin(other.admin, authentication=clients.AuthenticationToken(cluster.token()))
    stats = admin.internal_stats(name)
    ledger = stats["ledgers"][-1]["ledgerId"]
    admin.create_subscription(name, "spark-sub", ledger, 0)  # PUT, 307 to the owner
    admin.reset_cursor(name, "spark-sub", ledger, 0)  # POST, 307 to the owner
    assert "spark-sub" in admin.subscriptions(name)
    with pytest.raises(PulsarAdminError) as info:
        SparkAdmin(other.admin).subscriptions(name)
    assert info.value.status == 401
