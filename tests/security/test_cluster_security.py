"""Security in cluster mode (issue 18): real ZooKeeper, two ``quire bookie`` processes that
serve TLS only and require a token of their clients (role ``broker``), one ``quire broker`` with token and basic
authentication and authorization whose ledger client presents the broker's token. The
identity x operation matrix runs here with ``clients/`` as on the standalone. The official
client produces and consumes through it; clients without credentials or the right role are
refused; a ledger client with no token or a forged one cannot write to the bookies."""

from __future__ import annotations

from pathlib import Path
from typing import Iterator

import pulsar
import pytest
import trio

from bookie.client import BookKeeper, ClientConfig
from bookie.client.errors import BKError
from metadata import open_store
from quire.security.tokens import create_secret_key, create_token
from tests.e2e.conftest import new_client, start_broker
from tests.fixtures.bookies import start_bookie
from tests.fixtures.processes import QuireProcesses
from tests.fixtures.zookeeper import ZooKeeperServer
from tests.security.certs import CertificateAuthority
from tests.security.conftest import SecureNode, cluster_base, setup_tenants, write_security_files
from tests.security.test_auth_matrix import EXPECTED, quire_matrix, seed


class SecureCluster:
    def __init__(self, procs: QuireProcesses, zk_url: str, port: int, web: int, client_key: bytes,
                 bookie_key: bytes) -> None:
        self.procs, self.zk_url, self.port, self.web = procs, zk_url, port, web
        self.client_key, self.bookie_key = client_key, bookie_key
        self.secure: SecureNode  # the matrix helpers' view of this cluster (set by the fixture)
        self.ca_file = ""  # the CA of the bookies' TLS certificates

    @property
    def url(self) -> str:
        return f"pulsar://127.0.0.1:{self.port}"

    @property
    def admin(self) -> str:
        return f"http://127.0.0.1:{self.web}"


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory, zk_server: ZooKeeperServer) -> Iterator[SecureCluster]:
    base: Path = tmp_path_factory.mktemp("secure-cluster")
    zk_url, client_key, bookie_key = cluster_base(base, zk_server, "secure")  # clients->broker, broker->bookies
    ca = CertificateAuthority(base)
    bookie_cert = ca.issue("bookie-tls", "bookie", ips=("127.0.0.1",))  # (not bookie.key: the token key)
    (base / "bookie.toml").write_text(
        'bookie_auth_provider_factory_class = "token"\n'
        f'bookie_auth_token_secret_key = "file://{base / "bookie.key"}"\n'
        'bookie_auth_allowed_roles = ["broker"]\n'
        f'tls_provider_factory_class = "OpenSSL"\ntls_certificate_path = "{bookie_cert.cert}"\n'
        f'tls_key_store = "{bookie_cert.key}"\n')
    _, _, htpasswd, passwords = write_security_files(base)
    (base / "broker.toml").write_text(
        f'basic_auth_conf = "{htpasswd}"\n'
        "authentication_enabled = true\nauthentication_providers = [\"token\", \"basic\"]\n"
        "authorization_enabled = true\nsuperuser_roles = [\"admin\"]\n"
        f'token_secret_key = "file://{base / "client.key"}"\n'
        "[bookkeeper_client]\nclient_auth_provider_factory_class = \"token\"\n"
        f'tls_provider_factory_class = "OpenSSL"\ntls_trust_store = "{ca.file}"\n'
        "tls_hostname_verification_enabled = true\n"
        f'client_auth_token = "{create_token("broker", secret_key=bookie_key)}"\n')
    procs = QuireProcesses(base / "logs")
    try:
        for i in range(2):
            start_bookie(procs, zk_url, base, i, "--conf", str(base / "bookie.toml"))
        port, web = start_broker(procs, zk_url, 30000, "--conf", str(base / "broker.toml"), ready_path="/metrics")
        sc = SecureCluster(procs, zk_url, port, web, client_key, bookie_key)
        sc.ca_file = str(ca.file)
        sc.secure = SecureNode(sc, client_key, base, passwords)  # type: ignore[arg-type]  # has url/admin as a Standalone
        setup_tenants(sc.secure)
        seed(sc.secure)
        yield sc
        codes = [p.terminate() for p in reversed(procs.procs)]
        assert codes == [0] * len(codes), codes
    finally:
        procs.cleanup()


def test_clients_through_a_secured_broker_and_bookies(cluster: SecureCluster) -> None:
    admin = pulsar.AuthenticationToken(create_token("admin", secret_key=cluster.client_key))
    c = new_client(cluster.url, authentication=admin)
    try:
        consumer = c.subscribe("persistent://public/default/secure-cluster", "s",
                               initial_position=pulsar.InitialPosition.Earliest)
        producer = c.create_producer("persistent://public/default/secure-cluster")
        for i in range(10):
            producer.send(b"m%d" % i)  # acknowledged = stored on both bookies, which checked the broker's token
        got = [consumer.receive(timeout_millis=15000).data() for _ in range(10)]
        assert got == [b"m%d" % i for i in range(10)]
    finally:
        c.close()
    stranger = new_client(cluster.url, operation_timeout_seconds=5,
                          authentication=pulsar.AuthenticationToken(create_token("stranger", secret_key=cluster.client_key)))
    try:
        with pytest.raises(pulsar.AuthorizationError):
            stranger.create_producer("persistent://public/default/secure-cluster")
    finally:
        stranger.close()


def test_matrix_on_a_cluster(cluster: SecureCluster) -> None:
    """The issue-18 matrix with clients/ against the cluster (the standalone runs it with both clients)."""
    assert quire_matrix(cluster.secure) == EXPECTED


@pytest.mark.parametrize("role_key", ["broker", "none", "forged", "wrong-role"])
async def test_bookies_refuse_ledger_clients_without_the_broker_identity(cluster: SecureCluster, role_key: str) -> None:
    token = {"broker": create_token("broker", secret_key=cluster.bookie_key), "none": None,
             "forged": create_token("broker", secret_key=create_secret_key()),
             "wrong-role": create_token("intruder", secret_key=cluster.bookie_key)}[role_key]
    # TLS like the broker's, so only the identity differs
    cfg = ClientConfig(add_entry_timeout_s=2.0, client_connect_timeout_ms=2000, tls_provider_factory_class="OpenSSL",
                       tls_trust_store=cluster.ca_file,
                       **({"client_auth_provider_factory_class": "token", "client_auth_token": token} if token else {}))
    store = await open_store(cluster.zk_url)
    try:
        async with BookKeeper(store, cfg) as bk:
            if role_key == "broker":  # the control: the broker's identity writes
                lh = await bk.create_ledger(2, 2, 2, password=b"pw")
                assert await lh.add_entry(b"allowed") == 0
                await lh.close()
                return
            with pytest.raises(BKError):
                with trio.fail_after(30):
                    lh = await bk.create_ledger(2, 2, 2, password=b"pw")
                    await lh.add_entry(b"not allowed")
    finally:
        await store.close()
