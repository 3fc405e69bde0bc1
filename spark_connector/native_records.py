"""The compiled batch decoder (``native_records.c``): a run of batched entries -> Arrow columns.

Role: the fast path of :class:`~spark_connector.scanned_rows.ScannedRun`. One C call checks and
sizes every record of every entry of the run, then fills the value, key, message-id,
publish-time and event-time columns (and the properties) into buffers of Arrow's memory pool
(reused from batch to batch: fresh pages from ``malloc`` cost more in page faults than the
decode itself), which become Arrow arrays here, the properties too (keys and values as
Arrow string arrays and each row's end among them: no Python object per property); no GIL is
held while it walks. It answers only for runs it can vouch for; anything else (a malformed
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
from typing import Any

import numpy as np
import pyarrow as pa

from .rows import TS

NO_NATIVE_ENV = "QUIRE_NO_NATIVE"
Columns = tuple[pa.Array, pa.Array, pa.Array, pa.Array, pa.Array]  # value, key, id, publish, event
# Each row's properties: a list of (key, value) pairs per row, or (row offsets (int32, rows + 1),
# keys, values) as Arrow string arrays; None: no row has any.
Props = list[list[tuple[str, str]]] | tuple[np.ndarray, pa.Array, pa.Array] | None


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
                publish_us: list[int]) -> tuple[Columns, Props] | None:
    """The rows of the records ``[firsts[i], lasts[i])`` (compacted-out ones dropped) of each entry
    ``bodies[i]`` (a batch payload of ``counts[i]`` records, message-id prefix ``prefixes[i]``) and
    their properties (Arrow, or None: no row has any); None when the extension is off or does not
    vouch for the run."""
    if EXT is None:
        return None
    got = EXT.decode(bodies, counts, firsts, lasts, prefixes, publish_us, pa.allocate_buffer)
    if got is None:
        return None
    (rows, values, value_offsets, keys, key_offsets, key_valid, key_nulls, ids, id_offsets, publish, events,
     event_valid, event_nulls, props) = got
    value_col = pa.Array.from_buffers(pa.binary(), rows, [None, value_offsets, values])
    key_col = pa.nulls(rows, pa.string()) if key_nulls == rows else pa.Array.from_buffers(
        pa.string(), rows, [key_valid, key_offsets, keys], null_count=key_nulls)
    id_col = pa.Array.from_buffers(pa.binary(), rows, [None, id_offsets, ids])
    publish_col = pa.Array.from_buffers(TS, rows, [None, publish])
    event_col = pa.nulls(rows, TS) if event_nulls == rows else pa.Array.from_buffers(
        TS, rows, [event_valid, events], null_count=event_nulls)
    if props is not None:
        row_ends, keys, key_offsets, values, value_offsets = props
        n = key_offsets.size // 4 - 1
        props = (np.frombuffer(row_ends, np.int32, rows + 1),
                 pa.Array.from_buffers(pa.string(), n, [None, key_offsets, keys]),
                 pa.Array.from_buffers(pa.string(), n, [None, value_offsets, values]))
    return (value_col, key_col, id_col, publish_col, event_col), props
