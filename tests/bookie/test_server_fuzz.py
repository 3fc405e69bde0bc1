"""Protocol fuzzing against one live bookie (hypothesis): well-formed requests with arbitrary
field values, truncated frames and oversized frames. Every well-formed request gets exactly
one reply with a known status; garbage costs only its connection; the bookie keeps serving."""

from __future__ import annotations

import socket
import struct
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import trio
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bookie import entry_format, protocol
from bookie.bookie import Bookie
from bookie.protocol import Op, Request, Status
from tests.bookie.helpers import MASTER_KEY, entry, make_config

MAX_FRAME = 64 * 1024
_I64 = st.integers(-(2**63), 2**63 - 1)
_SMALL_IDS = st.integers(-3, 6)


class LiveBookie:
    """A bookie running in its own trio loop on a background thread."""

    def __init__(self, root: Path) -> None:
        self.cfg = make_config(root, netty_max_frame_size_bytes=MAX_FRAME)
        self.port = 0
        self._ready = threading.Event()
        self._token: trio.lowlevel.TrioToken | None = None
        self._stop: trio.Event | None = None
        self.error: BaseException | None = None
        self.canary_entries = 0
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        async def main() -> None:
            async with trio.open_nursery() as nursery:
                bookie = Bookie(self.cfg)
                await bookie.start(nursery)
                self.port, self._token, self._stop = bookie.port, trio.lowlevel.current_trio_token(), trio.Event()
                self._ready.set()
                await self._stop.wait()
                await bookie.close()
                nursery.cancel_scope.cancel()

        try:
            trio.run(main)
        except BaseException as exc:  # surfaced by the tests through .error
            self.error = exc
            self._ready.set()

    def start(self) -> None:
        self._thread.start()
        assert self._ready.wait(30) and self.error is None, self.error

    def stop(self) -> None:
        if self._token is not None and self._stop is not None and self.error is None:
            trio.from_thread.run_sync(self._stop.set, trio_token=self._token)
        self._thread.join(30)


@pytest.fixture(scope="module")
def live(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LiveBookie]:
    b = LiveBookie(tmp_path_factory.mktemp("fuzz-server"))
    b.start()
    yield b
    b.stop()
    assert b.error is None, b.error


def _connect(port: int) -> socket.socket:
    s = socket.create_connection(("127.0.0.1", port), timeout=5)
    s.settimeout(5)
    return s


def _read_responses(s: socket.socket, n: int) -> list[protocol.Response]:
    decoder = protocol.FrameDecoder()
    out: list[protocol.Response] = []
    while len(out) < n:
        data = s.recv(1 << 20)
        assert data, f"connection closed after {len(out)} of {n} replies"
        out += [protocol.decode_response(f) for f in decoder.feed(data)]
    return out


def _closed_by_peer(s: socket.socket) -> bool:
    try:
        while s.recv(1 << 16):
            pass
        return True
    except ConnectionResetError:
        return True
    except TimeoutError:
        return False


CANARY_LEDGER = 987_654_321_987  # far from the ledgers the fuzzer fences and writes


def _still_serves(live: LiveBookie) -> None:
    assert live.error is None, live.error
    eid = live.canary_entries
    live.canary_entries += 1
    with _connect(live.port) as s:
        req = Request(Op.ADD, 1, CANARY_LEDGER, eid, master_key=MASTER_KEY, body=entry(CANARY_LEDGER, eid, b"canary"))
        s.sendall(protocol.encode_request(req) + protocol.encode_request(Request(Op.READ, 2, CANARY_LEDGER, eid)))
        add, read = sorted(_read_responses(s, 2), key=lambda r: r.request_id)  # replies may overtake
        assert add.status == Status.OK and read.status == Status.OK
        assert entry_format.payload(read.body) == b"canary"


requests = st.builds(
    Request,
    op=st.sampled_from(list(Op)),
    request_id=st.integers(0, 2**64 - 1),
    ledger_id=st.one_of(st.integers(1, 4), st.integers(0, 2**64 - 1)),
    entry_id=st.one_of(_SMALL_IDS, _I64),
    flags=st.integers(0, 15),
    master_key=st.sampled_from([MASTER_KEY, b"", b"wrong"]),
    body=st.one_of(st.binary(max_size=80), st.builds(entry, st.integers(1, 4), _SMALL_IDS, st.binary(max_size=40))),
    previous_lac=st.one_of(_SMALL_IDS, _I64),
    timeout_ms=st.integers(0, 30),  # long polls end quickly
    last_entry_id=st.one_of(_SMALL_IDS, _I64),
    max_entries=st.integers(0, 2**32 - 1),
    max_bytes=st.integers(0, 2**64 - 1),
)

_FUZZ = settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@_FUZZ
@given(batch=st.lists(requests, min_size=1, max_size=8))
def test_every_well_formed_request_gets_one_reply(live: LiveBookie, batch: list[Request]) -> None:
    for i, req in enumerate(batch):
        req.request_id = i  # unique per connection
    with _connect(live.port) as s:
        s.sendall(b"".join(protocol.encode_request(r) for r in batch))
        replies = _read_responses(s, len(batch))
    assert sorted(r.request_id for r in replies) == list(range(len(batch)))
    for r in replies:
        assert r.op == batch[r.request_id].op and isinstance(r.status, Status)
    _still_serves(live)


@_FUZZ
@given(req=requests, cut=st.integers(1, 1000), garbage=st.binary(max_size=64))
def test_truncated_frames_and_garbage_cost_only_the_connection(
    live: LiveBookie, req: Request, cut: int, garbage: bytes
) -> None:
    frame = protocol.encode_request(req)
    with _connect(live.port) as s:  # a frame cut short, then the peer goes away
        s.sendall(frame[: max(1, len(frame) - cut)])
    with _connect(live.port) as s:  # garbage inside a well-delimited frame: error, connection closed
        s.sendall(struct.pack(">I", len(garbage) + 4) + struct.pack(">I", len(garbage) + 1) + garbage)
        assert _closed_by_peer(s)
    _still_serves(live)


@pytest.mark.parametrize("size", [MAX_FRAME + 1, 2**32 - 1])
def test_oversized_frame_closes_connection(live: LiveBookie, size: int) -> None:
    with _connect(live.port) as s:
        s.sendall(struct.pack(">I", size) + b"\0" * 100)
        assert _closed_by_peer(s)
    # a frame just over the limit is refused even when every byte of it is sent
    body = entry(1, 1, b"x" * (MAX_FRAME + 100))
    with _connect(live.port) as s:
        try:
            s.sendall(protocol.encode_request(Request(Op.ADD, 1, 1, 1, master_key=MASTER_KEY, body=body)))
        except (BrokenPipeError, ConnectionResetError):
            pass
        assert _closed_by_peer(s)
    _still_serves(live)
