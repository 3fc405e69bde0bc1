"""``PulsarDataSource``: the ``pulsar`` format for ``spark.read``/``readStream``/``write``/``writeStream``.

The read schema is the metadata columns plus ``value`` (binary), or, when the topics have a
JSON or AVRO schema in the broker's registry, that record's fields in place of ``value``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .errors import PulsarAdminError, PulsarOptionError
from .options import PulsarOptions, parse_options
from .rows import META_DDL, SCHEMA_DDL
from .topic_names import registry_topic
from .value_schema import ValueSchema

_UNSET: Any = object()


def topics_value_schema(opts: PulsarOptions) -> ValueSchema | None:
    """The value schema shared by the selected topics (None: raw bytes). Topics whose schemas
    differ cannot share one DataFrame: that is an error naming the topic option."""
    from .admin import AdminClient, full_topic_name
    from .planner import resolve_topics

    admin = AdminClient.for_options(opts)
    found: dict[str, tuple[str, str] | None] = {}
    latest: dict[str, int] = {}
    for topic in resolve_topics(opts, admin):
        info = admin.schema(topic)
        kind = str(info.get("type", "")).upper() if info else ""
        found[topic] = (kind, str(info.get("data", ""))) if info and kind in ("JSON", "AVRO") else None
        if info and isinstance(info.get("version"), int):
            latest[registry_topic(full_topic_name(topic))] = info["version"]
    distinct = set(found.values())
    if not distinct or distinct == {None}:
        return None
    if len(distinct) > 1:
        option = "topic" if opts.topic else "topics" if opts.topics else "topicsPattern"
        raise PulsarOptionError(option, "the topics have different value schemas, read them separately: "
                                + ", ".join(f"{t}: {s[0] if s else 'bytes'}" for t, s in sorted(found.items())))
    kind, definition = next(iter(distinct))  # type: ignore[misc]
    return ValueSchema(kind, definition, latest)

if TYPE_CHECKING:  # imported when Spark asks for them: a read does not load the writer
    from .batch import PulsarBatchReader
    from .stream import PulsarStreamReader
    from .write import PulsarBatchWriter, PulsarStreamWriter


class PulsarDataSource(DataSource):
    """Register with ``spark.dataSource.register(PulsarDataSource)``; options as StreamNative's connector."""

    _value_schema: Any = _UNSET

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def _read_options(self, streaming: bool) -> PulsarOptions:
        opts = parse_options(self.options, purpose="read", streaming=streaming)
        if self._value_schema is _UNSET:
            self._value_schema = topics_value_schema(opts)
        opts.value_schema = self._value_schema
        return opts

    def schema(self) -> str:
        # Spark asks for the schema before it says whether the read is batch or streaming
        for streaming in (False, True):
            try:
                vs = self._read_options(streaming).value_schema
            except PulsarOptionError:
                continue  # reader()/streamReader() raise it with the right purpose
            except PulsarAdminError:
                break
            return SCHEMA_DDL if vs is None else f"{vs.ddl()}, {META_DDL}"
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> PulsarBatchReader:
        from .batch import PulsarBatchReader
        return PulsarBatchReader(self._read_options(streaming=False))

    def streamReader(self, schema: StructType) -> PulsarStreamReader:
        from .stream import PulsarStreamReader
        return PulsarStreamReader(self._read_options(streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> PulsarBatchWriter:
        from .write import PulsarBatchWriter
        return PulsarBatchWriter(parse_options(self.options, purpose="write"), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> PulsarStreamWriter:
        from .write import PulsarStreamWriter
        return PulsarStreamWriter(parse_options(self.options, purpose="write"), schema)
