"""Per-topic schema registry kept in the metadata store (``/schemas/<tenant>/<ns>/<topic>``).

Versions are 8-byte big-endian longs as in Pulsar. Registering a schema equal to an existing
version returns that version; a different schema becomes the next version unless its type
conflicts with the topic's existing typed schema (IncompatibleSchema).
"""

from __future__ import annotations

import time
from typing import Any

from broker.errors import IncompatibleSchemaError
from broker.names import TopicName
from metadata import values
from metadata.errors import AlreadyExistsError, BadVersionError, NotFoundError
from metadata.store import MetadataStore

NONE_TYPE = 0  # Schema.Type None: raw bytes, compatible with everything

# Schema.Type (protocol enum) -> SchemaType name as the admin API spells it
TYPE_NAMES = ("NONE", "STRING", "JSON", "PROTOBUF", "AVRO", "BOOLEAN", "INT8", "INT16", "INT32", "INT64", "FLOAT",
              "DOUBLE", "DATE", "TIME", "TIMESTAMP", "KEY_VALUE", "INSTANT", "LOCAL_DATE", "LOCAL_TIME",
              "LOCAL_DATE_TIME", "PROTOBUF_NATIVE")


def schema_type_name(type_: int) -> str:
    return TYPE_NAMES[type_] if 0 <= type_ < len(TYPE_NAMES) else str(type_)


def version_bytes(version: int) -> bytes:
    return version.to_bytes(8, "big", signed=True)


def version_int(data: bytes) -> int:
    return int.from_bytes(data, "big", signed=True)


class SchemaRegistry:
    def __init__(self, store: MetadataStore) -> None:
        self.store = store

    @staticmethod
    def path(topic: TopicName) -> str:
        base = topic.partitioned_topic_name
        return f"/schemas/{base.tenant}/{base.namespace}/{base.encoded_local_name}"

    async def _load(self, topic: TopicName) -> tuple[list[dict[str, Any]], int | None]:
        try:
            raw, stat = await self.store.get(self.path(topic))
        except NotFoundError:
            return [], None
        return list(values.unpack(raw)), stat.version

    async def versions(self, topic: TopicName) -> list[dict[str, Any]]:
        return (await self._load(topic))[0]

    async def get(self, topic: TopicName, version: int | None = None) -> dict[str, Any] | None:
        entries = await self.versions(topic)
        if not entries:
            return None
        if version is None:
            return entries[-1]
        for e in entries:
            if e["version"] == version:
                return e
        return None

    async def get_or_create(self, topic: TopicName, type_: int, name: str, data: bytes, properties: dict[str, str]) -> int:
        while True:
            entries, stat_version = await self._load(topic)
            for e in entries:
                if e["type"] == type_ and e["data"] == data:
                    return int(e["version"])
            typed = [e for e in entries if e["type"] != NONE_TYPE]
            if typed and type_ != NONE_TYPE and typed[-1]["type"] != type_:
                raise IncompatibleSchemaError(
                    f"schema type {type_} is incompatible with the topic's type {typed[-1]['type']}"
                )
            version = (entries[-1]["version"] + 1) if entries else 0
            entries.append(
                {"version": version, "type": type_, "name": name, "data": data, "properties": properties,
                 "timestamp": int(time.time() * 1000)}
            )
            try:
                await self.store.put(self.path(topic), values.pack(entries), -1 if stat_version is None else stat_version,
                                     make_parents=True)
                return version
            except (BadVersionError, AlreadyExistsError):
                continue  # a concurrent registration won: look again

    async def delete(self, topic: TopicName) -> None:
        try:
            await self.store.delete(self.path(topic))
        except NotFoundError:
            pass
