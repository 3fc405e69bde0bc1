"""``PulsarDataSource``: the ``pulsar`` format for ``spark.read``/``readStream``/``write``/``writeStream``."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from .options import parse_options
from .rows import SCHEMA_DDL

if TYPE_CHECKING:  # imported when Spark asks for them: a read does not load the writer
    from .batch import PulsarBatchReader
    from .stream import PulsarStreamReader
    from .write import PulsarBatchWriter, PulsarStreamWriter


class PulsarDataSource(DataSource):
    """Register with ``spark.dataSource.register(PulsarDataSource)``; options as StreamNative's connector."""

    @classmethod
    def name(cls) -> str:
        return "pulsar"

    def schema(self) -> str:
        return SCHEMA_DDL

    def reader(self, schema: StructType) -> PulsarBatchReader:
        from .batch import PulsarBatchReader
        return PulsarBatchReader(parse_options(self.options, purpose="read"))

    def streamReader(self, schema: StructType) -> PulsarStreamReader:
        from .stream import PulsarStreamReader
        return PulsarStreamReader(parse_options(self.options, purpose="read", streaming=True))

    def writer(self, schema: StructType, overwrite: bool) -> PulsarBatchWriter:
        from .write import PulsarBatchWriter
        return PulsarBatchWriter(parse_options(self.options, purpose="write"), schema)

    def streamWriter(self, schema: StructType, overwrite: bool) -> PulsarStreamWriter:
        from .write import PulsarStreamWriter
        return PulsarStreamWriter(parse_options(self.options, purpose="write"), schema)
