"""The `quire` command: one click group whose subcommands each package contributes.

Subcommands are loaded lazily (``module:attribute``) so `quire --help` and light commands do
not pay for importing pyspark or the broker. A package adds a command by adding a line to
``COMMANDS``; the module it names holds a click command or group.
"""

from __future__ import annotations

import importlib
import importlib.util

import click

from quire.cli_errors import run

# name -> "module:attribute" of a click.Command; each package owns its own module.
COMMANDS: dict[str, tuple[str, str]] = {
    "metadata": ("metadata.cli:metadata", "inspect and edit the metadata store"),
    "bookie": ("bookie.cli:bookie", "run a bookie (storage server)"),
    "bookie-shell": ("bookie.cli:bookie_shell", "inspect a bookie's journal, entry logs and index"),
    "autorecovery": ("bookie.autorecovery.cli:autorecovery", "run the bookie auditor + replication worker"),
    "broker": ("broker.cli:broker", "run a broker"),
    "standalone": ("broker.cli:standalone", "run metadata store + bookie + broker in one process"),
    "produce": ("quire.client_cli:produce", "produce messages to a topic"),
    "consume": ("quire.client_cli:consume", "consume messages from a subscription"),
    "read": ("quire.client_cli:read", "read a topic with a reader"),
    "perf": ("quire.client_cli:perf", "throughput and latency load generator"),
    "admin": ("quire.client_cli:admin", "admin REST client"),
    "tokens": ("quire.tokens_cli:tokens", "create and validate JWT tokens (pulsar tokens)"),
    "cluster-status": ("quire.cluster_cli:cluster_status", "brokers, bookies, bundle owners, under-replicated ledgers"),
    "cluster": ("quire.local_cluster:cluster", "start a local multi-process cluster (cluster up)"),
}


class LazyGroup(click.Group):
    """A group that imports a subcommand's module only when that subcommand runs."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(n for n in COMMANDS if self._available(n))

    @staticmethod
    def _available(name: str) -> bool:
        module = COMMANDS[name][0].split(":")[0]
        return importlib.util.find_spec(module) is not None

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in COMMANDS:
            return None
        target, _ = COMMANDS[name]
        module_name, attr = target.split(":")
        try:
            module = importlib.import_module(module_name)
        except ModuleNotFoundError:
            return None
        return getattr(module, attr, None)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        # Help comes from the table so listing does not import every package.
        rows = [(n, COMMANDS[n][1]) for n in self.list_commands(ctx)]
        if rows:
            with formatter.section("Commands"):
                formatter.write_dl(rows)


@click.group(cls=LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="quire")
@click.option("--debug", is_flag=True, help="show the full traceback of an error (also QUIRE_DEBUG=1; accepted anywhere)")
@click.option("--url", "service_url", envvar="QUIRE_SERVICE_URL", default="pulsar://localhost:6650", show_default=True,
              help="broker service URL of produce/consume/read/perf (also QUIRE_SERVICE_URL; accepted anywhere)")
@click.option("--admin-url", envvar="QUIRE_ADMIN_URL", default="http://localhost:8080", show_default=True,
              help="admin REST URL of admin/cluster-status (also QUIRE_ADMIN_URL; accepted anywhere)")
def cli(debug: bool, service_url: str, admin_url: str) -> None:
    """quire: a Pulsar-style message queue (brokers, managed ledgers, bookies)."""


def main() -> None:
    """Console-script entry point (also `python -m quire`): one-line errors (quire/cli_errors.py)."""
    run(cli, prog_name="quire")


if __name__ == "__main__":
    main()
