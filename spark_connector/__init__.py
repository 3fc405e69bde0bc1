"""PySpark 4 Python Data Source ``pulsar``: batch and streaming reads of quire/Pulsar topics, exactly-once writes.

    from spark_connector import PulsarDataSource
    spark.dataSource.register(PulsarDataSource)
    df = spark.read.format("pulsar").option("service.url", ...).option("admin.url", ...).option("topic", t).load()
"""

from .errors import PulsarAdminError, PulsarConnectorError, PulsarDataLossError, PulsarOptionError
from .source import PulsarDataSource

__all__ = ["PulsarDataSource", "PulsarConnectorError", "PulsarOptionError", "PulsarAdminError",
           "PulsarDataLossError"]
