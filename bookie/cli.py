"""`quire bookie` (run a bookie) and `quire bookie-shell` (inspect a stopped bookie's files).

Settings come from an optional TOML file (``--conf``; BookieConfig keys, top level or under
``[bookie]``), then the named flags, then ``--set key=value`` for any other key. SIGTERM and
SIGINT shut the bookie down gracefully (journal flushed, final checkpoint); SIGKILL is what
the journal is for.
"""

from __future__ import annotations

import dataclasses
import gc
import json
import logging
import signal
import sys
from pathlib import Path
from typing import Any

import click
import trio

from bookie.config import BookieConfig
from bookie.errors import BookieError
from quire.cli_types import LOG_LEVEL
from quire.cpu_profile import cpu_profile
from quire.config import parse_sets

log = logging.getLogger(__name__)


def build_config(conf: str | None, flags: dict[str, Any], sets: tuple[str, ...]) -> BookieConfig:
    """The file, then the named flags, then ``--set``; any problem is one ConfigError (quire.config)."""
    overrides = {k: v for k, v in flags.items() if v is not None}
    overrides.update(parse_sets(BookieConfig, sets, what="bookie"))
    return BookieConfig.load(conf, **overrides)


async def _run_bookie(config: BookieConfig) -> None:
    from bookie.bookie import Bookie

    store = None
    if config.metadata_service_uri:
        from metadata import open_store

        store = await open_store(config.metadata_service_uri, session_timeout_s=config.zk_timeout / 1000)
    try:
        async with trio.open_nursery() as nursery:
            bookie = Bookie(config, store)
            await bookie.start(nursery)
            print(f"bookie {bookie.bookie_id} ready (port {bookie.port}, http {bookie.http_port})", flush=True)
            with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                async for _ in signals:
                    break
            log.info("shutting down")
            await bookie.close()
            nursery.cancel_scope.cancel()
    finally:
        if store is not None:
            with trio.CancelScope(shield=True):
                await store.close()


@click.command("bookie")
@click.option("--conf", type=click.Path(exists=True, dir_okay=False), help="TOML config file (BookieConfig keys)")
@click.option("--metadata-url", "metadata_service_uri",
              help="zk://host:port/chroot, rocksdb:///path or memory:// (default: none, the bookie registers nowhere)")
@click.option("--bind-address", "--host", "listening_interface",
              help="interface to listen on (default 127.0.0.1; --host is the old spelling)")
@click.option("--advertised-address", help="address registered in the metadata store")
@click.option("--port", "bookie_port", type=int, help="bookie protocol port (default 3181; 0 = any)")
@click.option("--http-port", "http_server_port", type=int, help="HTTP admin port (default 8000; 0 = any)")
@click.option("--journal-dir", "journal_directory", help="journal directory")
@click.option("--ledger-dirs", "ledger_directories", help="comma-separated ledger directories")
@click.option("--rack", "bookie_rack", help="rack of this bookie for rack-aware placement (/bookies/<id>/rack)")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="any other BookieConfig key")
@click.option("--log-level", type=LOG_LEVEL, default="INFO", show_default=True)
def bookie(conf: str | None, sets: tuple[str, ...], log_level: str, **flags: Any) -> None:
    """Run a bookie: journal + write/read cache + entry logs + RocksDB index."""
    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    if flags.get("ledger_directories"):
        flags["ledger_directories"] = [d for d in flags["ledger_directories"].split(",") if d]
    config = build_config(conf, flags, sets)
    if not config.metadata_service_uri:
        click.echo("warning: no --metadata-url: this bookie registers nowhere, so no broker can find it "
                   "(give the cluster's, e.g. --metadata-url zk://127.0.0.1:2181/quire)", err=True)
    # Journal/read worker threads must get the GIL back promptly after fdatasync/pread:
    # with the default 5 ms switch interval a busy event loop delays every group commit.
    sys.setswitchinterval(0.0005)
    # Every add allocates a few short-lived containers (header list, request, ack token); with
    # the default gen-0 threshold of 700 the collector runs every ~200 adds and its older
    # generations rescan the long-lived state. Measured: GC time per add drops ~2.5x.
    gc.freeze()  # everything imported so far is permanent
    gc.set_threshold(50_000, 20, 100)
    try:
        with cpu_profile():
            trio.run(_run_bookie, config)
    except* BookieError as group:
        for exc in group.exceptions:
            click.echo(f"bookie failed to start: {exc}", err=True)
        sys.exit(2)


# --- bookie-shell ----------------------------------------------------------------------------


def _ledger_dirs(ledger_dirs: str) -> list[Path]:
    dirs = [Path(d) / "current" for d in ledger_dirs.split(",") if d]
    for cur in dirs:
        if not cur.is_dir():
            raise click.ClickException(f"{cur.parent} is not a bookie ledger dir (no current/ inside): give the "
                                       "bookie's --ledger-dirs (a standalone's: DATA_DIR/bookkeeper/ledgers)")
    return dirs


@click.group("bookie-shell")
def bookie_shell() -> None:
    """Inspect a bookie's journal, entry logs and index.

    The reading commands work on a running bookie too: they open its indexes read-only, a
    snapshot of the moment they start (entries still in the write cache are not in it yet).
    rebuild-index writes, so it needs the bookie stopped."""


@bookie_shell.command("last-mark")
@click.option("--ledger-dirs", required=True, help="comma-separated ledger directories")
def last_mark(ledger_dirs: str) -> None:
    """Show the LastLogMark stored in each ledger dir and the one that wins."""
    from bookie import log_mark

    for cur in _ledger_dirs(ledger_dirs):
        try:
            mark = log_mark.decode((cur / log_mark.FILE_NAME).read_bytes())
        except FileNotFoundError:
            mark = None
        click.echo(f"{cur}: {mark if mark is not None else 'none'}")
    click.echo(f"last mark: {log_mark.read_mark(_ledger_dirs(ledger_dirs))}")


@bookie_shell.command("list-ledgers")
@click.option("--ledger-dirs", required=True, help="comma-separated ledger directories")
def list_ledgers(ledger_dirs: str) -> None:
    """List the ledgers in the index with their state and last indexed entry."""
    from bookie.ledger_index import EntryLocationIndex, LedgerMetadataIndex

    for cur in _ledger_dirs(ledger_dirs):
        states = LedgerMetadataIndex(cur / "ledgers", read_only=True)
        locations = EntryLocationIndex(cur / "locations", read_only=True)
        try:
            for lid, st in sorted(states.load_all().items()):
                row = {"ledger": lid, "fenced": st.fenced, "deleted": st.deleted, "lac": st.lac,
                       "last_entry": locations.last_entry(lid), "master_key": st.master_key.hex()}
                click.echo(json.dumps(row))
        finally:
            states.close()
            locations.close()


@bookie_shell.command("read-entry")
@click.option("--ledger-dirs", required=True, help="comma-separated ledger directories")
@click.argument("ledger_id", type=int)
@click.argument("entry_id", type=int)
def read_entry(ledger_dirs: str, ledger_id: int, entry_id: int) -> None:
    """Read one checkpointed entry through the location index and verify its digest."""
    from bookie import entry_format
    from bookie.entry_logger import EntryLogger
    from bookie.ledger_index import EntryLocationIndex

    dirs = _ledger_dirs(ledger_dirs)
    cur = dirs[ledger_id % len(dirs)]
    locations = EntryLocationIndex(cur / "locations", read_only=True)
    try:
        loc = locations.get(ledger_id, entry_id)
    finally:
        locations.close()
    if loc is None:
        raise click.ClickException(f"entry {ledger_id}:{entry_id} is not in the index (not checkpointed yet?)")
    data = EntryLogger(cur, 0).read(loc, ledger_id, entry_id)
    try:
        hdr = entry_format.verify(data)
        digest = "ok"
    except BookieError as exc:
        hdr, digest = entry_format.unpack_header(data), f"BAD ({exc})"
    click.echo(json.dumps({"ledger": hdr.ledger_id, "entry": hdr.entry_id, "lac": hdr.lac, "length": hdr.length,
                           "digest": digest, "location": dataclasses.asdict(loc), "size": len(data)}))
    payload = entry_format.payload(data)
    click.echo(payload[:256].decode("utf-8", "backslashreplace") + ("..." if len(payload) > 256 else ""))


@bookie_shell.command("journal-dump")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--limit", default=100, show_default=True, help="records to print (0 = all)")
def journal_dump(path: str, limit: int) -> None:
    """Print a journal file's header and records, and where/why the scan stopped."""
    from bookie import journal_format as jf

    data = Path(path).read_bytes()
    click.echo(f"journal id {jf.decode_header(data):x}, {len(data)} bytes")
    kinds = {jf.ENTRY_ID_MASTER_KEY: "master-key", jf.ENTRY_ID_FENCE: "fence", jf.ENTRY_ID_EXPLICIT_LAC: "explicit-lac"}
    result = jf.ScanResult(jf.HEADER_SIZE, "eof")
    n = 0
    for rec in jf.scan(data, jf.HEADER_SIZE, result):
        n += 1
        if not limit or n <= limit:
            kind = kinds.get(rec.entry_id, "meta" if rec.entry_id < 0 else "entry")
            click.echo(f"{rec.end_offset:>12} {kind:<12} ledger={rec.ledger_id} entry={rec.entry_id} bytes={len(rec.payload)}")
    click.echo(f"{n} records; scan stopped at offset {result.end_offset} ({result.reason})")


@bookie_shell.command("entrylog-dump")
@click.argument("path", type=click.Path(exists=True, dir_okay=False))
@click.option("--limit", default=100, show_default=True, help="records to print (0 = all)")
def entrylog_dump(path: str, limit: int) -> None:
    """Print an entry log's header, records and ledgers map."""
    from bookie import entry_log_format as elf

    data = Path(path).read_bytes()
    hdr = elf.decode_header(data)
    click.echo(f"entry log {hdr.log_id:x}: ledgers map at {hdr.ledgers_map_offset}, {hdr.ledgers_count} ledgers")
    n = 0
    for rec in elf.scan(data):
        if rec.ledger_id == elf.LEDGERS_MAP_ID:
            continue
        n += 1
        if not limit or n <= limit:
            click.echo(f"{rec.offset:>12} ledger={rec.ledger_id} entry={rec.entry_id} bytes={len(rec.data)}")
    click.echo(f"{n} entries")
    if hdr.ledgers_count:
        for lid, size in sorted(elf.decode_ledgers_map(data, hdr.ledgers_map_offset, hdr.ledgers_count).items()):
            click.echo(f"ledgers map: ledger={lid} bytes={size}")


@bookie_shell.command("list-entry-logs")
@click.option("--ledger-dirs", required=True, help="comma-separated ledger directories")
def list_entry_logs(ledger_dirs: str) -> None:
    """List every entry log with its ledgers, usage (live bytes / bytes) and age."""
    from bookie.index_rebuild import entry_log_report

    for cur in _ledger_dirs(ledger_dirs):
        for row in entry_log_report(cur):
            click.echo(json.dumps({"dir": str(cur), **row}))


@bookie_shell.command("rebuild-index")
@click.option("--ledger-dirs", required=True, help="comma-separated ledger directories")
def rebuild_index(ledger_dirs: str) -> None:
    """Rebuild the location index from the entry logs (the old one is kept as locations.bak-*)."""
    from bookie.index_rebuild import rebuild_location_index

    for cur in _ledger_dirs(ledger_dirs):
        click.echo(json.dumps({"dir": str(cur), **rebuild_location_index(cur)}))


def _register_autorecovery_commands() -> None:
    """`decommission`, `list-underreplicated` and `autorecovery` talk to the cluster (bookie.autorecovery)."""
    from bookie.autorecovery.cli import (
        autorecovery_switch,
        decommission,
        list_underreplicated,
        lost_bookie_recovery_delay,
    )

    bookie_shell.add_command(decommission)
    bookie_shell.add_command(list_underreplicated)
    bookie_shell.add_command(autorecovery_switch)
    bookie_shell.add_command(lost_bookie_recovery_delay)


_register_autorecovery_commands()
