"""Bookie auto-recovery: BookKeeper's auditor and replication worker.

- :mod:`bookie.autorecovery.underreplication`: the ``/ledgers/underreplication`` layout (marks,
  locks, the auditor's election node, decommission marks).
- :mod:`bookie.autorecovery.auditor`: one elected auditor watches the bookies and marks every
  ledger with a replica on a lost (gone longer than ``lost_bookie_recovery_delay``) or
  decommissioned bookie.
- :mod:`bookie.autorecovery.fragment_replicator`: copies one ensemble segment's entries from a
  surviving replica to a new bookie (range reads, pipelined adds).
- :mod:`bookie.autorecovery.replication_worker`: takes marked ledgers under a lock, re-replicates
  their fragments, CASes the ensembles, removes the mark.
- :mod:`bookie.autorecovery.service`: both together (``quire autorecovery``, or inside a bookie
  with ``autorecovery_daemon_enabled``).

Layering: ``bookie.autorecovery`` is a ledger-client application (``-> bookie.client ->
metadata``); the bookie server imports it only to run the daemon.
"""
