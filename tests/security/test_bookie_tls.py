"""TLS between ledger clients (brokers) and bookies (issue 18): a bookie with
``tls_provider_factory_class`` serves TLS only; a client trusting its CA writes and reads, a
plain-TCP client or one trusting another CA cannot; with ``tls_client_authentication`` the
client needs a certificate from the bookie's trust store. The token identity works over TLS."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import Any, AsyncIterator

import pytest
import trio

from bookie.bookie import Bookie
from bookie.client import BookKeeper, ClientConfig
from bookie.client.errors import BKError
from metadata import open_store
from metadata.store import MetadataStore
from quire.security.tokens import create_secret_key, create_token
from tests.bookie.helpers import make_config
from tests.security.certs import CertificateAuthority


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    s = await open_store(f"memory://bookie-tls-{uuid.uuid4().hex}")
    yield s
    await s.close()


async def _write_read(store: MetadataStore, **client: Any) -> list[bytes]:
    cfg = ClientConfig(add_entry_timeout_s=2.0, read_timeout_s=2.0, client_connect_timeout_ms=2000, **client)
    async with BookKeeper(store, cfg) as bk:
        lh = await bk.create_ledger(1, 1, 1, password=b"pw")
        await lh.add_entry(b"secret payload")
        await lh.close()
        rh = await bk.open_ledger(lh.ledger_id, b"pw", recovery=False)
        return [e.data for e in await rh.read(0, 0)]


async def _refused(store: MetadataStore, **client: Any) -> None:
    with pytest.raises(BKError):
        with trio.fail_after(30):
            await _write_read(store, **client)


async def test_bookie_tls(tmp_path: Path, store: MetadataStore) -> None:
    ca = CertificateAuthority(tmp_path)
    server = ca.issue("bookie", "bookie", ips=("127.0.0.1",))
    client = ca.issue("broker", "broker", client=True)
    other = CertificateAuthority(tmp_path, "other-ca")
    key = create_secret_key()
    cfg = make_config(tmp_path, tls_provider_factory_class="OpenSSL", tls_certificate_path=str(server.cert),
                      tls_key_store=str(server.key), tls_trust_store=str(ca.file), tls_client_authentication=True,
                      bookie_auth_provider_factory_class="token",
                      bookie_auth_token_secret_key="data:;base64," + base64.b64encode(key).decode())
    token = create_token("broker", secret_key=key)
    good: dict[str, Any] = dict(tls_provider_factory_class="OpenSSL", tls_trust_store=str(ca.file),
                                tls_certificate_path=str(client.cert), tls_key_store=str(client.key),
                                client_auth_provider_factory_class="token", client_auth_token=token)
    async with trio.open_nursery() as nursery:
        bookie = Bookie(cfg, store)
        await bookie.start(nursery)
        try:
            assert await _write_read(store, **good) == [b"secret payload"]
            assert await _write_read(store, **good, tls_hostname_verification_enabled=True) == [b"secret payload"]
            await _refused(store, client_auth_provider_factory_class="token", client_auth_token=token)  # plain TCP
            await _refused(store, **{**good, "tls_trust_store": str(other.file)})  # the bookie is not trusted
            no_cert = {k: v for k, v in good.items() if k not in ("tls_certificate_path", "tls_key_store")}
            await _refused(store, **no_cert)  # tls_client_authentication: a certificate is required
            await _refused(store, **{**good, "client_auth_token": create_token("broker", secret_key=create_secret_key())})
        finally:
            await bookie.close()
            nursery.cancel_scope.cancel()


async def test_bookie_https_with_a_key_store(tmp_path: Path, store: MetadataStore) -> None:
    """http_server_tls_enable with http_server_key_store_path (one PEM holding the chain and the
    key, BookKeeper's key store) and no TLS on the bookie port: the HTTP API speaks HTTPS only."""
    import ssl

    import httpx

    ca = CertificateAuthority(tmp_path)
    issued = ca.issue("bookie-http", "bookie", ips=("127.0.0.1",))
    both = tmp_path / "key-store.pem"
    both.write_bytes(issued.cert.read_bytes() + issued.key.read_bytes())
    cfg = make_config(tmp_path, http_server_enabled=True, http_server_port=0, http_server_tls_enable=True,
                      http_server_key_store_path=str(both))
    async with trio.open_nursery() as nursery:
        bookie = Bookie(cfg, store)
        await bookie.start(nursery)
        try:
            async with httpx.AsyncClient(verify=ssl.create_default_context(cafile=str(ca.file))) as http:
                r = await http.get(f"https://127.0.0.1:{bookie.http_port}/api/v1/bookie/state")
                assert r.status_code == 200 and r.json()["running"] is True
            with pytest.raises(httpx.HTTPError):
                async with httpx.AsyncClient() as plain:
                    await plain.get(f"http://127.0.0.1:{bookie.http_port}/api/v1/bookie/state", timeout=5)
            assert await _write_read(store) == [b"secret payload"]  # the bookie port stays plain TCP
        finally:
            await bookie.close()
            nursery.cancel_scope.cancel()
