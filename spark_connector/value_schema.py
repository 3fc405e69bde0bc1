"""A topic's JSON or AVRO schema -> Spark columns, and the decoder of its payloads.

Pulsar describes both JSON and AVRO values with an Avro record definition (the schema's
``data``). The record's fields become top-level columns (in place of ``value``); AVRO payloads
are Avro binary without a container header (decoded with fastavro), JSON payloads are JSON
objects. Types: boolean, int, long, float, double, string, bytes, enum (string), fixed
(binary), arrays, maps (string keys), nested records (structs), ``["null", T]`` unions
(nullable T), logical ``timestamp-millis``/``timestamp-micros`` (timestamp) and ``date``.
Other unions are rejected when the query is analysed.

The columns are the topic's latest schema version's. A message written with an older version
(its ``schema_version``) is decoded with that writer schema and resolved to the latest one's
fields, as Avro schema resolution does: fields it lacks take the latest schema's default (null
when none). The executors fetch those writer schemas from the registry as they meet them
(:meth:`ValueSchema.add_writer`).
"""

from __future__ import annotations

import datetime as dt
import io
import json
from typing import Any, Callable

import pyarrow as pa

from .errors import PulsarConnectorError

_EPOCH = dt.date(1970, 1, 1)


class _Type:
    """One Avro type: its Spark DDL, Arrow type, and the converter of a decoded value to what
    ``pa.array`` takes for that Arrow type (``json``: the value came from JSON text)."""

    def __init__(self, ddl: str, arrow: pa.DataType, conv: Callable[[Any, bool], Any] | None = None) -> None:
        self.ddl, self.arrow = ddl, arrow
        self.conv = conv


def _convert(avro: Any) -> _Type:
    if isinstance(avro, list):
        rest = [t for t in avro if t != "null"]
        if len(rest) != 1:
            raise PulsarConnectorError(f"unsupported Avro union {avro!r}: only [\"null\", T] maps to a column")
        return _convert(rest[0])
    if isinstance(avro, str):
        avro = {"type": avro}
    kind, logical = avro.get("type"), avro.get("logicalType")
    if isinstance(kind, (dict, list)):
        return _convert(kind)
    if logical in ("timestamp-millis", "timestamp-micros") and kind == "long":
        scale = 1000 if logical == "timestamp-millis" else 1
        return _Type("TIMESTAMP", pa.timestamp("us", tz="UTC"),
                     lambda v, js: v * scale if js or isinstance(v, int) else v)
    if logical == "date" and kind == "int":
        return _Type("DATE", pa.date32(), lambda v, js: _EPOCH + dt.timedelta(days=v) if isinstance(v, int) else v)
    simple = {"boolean": ("BOOLEAN", pa.bool_()), "int": ("INT", pa.int32()), "long": ("BIGINT", pa.int64()),
              "float": ("FLOAT", pa.float32()), "double": ("DOUBLE", pa.float64()), "string": ("STRING", pa.string()),
              "enum": ("STRING", pa.string())}
    if kind in simple:
        return _Type(*simple[kind])
    if kind in ("bytes", "fixed"):
        # JSON carries bytes as text (Avro's JSON encoding: one code point per byte)
        return _Type("BINARY", pa.binary(), lambda v, js: v.encode("latin-1") if isinstance(v, str) else v)
    if kind == "array":
        item = _convert(avro["items"])
        ic = item.conv
        return _Type(f"ARRAY<{item.ddl}>", pa.list_(item.arrow),
                     None if ic is None else lambda v, js: [None if x is None else ic(x, js) for x in v])
    if kind == "map":
        val = _convert(avro["values"])
        vc = val.conv
        return _Type(f"MAP<STRING, {val.ddl}>", pa.map_(pa.string(), val.arrow),
                     lambda v, js: [(k, x if vc is None or x is None else vc(x, js)) for k, x in v.items()])
    if kind == "record":
        fields = [(f["name"], _convert(f["type"])) for f in avro.get("fields", [])]
        convs = [(name, t.conv) for name, t in fields if t.conv is not None]

        def record(v: Any, js: bool) -> Any:
            if convs:
                v = dict(v)
                for name, c in convs:
                    x = v.get(name)
                    if x is not None:
                        v[name] = c(x, js)
            return v
        return _Type("STRUCT<" + ", ".join(f"`{n}`: {t.ddl}" for n, t in fields) + ">",
                     pa.struct([pa.field(n, t.arrow) for n, t in fields]), record)
    raise PulsarConnectorError(f"unsupported Avro type {avro!r}")


class ValueSchema:
    """The decoded-value columns of a topic with a JSON or AVRO schema (picklable: executors
    rebuild the parsed forms from the definition text)."""

    def __init__(self, kind: str, definition: str, latest: dict[str, int] | None = None) -> None:
        if kind not in ("JSON", "AVRO"):
            raise ValueError(f"not a record schema type: {kind}")
        self.kind, self.definition = kind, definition
        self.latest = dict(latest or {})  # topic (partitions: their topic's name) -> version of `definition`
        # (topic, other version) met in the data -> (type name, definition) as the registry holds them
        self.writers: dict[tuple[str, int], tuple[str, str]] = {}
        self._setup()

    def _setup(self) -> None:
        try:
            self.avro = json.loads(self.definition)
        except ValueError as exc:
            raise PulsarConnectorError(f"the topic's {self.kind} schema is not valid JSON: {exc}") from None
        if not isinstance(self.avro, dict) or self.avro.get("type") != "record":
            raise PulsarConnectorError(f"the topic's {self.kind} schema is not an Avro record")
        self.record = _convert(self.avro)
        self.fields = [(f["name"], _convert(f["type"])) for f in self.avro.get("fields", [])]
        self._parsed: Any = None
        self._writer_parsed: dict[tuple[str, int], Any] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {"kind": self.kind, "definition": self.definition, "latest": self.latest}

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.kind, self.definition, self.latest = state["kind"], state["definition"], state.get("latest", {})
        self.writers = {}
        self._setup()

    def is_latest(self, topic: str, version: int | None) -> bool:
        """Whether values of ``topic``'s schema ``version`` (None: the message names none)
        decode with the latest schema as they are."""
        return version is None or self.latest.get(topic, version) == version

    def needs_writer(self, topic: str, version: int | None) -> bool:
        """Whether values of ``topic``'s schema ``version`` need a writer schema that
        :meth:`add_writer` has not been given yet."""
        return not self.is_latest(topic, version) and (topic, version) not in self.writers

    def add_writer(self, topic: str, version: int, kind: str, definition: str) -> None:
        """The registry's schema ``version`` of ``topic`` (``kind``: its type name)."""
        self.writers[(topic, version)] = (kind.upper(), definition)

    @property
    def column_names(self) -> list[str]:
        return [name for name, _ in self.fields]

    def ddl(self) -> str:
        return ", ".join(f"`{name}` {t.ddl}" for name, t in self.fields)

    def arrow_fields(self) -> list[pa.Field]:
        return [pa.field(name, t.arrow) for name, t in self.fields]

    def _reader(self, writer_key: tuple[str, int] | None) -> Callable[[bytes], Any]:
        """The decoder of one payload written with the schema ``writer_key`` (topic, version;
        None: the latest) into a latest-schema record."""
        writer = None if writer_key is None else self.writers.get(writer_key)
        if writer_key is not None and writer is None:
            raise PulsarConnectorError(f"{writer_key[0]}: no writer schema for version {writer_key[1]} was fetched")
        if writer is not None and (writer[0] not in ("JSON", "AVRO") or writer[1] == self.definition):
            writer = None  # the latest's definition, or a bytes version of a topic now typed: as latest
        if self.kind == "JSON":
            if writer is None:
                return json.loads
            # JSON carries field names: only the fields the writer lacked need the latest defaults
            defaults = {f["name"]: f["default"] for f in self.avro.get("fields", []) if "default" in f}
            if not defaults:
                return json.loads

            def with_defaults(data: bytes) -> Any:
                rec = json.loads(data)
                if isinstance(rec, dict):
                    for name, value in defaults.items():
                        rec.setdefault(name, value)
                return rec
            return with_defaults
        import fastavro

        if self._parsed is None:
            self._parsed = fastavro.parse_schema(self.avro)
        reader = self._parsed
        if writer is not None:
            assert writer_key is not None
            parsed = self._writer_parsed.get(writer_key)
            if parsed is None:
                try:
                    parsed = self._writer_parsed[writer_key] = fastavro.parse_schema(json.loads(writer[1]))
                except Exception as exc:
                    raise PulsarConnectorError(f"{writer_key[0]}: schema version {writer_key[1]} does not "
                                               f"parse: {exc!r}") from None
            return lambda data: fastavro.schemaless_reader(io.BytesIO(data), parsed, reader)
        return lambda data: fastavro.schemaless_reader(io.BytesIO(data), reader, None)

    def decode(self, values: list[bytes], ids: list[bytes], writer: tuple[str, int] | None = None) -> list[pa.Array]:
        """One Arrow array per field for the payloads ``values`` written with the schema
        ``writer`` ((topic, version); None: the latest; ``ids``: for error messages)."""
        js = self.kind == "JSON"
        conv = self.record.conv
        records = []
        decode_one = self._reader(writer)
        for i, data in enumerate(values):
            try:
                rec = decode_one(data)
                if not isinstance(rec, dict):
                    raise ValueError(f"not a record but {type(rec).__name__}")
                records.append(conv(rec, js) if conv is not None else rec)
            except Exception as exc:
                from clients.message_id import MessageId

                mid = MessageId.deserialize(ids[i])
                raise PulsarConnectorError(
                    f"message {mid.ledger_id()}:{mid.entry_id()}:{mid.batch_index()} does not decode with the "
                    f"topic's {self.kind} schema{'' if writer is None else f' version {writer[1]}'}: {exc!r}") from None
        try:
            struct = pa.array(records, type=self.record.arrow)
        except (pa.ArrowInvalid, pa.ArrowTypeError) as exc:
            raise PulsarConnectorError(f"values do not fit the topic's {self.kind} schema: {exc}") from None
        return list(struct.flatten())
