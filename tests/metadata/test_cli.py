"""`quire metadata` against a real ZooKeeper, run as the real command."""

from __future__ import annotations

import json
import subprocess
import sys

from metadata.ledger_ids import ledger_path


def quire(*args: str, stdin: bytes | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "quire", "metadata", *args],
        input=stdin.decode() if stdin is not None else None,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_put_get_ls_rm(zk_url: str) -> None:
    put = quire("put", "--url", zk_url, "--json", "-p", "/admin/policies/t/ns", '{"retention_minutes": 60}')
    assert put.returncode == 0, put.stderr
    assert "version=0" in put.stdout
    got = quire("get", "--url", zk_url, "--stat", "/admin/policies/t/ns")
    assert got.returncode == 0, got.stderr
    assert json.loads(got.stdout.split("version=")[0]) == {"retention_minutes": 60}
    conflict = quire("put", "--url", zk_url, "--version", "5", "/admin/policies/t/ns", "x")
    assert conflict.returncode == 1 and "BadVersionError" in conflict.stderr
    for ledger_id in (3, 2**33):
        assert quire("put", "--url", zk_url, "-p", ledger_path(ledger_id), "meta").returncode == 0
    listed = quire("ls", "--url", zk_url, "-R", "/")
    assert "/admin/policies/t/ns" in listed.stdout.splitlines()
    assert quire("ledgers", "--url", zk_url).stdout.split() == ["3", str(2**33)]
    assert quire("rm", "--url", zk_url, "-r", "/admin").returncode == 0
    missing = quire("get", "--url", zk_url, "/admin/policies/t/ns")
    assert missing.returncode == 1 and "NotFoundError" in missing.stderr


def test_bad_input_is_a_clean_error(zk_url: str) -> None:
    bad_path = quire("get", "--url", zk_url, "no-slash")
    assert bad_path.returncode == 1 and "InvalidPathError" in bad_path.stderr
    bad_url = quire("ls", "--url", "etcd://nowhere", "/")
    assert bad_url.returncode == 1 and "unknown metadata URL scheme" in bad_url.stderr


def test_rocksdb_reads_need_an_existing_database(tmp_path) -> None:  # type: ignore[no-untyped-def]
    missing = tmp_path / "typo"
    result = quire("ls", "--url", f"rocksdb://{missing}", "/")
    assert result.returncode == 1 and "no metadata database" in result.stderr
    assert not missing.exists()
    url = f"rocksdb://{tmp_path / 'meta'}"
    assert quire("put", "--url", url, "/k", "v").returncode == 0  # writing creates it
    assert quire("get", "--url", url, "/k").stdout.strip() == "v"
