"""Older schema versions met in a read, fetched from the registry before their entries are decoded.

A message names the schema version it was written with (``MessageMetadata.schema_version``,
an 8-byte big-endian long); the driver planned with each topic's latest version. The fetchers
of both read modes ask the registry for any other version before they hand its entries over
(:meth:`ValueSchema.add_writer`), so the decoder always has the writer schema: over the
broker connection (``GET_SCHEMA`` with the version) in broker mode, from the metadata store's
``/schemas/<tenant>/<ns>/<topic>`` record in direct mode.
"""

from __future__ import annotations

from typing import Any, Iterable
from urllib.parse import quote

from .errors import PulsarConnectorError
from .topic_names import registry_topic
from .value_schema import ValueSchema

_TYPE_NAMES = {2: "JSON", 4: "AVRO"}  # Schema.Type values of record schemas; others decode as latest


def missing_versions(value_schema: ValueSchema | None, topic: str, entries: Iterable[Any]) -> set[int]:
    """The schema versions of ``entries`` (``(ledger, entry, metadata, ...)``) that ``value_schema``
    has no writer schema for yet."""
    if value_schema is None:
        return set()
    topic = registry_topic(topic)
    out = set()
    for item in entries:
        meta = item[2]
        if meta.HasField("schema_version"):
            v = int.from_bytes(meta.schema_version, "big", signed=True)
            if value_schema.needs_writer(topic, v):
                out.add(v)
    return out


async def fetch_from_broker(cnx: Any, request_id: Any, value_schema: ValueSchema, topic: str,
                            versions: set[int]) -> None:
    """Each of ``versions`` of ``topic``'s schema over the connection ``cnx`` (``request_id()``: a new id)."""
    from clients.protocol import commands as cmds

    base = registry_topic(topic)
    for v in sorted(versions):
        rid = request_id()
        resp = (await cnx.request(cmds.get_schema(rid, base, v.to_bytes(8, "big", signed=True)), rid)).getSchemaResponse
        if resp.HasField("error_code") or not resp.HasField("schema"):
            raise PulsarConnectorError(f"{base}: schema version {v} of its messages is not in the registry: "
                                       f"{resp.error_message or 'no schema'}")
        value_schema.add_writer(base, v, _TYPE_NAMES.get(resp.schema.type, str(resp.schema.type)),
                                resp.schema.schema_data.decode("utf-8", errors="replace"))


async def fetch_from_store(store: Any, value_schema: ValueSchema, topic: str, versions: set[int]) -> None:
    """Each of ``versions`` of ``topic``'s schema from the broker's registry record in ``store``."""
    from metadata import values
    from metadata.errors import NotFoundError

    base = registry_topic(topic)
    tenant, ns, local = base.split("://", 1)[1].split("/", 2)
    try:
        raw, _ = await store.get(f"/schemas/{tenant}/{ns}/{quote(local, safe='')}")
        entries = {int(e["version"]): e for e in values.unpack(raw)}
    except NotFoundError:
        entries = {}
    for v in sorted(versions):
        e = entries.get(v)
        if e is None:
            raise PulsarConnectorError(f"{base}: schema version {v} of its messages is not in the registry")
        data = e["data"]
        value_schema.add_writer(base, v, _TYPE_NAMES.get(e["type"], str(e["type"])),
                                data.decode("utf-8", errors="replace") if isinstance(data, bytes) else str(data))
