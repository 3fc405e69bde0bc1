"""The Pulsar binary protocol codec (sans-IO), shared by the broker, the client and the tests.

Modules: ``pulsar_api_pb2`` (generated from ``pulsar_api.proto``), ``frames`` (framing, CRC32C,
``FrameDecoder``, stored entries), ``commands`` (command constructors, message-id helpers),
``batch`` (batch payloads, ack sets), ``compression`` (LZ4/ZLIB/ZSTD/SNAPPY), ``errors``.
"""
