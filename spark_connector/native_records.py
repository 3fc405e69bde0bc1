"""The compiled batch decoder (``native_records.c``): a run of batched entries -> Arrow columns.

Role: the fast path of :class:`~spark_connector.scanned_rows.ScannedRun`. One C call walks every
record of every entry of the run once (no GIL held) and returns the buffers of the value, key,
message-id, publish-time and event-time columns (and the properties), which become Arrow arrays
here without a copy. It answers only for runs it can vouch for; anything else (a malformed
record, an unknown field, invalid UTF-8...) makes :func:`run_columns` return None and the Python
decoder (``scanned_rows`` / ``entries``) gives its rows or its precise error, so both paths give
identical record batches.

Optional: ``scripts/build_native.py`` (run by ``scripts/bootstrap.sh``) builds
``_native_records.abi3.so`` in place. When it is missing, stale (built from another version of
the C file) or ``QUIRE_NO_NATIVE=1`` is set, :data:`EXT` is None, :data:`STATUS` says why, and
the Python decoder runs alone.
"""

from __future__ import annotations

import hashlib
import os
from pathlib import Path
from typing import Any, Sequence

import pyarrow as pa

from .rows import TS

NO_NATIVE_ENV = "QUIRE_NO_NATIVE"
Columns = tuple[pa.Array, pa.Array, pa.Array, pa.Array, pa.Array]  # value, key, id, publish, event


def _load() -> tuple[Any, str]:
    if os.environ.get(NO_NATIVE_ENV, "") not in ("", "0"):
        return None, f"disabled by {NO_NATIVE_ENV}"
    try:
        from . import _native_records as ext  # type: ignore[attr-defined]
    except ImportError as exc:
        return None, f"not built ({exc}): scripts/build_native.py builds it"
    source = Path(__file__).with_name("native_records.c")
    if source.exists() and ext.source_sha() != hashlib.sha256(source.read_bytes()).hexdigest():
        return None, "stale (built from another native_records.c): scripts/build_native.py rebuilds it"
    return ext, "native"


EXT, STATUS = _load()


def run_columns(bodies: list[Any], counts: list[int], firsts: list[int], lasts: list[int], prefixes: list[bytes],
                publish_us: list[int]) -> tuple[Columns, list[list[tuple[str, str]]] | None] | None:
    """The rows of the records ``[firsts[i], lasts[i])`` (compacted-out ones dropped) of each entry
    ``bodies[i]`` (a batch payload of ``counts[i]`` records, message-id prefix ``prefixes[i]``) and
    their properties (None: no row has any); None when the extension is off or does not vouch for
    the run."""
    if EXT is None:
        return None
    got = EXT.decode(bodies, counts, firsts, lasts, prefixes, publish_us)
    if got is None:
        return None
    (rows, values, value_offsets, keys, key_offsets, key_valid, key_nulls, ids, id_offsets, publish, events,
     event_valid, event_nulls, props) = got
    buf = pa.py_buffer
    value_col = pa.Array.from_buffers(pa.binary(), rows, [None, buf(value_offsets), buf(values)])
    key_col = pa.nulls(rows, pa.string()) if key_nulls == rows else pa.Array.from_buffers(
        pa.string(), rows, [key_valid and buf(key_valid), buf(key_offsets), buf(keys)], null_count=key_nulls)
    id_col = pa.Array.from_buffers(pa.binary(), rows, [None, buf(id_offsets), buf(ids)])
    publish_col = pa.Array.from_buffers(TS, rows, [None, buf(publish)])
    event_col = pa.nulls(rows, TS) if event_nulls == rows else pa.Array.from_buffers(
        TS, rows, [event_valid and buf(event_valid), buf(events)], null_count=event_nulls)
    return (value_col, key_col, id_col, publish_col, event_col), None if props is None else _properties(rows, props)


def _properties(rows: int, props: Sequence[bytes]) -> list[list[tuple[str, str]]]:
    """Each row's ``(key, value)`` pairs from the extension's property buffers (valid UTF-8)."""
    row_offsets, keys, key_offsets, values, value_offsets = props
    n = len(key_offsets) // 4 - 1
    ks = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(key_offsets), pa.py_buffer(keys)]).to_pylist()
    vs = pa.Array.from_buffers(pa.string(), n, [None, pa.py_buffer(value_offsets), pa.py_buffer(values)]).to_pylist()
    at = memoryview(row_offsets).cast("i").tolist()
    pairs = list(zip(ks, vs))
    return [pairs[at[i]:at[i + 1]] for i in range(rows)]
