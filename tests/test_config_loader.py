"""The one configuration loader (quire/config.py) every component uses."""

from dataclasses import dataclass, field
from pathlib import Path

import pytest

from bookie.client.config import ClientConfig
from managed_ledger.config import ManagedLedgerConfig
from quire.config import ConfigError, load_config, snake_case


@dataclass
class Sample:
    journal_max_group_wait_ms: float = 2.0
    bookie_port: int = 3181
    ledger_directories: list[str] = field(default_factory=list)
    name: str = ""


def test_table_top_level_and_overrides(tmp_path: Path) -> None:
    f = tmp_path / "q.toml"
    f.write_text('[sample]\nbookie_port = 4000\njournal_max_group_wait_ms = 1\n[other]\nbookie_port = "x"\n')
    c = load_config(Sample, f, table="sample", name="n", bookie_port=None)
    assert (c.bookie_port, c.journal_max_group_wait_ms, c.name) == (4000, 1, "n")
    f.write_text('bookie_port = 4001\nledger_directories = ["/a"]\n[broker]\nx = 1\n')
    assert load_config(Sample, f, table="sample").ledger_directories == ["/a"]


def test_camel_case_pulsar_name_suggests_the_snake_case_key(tmp_path: Path) -> None:
    f = tmp_path / "q.toml"
    f.write_text("journalMaxGroupWaitMs = 5\n")
    with pytest.raises(ConfigError, match=r"journalMaxGroupWaitMs.*did you mean journal_max_group_wait_ms\?"):
        load_config(Sample, f, table="sample")
    f.write_text("bookie_prot = 5\n")
    with pytest.raises(ConfigError, match=r"did you mean bookie_port\?"):
        load_config(Sample, f, table="sample")
    assert snake_case("isForceGCAllowWhenNoSpace") == "is_force_gc_allow_when_no_space"


def test_bad_toml_names_file_and_line_and_bad_types_name_the_key(tmp_path: Path) -> None:
    f = tmp_path / "q.toml"
    f.write_text("bookie_port = 1\nname = \n")
    with pytest.raises(ConfigError, match=r"q\.toml:2:\d+: not valid TOML: "):
        load_config(Sample, f, table="sample")
    f.write_text('bookie_port = "3181"\n')
    with pytest.raises(ConfigError, match=r"'bookie_port' = '3181': expected int"):
        load_config(Sample, f, table="sample")
    with pytest.raises(ConfigError, match="no such configuration file"):
        load_config(Sample, tmp_path / "missing.toml", table="sample")


def test_components_share_it(tmp_path: Path) -> None:
    with pytest.raises(ConfigError, match="managedLedgerMaxEntriesPerLedger"):
        ManagedLedgerConfig.from_dict({"managedLedgerMaxEntriesPerLedger": 5})
    assert ManagedLedgerConfig.from_dict({"managed_ledger_max_entries_per_ledger": 5}).max_entries_per_ledger == 5
    with pytest.raises(ConfigError, match="ledger client config key 'throttle' = 'x'"):
        ClientConfig.from_dict({"throttle": "x"})
