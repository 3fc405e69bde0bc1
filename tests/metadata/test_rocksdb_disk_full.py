"""The embedded RocksDB metadata store on a disk that fills up (issue 10, item 5): a write
that finds no space fails with StoreUnavailableError (a MetadataError callers handle, never a
bare exception that ends the process), reads keep working, nothing written before is lost,
and writes work again once space returns, without a restart. Runs on a small tmpfs; skips
where mounting is not allowed."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from metadata import open_store
from metadata.errors import StoreUnavailableError
from tests.fixtures.small_disk import mounted_tmpfs


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    with mounted_tmpfs(tmp_path / "disk", 8) as mnt:
        yield mnt


async def test_embedded_store_survives_a_full_disk(small_disk: Path) -> None:
    url = f"rocksdb://{small_disk / 'meta'}"
    store = await open_store(url)
    await store.create("/a", b"before", make_parents=True)
    st = os.statvfs(small_disk)
    filler = small_disk / "filler"
    with open(filler, "wb") as f:
        os.posix_fallocate(f.fileno(), 0, st.f_bavail * st.f_frsize - 64 * 1024)
    written = []
    with pytest.raises(StoreUnavailableError):
        for i in range(10_000):
            await store.create(f"/a/n{i}", b"x" * 4096)
            written.append(i)
    # still answering: reads work, writes keep failing cleanly while the disk is full
    assert (await store.get("/a"))[0] == b"before"
    with pytest.raises(StoreUnavailableError):
        await store.put("/a", b"full", expected_version=0)
    filler.unlink()
    await store.create("/b", b"after")
    await store.put("/a", b"changed", expected_version=0)
    await store.close()
    store = await open_store(url)
    assert (await store.get("/a"))[0] == b"changed"
    assert (await store.get("/b"))[0] == b"after"
    children = await store.children("/a")
    assert all(f"n{i}" in children for i in written)
    await store.close()
