"""``quire broker`` and ``quire standalone``.

Settings come from an optional TOML file (``--conf``: BrokerConfig keys at the top level or in
``[broker]``; ``[bookkeeper_client]`` for the ledger client of both commands; a ``[bookie]`` table
for standalone's bookie), then the named flags, then ``--set key=value``. SIGINT and SIGTERM shut down cleanly; SIGKILL loses nothing acknowledged.
"""

from __future__ import annotations

import functools
import gc
import logging
import signal
import sys
from typing import Any, Awaitable, Callable

import click
import trio

from broker.config import BrokerConfig, ledger_client_config
from quire.cli_types import LOG_LEVEL
from quire.cpu_profile import cpu_profile
from quire.config import parse_sets, read_toml

log = logging.getLogger(__name__)


def build_config(conf: str | None, flags: dict[str, Any], sets: tuple[str, ...]) -> BrokerConfig:
    """The file, then the named flags, then ``--set``; any problem is one ConfigError (quire.config)."""
    overrides = {k: v for k, v in flags.items() if v is not None}
    overrides.update(parse_sets(BrokerConfig, sets, what="broker"))
    return BrokerConfig.load(conf, **overrides)


async def _until_signal(main: Callable[..., Awaitable[None]], *args: Any) -> None:
    """Run ``main(*args, stop=event)``: the first SIGINT/SIGTERM sets the event (orderly
    shutdown), a second one cancels everything."""
    stop = trio.Event()
    async with trio.open_nursery() as nursery:

        async def runner() -> None:
            await main(*args, stop=stop)
            nursery.cancel_scope.cancel()

        with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
            nursery.start_soon(runner)
            async for sig in signals:
                if stop.is_set():
                    log.warning("second signal %s: exiting now", signal.Signals(sig).name)
                    nursery.cancel_scope.cancel()
                    return
                log.info("signal %s: shutting down", signal.Signals(sig).name)
                stop.set()


def _logging(level: str) -> None:
    logging.basicConfig(level=level.upper(),
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s", stream=sys.stderr)


_common = [
    click.option("--conf", type=click.Path(exists=True, dir_okay=False), help="TOML config file (BrokerConfig keys)"),
    click.option("--port", "broker_service_port", type=int, help="Pulsar protocol port (default 6650; 0 = any)"),
    click.option("--web-port", "web_service_port", type=int, help="admin/metrics HTTP port (default 8080; 0 = any)"),
    click.option("--bind-address", help="interface to listen on (default 127.0.0.1: authentication is off by default; "
                                        "0.0.0.0 = every interface)"),
    click.option("--advertised-address", help="address clients are told to connect to (default: the bind "
                                              "address, 127.0.0.1 for 0.0.0.0)"),
    click.option("--cluster-name", help="cluster name (default standalone)"),
    click.option("--access-log", "http_access_log_enabled", is_flag=True, default=None,
                 help="log every admin HTTP request (http_access_log_enabled)"),
    click.option("--set", "sets", multiple=True, metavar="KEY=VALUE", help="any other BrokerConfig key"),
    click.option("--log-level", type=LOG_LEVEL, default="INFO", show_default=True),
]


def _apply(options: list[Callable[..., Any]]) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    def deco(fn: Callable[..., Any]) -> Callable[..., Any]:
        for opt in reversed(options):
            fn = opt(fn)
        return fn
    return deco


@click.command()
@_apply(_common)
@click.option("--metadata-url", "metadata_store_url",
              help="zk://host:port/chroot or rocksdb:///path (default zk://127.0.0.1:2181)")
def broker(conf: str | None, sets: tuple[str, ...], log_level: str, **flags: Any) -> None:
    """Run a broker; bookies are found through the metadata store."""
    from broker.service import run_broker
    from metadata import open_store

    _logging(log_level)
    config = build_config(conf, flags, sets)
    client_config = ledger_client_config(conf)

    async def main(stop: trio.Event) -> None:
        store = await open_store(config.metadata_store_url,
                                 session_timeout_s=config.metadata_store_session_timeout_millis / 1000,
                                 operation_timeout_s=config.metadata_store_operation_timeout_seconds)
        try:
            async with trio.open_nursery() as nursery:
                await nursery.start(functools.partial(run_broker, config, store, client_config=client_config))
                await stop.wait()
                nursery.cancel_scope.cancel()
        finally:
            with trio.CancelScope(shield=True):
                await store.close()

    with cpu_profile():
        trio.run(_until_signal, main)


@click.command()
@_apply(_common)
@click.option("--data-dir", default="./data", show_default=True, help="where metadata, journal and ledgers live")
@click.option("--bookie-port", type=int, help="the embedded bookie's port (default 3181; 0 = any)")
@click.option("--bookie-http-port", type=int, help="the embedded bookie's HTTP port (default 8000; 0 = any)")
def standalone(conf: str | None, sets: tuple[str, ...], log_level: str, data_dir: str,
               bookie_port: int | None, bookie_http_port: int | None, **flags: Any) -> None:
    """Run metadata store + bookie + broker in one process."""
    from broker.standalone import run_standalone
    from quire.data_dir import claim

    _logging(log_level)
    claim(data_dir)  # before anything opens it: locked, writable
    config = build_config(conf, flags, sets)
    client_config = ledger_client_config(conf)
    bookie_overrides: dict[str, Any] = {}
    if conf:
        bookie_overrides.update(read_toml(conf).get("bookie", {}))
    bookie_overrides.update({"bookie_port": bookie_port, "http_server_port": bookie_http_port})
    # As in `quire bookie`: the journal thread must get the GIL back promptly after each
    # fdatasync while the broker's event loop is busy (default switch interval: 5 ms), and
    # per-message garbage must not make the collector rescan the long-lived state every few
    # hundred messages.
    sys.setswitchinterval(0.0005)
    gc.freeze()
    gc.set_threshold(50_000, 20, 100)
    with cpu_profile():
        trio.run(_until_signal, functools.partial(run_standalone, client_config=client_config), data_dir, config,
                 bookie_overrides)
