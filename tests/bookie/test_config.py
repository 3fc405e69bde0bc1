"""BookieConfig loading (TOML, CLI overrides) and the journal without per-add fsync."""

from __future__ import annotations

from pathlib import Path

import pytest
import trio

from bookie.bookie import run_bookie
from bookie.cli import build_config
from bookie.config import BookieConfig
from quire.config import ConfigError
from bookie.protocol import Status
from tests.bookie.helpers import BookieClient, make_config


def test_toml_defaults_and_overrides(tmp_path: Path) -> None:
    conf = tmp_path / "bookie.toml"
    conf.write_text('[bookie]\nbookie_port = 3999\nledger_directories = ["/a", "/b"]\njournal_max_group_wait_ms = 5\n')
    cfg = BookieConfig.load(conf, journal_directory="/j")
    assert cfg.bookie_port == 3999 and cfg.ledger_directories == ["/a", "/b"] and cfg.journal_directory == "/j"
    assert cfg.journal_max_group_wait_ms == 5 and cfg.journal_buffered_writes_threshold == 512 * 1024
    assert cfg.journal_sync_data is True and cfg.log_size_limit == 1 << 30 and cfg.bookie_id == "127.0.0.1:3999"
    bad = tmp_path / "bad.toml"
    bad.write_text("jornal_sync_data = false\n")
    with pytest.raises(ConfigError, match="jornal_sync_data"):
        BookieConfig.load(bad)


def test_cli_flags_and_set_override_file(tmp_path: Path) -> None:
    conf = tmp_path / "bookie.toml"
    conf.write_text("bookie_port = 1\nflush_interval_ms = 7\n")
    cfg = build_config(str(conf), {"bookie_port": 2, "ledger_directories": ["/x"]},
                       ("journal_sync_data=false", "disk_usage_threshold=0.5", "flush-interval-ms=9"))
    assert (cfg.bookie_port, cfg.journal_sync_data, cfg.disk_usage_threshold, cfg.flush_interval_ms) == (2, False, 0.5, 9)


async def test_run_bookie_without_journal_sync(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, journal_sync_data=False, journal_page_cache_flush_interval_ms=50)
    async with trio.open_nursery() as nursery:
        bookie = await nursery.start(run_bookie, cfg, None)
        client = await BookieClient.connect("127.0.0.1", bookie.port, nursery)
        for i in range(50):
            assert (await client.add(1, i, b"nosync")).status == Status.OK
        await trio.sleep(0.2)  # the periodic fsync makes the journal durable
        assert bookie.journal.durable_mark.offset > 512
        await client.aclose()
        nursery.cancel_scope.cancel()


def test_https_needs_a_certificate(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="http_server_tls_enable"):
        BookieConfig(ledger_directories=[str(tmp_path)], http_server_tls_enable=True)
    ok = BookieConfig(ledger_directories=[str(tmp_path)], http_server_tls_enable=True,
                      http_server_key_store_path=str(tmp_path / "both.pem"))
    assert ok.http_server_key_store_path.endswith("both.pem")
