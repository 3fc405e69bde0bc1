"""RequestProcessor without sockets: adds are answered per journal group, through
``send_many`` when the sink has it and one ``send`` per reply otherwise (the in-process
local-bookie channel), and never before the group is durable."""

from __future__ import annotations

from pathlib import Path

import trio

from bookie import protocol
from bookie.journal import Journal
from bookie.ledger_storage import LedgerStorage
from bookie.metrics import BookieMetrics
from bookie.protocol import Op, Request, Status
from bookie.registration import BookieState
from bookie.request_processor import RequestProcessor
from tests.bookie.helpers import MASTER_KEY, entry, make_config


class SendOnlySink:
    def __init__(self) -> None:
        self.frames: list[bytes] = []

    def send(self, frame: bytes) -> None:
        self.frames.append(frame)


class BatchSink(SendOnlySink):
    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def send_many(self, buffers: list[bytes], count: int) -> None:
        self.calls += 1
        frames = protocol.FrameDecoder().feed(b"".join(buffers))
        assert len(frames) == count
        self.frames += [len(f).to_bytes(4, "big") + f for f in frames]


def _replies(sink: SendOnlySink) -> list[protocol.Response]:
    return [protocol.decode_response(f[4:]) for f in sink.frames]


async def test_adds_answered_per_group_through_either_sink(tmp_path: Path) -> None:
    cfg = make_config(tmp_path, journal_max_group_wait_ms=20)
    metrics = BookieMetrics()
    storage = LedgerStorage(cfg, metrics)
    storage.open()
    journal = Journal(cfg, metrics)
    journal.open_new_file()
    processor = RequestProcessor(cfg, storage, journal, BookieState(), metrics)
    storage.create_ledger(1, MASTER_KEY)
    plain, batched = SendOnlySink(), BatchSink()
    async with trio.open_nursery() as nursery:
        await nursery.start(journal.run)
        for i in range(200):
            sink = plain if i % 2 else batched
            req = Request(Op.ADD, i, 1, i, master_key=MASTER_KEY, body=entry(1, i, b"p"))
            assert processor.handle_fast(req, sink)
        assert plain.frames == [] and batched.frames == []  # nothing acked before the fsync
        with trio.fail_after(10):
            while len(plain.frames) + len(batched.frames) < 200:
                await trio.sleep(0.01)
        nursery.cancel_scope.cancel()
    journal.close()
    storage.close()
    assert sorted(r.request_id for r in _replies(plain)) == list(range(1, 200, 2))
    assert sorted(r.request_id for r in _replies(batched)) == list(range(0, 200, 2))
    assert all(r.status == Status.OK and r.entry_id == r.request_id for r in _replies(plain) + _replies(batched))
    assert batched.calls < 100  # one call per group, not per add
    assert processor.counts[("add", 0)] == 200
