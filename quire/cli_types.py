"""Click parameter types shared by the client-side commands (produce/consume/read/perf)."""

from __future__ import annotations

import click

from clients.options import ConsumerType


# --log-level of every server command: an unknown level is a usage error, not a traceback.
LOG_LEVEL = click.Choice(["DEBUG", "INFO", "WARNING", "ERROR", "CRITICAL"], case_sensitive=False)


class SubscriptionType(click.Choice):
    """Exclusive / Shared / Failover / KeyShared, spelled as pulsar-client accepts them too
    (``Key_Shared``, ``key_shared``, ``shared`` ...)."""

    def __init__(self) -> None:
        super().__init__([t.name for t in ConsumerType], case_sensitive=False)

    def convert(self, value: object, param: click.Parameter | None, ctx: click.Context | None) -> str:
        text = str(value).replace("_", "").replace("-", "")
        return str(super().convert(text, param, ctx))
