"""``quire cluster-status`` (what the cluster looks like) and ``quire cluster up`` (a local one).

``cluster-status`` asks a broker's admin endpoint (``/admin/v2/quire/cluster-status``), or
reads the metadata store itself with ``--metadata-url`` (when no broker is up). ``cluster up``
lives in ``quire/local_cluster.py``.
"""

from __future__ import annotations

import json
from typing import Any

import click

from quire.admin_cli import AdminClient


@click.command("cluster-status")
@click.option("--admin-url", default="http://localhost:8080", envvar="QUIRE_ADMIN_URL", show_default=True,
              help="any broker's admin URL (also QUIRE_ADMIN_URL)")
@click.option("--metadata-url", default=None,
              help="read the metadata store directly instead (zk://host:port/chroot, or a standalone's "
                   "rocksdb:///DATA_DIR/metadata as a read-only snapshot)")
@click.option("--json", "as_json", is_flag=True, help="print the JSON the admin endpoint answers")
def cluster_status(admin_url: str, metadata_url: str | None, as_json: bool) -> None:
    """Brokers (with their load reports), bookies (writable / read-only, disk), bundle owners and
    under-replicated ledgers."""
    from broker.cluster_status import render

    if metadata_url:
        import trio

        async def main() -> dict[str, Any]:
            from broker.cluster_status import collect
            from metadata.cli import open_for_reading

            store = await open_for_reading(metadata_url)
            try:
                return await collect(store)
            finally:
                await store.close()

        status = trio.run(main)
    else:
        status = AdminClient(admin_url).call("GET", "/admin/v2/quire/cluster-status")
    click.echo(json.dumps(status, indent=2, sort_keys=True) if as_json else render(status))
