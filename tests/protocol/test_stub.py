"""The checked-in type stub of the generated protobuf module matches its descriptors."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def test_pulsar_api_stub_is_up_to_date() -> None:
    spec = importlib.util.spec_from_file_location("gen_pulsar_api_stub", ROOT / "scripts" / "gen_pulsar_api_stub.py")
    assert spec is not None and spec.loader is not None
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    stub = ROOT / "clients" / "protocol" / "pulsar_api_pb2.pyi"
    assert stub.read_text() == gen.render(), "run scripts/gen_pulsar_api_stub.py after regenerating pulsar_api_pb2.py"
