"""One broker -> managed-ledger mapping and one ledger-client section for both entry points."""

from pathlib import Path

import pytest

from broker.config import BrokerConfig, ledger_client_config, managed_ledger_config
from quire.config import ConfigError


def test_managed_ledger_config_maps_broker_keys_and_retention_policy() -> None:
    c = BrokerConfig(managed_ledger_default_ensemble_size=3, managed_ledger_default_write_quorum=2,
                     managed_ledger_default_ack_quorum=2, managed_ledger_max_entries_per_ledger=7)
    ml = managed_ledger_config(c)
    assert (ml.ensemble_size, ml.write_quorum, ml.ack_quorum, ml.max_entries_per_ledger) == (3, 2, 2, 7)
    assert (ml.metadata_ensemble_size, ml.retention_time_minutes) == (3, c.default_retention_time_in_minutes)
    ml = managed_ledger_config(c, {"retention_policies": {"retentionTimeInMinutes": 60, "retentionSizeInMB": -1}})
    assert (ml.retention_time_minutes, ml.retention_size_mb) == (60, -1)


def test_bookkeeper_client_table_and_broker_errors(tmp_path: Path) -> None:
    f = tmp_path / "broker.toml"
    f.write_text("[broker]\nbroker_service_port = 7000\n[bookkeeper_client]\nadd_entry_timeout_s = 2.5\n")
    assert BrokerConfig.load(f).broker_service_port == 7000
    assert ledger_client_config(f).add_entry_timeout_s == 2.5 and ledger_client_config(None).add_entry_timeout_s == 5
    f.write_text("[broker]\nbrokerServicePort = 7000\n")
    with pytest.raises(ConfigError, match="did you mean broker_service_port"):
        BrokerConfig.load(f)
