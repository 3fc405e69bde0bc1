"""Cookies: proof that a bookie's directories belong to it and to this cluster.

A cookie records the bookie id, its journal and ledger dirs and the cluster instance id. It
is written as ``current/VERSION`` in the journal dir and every ledger dir, and as
``/ledgers/cookies/<bookie id>`` in the metadata store (the same text, as a msgpack string)::

    5
    bookieHost: "127.0.0.1:3181"
    journalDir: "/data/journal"
    ledgerDirs: "2\\t/data/l1\\t/data/l2"
    instanceId: "6f0c..."

Startup is refused (CookieError) when a stored cookie differs from the configuration, when the
store has a cookie but a directory lost its own (wiped or replaced disk), when a directory
without a cookie already holds data, or when the directories have cookies the store lacks.
"""

from __future__ import annotations

import json
import os
import uuid
from dataclasses import dataclass
from pathlib import Path

import trio

from bookie.config import BookieConfig
from bookie.errors import CookieError
from metadata.errors import AlreadyExistsError, NotFoundError
from metadata.store import MetadataStore
from metadata.values import pack, unpack

LAYOUT_VERSION = 5
COOKIE_FILE = "VERSION"
INSTANCE_ID_PATH = "/ledgers/INSTANCEID"
COOKIES_PATH = "/ledgers/cookies"


@dataclass(frozen=True)
class Cookie:
    bookie_host: str
    journal_dir: str
    ledger_dirs: str
    instance_id: str = ""
    layout_version: int = LAYOUT_VERSION

    def encode(self) -> bytes:
        lines = [
            str(self.layout_version),
            f"bookieHost: {json.dumps(self.bookie_host)}",
            f"journalDir: {json.dumps(self.journal_dir)}",
            f"ledgerDirs: {json.dumps(self.ledger_dirs)}",
        ]
        if self.instance_id:
            lines.append(f"instanceId: {json.dumps(self.instance_id)}")
        return ("\n".join(lines) + "\n").encode()

    @classmethod
    def decode(cls, data: bytes) -> "Cookie":
        try:
            lines = data.decode().splitlines()
            version = int(lines[0])
            fields: dict[str, str] = {}
            for line in lines[1:]:
                if line.strip():
                    key, _, value = line.partition(":")
                    fields[key.strip()] = json.loads(value.strip())
            return cls(fields["bookieHost"], fields["journalDir"], fields["ledgerDirs"], fields.get("instanceId", ""), version)
        except (ValueError, KeyError, IndexError, UnicodeDecodeError) as exc:
            raise CookieError(f"unreadable cookie: {exc}") from None


def expected_cookie(config: BookieConfig, instance_id: str) -> Cookie:
    dirs = [str(Path(d).resolve()) for d in config.ledger_directories]
    return Cookie(
        config.bookie_id,
        str(Path(config.journal_directory).resolve()),
        "\t".join([str(len(dirs)), *dirs]),
        instance_id,
    )


def cookie_dirs(config: BookieConfig) -> list[Path]:
    """The ``current/`` dirs that each carry a VERSION file."""
    dirs = [Path(config.journal_directory) / "current"]
    dirs += [Path(d) / "current" for d in config.ledger_directories]
    return dirs


def read_dir_cookie(current: Path) -> Cookie | None:
    try:
        return Cookie.decode((current / COOKIE_FILE).read_bytes())
    except FileNotFoundError:
        return None


def _has_data(current: Path) -> bool:
    try:
        return any(name != COOKIE_FILE for name in os.listdir(current))
    except FileNotFoundError:
        return False


def _write_dir_cookie(current: Path, cookie: Cookie) -> None:
    current.mkdir(parents=True, exist_ok=True)
    tmp = current / (COOKIE_FILE + ".tmp")
    with open(tmp, "wb") as f:
        f.write(cookie.encode())
        f.flush()
        os.fsync(f.fileno())
    os.replace(tmp, current / COOKIE_FILE)


async def get_instance_id(store: MetadataStore) -> str:
    """The cluster instance id, created on first use (``/ledgers/INSTANCEID``)."""
    try:
        value, _ = await store.get(INSTANCE_ID_PATH)
        return str(unpack(value))
    except NotFoundError:
        pass
    try:
        await store.create(INSTANCE_ID_PATH, pack(str(uuid.uuid4())), make_parents=True)
    except AlreadyExistsError:
        pass
    value, _ = await store.get(INSTANCE_ID_PATH)
    return str(unpack(value))


def check_dir_cookies(config: BookieConfig, expected: Cookie, stored: Cookie | None) -> list[Path]:
    """Validate the dirs against the expected cookie and the store's one (None = absent).

    Returns the dirs that still need a cookie written (blocking: call from a thread).
    """
    missing: list[Path] = []
    found: list[Path] = []
    for current in cookie_dirs(config):
        c = read_dir_cookie(current)
        if c is None:
            if _has_data(current):
                raise CookieError(
                    f"{current} holds data but has no cookie: it belongs to another bookie or its cookie was removed"
                )
            missing.append(current)
            continue
        if c != expected:
            raise CookieError(f"cookie in {current} does not match this bookie's configuration: {c} != {expected}")
        found.append(current)
    if stored is not None:
        if stored != expected:
            raise CookieError(f"cookie in the metadata store does not match the configuration: {stored} != {expected}")
        if missing and not config.allow_storage_expansion:
            raise CookieError(
                f"directories {', '.join(map(str, missing))} have no cookie but this bookie is registered: "
                "its data dirs were wiped or replaced; refusing to start (decommission the bookie first)"
            )
    elif found:
        if config.metadata_service_uri:
            raise CookieError(
                f"directories {', '.join(map(str, found))} have cookies but the metadata store has none: "
                "wrong cluster or the metadata was wiped"
            )
        if missing and not config.allow_storage_expansion:
            raise CookieError(
                f"directories {', '.join(map(str, missing))} lost their cookie while others kept it: wiped dirs"
            )
    return missing


async def verify_and_write(config: BookieConfig, store: MetadataStore | None) -> Cookie:
    """Check every cookie and write the missing ones (dirs first, then the store)."""
    instance_id = await get_instance_id(store) if store is not None else ""
    expected = expected_cookie(config, instance_id)
    stored: Cookie | None = None
    path = f"{COOKIES_PATH}/{config.bookie_id}"
    if store is not None:
        try:
            value, _ = await store.get(path)
            stored = Cookie.decode(str(unpack(value)).encode())
        except NotFoundError:
            stored = None
    missing = await trio.to_thread.run_sync(check_dir_cookies, config, expected, stored)
    for current in missing:
        await trio.to_thread.run_sync(_write_dir_cookie, current, expected)
    if store is not None and stored is None:
        await store.put(path, pack(expected.encode().decode()), None, make_parents=True)
    return expected
