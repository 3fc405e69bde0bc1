"""Bookies that require an identity of their clients (issue 18, bookie side): with
``bookie_auth_provider_factory_class = "token"`` a ledger client must open every connection
with AUTH carrying a token the bookie's key verifies (and an allowed role); a client without
one, with a forged one or with another role cannot add or read, and a request sent before AUTH
is answered UNAUTHORIZED and the connection closed."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path
from typing import AsyncIterator

import httpx
import pytest
import trio

from bookie.bookie import Bookie
from bookie.client import BookKeeper, ClientConfig
from bookie.client.errors import BKError
from bookie.protocol import Status
from metadata import open_store
from metadata.store import MetadataStore
from quire.security.tokens import create_secret_key, create_token
from tests.bookie.helpers import BookieClient, make_config

KEY = create_secret_key()
KEY_VALUE = "data:;base64," + base64.b64encode(KEY).decode()


@pytest.fixture
async def store() -> AsyncIterator[MetadataStore]:
    s = await open_store(f"memory://bookie-auth-{uuid.uuid4().hex}")
    yield s
    await s.close()


def client_config(token: str | None) -> ClientConfig:
    if token is None:
        return ClientConfig(add_entry_timeout_s=2.0, read_timeout_s=2.0, client_connect_timeout_ms=2000)
    return ClientConfig(add_entry_timeout_s=2.0, read_timeout_s=2.0, client_connect_timeout_ms=2000,
                        client_auth_provider_factory_class="token", client_auth_token=token)


async def _write(store: MetadataStore, token: str | None) -> list[bytes]:
    async with BookKeeper(store, client_config(token)) as bk:
        lh = await bk.create_ledger(1, 1, 1, password=b"pw")
        await lh.add_entry(b"one")
        await lh.add_entry(b"two")
        await lh.close()
        rh = await bk.open_ledger(lh.ledger_id, b"pw", recovery=False)
        return [e.data for e in await rh.read(0, 1)]


async def test_bookie_requires_a_valid_token(tmp_path: Path, store: MetadataStore) -> None:
    cfg = make_config(tmp_path, bookie_auth_provider_factory_class="token", bookie_auth_token_secret_key=KEY_VALUE,
                      bookie_auth_allowed_roles=["broker"], http_server_enabled=True, http_server_port=0)
    async with trio.open_nursery() as nursery:
        bookie = Bookie(cfg, store)
        await bookie.start(nursery)
        try:
            got = await _write(store, create_token("broker", secret_key=KEY))  # the broker's identity: works
            assert got == [b"one", b"two"]
            for token in (None, create_token("broker", secret_key=create_secret_key()),
                          create_token("someone-else", secret_key=KEY), "not-a-token"):
                with pytest.raises(BKError):
                    with trio.fail_after(20):
                        await _write(store, token)
            # a raw request before AUTH: UNAUTHORIZED, then the bookie closes the connection
            raw = await BookieClient.connect("127.0.0.1", bookie.port, nursery)
            resp = await raw.add(7, 0, b"x")
            assert resp.status == Status.UNAUTHORIZED
            with pytest.raises(Exception):
                with trio.fail_after(5):
                    await raw.add(7, 1, b"y")
            await raw.aclose()
            # the bookie's admin HTTP wants the same identity; /metrics stays open
            async with httpx.AsyncClient(base_url=f"http://127.0.0.1:{bookie.http_port}") as http:
                assert (await http.get("/api/v1/bookie/state")).status_code == 401
                assert (await http.put("/api/v1/bookie/gc", headers={"Authorization": "Bearer " + create_token(
                    "someone-else", secret_key=KEY)})).status_code == 401
                ok = await http.get("/api/v1/bookie/state",
                                    headers={"Authorization": "Bearer " + create_token("broker", secret_key=KEY)})
                assert ok.status_code == 200, ok.text
                assert (await http.get("/metrics")).status_code == 200
        finally:
            await bookie.close()
            nursery.cancel_scope.cancel()


async def test_bookie_without_auth_accepts_an_auth_request(tmp_path: Path, store: MetadataStore) -> None:
    # A broker configured with a token still talks to bookies that require none.
    async with trio.open_nursery() as nursery:
        bookie = Bookie(make_config(tmp_path), store)
        await bookie.start(nursery)
        try:
            await _write(store, create_token("broker", secret_key=KEY))
            await _write(store, None)
        finally:
            await bookie.close()
            nursery.cancel_scope.cancel()
