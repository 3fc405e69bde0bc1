"""Two processes sharing one ZooKeeper: sequential suffixes and ledger ids stay unique."""

from __future__ import annotations

import sys
from pathlib import Path

import trio

from metadata import open_store

WORKER = Path(__file__).with_name("seq_worker.py")


async def test_two_processes_sequential_and_ledger_ids(zk_url: str, quire_procs, tmp_path: Path) -> None:
    go = tmp_path / "go"
    procs = [
        quire_procs.command(
            [sys.executable, str(WORKER), zk_url, str(go), "150"], name=f"seq-worker-{i}", ready_log="^ready"
        )
        for i in range(2)
    ]
    go.touch()
    outputs = []
    for proc in procs:
        assert await trio.to_thread.run_sync(proc.wait, 60) == 0, proc.log_tail()
        lines = [ln.split() for ln in proc.log_text().splitlines() if ln.startswith(("seq ", "ledger "))]
        outputs.append(
            (
                [int(v.rsplit("-", 1)[1]) for k, v in lines if k == "seq"],
                [int(v) for k, v in lines if k == "ledger"],
            )
        )
    all_seq = [s for seq, _ in outputs for s in seq]
    all_ids = [i for _, ids in outputs for i in ids]
    assert len(all_seq) == len(set(all_seq)) == 300
    assert len(all_ids) == len(set(all_ids)) == 300
    for seq, ids in outputs:  # each process sees its own results increase
        assert seq == sorted(seq) and ids == sorted(ids)
    store = await open_store(zk_url)
    try:
        assert len(await store.children("/seq")) == 300
        assert await store.children("/ledgers/idgen") == []  # allocation nodes are cleaned up
    finally:
        await store.close()


async def _until(predicate, timeout: float = 30.0) -> None:  # type: ignore[no-untyped-def]
    with trio.fail_after(timeout):
        while not await predicate():
            await trio.sleep(0.1)


async def test_session_expires_when_client_is_frozen(zk_url: str, quire_procs) -> None:
    """A real server-side expiry: the client stops heartbeating (SIGSTOP) for longer than its
    2 s session timeout; ZooKeeper drops its ephemeral node; once resumed the client learns
    its session is gone, runs its session-lost callback and re-creates the node."""
    worker = Path(__file__).with_name("session_worker.py")
    proc = quire_procs.command([sys.executable, str(worker), zk_url], name="session-worker", ready_log="^ready")
    store = await open_store(zk_url)
    try:
        assert (await store.exists("/member")).ephemeral
        proc.pause()

        async def gone() -> bool:
            return await store.exists("/member") is None

        await _until(gone)
        proc.resume()
        await proc.wait_for_log_async("^recreated")
        value, stat = await store.get("/member")
        assert value == b"worker again" and stat.ephemeral
        assert "lost" in proc.log_text().split()
    finally:
        await store.close()
