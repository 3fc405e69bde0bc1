"""One secured ``quire standalone`` for the tests of this package (session scope: the matrix,
token refresh and TLS tests share it): token (HS256) and basic authentication, authorization
with superuser ``admin``, tenants ``acme`` (admin ``acme-admin``) and ``other`` (admin
``other-admin``), ``granted`` / ``granted-basic`` holding produce+consume on ``acme/ns``."""

from __future__ import annotations

import base64
import uuid
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterator

import httpx
import pytest

from quire.security.htpasswd import hash_password
from quire.security.tokens import create_secret_key, create_token
from tests.e2e.conftest import Standalone, start_standalone
from tests.fixtures.zookeeper import ZooKeeperServer

SUPERUSER = "admin"


@dataclass
class SecureNode:
    node: Standalone
    secret_key: bytes
    base: Path
    passwords: dict[str, str] = field(default_factory=dict)

    def token(self, role: str, expiry_seconds: int | None = None, *, key: bytes | None = None) -> str:
        return create_token(role, secret_key=key or self.secret_key, expiry_seconds=expiry_seconds)

    def bearer(self, role: str) -> dict[str, str]:
        return {"Authorization": f"Bearer {self.token(role)}"}

    def admin(self) -> httpx.Client:
        return httpx.Client(base_url=self.node.admin, headers=self.bearer(SUPERUSER), timeout=30)


def write_security_files(base: Path) -> tuple[bytes, Path, Path, dict[str, str]]:
    key = create_secret_key()
    key_file = base / "secret.key"
    key_file.write_bytes(key)
    passwords = {"granted-basic": "basic-pw", "stranger-basic": "stranger-pw"}
    htpasswd = base / "htpasswd"
    # apr1 (htpasswd -m, Pulsar's documented format) and bcrypt (htpasswd -B) side by side
    htpasswd.write_text(f"granted-basic:{hash_password('basic-pw', 'apr1')}\n"
                        f"stranger-basic:{hash_password('stranger-pw', 'bcrypt')}\n")
    return key, key_file, htpasswd, passwords


def security_args(key_file: Path, htpasswd: Path) -> list[str]:
    return ["--set", "authentication_enabled=true", "--set", "authentication_providers=token,basic",
            "--set", "authorization_enabled=true", "--set", f"superuser_roles={SUPERUSER}",
            "--set", f"token_secret_key=file://{key_file}", "--set", f"basic_auth_conf={htpasswd}",
            "--set", "authentication_refresh_check_seconds=1"]


@pytest.fixture(scope="session")
def secure(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SecureNode]:
    base = tmp_path_factory.mktemp("secure")
    key, key_file, htpasswd, passwords = write_security_files(base)
    node = start_standalone(base, *security_args(key_file, htpasswd), "--log-level", "INFO", ready_path="/metrics")
    sn = SecureNode(node, key, base, passwords)
    try:
        setup_tenants(sn)
        yield sn
    finally:
        code = node.proc.terminate()
        print(node.proc.log_tail(30))
    assert code == 0


def setup_tenants(sn: SecureNode) -> None:
    """Tenants acme and other (admins acme-admin, other-admin), namespaces */ns, grants on acme/ns."""
    with sn.admin() as a:
        for tenant in ("acme", "other"):
            r = a.put(f"/admin/v2/tenants/{tenant}",
                      json={"adminRoles": [f"{tenant}-admin"], "allowedClusters": ["standalone"]})
            assert r.status_code == 204, r.text
            assert a.put(f"/admin/v2/namespaces/{tenant}/ns").status_code == 204
        for role in ("granted", "granted-basic"):
            r = a.post(f"/admin/v2/namespaces/acme/ns/permissions/{role}", json=["produce", "consume"])
            assert r.status_code == 204, r.text


def basic_header(user: str, password: str) -> dict[str, str]:
    return {"Authorization": "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()}


def cluster_base(base: Path, zk_server: ZooKeeperServer, name: str) -> tuple[str, bytes, bytes]:
    """A secured cluster's start: its ZooKeeper chroot (url), and the token keys clients use
    towards brokers and brokers towards bookies, written to ``client.key`` / ``bookie.key``."""
    if not zk_server.is_running:
        zk_server.start()
    chroot = f"/{name}-{uuid.uuid4().hex}"
    zk_server.ensure_path(chroot)
    client_key, bookie_key = create_secret_key(), create_secret_key()
    (base / "client.key").write_bytes(client_key)
    (base / "bookie.key").write_bytes(bookie_key)
    return zk_server.url(chroot), client_key, bookie_key
