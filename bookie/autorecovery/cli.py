"""`quire autorecovery` (the auditor + a replication worker on their own) and the bookie-shell
commands `decommission` and `list-underreplicated` (registered in ``bookie/cli.py``).

Settings are the bookie's (``--conf`` TOML, top level or ``[bookie]``; ``--set key=value``):
``lost_bookie_recovery_delay``, ``auditor_periodic_check_interval``,
``auditor_periodic_bookie_check_interval``, ``rereplication_entry_batch_size``,
``open_ledger_rereplication_grace_period``, ``rw_rereplicate_backoff_ms``,
``autorecovery_ledger_passwords``.
"""

from __future__ import annotations

import json
import logging
import signal
from typing import Any, Awaitable, Callable, TypeVar

import click
import trio

log = logging.getLogger(__name__)
T = TypeVar("T")


async def _open(url: str, session_timeout_s: float = 10.0) -> Any:
    from metadata import open_store

    return await open_store(url, session_timeout_s=session_timeout_s)


def _on_store(url: str, fn: Callable[[Any], Awaitable[T]]) -> T:
    """Run ``fn(store)`` on a store opened for it (closed again whatever happens)."""
    async def main() -> T:
        store = await _open(url)
        try:
            return await fn(store)
        finally:
            with trio.CancelScope(shield=True):
                await store.close()

    return trio.run(main)


@click.command("autorecovery")
@click.option("--conf", type=click.Path(exists=True, dir_okay=False), help="TOML config file (bookie keys)")
@click.option("--metadata-url", "metadata_service_uri", help="zk://host:port/chroot (the bookies' metadata store)")
@click.option("--http-port", type=int, default=None, help="serve Prometheus /metrics on this port")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="any bookie config key")
@click.option("--log-level", default="INFO", show_default=True)
def autorecovery(conf: str | None, metadata_service_uri: str | None, http_port: int | None, sets: tuple[str, ...],
                 log_level: str) -> None:
    """Run the auditor (elected among all auto-recovery processes) and a replication worker."""
    from bookie.cli import build_config  # (bookie.cli registers this module's shell commands)

    logging.basicConfig(level=log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    config = build_config(conf, {"metadata_service_uri": metadata_service_uri}, sets)
    if not config.metadata_service_uri:
        raise click.UsageError("--metadata-url (or metadata_service_uri in --conf) is required")

    async def main() -> None:
        from prometheus_client import CollectorRegistry, start_http_server

        from bookie.autorecovery.service import AutoRecovery

        registry = CollectorRegistry(auto_describe=True)
        if http_port is not None:
            start_http_server(http_port, addr=config.listening_interface, registry=registry)
        store = await _open(config.metadata_service_uri, config.zk_timeout / 1000)
        try:
            async with trio.open_nursery() as nursery:
                ar = await nursery.start(AutoRecovery(store, config, registry=registry).run)
                print(f"autorecovery {ar.id} running", flush=True)
                with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
                    async for _ in signals:
                        break
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await store.close()

    trio.run(main)


@click.command("decommission")
@click.option("--metadata-url", required=True, help="zk://host:port/chroot")
@click.option("--bookie-id", required=True, help="host:port of the bookie to drain (down or read-only)")
@click.option("--conf", type=click.Path(exists=True, dir_okay=False), help="TOML config (auto-recovery keys)")
@click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="any bookie config key")
@click.option("--timeout", type=float, default=None, help="give up after this many seconds")
def decommission(metadata_url: str, bookie_id: str, conf: str | None, sets: tuple[str, ...],
                 timeout: float | None) -> None:
    """Re-replicate every ledger fragment on a bookie elsewhere and wait until none names it."""
    from bookie.autorecovery.decommission import decommission_bookie
    from bookie.autorecovery.errors import DecommissionError
    from bookie.cli import build_config

    config = build_config(conf, {"metadata_service_uri": metadata_url}, sets)
    logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    async def main(store: Any) -> dict[str, object]:
        with click.progressbar(length=1, label=f"draining {bookie_id}", show_pos=True) as bar:
            def progress(done: int, total: int) -> None:
                bar.length = max(total, 1)
                bar.update(done - bar.pos if total else 1 - bar.pos)

            return await decommission_bookie(store, bookie_id, config, progress=progress, timeout_s=timeout)

    try:
        result = _on_store(metadata_url, main)
    except DecommissionError as exc:
        raise click.ClickException(str(exc)) from None
    except trio.TooSlowError:
        raise click.ClickException(f"{bookie_id} was not drained within {timeout} s (progress is kept; run it again)") from None
    click.echo(json.dumps(result))


@click.command("list-underreplicated")
@click.option("--metadata-url", required=True, help="zk://host:port/chroot")
def list_underreplicated(metadata_url: str) -> None:
    """List the under-replicated ledgers (JSON lines) and the elected auditor."""
    from bookie.autorecovery.underreplication import UnderReplicationManager

    async def main(store: Any) -> tuple[str | None, list[Any]]:
        urm = UnderReplicationManager(store)
        return await urm.auditor(), await urm.list()

    auditor, marks = _on_store(metadata_url, main)
    click.echo(json.dumps({"auditor": auditor, "under_replicated": len(marks)}))
    for m in marks:
        click.echo(json.dumps({"ledger": m.ledger_id, "missing_replicas": sorted(m.missing_replicas),
                               "ctime_ms": m.ctime_ms}))


@click.command("autorecovery")
@click.option("--metadata-url", required=True, help="zk://host:port/chroot")
@click.option("--enable/--disable", "enable", default=None, help="resume / pause re-replication (no flag: show)")
def autorecovery_switch(metadata_url: str, enable: bool | None) -> None:
    """Pause or resume re-replication cluster-wide (BookKeeper's `shell autorecovery`)."""
    from bookie.autorecovery.underreplication import UnderReplicationManager

    async def main(store: Any) -> bool:
        urm = UnderReplicationManager(store)
        if enable is not None:
            await urm.set_replication_enabled(enable)
        return await urm.replication_enabled()

    click.echo(json.dumps({"replication_enabled": _on_store(metadata_url, main)}))


@click.command("lost-bookie-recovery-delay")
@click.option("--metadata-url", required=True, help="zk://host:port/chroot")
@click.option("--set", "seconds", type=int, default=None, help="store this delay (seconds) for the auditor")
def lost_bookie_recovery_delay(metadata_url: str, seconds: int | None) -> None:
    """Show or change the auditor's lost-bookie recovery delay at run time (BookKeeper's
    `shell lostbookierecoverydelay`); null = the auditor's configured value applies."""
    from bookie.autorecovery.underreplication import UnderReplicationManager

    async def main(store: Any) -> int | None:
        urm = UnderReplicationManager(store)
        if seconds is not None:
            await urm.set_lost_bookie_recovery_delay(seconds)
        return await urm.lost_bookie_recovery_delay()

    click.echo(json.dumps({"lost_bookie_recovery_delay": _on_store(metadata_url, main)}))
