"""Option parsing and validation (StreamNative pulsar-spark names, case-insensitive).

Every problem raises :class:`PulsarOptionError` naming the option, at analysis time: the data
source validates in ``schema()``/``reader()``/``writer()`` on the driver, before any task runs.
"""

from __future__ import annotations

import json
import re
import uuid
from dataclasses import dataclass, field
from typing import Any, Mapping

from .errors import PulsarOptionError
from .passthrough import is_passthrough, parse_passthrough
from .positions import EARLIEST, Pos, position_from_json

READ_MODES = ("broker", "direct")

# lower-cased names; the value says where the option is meaningful
KNOWN = {
    "service.url": "all", "admin.url": "all", "metadata.url": "read",
    "topic": "all", "topics": "read", "topicspattern": "read",
    "startingoffsets": "read", "endingoffsets": "read", "startingtime": "read", "endingtime": "read",
    "failondataloss": "read", "maxentriespertrigger": "read", "maxbytespertrigger": "read",
    "subscriptionprefix": "read", "predefinedsubscription": "read", "polltimeoutms": "all",
    "readmode": "read", "entriesperpartition": "read", "bytesperpartition": "read", "minpartitions": "read",
    "recordbatchsize": "read",
    "writeid": "write", "test.failafterrows": "write",
}

# options Spark itself passes along to a source or sink
SPARK_OWN = {"path", "checkpointlocation", "queryname"}

CANONICAL = {k.lower(): k for k in (
    "service.url", "admin.url", "metadata.url", "topic", "topics", "topicsPattern", "startingOffsets",
    "endingOffsets", "startingTime", "endingTime", "failOnDataLoss", "maxEntriesPerTrigger",
    "maxBytesPerTrigger", "subscriptionPrefix", "predefinedSubscription", "pollTimeoutMs", "readMode",
    "entriesPerPartition", "bytesPerPartition", "minPartitions", "recordBatchSize", "writeId", "test.failAfterRows")}


@dataclass
class PulsarOptions:
    service_url: str | None
    admin_url: str | None
    metadata_url: str | None
    topic: str | None
    topics: list[str] | None
    topics_pattern: str | None
    starting_offsets: Any  # "earliest" | "latest" | dict[str, Pos]
    ending_offsets: Any
    starting_time: int | None
    ending_time: int | None
    fail_on_data_loss: bool
    max_entries_per_trigger: int | None
    max_bytes_per_trigger: int | None
    subscription_prefix: str | None
    predefined_subscription: str | None
    poll_timeout_ms: int
    read_mode: str
    entries_per_partition: int
    bytes_per_partition: int
    min_partitions: int | None
    record_batch_size: int
    write_id: str
    fail_after_rows: int | None
    client_conf: dict[str, Any] = field(default_factory=dict)  # pulsar.client.* as clients.Client kwargs
    reader_conf: dict[str, Any] = field(default_factory=dict)  # pulsar.reader.* as create_reader kwargs
    producer_conf: dict[str, Any] = field(default_factory=dict)  # pulsar.producer.* as create_producer kwargs
    value_schema: Any = None  # a ValueSchema when the topics have a JSON/AVRO schema (set by the source)
    raw: dict[str, str] = field(default_factory=dict)


def _int(opts: Mapping[str, str], name: str, key: str, default: int | None, minimum: int = 0) -> int | None:
    if key not in opts:
        return default
    try:
        value = int(opts[key])
    except ValueError:
        raise PulsarOptionError(name, f"must be an integer, got {opts[key]!r}") from None
    if value < minimum:
        raise PulsarOptionError(name, f"must be >= {minimum}, got {value}")
    return value


def _bool(opts: Mapping[str, str], name: str, key: str, default: bool) -> bool:
    if key not in opts:
        return default
    v = str(opts[key]).strip().lower()
    if v not in ("true", "false"):
        raise PulsarOptionError(name, f"must be true or false, got {opts[key]!r}")
    return v == "true"


def _offsets(opts: Mapping[str, str], name: str, key: str, default: str) -> Any:
    text = opts.get(key, default).strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        data = json.loads(text)
    except ValueError:
        raise PulsarOptionError(name, "must be earliest, latest or a JSON object topic-partition -> message id") from None
    if not isinstance(data, dict) or not data:
        raise PulsarOptionError(name, "the JSON must be a non-empty object topic-partition -> message id")
    from .topic_names import full_topic_name
    out: dict[str, Pos] = {}
    for tp, value in data.items():
        try:
            out[full_topic_name(tp)] = position_from_json(value)
        except (ValueError, KeyError, TypeError) as exc:
            raise PulsarOptionError(name, f"bad message id for {tp!r}: {exc}") from None
    return out


def parse_options(raw: Mapping[str, str], *, purpose: str, streaming: bool = False) -> PulsarOptions:
    """Validate the user's options for ``purpose`` ("read" or "write")."""
    opts = {str(k).lower(): str(v) for k, v in raw.items()}
    # Spark lower-cases option keys: errors use the documented spelling
    names = {k: CANONICAL.get(k, k) for k in opts}
    names.update({k.lower(): k for k in CANONICAL.values()})
    for key in opts:
        if key in SPARK_OWN or is_passthrough(key):
            continue
        where = KNOWN.get(key)
        if where is None:
            raise PulsarOptionError(names[key], "unknown option")
        if where not in ("all", purpose):
            raise PulsarOptionError(names[key], f"is not a {purpose} option")
    selected = [k for k in ("topic", "topics", "topicspattern") if opts.get(k, "").strip()]
    if purpose == "read" and len(selected) != 1:
        raise PulsarOptionError("topic", "exactly one of topic, topics, topicsPattern is required"
                                + (f" (got {', '.join(names[k] for k in selected)})" if selected else ""))
    pattern = opts.get("topicspattern")
    if pattern:
        try:
            re.compile(pattern)
        except re.error as exc:
            raise PulsarOptionError(names["topicspattern"], f"invalid regular expression: {exc}") from None
    mode = opts.get("readmode", "broker").lower()
    if mode not in READ_MODES:
        raise PulsarOptionError(names.get("readmode", "readMode"), f"must be one of {READ_MODES}, got {mode!r}")
    if purpose == "read":
        if mode == "broker" and not opts.get("service.url"):
            raise PulsarOptionError("service.url", "is required (pulsar://host:port)")
        if mode == "direct" and not opts.get("metadata.url"):
            raise PulsarOptionError("metadata.url", "is required with readMode=direct")
        if not opts.get("admin.url"):
            raise PulsarOptionError("admin.url", "is required to plan reads (http://host:port)")
    else:
        if not opts.get("service.url"):
            raise PulsarOptionError("service.url", "is required (pulsar://host:port)")
    for key in ("service.url",):
        if opts.get(key) and not opts[key].startswith("pulsar://"):
            raise PulsarOptionError(names[key], f"must start with pulsar://, got {opts[key]!r}")
    if opts.get("admin.url") and not opts["admin.url"].startswith(("http://", "https://")):
        raise PulsarOptionError(names["admin.url"], f"must start with http://, got {opts['admin.url']!r}")

    starting = _offsets(opts, names.get("startingoffsets", "startingOffsets"), "startingoffsets",
                        "latest" if streaming else "earliest")
    ending = _offsets(opts, names.get("endingoffsets", "endingOffsets"), "endingoffsets", "latest")
    if ending == "earliest":
        raise PulsarOptionError(names.get("endingoffsets", "endingOffsets"), "earliest is not a valid end")
    if isinstance(ending, dict) and any(p == EARLIEST for p in ending.values()):
        raise PulsarOptionError(names["endingoffsets"], "earliest (-2) is not a valid end")
    if streaming:
        for key in ("endingoffsets", "startingtime", "endingtime"):
            if key in opts:
                raise PulsarOptionError(names[key], "is a batch option; not valid for a streaming read")
    starting_time = _int(opts, names.get("startingtime", "startingTime"), "startingtime", None)
    ending_time = _int(opts, names.get("endingtime", "endingTime"), "endingtime", None)
    if starting_time is not None and "startingoffsets" in opts:
        raise PulsarOptionError(names["startingtime"], "contradicts startingOffsets: give one of them")
    if ending_time is not None and "endingoffsets" in opts:
        raise PulsarOptionError(names["endingtime"], "contradicts endingOffsets: give one of them")
    if starting_time is not None and ending_time is not None and ending_time < starting_time:
        raise PulsarOptionError(names["endingtime"], "is before startingTime")
    if "subscriptionprefix" in opts and "predefinedsubscription" in opts:
        raise PulsarOptionError(names["predefinedsubscription"], "contradicts subscriptionPrefix: give one of them")
    if "maxentriespertrigger" in opts and "maxbytespertrigger" in opts:
        raise PulsarOptionError(names["maxbytespertrigger"], "contradicts maxEntriesPerTrigger: give one of them")
    client_conf, reader_conf, producer_conf = parse_passthrough(opts, purpose, mode)
    if purpose == "read" and not streaming:
        for key in ("maxentriespertrigger", "maxbytespertrigger", "subscriptionprefix", "predefinedsubscription"):
            if key in opts:
                raise PulsarOptionError(names[key], "is a streaming option; not valid for a batch read")

    return PulsarOptions(
        service_url=opts.get("service.url"),
        admin_url=opts.get("admin.url"),
        metadata_url=opts.get("metadata.url"),
        topic=opts.get("topic") or None,
        topics=[t.strip() for t in opts["topics"].split(",") if t.strip()] if opts.get("topics") else None,
        topics_pattern=pattern or None,
        starting_offsets=starting,
        ending_offsets=ending,
        starting_time=starting_time,
        ending_time=ending_time,
        fail_on_data_loss=_bool(opts, names.get("failondataloss", "failOnDataLoss"), "failondataloss", True),
        max_entries_per_trigger=_int(opts, names.get("maxentriespertrigger", ""), "maxentriespertrigger", None, 1),
        max_bytes_per_trigger=_int(opts, names.get("maxbytespertrigger", ""), "maxbytespertrigger", None, 1),
        subscription_prefix=opts.get("subscriptionprefix"),
        predefined_subscription=opts.get("predefinedsubscription"),
        poll_timeout_ms=_int(opts, names.get("polltimeoutms", "pollTimeoutMs"), "polltimeoutms", 120_000, 1) or 120_000,
        read_mode=mode,
        bytes_per_partition=_int(opts, names.get("bytesperpartition", ""), "bytesperpartition", 64 << 20, 1)
        or 64 << 20,
        entries_per_partition=_int(opts, names.get("entriesperpartition", ""), "entriesperpartition", 200_000, 1)
        or 200_000,
        min_partitions=_int(opts, names.get("minpartitions", ""), "minpartitions", None, 1),
        record_batch_size=_int(opts, names.get("recordbatchsize", ""), "recordbatchsize", 65536, 1) or 65536,
        write_id=opts.get("writeid") or uuid.uuid4().hex,
        fail_after_rows=_int(opts, "test.failAfterRows", "test.failafterrows", None),
        client_conf=client_conf,
        reader_conf=reader_conf,
        producer_conf=producer_conf,
        raw=dict(opts),
    )
