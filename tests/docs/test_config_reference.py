"""docs/configuration.md and docs/config/*.toml are what scripts/gen_config_reference.py makes of
the config classes now: a key added, removed or given another default fails here until the
script is re-run. Every key has a meaning, and the sample files load."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("gen_config_reference", ROOT / "scripts" / "gen_config_reference.py")
assert spec is not None and spec.loader is not None
gen = importlib.util.module_from_spec(spec)
sys.modules["gen_config_reference"] = gen
spec.loader.exec_module(gen)


def test_the_committed_reference_is_what_the_classes_generate() -> None:
    for path, text in gen.outputs().items():
        assert path.exists(), f"{path} is missing: run python scripts/gen_config_reference.py"
        assert path.read_text() == text, f"{path} is stale: run python scripts/gen_config_reference.py"


def test_every_key_is_listed_with_a_meaning() -> None:
    doc = (ROOT / "docs" / "configuration.md").read_text()
    for _, target, _, _ in gen.TABLES:
        cls = gen.load(target)
        comments = gen.field_comments(cls)
        for f in dataclasses.fields(cls):
            assert f"| `{f.name}` |" in doc
            assert comments.get(f.name) or gen.MEANINGS.get(f.name), f"{cls.__name__}.{f.name} has no meaning"
    assert gen.camel_case("journal_max_group_wait_ms") == "journalMaxGroupWaitMs"


def test_the_sample_files_load() -> None:
    from bookie.client.config import ClientConfig
    from bookie.config import BookieConfig
    from broker.config import BrokerConfig, ledger_client_config

    for name in ("standalone.toml", "broker.toml"):
        path = ROOT / "docs" / "config" / name
        assert isinstance(BrokerConfig.load(path), BrokerConfig)
        assert isinstance(ledger_client_config(path), ClientConfig)
    for name in ("standalone.toml", "bookie.toml"):
        assert isinstance(BookieConfig.load(ROOT / "docs" / "config" / name), BookieConfig)
