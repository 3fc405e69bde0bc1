"""Test helpers: a pipelining bookie protocol client over trio, configs in temp dirs."""

from __future__ import annotations

from pathlib import Path

import trio

from tests.fixtures.processes import free_port

from bookie import entry_format, protocol
from bookie.config import BookieConfig
from bookie.protocol import Op, Request, Response

MASTER_KEY = b"k" * 20


def make_config(root: Path, **overrides: object) -> BookieConfig:
    values: dict[str, object] = dict(
        bookie_port=free_port(),
        http_server_enabled=False,
        journal_directory=str(root / "journal"),
        ledger_directories=[str(root / "ledgers")],
        journal_pre_alloc_size_mb=1,
        db_storage_write_cache_max_size_mb=8,
        db_storage_read_ahead_cache_max_size_mb=8,
        disk_usage_threshold=0.999,
        disk_usage_lwm_threshold=0.998,
    )
    values.update(overrides)
    return BookieConfig(**values)  # type: ignore[arg-type]


def entry(ledger_id: int, entry_id: int, payload: bytes, lac: int | None = None) -> bytes:
    return entry_format.pack_entry(ledger_id, entry_id, entry_id - 1 if lac is None else lac, 0, payload)


class BookieClient:
    """Minimal pipelined client: many requests in flight, replies matched by request id."""

    def __init__(self, stream: trio.SocketStream) -> None:
        self.stream = stream
        self.decoder = protocol.FrameDecoder()
        self.next_id = 1
        self.waiting: dict[int, tuple[trio.Event, list[Response]]] = {}
        self._send_lock = trio.Lock()

    @classmethod
    async def connect(cls, host: str, port: int, nursery: trio.Nursery) -> "BookieClient":
        client = cls(await trio.open_tcp_stream(host, port))
        nursery.start_soon(client._reader)
        return client

    async def _reader(self) -> None:
        while True:
            try:
                data = await self.stream.receive_some(1 << 20)
            except (trio.ClosedResourceError, trio.BrokenResourceError):
                data = b""
            if not data:
                for ev, _ in self.waiting.values():
                    ev.set()
                return
            for frame in self.decoder.feed(data):
                resp = protocol.decode_response(frame)
                ev, box = self.waiting.pop(resp.request_id)
                box.append(resp)
                ev.set()

    async def call(self, op: Op, **fields: object) -> Response:
        rid = self.next_id
        self.next_id += 1
        ev: trio.Event = trio.Event()
        box: list[Response] = []
        self.waiting[rid] = (ev, box)
        async with self._send_lock:
            await self.stream.send_all(protocol.encode_request(Request(op, rid, **fields)))  # type: ignore[arg-type]
        await ev.wait()
        if not box:
            raise ConnectionError("bookie closed the connection")
        return box[0]

    async def add(self, ledger_id: int, entry_id: int, payload: bytes, *, flags: int = 0, key: bytes = MASTER_KEY) -> Response:
        return await self.call(Op.ADD, ledger_id=ledger_id, entry_id=entry_id, flags=flags, master_key=key,
                               body=entry(ledger_id, entry_id, payload))

    async def read(self, ledger_id: int, entry_id: int, **fields: object) -> Response:
        return await self.call(Op.READ, ledger_id=ledger_id, entry_id=entry_id, **fields)

    async def aclose(self) -> None:
        await self.stream.aclose()
