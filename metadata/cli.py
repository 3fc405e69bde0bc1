"""`quire metadata ...`: inspect and edit a metadata store (ls, get, put, rm, ledgers).

Values are shown as text if they are printable UTF-8, else as JSON if they decode as msgpack,
else as hex.
`put --json` stores a JSON document as msgpack (what quire itself writes).
"""

from __future__ import annotations

import json
import logging
import os
import sys
from collections.abc import Awaitable, Callable
from typing import Any

import click
import trio

from metadata import open_store, parse_url
from metadata.errors import MetadataError, StoreUnavailableError
from metadata.store import MetadataStore, Stat

URL_OPTION = click.option(
    "--metadata-url", "--url", "url",
    envvar="QUIRE_METADATA_URL",
    required=True,
    help="metadata store URL: zk://host:port/chroot, rocksdb:///path or memory://name (env QUIRE_METADATA_URL)",
)
TIMEOUT_OPTION = click.option("--timeout", default=10.0, show_default=True, help="operation timeout in seconds")


async def _open(url: str, timeout: float, read_only: bool) -> MetadataStore:
    scheme, _, path = parse_url(url)
    if read_only and scheme == "rocksdb" and not os.path.isdir(path):
        # Reading must not leave an empty database behind at a mistyped path.
        raise StoreUnavailableError(f"no metadata database at {path}")
    try:
        return await open_store(url, operation_timeout_s=timeout)
    except StoreUnavailableError:
        if not (read_only and scheme == "rocksdb"):
            raise
    # A running standalone owns the embedded database: read a snapshot instead.
    from metadata.rocksdb_store import open_rocksdb_store

    click.echo("note: database in use by another process; showing a read-only snapshot", err=True)
    return await open_rocksdb_store(path, read_only=True)


async def open_for_reading(url: str, timeout: float = 10.0) -> MetadataStore:
    """A store to read from: a running standalone's embedded database as a read-only snapshot
    (`quire cluster-status --metadata-url rocksdb://...` uses it too)."""
    return await _open(url, timeout, read_only=True)


def _run(
    url: str, timeout: float, action: Callable[[MetadataStore], Awaitable[Any]], *, read_only: bool = False
) -> Any:
    async def main() -> Any:
        store = await _open(url, timeout, read_only)
        try:
            return await action(store)
        finally:
            await store.close()

    # kazoo logs every reconnect attempt; the command reports the outcome itself.
    logging.getLogger("kazoo").setLevel(logging.ERROR)
    try:
        return trio.run(main)
    except MetadataError as exc:
        raise click.ClickException(f"{type(exc).__name__}: {exc}") from exc


def _jsonable(obj: Any) -> Any:
    if isinstance(obj, bytes):
        try:
            return obj.decode()
        except UnicodeDecodeError:
            return obj.hex()
    if isinstance(obj, dict):
        return {str(_jsonable(k)): _jsonable(v) for k, v in obj.items()}
    if isinstance(obj, (list, tuple)):
        return [_jsonable(v) for v in obj]
    return obj


def render_value(value: bytes) -> str:
    """Human form of a stored value: printable UTF-8 as text, else msgpack as JSON, else hex.
    (Text first: a short ASCII string is also valid msgpack, e.g. b"v" is the integer 118.)"""
    from metadata.values import ValueDecodeError, unpack

    if not value:
        return ""
    try:
        text = value.decode()
        if all(ch.isprintable() or ch in "\n\r\t" for ch in text):
            return text
    except UnicodeDecodeError:
        pass
    try:
        return json.dumps(_jsonable(unpack(value)), indent=2, sort_keys=True)
    except ValueDecodeError:
        return value.hex()


def _stat_line(stat: Stat) -> str:
    return (
        f"version={stat.version} ephemeral={stat.ephemeral} children={stat.num_children} "
        f"ctime_ms={stat.ctime_ms} mtime_ms={stat.mtime_ms}"
    )


@click.group()
def metadata() -> None:
    """Inspect and edit the metadata store (ZooKeeper, embedded RocksDB)."""


@metadata.command("ls")
@URL_OPTION
@TIMEOUT_OPTION
@click.option("-R", "--recursive", is_flag=True, help="list the whole subtree (full paths)")
@click.argument("path", default="/")
def ls_cmd(url: str, timeout: float, recursive: bool, path: str) -> None:
    """List the children of PATH."""

    async def action(store: MetadataStore) -> list[str]:
        if not recursive:
            return await store.children(path)
        out: list[str] = []

        async def walk(p: str) -> None:
            for name in await store.children(p):
                child = f"{p.rstrip('/')}/{name}"
                out.append(child)
                await walk(child)

        await walk(path)
        return out

    for line in _run(url, timeout, action, read_only=True):
        click.echo(line)


@metadata.command("get")
@URL_OPTION
@TIMEOUT_OPTION
@click.option("--raw", is_flag=True, help="write the value bytes unchanged to stdout")
@click.option("--stat", "show_stat", is_flag=True, help="also print the node's stat")
@click.argument("path")
def get_cmd(url: str, timeout: float, raw: bool, show_stat: bool, path: str) -> None:
    """Print the value of PATH."""
    value, stat = _run(url, timeout, lambda store: store.get(path), read_only=True)
    if raw:
        sys.stdout.buffer.write(value)
        sys.stdout.buffer.flush()
    else:
        click.echo(render_value(value))
    if show_stat:
        click.echo(_stat_line(stat), err=raw)


@metadata.command("put")
@URL_OPTION
@TIMEOUT_OPTION
@click.option("--json", "as_json", is_flag=True, help="VALUE is JSON: store it as msgpack")
@click.option(
    "--version",
    "expected_version",
    type=int,
    default=None,
    help="compare-and-set: expected version (-1 = must not exist)",
)
@click.option("-p", "--parents", is_flag=True, help="create missing parent nodes")
@click.argument("path")
@click.argument("value", required=False)
def put_cmd(
    url: str, timeout: float, as_json: bool, expected_version: int | None, parents: bool, path: str, value: str | None
) -> None:
    """Set PATH to VALUE (read from stdin if VALUE is omitted)."""
    data = sys.stdin.buffer.read() if value is None else value.encode()
    if as_json:
        from metadata.values import pack

        try:
            data = pack(json.loads(data))
        except json.JSONDecodeError as exc:
            raise click.BadParameter(f"not JSON: {exc}", param_hint="VALUE") from exc
    stat = _run(url, timeout, lambda store: store.put(path, data, expected_version, make_parents=parents))
    click.echo(_stat_line(stat))


@metadata.command("rm")
@URL_OPTION
@TIMEOUT_OPTION
@click.option("-r", "--recursive", is_flag=True, help="delete the whole subtree")
@click.option("--version", "expected_version", type=int, default=None, help="expected version")
@click.argument("path")
def rm_cmd(url: str, timeout: float, recursive: bool, expected_version: int | None, path: str) -> None:
    """Delete PATH."""
    if recursive:
        _run(url, timeout, lambda store: store.delete_recursive(path))
    else:
        _run(url, timeout, lambda store: store.delete(path, expected_version))


@metadata.command("ledgers")
@URL_OPTION
@TIMEOUT_OPTION
@click.option("--root", default="/ledgers", show_default=True)
def ledgers_cmd(url: str, timeout: float, root: str) -> None:
    """List every ledger id with metadata, ascending."""
    from metadata.ledger_ids import iter_ledger_ids

    async def action(store: MetadataStore) -> list[int]:
        return [lid async for lid in iter_ledger_ids(store, root)]

    for ledger_id in _run(url, timeout, action, read_only=True):
        click.echo(ledger_id)
