"""Topic and namespace names: parsing, validation, partitions and storage names.

``persistent://tenant/ns/topic`` is the full form; ``topic`` maps to ``public/default`` and
``tenant/ns/topic`` to the persistent domain. Partition ``i`` of a partitioned topic is the
ordinary topic ``<topic>-partition-<i>``; as in Pulsar's TopicName, a suffix that is not a
canonical decimal (``-partition-01``, ``-partition-x``) makes no partition, and an index
beyond int32 (the wire's partition field) is an invalid name.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from urllib.parse import quote, unquote

from broker.errors import InvalidSubscriptionNameError, InvalidTopicNameError

PARTITION_SUFFIX = "-partition-"
DOMAINS = ("persistent", "non-persistent")
_NAME_OK = re.compile(r"^[-=:.\w]+$", re.ASCII)  # Java's \w: ASCII letters, digits, _
# Canonical decimal only (no leading zero, ASCII digits), as Pulsar's getPartitionIndex.
_PARTITION_RE = re.compile(r"^(.*)-partition-(0|[1-9][0-9]*)$")
MAX_PARTITION_INDEX = 2**31 - 1


def check_name_part(kind: str, value: str) -> str:
    """Validate a tenant, namespace or cluster name (Pulsar's allowed characters)."""
    if not value or not _NAME_OK.match(value):
        raise InvalidTopicNameError(f"invalid {kind} name: {value!r}")
    return value


def without_partition_suffix(name: str) -> str:
    """``...topic-partition-3`` -> ``...topic`` (a name that is no partition is returned as is)."""
    m = _PARTITION_RE.match(name)
    return m.group(1) if m else name


def check_subscription_name(name: str) -> str:
    """A subscription name is a cursor's node name in the metadata store: it must be a
    non-empty single path component."""
    if not name or "/" in name or name in (".", ".."):
        raise InvalidSubscriptionNameError(f"invalid subscription name: {name!r}")
    return name


@dataclass(frozen=True)
class NamespaceName:
    tenant: str
    namespace: str

    @classmethod
    def parse(cls, text: str) -> "NamespaceName":
        parts = text.strip("/").split("/")
        if len(parts) != 2:
            raise InvalidTopicNameError(f"invalid namespace name: {text!r}")
        return cls(check_name_part("tenant", parts[0]), check_name_part("namespace", parts[1]))

    def __str__(self) -> str:
        return f"{self.tenant}/{self.namespace}"


@dataclass(frozen=True)
class TopicName:
    domain: str
    tenant: str
    namespace: str
    local_name: str

    @classmethod
    def parse(cls, text: str) -> "TopicName":
        if not text:
            raise InvalidTopicNameError("empty topic name")
        if "://" in text:
            domain, _, rest = text.partition("://")
            if domain not in DOMAINS:
                raise InvalidTopicNameError(f"invalid topic domain: {domain!r}")
            parts = rest.split("/", 2)
            if len(parts) != 3:
                raise InvalidTopicNameError(f"invalid topic name: {text!r}")
        else:
            domain = "persistent"
            parts = text.split("/", 2)
            if len(parts) == 1:
                parts = ["public", "default", parts[0]]
            elif len(parts) != 3:
                raise InvalidTopicNameError(f"invalid short topic name: {text!r}")
        tenant, ns, local = parts
        check_name_part("tenant", tenant)
        check_name_part("namespace", ns)
        if not local or "/" in local or local.strip() != local:
            raise InvalidTopicNameError(f"invalid topic local name: {local!r}")
        m = _PARTITION_RE.match(local)
        if m and (len(m.group(2)) > 10 or int(m.group(2)) > MAX_PARTITION_INDEX):
            raise InvalidTopicNameError(f"invalid topic name {text!r}: partition index beyond {MAX_PARTITION_INDEX}")
        return cls(domain, tenant, ns, local)

    @classmethod
    def of(cls, namespace: NamespaceName, local_name: str, domain: str = "persistent") -> "TopicName":
        return cls.parse(f"{domain}://{namespace}/{local_name}")

    def __str__(self) -> str:
        return f"{self.domain}://{self.tenant}/{self.namespace}/{self.local_name}"

    @property
    def namespace_name(self) -> NamespaceName:
        return NamespaceName(self.tenant, self.namespace)

    @property
    def persistent(self) -> bool:
        return self.domain == "persistent"

    @property
    def partition_index(self) -> int:
        """The partition number of a ``-partition-N`` topic, else -1."""
        m = _PARTITION_RE.match(self.local_name)
        return int(m.group(2)) if m else -1

    @property
    def partitioned_topic_name(self) -> "TopicName":
        """The parent topic of a partition (itself when it is not a partition)."""
        m = _PARTITION_RE.match(self.local_name)
        if not m:
            return self
        return TopicName(self.domain, self.tenant, self.namespace, m.group(1))

    def partition(self, index: int) -> "TopicName":
        if not 0 <= index <= MAX_PARTITION_INDEX:
            raise InvalidTopicNameError(f"invalid partition index {index} of {self}")
        return TopicName(self.domain, self.tenant, self.namespace, f"{self.local_name}{PARTITION_SUFFIX}{index}")

    @property
    def encoded_local_name(self) -> str:
        return quote(self.local_name, safe="")

    @property
    def managed_ledger_name(self) -> str:
        """``tenant/ns/persistent/<url-encoded topic>``: Pulsar's managed-ledger naming."""
        return f"{self.tenant}/{self.namespace}/{self.domain}/{self.encoded_local_name}"

    @classmethod
    def from_managed_ledger_name(cls, name: str) -> "TopicName":
        tenant, ns, domain, local = name.split("/", 3)
        return cls(domain, tenant, ns, unquote(local))

    @property
    def rest_path(self) -> str:
        """``persistent/tenant/ns/topic`` as used in admin and lookup URLs."""
        return f"{self.domain}/{self.tenant}/{self.namespace}/{self.encoded_local_name}"
