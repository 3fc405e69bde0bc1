"""The bookie: BookKeeper-style durable storage server (journal, write/read cache, entry logs,
RocksDB index, checkpoint, cookies, registration, HTTP admin).

Entry points: :class:`bookie.bookie.Bookie` / :func:`bookie.bookie.run_bookie` (embedding),
``quire bookie`` / ``quire bookie-shell`` (:mod:`bookie.cli`). The wire codec
(:mod:`bookie.protocol`) and the entry layout (:mod:`bookie.entry_format`) are pure modules
shared with the ledger client in :mod:`bookie.client`.
"""
