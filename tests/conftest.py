"""Project-wide pytest configuration: makes the shared fixtures available to every test.

`zk_server` (session), `zk_chroot`, `zk_url` from tests/fixtures/zookeeper.py and
`quire_procs` from tests/fixtures/processes.py. Plain helpers (`free_port`, `QuireProcess`,
`ZooKeeperServer`) are imported from those modules directly.
"""

from tests.fixtures.processes import quire_procs  # noqa: F401  (fixture)
from tests.fixtures.zookeeper import zk_chroot, zk_server, zk_url  # noqa: F401  (fixtures)
