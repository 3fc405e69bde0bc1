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
