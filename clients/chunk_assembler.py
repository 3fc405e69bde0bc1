"""Reassembly of chunked messages (sans-IO): chunks in, whole payloads out.

A producer splits a message larger than the broker's limit into ``num_chunks_from_msg``
chunks sharing one ``uuid``; each chunk is its own entry. Chunks of one message arrive in
order (``chunk_id`` 0, 1, ...), possibly interleaved with other messages' chunks. A chunk out
of sequence (e.g. a redelivery of a partly received message) drops what was gathered for that
uuid; beyond ``max_pending`` incomplete messages the oldest is dropped (it is redelivered
later, as the official client does with ``max_pending_chunked_message``).
"""

from __future__ import annotations

Key = tuple[int, int]


class ChunkAssembler:
    __slots__ = ("_max_pending", "_pending")

    def __init__(self, max_pending: int) -> None:
        self._max_pending = max(1, max_pending)
        # uuid -> (payload parts, (ledger, entry) of each chunk), in arrival order
        self._pending: dict[str, tuple[list[bytes], list[Key]]] = {}

    def add(self, uuid: str, chunk_id: int, num_chunks: int, payload: bytes | memoryview,
            key: Key) -> tuple[bytes, tuple[Key, ...]] | None:
        """The whole payload and every chunk's id once the last chunk arrived; None before
        (and for a chunk out of sequence, which is dropped with its message's parts)."""
        parts = self._pending.get(uuid)
        if chunk_id == 0:
            if parts is None and len(self._pending) >= self._max_pending:
                del self._pending[next(iter(self._pending))]
            parts = self._pending[uuid] = ([], [])
        if parts is None or len(parts[0]) != chunk_id:
            self._pending.pop(uuid, None)
            return None
        parts[0].append(bytes(payload))
        parts[1].append(key)
        if chunk_id < num_chunks - 1:
            return None
        del self._pending[uuid]
        return b"".join(parts[0]), tuple(parts[1])

    def clear(self) -> None:
        """A new connection: the broker redelivers every incomplete message from its start."""
        self._pending.clear()

    def __len__(self) -> int:
        return len(self._pending)
