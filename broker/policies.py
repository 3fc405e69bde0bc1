"""Validation of namespace policies (Pulsar's ``Policies`` fields) and admin input values.

Pure functions: a JSON value in, the normalised value out, or ``BadRequestError`` (HTTP 400:
wrong type, malformed, out of the field's range) / ``PreconditionFailedError`` (HTTP 412: a
well-formed value Pulsar refuses with 412, such as a negative TTL) whose reason names the field.
``check_stored`` runs the same checks on policies read back from the metadata store, so a policy
an older version stored gives ``InvalidPoliciesError`` for its namespace, never a crash.
"""

from __future__ import annotations

from typing import Any

from broker.errors import BadRequestError, InvalidPoliciesError, PreconditionFailedError

INT32_MAX = 2**31 - 1
INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)
FULL_RANGE_END = 0xFFFFFFFF
# Pulsar's loadBalancerNamespaceMaximumBundles default: more bundles than this are refused.
MAX_BUNDLES = 128
TOPIC_TYPES = ("partitioned", "non-partitioned")


def describe(value: Any) -> str:
    """A short, safe rendering of a bad value for an error reason."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."


def int_field(field: str, value: Any, lo: int, hi: int, *, precondition_below: int | None = None) -> int:
    """``value`` as an int in ``[lo, hi]``. Booleans, floats (NaN, Infinity, 1.5) and strings
    are refused with 400; below ``precondition_below`` answers 412 (Pulsar's range checks)."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise BadRequestError(f"{field} must be an integer, got {describe(value)}")
    if precondition_below is not None and value < precondition_below:
        raise PreconditionFailedError(f"{field} must be >= {precondition_below}, got {value}")
    if not lo <= value <= hi:
        raise BadRequestError(f"{field} must be between {lo} and {hi}, got {describe(value)}")
    return value


def bool_field(field: str, value: Any) -> bool:
    if not isinstance(value, bool):
        raise BadRequestError(f"{field} must be true or false, got {describe(value)}")
    return value


def object_field(field: str, value: Any) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise BadRequestError(f"{field} must be a JSON object, got {describe(value)}")
    return value


def string_list_field(field: str, value: Any) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
        raise BadRequestError(f"{field} must be a list of strings, got {describe(value)}")
    return value


def query_flag(name: str, raw: str | None) -> bool:
    """A boolean query parameter (absent = false)."""
    if raw is None:
        return False
    low = raw.lower()
    if low not in ("true", "false"):
        raise BadRequestError(f"query parameter {name} must be true or false, got {describe(raw)}")
    return low == "true"


# -- bundles -----------------------------------------------------------------------------------

def bundle_boundaries(num_bundles: int) -> list[str]:
    """Evenly split hash range ``0x00000000..0xffffffff`` (Pulsar's NamespaceBundleFactory)."""
    int_field("bundles.numBundles", num_bundles, 1, MAX_BUNDLES)
    step = (FULL_RANGE_END + 1) // num_bundles
    bounds = [i * step for i in range(num_bundles)] + [FULL_RANGE_END]
    return [f"0x{b:08x}" for b in bounds]


def parse_boundaries(boundaries: Any, field: str = "bundles.boundaries") -> list[int]:
    """Boundaries as ints: hex strings, strictly increasing, from 0x00000000 to 0xffffffff."""
    if not isinstance(boundaries, list) or not 2 <= len(boundaries) <= MAX_BUNDLES + 1:
        raise BadRequestError(f"{field} must be a list of 2 to {MAX_BUNDLES + 1} hex strings, got {describe(boundaries)}")
    out: list[int] = []
    for b in boundaries:
        if not isinstance(b, str) or not b.lower().startswith("0x") or len(b) > 10:
            raise BadRequestError(f"{field} entries must be hex strings like 0x40000000, got {describe(b)}")
        try:
            out.append(int(b, 16))
        except ValueError:
            raise BadRequestError(f"{field} entries must be hex strings like 0x40000000, got {describe(b)}") from None
    if out[0] != 0 or out[-1] != FULL_RANGE_END:
        raise BadRequestError(f"{field} must start at 0x00000000 and end at 0xffffffff")
    if any(a >= b for a, b in zip(out, out[1:])):
        raise BadRequestError(f"{field} must be strictly increasing")
    return out


def parse_bundles(value: Any) -> dict[str, Any]:
    """A BundlesData object (``numBundles`` and/or ``boundaries``), normalised to both."""
    body = object_field("bundles", value)
    boundaries, num = body.get("boundaries"), body.get("numBundles")
    if boundaries is not None:
        parse_boundaries(boundaries)
        bounds = [b.lower() for b in boundaries]
        if num is not None and int_field("bundles.numBundles", num, 1, MAX_BUNDLES) != len(bounds) - 1:
            raise BadRequestError("bundles.numBundles must be the number of boundaries minus one")
        return {"boundaries": [f"0x{int(b, 16):08x}" for b in bounds], "numBundles": len(bounds) - 1}
    if num is None:
        raise BadRequestError("bundles needs numBundles or boundaries")
    n = int_field("bundles.numBundles", num, 1, MAX_BUNDLES)
    return {"boundaries": bundle_boundaries(n), "numBundles": n}


# -- policy values (the admin routes' bodies) ----------------------------------------------------

def parse_retention(value: Any) -> dict[str, int]:
    body = object_field("retention", value)
    t = int_field("retentionTimeInMinutes", body.get("retentionTimeInMinutes", 0), -1, INT32_MAX, precondition_below=-1)
    s = int_field("retentionSizeInMB", body.get("retentionSizeInMB", 0), -1, INT64_MAX, precondition_below=-1)
    if (t == 0) != (s == 0):
        raise PreconditionFailedError("Retention time and size must both be 0 or both be non-zero")
    return {"retentionTimeInMinutes": t, "retentionSizeInMB": s}


def parse_message_ttl(value: Any) -> int:
    return int_field("messageTTL", value, 0, INT32_MAX, precondition_below=0)


def parse_deduplication(value: Any) -> bool:
    return bool_field("deduplicationEnabled", value)


def parse_auto_topic_creation(value: Any, max_partitions: int = 0) -> dict[str, Any]:
    """Pulsar's AutoTopicCreationOverride: ``allowAutoTopicCreation``, ``topicType`` and, for
    partitioned topics, ``defaultNumPartitions`` (> 0, at most ``max_partitions`` if set)."""
    body = object_field("autoTopicCreation", value)
    if "allowAutoTopicCreation" not in body:
        raise BadRequestError("autoTopicCreation needs allowAutoTopicCreation")
    out: dict[str, Any] = {"allowAutoTopicCreation": bool_field("allowAutoTopicCreation", body["allowAutoTopicCreation"])}
    # topicType and defaultNumPartitions may be left out: the broker's defaults apply.
    kind = body.get("topicType")
    if kind is not None:
        if kind not in TOPIC_TYPES:  # Pulsar: 400 when not a string (JSON mapping), else 412
            error = PreconditionFailedError if isinstance(kind, str) else BadRequestError
            raise error(f"topicType must be one of {', '.join(TOPIC_TYPES)}, got {describe(kind)}")
        out["topicType"] = kind
    parts = body.get("defaultNumPartitions")
    if parts is not None:
        out["defaultNumPartitions"] = parse_num_partitions(parts, max_partitions, "defaultNumPartitions")
    return out


def parse_num_partitions(value: Any, max_partitions: int = 0, field: str = "partitions") -> int:
    """A partition count: 1..int32 (412 when above the broker's maxNumPartitionsPerPartitionedTopic)."""
    n = int_field(field, value, 1, INT32_MAX, precondition_below=1)
    if max_partitions > 0 and n > max_partitions:
        raise PreconditionFailedError(f"{field} {n} is above the maximum of {max_partitions} partitions per topic")
    return n


def parse_message_id(value: Any) -> tuple[int, int, int]:
    """(ledgerId, entryId, partitionIndex) of a MessageIdImpl JSON body (partitionIndex -1 if absent)."""
    body = object_field("messageId", value)
    if "ledgerId" not in body or "entryId" not in body:
        raise BadRequestError("a message id needs ledgerId and entryId")
    ledger = int_field("ledgerId", body["ledgerId"], INT64_MIN, INT64_MAX)
    entry = int_field("entryId", body["entryId"], INT64_MIN, INT64_MAX)
    partition = int_field("partitionIndex", body.get("partitionIndex", -1), -1, INT32_MAX)
    return ledger, entry, partition


BACKLOG_QUOTA_TYPES = ("destination_storage", "message_age")
BACKLOG_QUOTA_POLICIES = ("producer_request_hold", "producer_exception", "consumer_backlog_eviction")


def parse_backlog_quota(value: Any) -> dict[str, Any]:
    """Pulsar's BacklogQuota: ``limitSize`` bytes (``limit``, its deprecated name, accepted),
    ``limitTime`` seconds (-1 = none) and ``policy``."""
    body = object_field("backlogQuota", value)
    size = body.get("limitSize", body.get("limit", -1))
    out: dict[str, Any] = {
        "limitSize": int_field("limitSize", size, -1, INT64_MAX),
        "limitTime": int_field("limitTime", body.get("limitTime", -1), -1, INT32_MAX),
    }
    policy = body.get("policy", "producer_request_hold")
    if policy not in BACKLOG_QUOTA_POLICIES:
        raise BadRequestError(f"policy must be one of {', '.join(BACKLOG_QUOTA_POLICIES)}, got {describe(policy)}")
    out["policy"] = policy
    return out


def parse_backlog_quota_type(value: Any) -> str:
    kind = "destination_storage" if value is None else value
    if kind not in BACKLOG_QUOTA_TYPES:
        raise BadRequestError(f"backlogQuotaType must be one of {', '.join(BACKLOG_QUOTA_TYPES)}, got {describe(kind)}")
    return str(kind)


def parse_backlog_quota_map(value: Any) -> dict[str, Any]:
    body = object_field("backlog_quota_map", value)
    return {parse_backlog_quota_type(k): parse_backlog_quota(v) for k, v in body.items()}


def parse_persistence(value: Any) -> dict[str, Any]:
    """Pulsar's PersistencePolicies: E >= WQ >= AQ >= 1 (412 otherwise, as Pulsar answers)."""
    body = object_field("persistence", value)
    e = int_field("bookkeeperEnsemble", body.get("bookkeeperEnsemble", 0), 0, 64)
    wq = int_field("bookkeeperWriteQuorum", body.get("bookkeeperWriteQuorum", 0), 0, 64)
    aq = int_field("bookkeeperAckQuorum", body.get("bookkeeperAckQuorum", 0), 0, 64)
    if not e >= wq >= aq >= 1:
        raise PreconditionFailedError(
            f"Bookkeeper Ensemble (E) >= WriteQuorum (Qw) >= AckQuorum (Qa) >= 1 is required, got {e}/{wq}/{aq}")
    rate = body.get("managedLedgerMaxMarkDeleteRate", 0)
    if isinstance(rate, bool) or not isinstance(rate, (int, float)) or not 0 <= rate < float("inf"):
        raise BadRequestError(f"managedLedgerMaxMarkDeleteRate must be a number >= 0, got {describe(rate)}")
    return {"bookkeeperEnsemble": e, "bookkeeperWriteQuorum": wq, "bookkeeperAckQuorum": aq,
            "managedLedgerMaxMarkDeleteRate": float(rate)}


# -- whole Policies objects ------------------------------------------------------------------------

# Field of the stored Policies -> validator of a non-null value (null = "not set" for all of them).
_FIELDS = {
    "bundles": parse_bundles,
    "retention_policies": parse_retention,
    "message_ttl_in_seconds": parse_message_ttl,
    "deduplicationEnabled": parse_deduplication,
    "autoTopicCreationOverride": parse_auto_topic_creation,
    "replication_clusters": lambda v: string_list_field("replication_clusters", v),
    "auth_policies": lambda v: object_field("auth_policies", v),
    "deleted": lambda v: bool_field("deleted", v),
    "backlog_quota_map": parse_backlog_quota_map,
    "persistence": parse_persistence,
}


def known_field(key: str) -> bool:
    return key in _FIELDS or key.endswith("Enabled")


def parse_policy(key: str, value: Any) -> Any:
    """Validate one Policies field (null allowed except for ``bundles``)."""
    if value is None and key != "bundles":
        return None
    validate = _FIELDS.get(key)
    if validate is None:
        return bool_field(key, value)  # the remaining known fields are the *Enabled flags
    try:
        return validate(value)
    except (BadRequestError, PreconditionFailedError) as exc:
        if str(exc).startswith(key):
            raise
        raise type(exc)(f"{key}: {exc}") from None  # the Policies field, then the detail


def parse_namespace_policies(value: Any) -> dict[str, Any]:
    """The known, validated fields of a namespace creation body (unknown fields are ignored)."""
    body = object_field("policies", value)
    return {k: parse_policy(k, v) for k, v in body.items() if known_field(k)}


def check_stored(ns: Any, policies: Any) -> dict[str, Any]:
    """Policies read from the metadata store, or InvalidPoliciesError naming the bad field."""
    try:
        body = object_field("policies", policies)
        if "bundles" not in body:
            raise BadRequestError("bundles is missing")
        for key, value in body.items():
            if known_field(key):
                parse_policy(key, value)
        # The stored boundaries are what ownership uses: they must agree with themselves.
        parse_boundaries(body["bundles"].get("boundaries"))
    except (BadRequestError, PreconditionFailedError) as exc:
        raise InvalidPoliciesError(
            f"Namespace {ns} has invalid stored policies ({exc}); set a valid value with the admin API "
            "or delete the namespace") from None
    return body
