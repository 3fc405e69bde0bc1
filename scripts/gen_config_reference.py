"""Generate docs/configuration.md and docs/config/*.toml from the configuration dataclasses.

Every key of every TOML table a quire process reads, with its default, its meaning (the
comments written next to the field in the source) and the Pulsar/BookKeeper key it mirrors
(the camelCase form of the snake_case name). Run ``python scripts/gen_config_reference.py``
after changing a config class; ``tests/docs/test_config_reference.py`` fails while the
committed files are stale.
"""

from __future__ import annotations

import ast
import dataclasses
import importlib
import inspect
import sys
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

# (TOML table, "module:Class", who reads it, upstream name of the settings)
TABLES = [
    ("broker", "broker.config:BrokerConfig", "`quire broker` and `quire standalone` (`--conf`; the keys may "
     "also sit at the top level of the file)", "Pulsar broker.conf"),
    ("bookkeeper_client", "bookie.client.config:ClientConfig", "the ledger client of `quire broker` and "
     "`quire standalone`", "BookKeeper ClientConfiguration"),
    ("bookie", "bookie.config:BookieConfig", "`quire bookie` (`--conf`; also the top level of the file) and the "
     "bookie of `quire standalone`", "BookKeeper bk_server.conf"),
]


def camel_case(name: str) -> str:
    """``journal_max_group_wait_ms`` -> ``journalMaxGroupWaitMs`` (the upstream spelling)."""
    head, *rest = name.split("_")
    return head + "".join(p[:1].upper() + p[1:] for p in rest)


def _is_title(block: list[str]) -> bool:
    """A group's name (``Protocol``, ``Managed ledger defaults``, ``--- journal ---``), not a meaning."""
    text = " ".join(block).strip()
    return text.startswith("---") or text.endswith("---") or (len(text.split()) <= 4 and not text.endswith("."))


def field_comments(cls: type) -> dict[str, str]:
    """Each field's meaning from the source: its trailing ``# ...`` comment, and the comment
    block above it, which also covers the fields right below it (no blank line between) that
    have none of their own. A short heading (``# Protocol``, ``# --- journal ---``) is a title."""
    lines, _ = inspect.getsourcelines(cls)
    body = ast.parse("".join(lines)).body[0]
    assert isinstance(body, ast.ClassDef)
    out: dict[str, str] = {}
    group = ""  # the block comment still in force
    previous_row = -2
    for node in body.body:
        if not isinstance(node, ast.AnnAssign) or not isinstance(node.target, ast.Name):
            continue
        row = node.lineno - 1
        above: list[str] = []
        i = row - 1
        while i >= 0 and lines[i].strip().startswith("#"):
            above.insert(0, lines[i].strip().lstrip("#").strip())
            i -= 1
        if above and _is_title(above[:1]):
            above = above[1:]
        if above:
            group = " ".join(above)
        elif i != previous_row:  # a blank line (or code) since the last field: the group ended
            group = ""
        previous_row = row
        trailing = lines[row].partition("  #")[2].strip()
        own = " ".join(t for t in (" ".join(above), trailing) if t)
        out[node.target.id] = own or group
    return out


# Meanings of the keys whose source has no comment (the source's comment wins when it has one).
# tests/docs/test_config_reference.py fails when a key has neither, so a new key needs one.
MEANINGS = {
    "max_message_size": "largest message (payload + metadata) a producer may send, in bytes",
    "keep_alive_interval_seconds": "PING a silent connection after this long; close it if no PONG follows",
    "max_pending_publish_requests_per_connection": "SENDs in flight per connection before the broker stops reading it",
    "connection_outbox_bytes": "bytes queued for one client connection before dispatch to it waits",
    "allow_auto_topic_creation": "create a topic when a producer or consumer first names it",
    "allow_auto_topic_creation_type": "what auto-creation makes: non-partitioned or partitioned",
    "default_num_partitions": "partitions of an auto-created partitioned topic",
    "default_number_of_namespace_bundles": "hash-range bundles of a new namespace (the unit of broker ownership)",
    "broker_deduplication_enabled": "drop re-sent messages (producer name + sequence id) unless a namespace says otherwise",
    "broker_deduplication_max_number_of_producers": "producers whose last sequence id a topic remembers",
    "broker_deduplication_entries_interval": "entries between snapshots of the deduplication state",
    "default_retention_time_in_minutes": "keep acknowledged messages this long unless a namespace sets retention (0: none)",
    "default_retention_size_in_mb": "keep up to this much acknowledged data per topic unless a namespace sets retention",
    "ttl_duration_default_in_seconds": "acknowledge messages older than this for every subscription (0: no TTL)",
    "message_expiry_check_interval_in_minutes": "how often message TTL is applied",
    "retention_check_interval_in_seconds": "how often consumed ledgers past retention are deleted",
    "max_unacked_messages_per_consumer": "a Shared consumer gets no more messages with this many unacknowledged",
    "max_unacked_messages_per_subscription": "a subscription dispatches no more with this many unacknowledged",
    "dispatcher_max_read_batch_size": "entries read from the managed ledger per dispatch round",
    "dispatcher_max_round_robin_batch_size": "entries given to one Shared consumer before the next one's turn",
    "dispatcher_max_read_size_bytes": "bytes read from the managed ledger per dispatch round",
    "delayed_delivery_enabled": "honour deliverAt / deliverAfter (otherwise messages go out at once)",
    "delayed_delivery_tick_time_millis": "granularity of the delayed-delivery timer",
    "subscription_redelivery_tracker_enabled": "count redeliveries per message (redelivery_count, dead-letter topics)",
    "acknowledgment_at_batch_index_level_enabled": "remember acknowledgements of single messages inside a batch",
    "managed_ledger_default_ensemble_size": "bookies a topic's ledger is striped over (E)",
    "managed_ledger_default_write_quorum": "copies written of each entry (WQ)",
    "managed_ledger_default_ack_quorum": "copies that must be stored before a publish is acknowledged (AQ)",
    "managed_ledger_max_entries_per_ledger": "a topic rolls over to a new ledger after this many entries",
    "managed_ledger_max_size_per_ledger_mbytes": "a topic rolls over to a new ledger after this many MB",
    "stats_update_frequency_in_secs": "how often topic rates in stats and /metrics are recomputed",
    "expose_topic_level_metrics_in_prometheus": "per-topic series in /metrics (off: namespace totals only)",
    "bookie_port": "the bookie protocol port; with the address it is the bookie's identity",
    "listening_interface": "interface the bookie listens on",
    "http_server_enabled": "serve the HTTP admin API and /metrics",
    "http_server_port": "HTTP admin and /metrics port",
    "netty_max_frame_size_bytes": "largest request frame accepted",
    "max_pending_requests_per_connection": "requests in flight per connection before the bookie stops reading it",
    "journal_directory": "where the write-ahead journal lives (best on its own disk)",
    "ledger_directories": "where entry logs and indexes live (one or more directories)",
    "allow_storage_expansion": "accept new ledger directories on restart (the cookie records the set)",
    "journal_max_group_wait_ms": "longest an add waits to be grouped into one journal fsync",
    "journal_buffered_writes_threshold": "bytes of grouped adds that force a journal fsync at once",
    "journal_flush_when_queue_empty": "fsync as soon as no add is waiting (low latency when lightly loaded)",
    "journal_sync_data": "fsync the journal before acknowledging (off: faster, loses acknowledged adds on power loss)",
    "journal_page_cache_flush_interval_ms": "with journal_sync_data off: how often the page cache is flushed",
    "db_storage_write_cache_max_size_mb": "entries held in memory until the next checkpoint writes them to entry logs",
    "db_storage_read_ahead_cache_max_size_mb": "memory for entries read ahead of readers",
    "db_storage_read_ahead_cache_batch_size": "entries read ahead per cache miss",
    "db_storage_max_throttle_time_ms": "an add waits this long for room in a full write cache before failing",
    "log_size_limit": "an entry log is closed and a new one started past this many bytes",
    "flush_interval_ms": "checkpoint interval: write cache to entry logs, then the journal can be trimmed",
    "disk_usage_threshold": "above this share of a disk used, the bookie turns read-only",
    "disk_usage_lwm_threshold": "below this share used, a read-only bookie turns writable again",
    "disk_check_interval_ms": "how often disk usage is checked",
    "gc_wait_time_ms": "interval between garbage-collection runs (deleted ledgers' entries reclaimed)",
    "minor_compaction_threshold": "entry logs with less than this share of live data are compacted in a minor run",
    "major_compaction_threshold": "entry logs with less than this share of live data are compacted in a major run",
    "major_compaction_interval": "seconds between major compactions",
    "major_compaction_max_time_millis": "a major compaction stops after this long (-1: no limit)",
    "is_throttle_by_bytes": "throttle compaction by bytes per second (else by entries per second)",
    "is_force_gc_allow_when_no_space": "compact even when the disk is nearly full (when it could free space)",
}


def default_of(f: dataclasses.Field[Any]) -> Any:
    if f.default is not dataclasses.MISSING:
        return f.default
    if f.default_factory is not dataclasses.MISSING:
        return f.default_factory()
    return None


def toml_value(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (int, float)):
        return repr(value)
    if isinstance(value, str):
        return '"' + value.replace("\\", "\\\\").replace('"', '\\"') + '"'
    if isinstance(value, (list, tuple)):
        return "[" + ", ".join(toml_value(v) for v in value) + "]"
    if value is None:
        return '""  # no default'
    return repr(value)


def load(target: str) -> type:
    module, name = target.split(":")
    return getattr(importlib.import_module(module), name)  # type: ignore[no-any-return]


def _cell(text: str) -> str:
    return text.replace("|", "\\|") or "-"


def reference() -> str:
    out = [
        "# Configuration reference",
        "",
        "<!-- generated by scripts/gen_config_reference.py from the config classes; do not edit by hand "
        "(tests/docs/test_config_reference.py fails when it is stale) -->",
        "",
        "Every setting of a quire process is a key of one TOML table. Names are Pulsar's and BookKeeper's in "
        "snake_case (`journalMaxGroupWaitMs` is `journal_max_group_wait_ms`; the camelCase spelling is refused "
        "with that suggestion) and defaults are theirs unless the meaning says otherwise. The \"upstream key\" "
        "column is the camelCase form: the Pulsar/BookKeeper setting the key mirrors (keys quire adds have no "
        "upstream counterpart under that name).",
        "",
        "A value comes from, last one winning: the default, the `--conf` file, the command's named flags "
        "(`--port`, `--web-port`, `--metadata-url` ...), then `--set key=value` (any key). Sample files: "
        "`docs/config/standalone.toml`, `docs/config/broker.toml`, `docs/config/bookie.toml`.",
        "",
    ]
    for table, target, who, upstream in TABLES:
        cls = load(target)
        comments = field_comments(cls)
        out += [f"## `[{table}]` ({cls.__name__})", "", f"Read by {who}; mirrors {upstream}.", "",
                "| key | default | meaning | upstream key |", "|---|---|---|---|"]
        for f in dataclasses.fields(cls):
            meaning = comments.get(f.name) or MEANINGS.get(f.name, "")
            out.append(f"| `{f.name}` | `{_cell(toml_value(default_of(f)))}` | {_cell(meaning)} "
                       f"| `{camel_case(f.name)}` |")
        out.append("")
    return "\n".join(out)


SAMPLES = {
    "standalone.toml": (
        "# quire standalone --conf docs/config/standalone.toml\n"
        "# Keys not written keep their defaults (docs/configuration.md lists every key).\n\n",
        [("broker", ["bind_address", "broker_service_port", "web_service_port", "cluster_name",
                     "default_retention_time_in_minutes", "default_retention_size_in_mb"]),
         ("bookie", ["bookie_port", "http_server_port", "journal_max_group_wait_ms", "gc_wait_time_ms"])],
    ),
    "broker.toml": (
        "# quire broker --conf docs/config/broker.toml  (one per broker host; see docs/cluster.md)\n\n",
        [("broker", ["bind_address", "advertised_address", "broker_service_port", "web_service_port",
                     "cluster_name", "metadata_store_url", "metadata_store_session_timeout_millis",
                     "managed_ledger_default_ensemble_size", "managed_ledger_default_write_quorum",
                     "managed_ledger_default_ack_quorum"]),
         ("bookkeeper_client", ["add_entry_timeout_s", "read_timeout_s"])],
    ),
    "bookie.toml": (
        "# quire bookie --conf docs/config/bookie.toml  (one per bookie host; see docs/cluster.md)\n\n",
        [("bookie", ["bookie_port", "listening_interface", "advertised_address", "http_server_port",
                     "metadata_service_uri", "journal_directory", "ledger_directories", "disk_usage_threshold",
                     "gc_wait_time_ms"])],
    ),
}
# Values a sample shows instead of the default (a cluster's, not a lone node's).
SAMPLE_VALUES = {
    ("broker.toml", "metadata_store_url"): "zk://zk1:2181,zk2:2181,zk3:2181/quire",
    ("broker.toml", "bind_address"): "0.0.0.0",
    ("broker.toml", "advertised_address"): "broker1.example.com",
    ("bookie.toml", "metadata_service_uri"): "zk://zk1:2181,zk2:2181,zk3:2181/quire",
    ("bookie.toml", "listening_interface"): "0.0.0.0",
    ("bookie.toml", "advertised_address"): "bookie1.example.com",
    ("bookie.toml", "journal_directory"): "/var/lib/quire/bookie/journal",
    ("bookie.toml", "ledger_directories"): ["/var/lib/quire/bookie/ledgers"],
}


def samples() -> dict[str, str]:
    classes = {table: load(target) for table, target, _, _ in TABLES}
    out = {}
    for name, (header, sections) in SAMPLES.items():
        text = [header.rstrip("\n"), ""]
        for table, keys in sections:
            cls = classes[table]
            fields = {f.name: f for f in dataclasses.fields(cls)}
            comments = field_comments(cls)
            text.append(f"[{table}]")
            for key in keys:
                value = SAMPLE_VALUES.get((name, key), default_of(fields[key]))
                meaning = comments.get(key) or MEANINGS.get(key, "")
                if meaning:
                    text.append(f"# {meaning}")
                text.append(f"{key} = {toml_value(value)}")
            text.append("")
        out[name] = "\n".join(text)
    return out


def outputs() -> dict[Path, str]:
    files = {ROOT / "docs" / "configuration.md": reference()}
    files.update({ROOT / "docs" / "config" / name: text for name, text in samples().items()})
    return files


def main() -> None:
    for path, text in outputs().items():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
        print(f"wrote {path.relative_to(ROOT)}")


if __name__ == "__main__":
    main()
