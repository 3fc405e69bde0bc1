"""Pulsar's dialect in the CLI, against a real standalone: global options before or after the
subcommand, pulsar-client's message lines (``--hex``), pulsar-admin's sizes and durations, the
admin verbs (peek, examine, expire, terminate, list-partitioned-topics, get-message-ttl,
tenants get, policies), admin errors that say what to do, partitions listed from creation on,
and ``quire cluster-status``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import click
import pytest

from quire.admin_cli import for_a_person, parse_size_mb, parse_time_minutes, parse_time_seconds
from quire.cli_errors import take_global_options
from tests.e2e.conftest import Standalone, standalone  # noqa: F401  (fixture)

ROOT = Path(__file__).resolve().parents[2]


def quire(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    clean = {k: v for k, v in os.environ.items() if k not in ("QUIRE_SERVICE_URL", "QUIRE_ADMIN_URL")}
    return subprocess.run([sys.executable, "-m", "quire", *args], capture_output=True, text=True, timeout=90,
                          cwd=ROOT, env={**clean, **(env or {})})


def ok(*args: str, env: dict[str, str] | None = None) -> str:
    res = quire(*args, env=env)
    assert res.returncode == 0, f"quire {' '.join(args)}: exit {res.returncode}\n{res.stdout}\n{res.stderr}"
    return res.stdout


# -- pure parts ---------------------------------------------------------------------------------


def test_global_options_are_taken_from_anywhere() -> None:
    env: dict[str, str] = {}
    args = ["--url", "pulsar://a:1", "produce", "t", "--admin-url=http://b:2", "-m", "x"]
    take_global_options(args, env)
    assert args == ["produce", "t", "-m", "x"]
    assert env == {"QUIRE_SERVICE_URL": "pulsar://a:1", "QUIRE_ADMIN_URL": "http://b:2"}
    other = ["metadata", "ls", "/", "--url", "zk://h:1"]  # not a client command: its own --url
    take_global_options(other, env)
    assert other == ["metadata", "ls", "/", "--url", "zk://h:1"]


def test_sizes_and_durations_as_pulsar_admin_writes_them() -> None:
    assert [parse_size_mb(s) for s in ("10G", "512M", "512", "2048K", "1T", "-1")] == [10240, 512, 512, 2, 1048576, -1]
    assert [parse_time_minutes(s) for s in ("3h", "90m", "90", "2d", "1w", "-1")] == [180, 90, 90, 2880, 10080, -1]
    assert [parse_time_seconds(s) for s in ("3h", "30m", "45s", "45")] == [10800, 1800, 45, 45]
    for bad in ("10X", "abc", "-5G"):
        with pytest.raises(click.BadParameter):
            parse_size_mb(bad)


def test_admin_errors_say_what_to_do() -> None:
    line = for_a_person("GET", "/admin/v2/persistent/t/n/x/stats", 412,
                        "persistent://t/n/x is a partitioned topic: use its partitions")
    assert line.startswith("persistent://t/n/x is a partitioned topic: use `topics partitioned-stats`")
    line = for_a_person("DELETE", "/admin/v2/persistent/t/n/x", 412, "persistent://t/n/x is a partitioned topic: x")
    assert "use --partitioned" in line
    assert "quire admin tenants create" in for_a_person("PUT", "/p", 404, "Tenant nope does not exist")
    assert for_a_person("GET", "/p", 404, "Topic persistent://a/b/c does not exist") == (
        "Topic persistent://a/b/c does not exist: list them with `quire admin topics list TENANT/NAMESPACE` "
        "(GET /p: HTTP 404)")


# -- against a standalone ------------------------------------------------------------------------


def test_client_commands_speak_pulsar_client(standalone: Standalone) -> None:
    url = standalone.url
    # --url before the subcommand, after it, as --url=, and from the environment
    ok("--url", url, "produce", "dialect", "-m", "hello", "-k", "k1", "-p", "a=1", "-n", "2")
    out = ok("consume", "dialect", "-s", "sub", "--earliest", "-n", "1", "-t", "Key_Shared", f"--url={url}")
    assert out.startswith("key:[k1], properties:[a=1], publishTime:[") and out.rstrip().endswith("content:hello")
    out = ok("read", "dialect", "-n", "1", "--hex", env={"QUIRE_SERVICE_URL": url})
    assert out.rstrip().endswith("content:68 65 6c 6c 6f")


def test_admin_verbs(standalone: Standalone) -> None:
    admin = ["--admin-url", standalone.admin]
    ok("produce", "adm-verbs", "-m", "one", "-m", "two", "-p", "k=v", "--url", standalone.url)
    ok("admin", "topics", "create-subscription", "adm-verbs", "-s", "peeker", "-m", "earliest", *admin)
    peek = ok("admin", "topics", "peek-messages", "adm-verbs", "-s", "peeker", "-n", "5", *admin)
    assert "Message ID:" in peek and "content:one" in peek and "content:two" in peek
    examined = ok(*admin, "admin", "topics", "examine-message", "adm-verbs", "-i", "earliest")
    assert "content:one" in examined
    ok("admin", *admin, "topics", "expire-messages", "adm-verbs", "-s", "peeker", "-t", "0")
    stats = json.loads(ok("admin", "topics", "stats", "adm-verbs", *admin))
    assert stats["subscriptions"]["peeker"]["msgBacklog"] == 0
    last = json.loads(ok("admin", "topics", "terminate", "adm-verbs", *admin))
    assert last["entryId"] >= 0
    refused = quire("produce", "adm-verbs", "-m", "late", "--url", standalone.url)
    assert refused.returncode == 1 and "terminated" in refused.stderr.lower() and "Traceback" not in refused.stderr

    ok("admin", "topics", "create-partitioned-topic", "adm-parts", "-p", "3", *admin)
    listed = json.loads(ok("admin", "topics", "list", "public/default", *admin))
    assert {f"persistent://public/default/adm-parts-partition-{i}" for i in range(3)} <= set(listed)
    assert "persistent://public/default/adm-parts" in json.loads(
        ok("admin", "topics", "list-partitioned-topics", "public/default", *admin))
    wrong = quire("admin", "topics", "stats", "adm-parts", *admin)
    assert wrong.returncode == 1 and "Traceback" not in wrong.stderr
    assert "is a partitioned topic: use `topics partitioned-stats`" in wrong.stderr.splitlines()[0]
    wrong = quire("admin", "topics", "delete", "adm-parts", *admin)
    assert "use --partitioned" in wrong.stderr.splitlines()[0]
    ok("admin", "topics", "delete", "adm-parts", "--partitioned", *admin)

    ok("admin", "namespaces", "set-retention", "public/default", "--size", "10G", "--time", "3h", *admin)
    assert json.loads(ok("admin", "namespaces", "get-retention", "public/default", *admin)) == {
        "retentionSizeInMB": 10240, "retentionTimeInMinutes": 180}
    ok("admin", "namespaces", "set-message-ttl", "public/default", "--ttl", "2h", *admin)
    assert ok("admin", "namespaces", "get-message-ttl", "public/default", *admin).strip() == "7200"
    policies = json.loads(ok("admin", "namespaces", "policies", "public/default", *admin))
    assert policies["message_ttl_in_seconds"] == 7200 and "bundles" in policies
    assert json.loads(ok("admin", "tenants", "get", "public", *admin))["allowedClusters"]


def test_wrong_ports_and_a_locked_data_dir_are_one_line_errors(standalone: Standalone) -> None:
    res = quire("produce", "t", "-m", "x", "--url", f"pulsar://127.0.0.1:{standalone.web_port}")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[0] == (
        f"error: pulsar://127.0.0.1:{standalone.web_port} answered in HTTP: that is the admin/HTTP port; the service "
        "URL needs the binary protocol port (broker --port, default 6650)")
    res = quire("admin", "tenants", "list", "--admin-url", f"http://127.0.0.1:{standalone.port}")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[0].startswith(
        f"Error: this is quire's Pulsar binary protocol port ({standalone.url}); the admin REST API and /metrics "
        f"are on {standalone.admin}")
    res = quire("standalone", "--data-dir", str(standalone.data_dir), "--port", "0", "--web-port", "0")
    assert res.returncode == 1 and "Traceback" not in res.stderr
    assert res.stderr.splitlines()[0] == (
        f"error: data dir {standalone.data_dir} is in use by another quire process (pid {standalone.proc.pid}): "
        "stop it, or choose another with --data-dir")
    res = quire("produce", "persistent://no-tenant/ns/t", "-m", "x", "--url", standalone.url)
    assert res.stderr.splitlines()[0] == ("error: namespace no-tenant/ns does not exist: create it with "
                                          "`quire admin namespaces create no-tenant/ns`")
    res = quire("produce", "a//b", "-m", "x", "--url", standalone.url)
    assert res.returncode == 1 and res.stderr.startswith("error: invalid topic name 'a//b': write NAME")
    res = quire("produce", "t", "-m", "x", "-p", "novalue", "--url", standalone.url)
    assert res.returncode == 2 and "property 'novalue' is not key=value" in res.stderr
    holder = subprocess.Popen([sys.executable, "-m", "quire", "consume", "conflict", "-s", "s", "-n", "0",
                               "--url", standalone.url], stderr=subprocess.DEVNULL, cwd=ROOT)
    try:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:  # until the holder's Exclusive consumer is attached
            stats = quire("admin", "topics", "stats", "conflict", "--admin-url", standalone.admin)
            if stats.returncode == 0 and json.loads(stats.stdout)["subscriptions"].get("s", {}).get("consumers"):
                break
            time.sleep(0.3)
        res = quire("consume", "conflict", "-s", "s", "-t", "shared", "--timeout", "1", "--url", standalone.url)
        assert res.stderr.splitlines()[0] == (
            "error: subscription s is Exclusive, not Shared: use -t Exclusive, another subscription name, or close "
            "its other consumers first")
    finally:
        holder.terminate()
        holder.wait(30)


def test_cluster_status_of_a_standalone(standalone: Standalone) -> None:
    ok("produce", "status-topic", "-m", "x", "--url", standalone.url)  # a bundle gets an owner
    status = json.loads(ok("cluster-status", "--json", "--admin-url", standalone.admin))
    assert [b["id"] for b in status["brokers"]] == [f"127.0.0.1:{standalone.web_port}"]
    assert len(status["bookies"]) == 1 and status["bookies"][0]["state"] == "writable"
    assert status["bookies"][0]["disk"]["totalBytes"] > 0
    assert any(r["owner"] == standalone.admin for r in status["bundles"])
    assert status["underReplicatedLedgers"] == []
    text = ok("cluster-status", "--admin-url", standalone.admin)
    assert "brokers (1):" in text and "1 writable" in text and "under-replicated ledgers (0)" in text
    # the store itself, without a broker: a running standalone's database as a read-only snapshot
    direct = json.loads(ok("cluster-status", "--json", "--metadata-url", f"rocksdb://{standalone.data_dir}/metadata"))
    assert [b["id"] for b in direct["brokers"]] == [b["id"] for b in status["brokers"]]
    assert [b["id"] for b in direct["bookies"]] == [b["id"] for b in status["bookies"]]
