"""The floor under the standalone's CPU per unbatched message: a bare trio server that speaks
just enough of the Pulsar protocol for a producer (CONNECT, PARTITIONED_METADATA, LOOKUP,
PRODUCER, CLOSE_PRODUCER, PING) and answers each SEND as the standalone's hot path does at the
system-call level and nothing more: wait readable (trio's ``wait_readable``, as the broker's
reader), one ``read``, the entry appended to a journal file with one ``pwritev2(RWF_DSYNC)``
(an 8-byte record prefix and the entry, as the bookie's journal writes a lone add), one
``write`` of the 22-byte SEND_RECEIPT. No dedup, no ledger, no index, no checks: what is left
is the kernel's and trio's share of a message (a wake-up, epoll, the three I/O calls) plus a
few lines of Python. ``bench/bench_publish_cpu.py`` runs it next to the standalones, with the
same clients, and reports ours / floor. With ``--read-first`` it reads again at once after each
receipt and waits only when nothing is there (the broker reader's ``read_now``, ungated): the
floor of a server that reads first.

    python bench/publish_floor.py DATA_DIR [--read-first]    # prints its port, serves until killed
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

import trio

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from broker.receipt_frame import send_receipt_frame  # noqa: E402
from clients.protocol import commands as C  # noqa: E402
from clients.protocol import frames  # noqa: E402
from clients.protocol import pulsar_api_pb2 as pb  # noqa: E402
from quire.varint import decode_varint  # noqa: E402

_TWO_U32 = struct.Struct(">II")
_SEND_PREFIX = b"\x08\x06\x32"  # BaseCommand{type = SEND, send = ...}
_RWF_DSYNC = getattr(os, "RWF_DSYNC", 0)
T = pb.BaseCommand


def lone_send_ids(data: bytes) -> tuple[int, int, int] | None:
    """(producer_id, sequence_id, entry offset) of a read that is one whole SEND frame with
    one-byte ids in its CommandSend, else None (the general decoder takes it)."""
    if len(data) < 12 or data[8:11] != _SEND_PREFIX:
        return None
    total, cmd_size = _TWO_U32.unpack_from(data, 0)
    end = 12 + data[11]
    if total + 4 != len(data) or end != 8 + cmd_size:
        return None
    pid = seq = -1
    pos = 12
    while pos + 1 < end:
        tag = data[pos]
        value, pos = decode_varint(data, pos + 1, end)
        if pos < 0:
            return None
        if tag == 0x08:
            pid = value
        elif tag == 0x10:
            seq = value
    return (pid, seq, end) if pid >= 0 and seq >= 0 else None


class Floor:
    def __init__(self, journal_path: Path, port: int, read_first: bool = False) -> None:
        self.read_first = read_first
        self.fd = os.open(journal_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        self.offset = 0
        self.entry_id = 0
        self.url = f"pulsar://127.0.0.1:{port}"

    def append(self, entry: memoryview) -> None:
        """The entry, durable (the journal's lone-add write: one pwritev2 with RWF_DSYNC)."""
        bufs = [struct.pack(">Q", len(entry)), entry]
        self.offset += os.pwritev(self.fd, bufs, self.offset, _RWF_DSYNC)
        if not _RWF_DSYNC:
            os.fdatasync(self.fd)

    def answer(self, command: pb.BaseCommand) -> pb.BaseCommand | None:
        """The reply to a setup command (None: no reply)."""
        t = command.type
        if t == T.CONNECT:
            return C.connected("Pulsar Server quire-floor", min(command.connect.protocol_version, C.PROTOCOL_VERSION))
        if t == T.PARTITIONED_METADATA:
            return C.partitioned_metadata_response(command.partitionMetadata.request_id, 0)
        if t == T.LOOKUP:
            return C.lookup_response(command.lookupTopic.request_id, broker_service_url=self.url)
        if t == T.PRODUCER:
            return C.producer_success(command.producer.request_id, f"floor-{command.producer.producer_id}")
        if t == T.CLOSE_PRODUCER:
            return C.success(command.close_producer.request_id)
        if t == T.PING:
            return C.pong()
        return None

    async def serve(self, stream: trio.SocketStream) -> None:
        fd = stream.socket.fileno()
        decoder = frames.FrameDecoder()
        while True:
            if not self.read_first:
                await trio.lowlevel.wait_readable(fd)
            try:
                data = os.read(fd, 256 * 1024)
            except BlockingIOError:  # (read first: nothing there yet, so wait)
                if self.read_first:
                    await trio.lowlevel.wait_readable(fd)
                continue
            except OSError:
                return
            if not data:
                return
            ids = None if decoder.buffered else lone_send_ids(data)
            if ids is not None:  # the hot path: one SEND, one durable append, one receipt
                pid, seq, at = ids
                self.append(memoryview(data)[at:])
                os.write(fd, send_receipt_frame(pid, seq, 0, 1, self.entry_id))
                self.entry_id += 1
                continue
            for frame in decoder.feed(data):
                cmd = frame.command
                if cmd.type == T.SEND and frame.entry is not None:
                    self.append(frame.entry)
                    os.write(fd, send_receipt_frame(cmd.send.producer_id, cmd.send.sequence_id, 0, 1, self.entry_id))
                    self.entry_id += 1
                    continue
                reply = self.answer(cmd)
                if reply is not None:
                    await stream.send_all(frames.encode_command(reply))


async def main(data_dir: Path, read_first: bool) -> None:
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    port = listeners[0].socket.getsockname()[1]
    floor = Floor(data_dir / "floor-journal", port, read_first)
    print(port, flush=True)
    await trio.serve_listeners(floor.serve, listeners)


if __name__ == "__main__":
    trio.run(main, Path(sys.argv[1]), "--read-first" in sys.argv[2:])
