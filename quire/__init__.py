"""quire: a Pulsar-style message queue in Python.

This package holds only the `quire` command-line entry point; the system itself lives in the
top-level packages metadata, bookie, managed_ledger, broker, clients and spark_connector.
"""

__version__ = "0.1.0"
