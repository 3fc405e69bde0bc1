"""Pass-through options ``pulsar.client.*``, ``pulsar.reader.*``, ``pulsar.producer.*``.

As StreamNative's connector, the suffix is a field of the Java client's configuration
(``ClientConfigurationData``, ``ReaderConfigurationData``, ``ProducerConfigurationData``). Only
fields our ``clients`` package can honour are accepted; each is converted at analysis time to a
keyword argument of ``clients.Client`` / ``create_reader`` / ``create_producer``. Any other field
is rejected with a message naming the option, rather than silently ignored.

Credentials are StreamNative's too: ``pulsar.client.authPluginClassName`` with
``pulsar.client.authParams`` (Pulsar's class names and parameter strings, see
clients.auth.authentication_from) become the ``authentication`` keyword; with
``tlsTrustCertsFilePath`` / ``tlsAllowInsecureConnection`` they also serve the admin calls on
the driver (spark_connector.admin), so they apply with readMode=direct as well.
"""

from __future__ import annotations

import math
from typing import Any, Callable, Mapping

from .errors import PulsarOptionError

PREFIXES = ("pulsar.client.", "pulsar.reader.", "pulsar.producer.")


def _int(text: str) -> int:
    value = int(text)
    if value < 0:
        raise ValueError("must be >= 0")
    return value


def _bool(text: str) -> bool:
    v = text.strip().lower()
    if v not in ("true", "false"):
        raise ValueError("must be true or false")
    return v == "true"


def _file(text: str) -> str:
    import os

    if not os.path.isfile(text):
        raise ValueError("no such file")
    return text


def _compression(text: str) -> Any:
    from clients.options import CompressionType

    names = {c.name.lower(): c for c in CompressionType}
    try:
        return names[text.strip().lower()]
    except KeyError:
        raise ValueError(f"must be one of {', '.join(c.name for c in CompressionType)}") from None


Conv = Callable[[str], Any]

# lower-cased Java field -> (documented spelling, python keyword, converter)
CLIENT: dict[str, tuple[str, str, Conv]] = {
    "operationtimeoutms": ("operationTimeoutMs", "operation_timeout_seconds",
                           lambda t: max(1, math.ceil(_int(t) / 1000))),
    "connectiontimeoutms": ("connectionTimeoutMs", "connection_timeout_ms", _int),
    "tlstrustcertsfilepath": ("tlsTrustCertsFilePath", "tls_trust_certs_file_path", _file),
    "tlsallowinsecureconnection": ("tlsAllowInsecureConnection", "tls_allow_insecure_connection", _bool),
}
# the credentials: two options, one keyword (``authentication``), built in _authentication
AUTH = {"authpluginclassname": "authPluginClassName", "authparams": "authParams"}
# client fields that serve the driver's admin calls too (valid in every read mode)
ADMIN_TOO = {"tlstrustcertsfilepath", "tlsallowinsecureconnection", *AUTH}
READER: dict[str, tuple[str, str, Conv]] = {
    "receiverqueuesize": ("receiverQueueSize", "receiver_queue_size", lambda t: max(1, _int(t))),
    "readername": ("readerName", "reader_name", str),
    "subscriptionroleprefix": ("subscriptionRolePrefix", "subscription_role_prefix", str),
}
PRODUCER: dict[str, tuple[str, str, Conv]] = {
    "sendtimeoutms": ("sendTimeoutMs", "send_timeout_millis", _int),
    "maxpendingmessages": ("maxPendingMessages", "max_pending_messages", lambda t: max(1, _int(t))),
    "blockifqueuefull": ("blockIfQueueFull", "block_if_queue_full", _bool),
    "batchingenabled": ("batchingEnabled", "batching_enabled", _bool),
    "batchingmaxmessages": ("batchingMaxMessages", "batching_max_messages", lambda t: max(1, _int(t))),
    "batchingmaxbytes": ("batchingMaxBytes", "batching_max_allowed_size_in_bytes", lambda t: max(1, _int(t))),
    "batchingmaxpublishdelaymicros": ("batchingMaxPublishDelayMicros", "batching_max_publish_delay_ms",
                                      lambda t: _int(t) // 1000),
    "compressiontype": ("compressionType", "compression_type", _compression),
    "chunkingenabled": ("chunkingEnabled", "chunking_enabled", _bool),
}
# fields the connector sets itself: a user value would break its guarantees
OWNED = {
    "pulsar.producer.producername": "the exactly-once writer derives the producer name from (query, partition)",
    "pulsar.reader.startmessageid": "use startingOffsets / endingOffsets",
    "pulsar.client.serviceurl": "use the service.url option",
}


def is_passthrough(key: str) -> bool:
    return key.startswith(PREFIXES)


def parse_passthrough(opts: Mapping[str, str], purpose: str, read_mode: str
                      ) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    """``(client kwargs, reader kwargs, producer kwargs)`` from the lower-cased options."""
    out: tuple[dict[str, Any], dict[str, Any], dict[str, Any]] = ({}, {}, {})
    tables = (CLIENT, READER, PRODUCER)
    for key, text in opts.items():
        if not is_passthrough(key):
            continue
        which = next(i for i, p in enumerate(PREFIXES) if key.startswith(p))
        prefix, field = PREFIXES[which], key[len(PREFIXES[which]):]
        if prefix == "pulsar.client." and field in AUTH:
            continue  # _authentication below
        table = tables[which]
        spelled = prefix + table[field][0] if field in table else key
        if key in OWNED:
            raise PulsarOptionError(key, f"cannot be set: {OWNED[key]}")
        if field not in table:
            known = [v[0] for v in table.values()] + (list(AUTH.values()) if table is CLIENT else [])
            raise PulsarOptionError(key, "is not supported; supported " + prefix + "* fields: "
                                    + ", ".join(prefix + k for k in known))
        if prefix == "pulsar.client." and purpose == "read" and read_mode != "broker" and field not in ADMIN_TOO:
            raise PulsarOptionError(spelled, "has no effect with readMode=direct (executors use no Pulsar client)")
        if prefix == "pulsar.reader." and (purpose != "read" or read_mode != "broker"):
            raise PulsarOptionError(spelled, "applies only to reads with readMode=broker")
        if prefix == "pulsar.producer." and purpose != "write":
            raise PulsarOptionError(spelled, "applies only to writes")
        _, kwarg, conv = table[field]
        try:
            out[which][kwarg] = conv(text)
        except ValueError as exc:
            raise PulsarOptionError(spelled, f"bad value {text!r}: {exc}") from None
    auth = _authentication(opts)
    if auth is not None:
        out[0]["authentication"] = auth
    return out


def _authentication(opts: Mapping[str, str]) -> Any:
    """The ``clients.Authentication`` of ``authPluginClassName`` + ``authParams`` (None: neither)."""
    from clients.auth import authentication_from
    from clients.errors import InvalidConfiguration

    plugin, params = (opts.get("pulsar.client." + f) for f in AUTH)
    if plugin is None:
        if params is not None:
            raise PulsarOptionError("pulsar.client.authParams", "needs pulsar.client.authPluginClassName")
        return None
    try:
        return authentication_from(plugin, params or "")
    except InvalidConfiguration as exc:  # its message never holds the secret
        raise PulsarOptionError("pulsar.client.authPluginClassName", str(exc)) from None
