"""Client-side CLI tools: ``quire produce|consume|read|perf|admin``.

They live here, not in ``clients/``, so the client package is only the library.
``produce``/``consume``/``read`` run the trio ``AsyncClient`` directly; ``perf`` lives in
``quire/perf.py`` and ``admin`` (the REST client) in ``quire/admin_cli.py``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Awaitable, Callable

import click
import trio

from clients import errors
from quire.admin_cli import admin
from clients.async_client import AsyncClient
from clients.message_id import MessageId
from clients.options import ConsumerType, InitialPosition
from quire.cli_errors import cause, run_trio
from quire.cli_types import SubscriptionType
from quire.perf import perf

__all__ = ["admin", "consume", "perf", "produce", "read"]

def _remember(ctx: click.Context, param: click.Parameter, value: Any) -> Any:
    ctx.meta[f"quire.client.{param.name}"] = value
    return value


_CLIENT_OPTIONS = [
    click.option("--url", "service_url", default="pulsar://localhost:6650", envvar="QUIRE_SERVICE_URL",
                 show_default=True, help="broker service URL (pulsar+ssl:// for TLS)"),
    click.option("--auth-token", envvar="QUIRE_AUTH_TOKEN", expose_value=False, callback=_remember,
                 help="JWT token (AuthenticationToken)"),
    click.option("--auth-basic", envvar="QUIRE_AUTH_BASIC", expose_value=False, callback=_remember,
                 help="user:password (AuthenticationBasic)"),
    click.option("--tls-trust-certs-file-path", expose_value=False, callback=_remember,
                 help="CA file the broker's certificate must chain to"),
    click.option("--tls-allow-insecure-connection", is_flag=True, expose_value=False, callback=_remember,
                 help="do not verify the broker's certificate"),
    click.option("--tls-validate-hostname", is_flag=True, expose_value=False, callback=_remember,
                 help="check that the broker's certificate names the host"),
]


def URL_OPTION(fn: Any) -> Any:  # noqa: N802 - kept the name every command uses
    """--url plus the authentication and TLS options, read back by ``_client_options``."""
    for opt in reversed(_CLIENT_OPTIONS):
        fn = opt(fn)
    return fn


def _client_options() -> dict[str, Any]:
    """AsyncClient keyword arguments from this command's --auth-* / --tls-* options."""
    from clients.auth import AuthenticationBasic, AuthenticationToken

    meta = click.get_current_context().meta
    out: dict[str, Any] = {}
    if meta.get("quire.client.auth_token"):
        out["authentication"] = AuthenticationToken(meta["quire.client.auth_token"])
    elif meta.get("quire.client.auth_basic"):
        user, _, password = meta["quire.client.auth_basic"].partition(":")
        out["authentication"] = AuthenticationBasic(user, password)
    for key in ("tls_trust_certs_file_path", "tls_allow_insecure_connection", "tls_validate_hostname"):
        if meta.get(f"quire.client.{key}"):
            out[key] = meta[f"quire.client.{key}"]
    return out


def _properties(pairs: tuple[str, ...]) -> dict[str, str] | None:
    out = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"property {pair!r} is not key=value")
        out[key] = value
    return out or None


def _run_interruptible(main: Callable[[], Awaitable[int]]) -> bool:
    """Run ``main``; True if Ctrl-C ended it, the normal way to stop ``consume -n 0`` and
    ``read --follow`` (the caller prints its count and exits 0). Other errors propagate to the
    one-line error report of quire/cli_errors.py."""
    try:
        run_trio(main)
    except BaseException as e:  # noqa: BLE001 - only an interrupt is swallowed
        if not isinstance(cause(e), KeyboardInterrupt):
            raise
        return True
    return False


def _show(data: bytes, hex_dump: bool = False) -> str:
    if hex_dump:
        return data.hex(" ")
    return data.decode("utf-8", errors="replace")


def format_message(msg: Any, hex_dump: bool = False) -> str:
    """One message as pulsar-client prints it (``key:[k1], properties:[a=1], content:...``),
    with its publish time, event time (when set) and id; ``--hex`` shows the payload's bytes."""
    key = msg.partition_key() or "null"
    props = ", ".join(f"{k}={v}" for k, v in sorted(msg.properties().items()))
    parts = [f"key:[{key}]", f"properties:[{props}]", f"publishTime:[{msg.publish_timestamp()}]"]
    if msg.event_timestamp():
        parts.append(f"eventTime:[{msg.event_timestamp()}]")
    parts.append(f"id:[{msg.message_id()}]")
    parts.append(f"content:{_show(msg.data(), hex_dump)}")
    return ", ".join(parts)


@click.command()
@click.argument("topic")
@click.option("-m", "--message", "messages", multiple=True, help="message body (repeatable)")
@click.option("-f", "--file", "files", multiple=True, type=click.Path(exists=True, dir_okay=False, path_type=Path),
              help="send a file's bytes as one message (repeatable)")
@click.option("-n", "--num-produce", default=1, show_default=True, help="send each message this many times")
@click.option("-r", "--rate", default=0.0, show_default=True, help="messages per second (0: as fast as possible)")
@click.option("-k", "--key", default=None, help="partition key")
@click.option("-p", "--property", "props", multiple=True, help="key=value property (repeatable)")
@click.option("-z", "--compression", type=click.Choice(["NONE", "LZ4", "ZLIB", "ZSTD", "SNAPPY"]), default="NONE",
              show_default=True)
@click.option("--chunking/--no-chunking", default=False, show_default=True, help="split messages above the max message size")
@URL_OPTION
def produce(topic: str, messages: tuple[str, ...], files: tuple[Path, ...], num_produce: int, rate: float,
            key: str | None, props: tuple[str, ...], compression: str, chunking: bool, service_url: str) -> None:
    """Produce messages to TOPIC."""
    bodies = [m.encode() for m in messages] + [p.read_bytes() for p in files]
    if not bodies:
        raise click.UsageError("give at least one -m MESSAGE or -f FILE")
    from clients.options import CompressionType

    codec = {"ZLIB": "ZLib"}.get(compression, compression)

    async def main() -> int:
        async with AsyncClient(service_url, **_client_options()) as client:
            producer = await client.create_producer(
                topic, compression_type=CompressionType[codec], chunking_enabled=chunking,
                batching_enabled=not chunking, block_if_queue_full=True,
            )
            futures = []
            start = trio.current_time()
            sent = 0
            for _ in range(num_produce):
                for body in bodies:
                    if rate > 0:
                        await trio.sleep_until(start + sent / rate)
                    futures.append(await producer.send_async(body, partition_key=key, properties=_properties(props)))
                    sent += 1
            await producer.flush()
            for fut in futures:
                await fut.wait()
            await producer.close()
            return sent

    count = run_trio(main)
    click.echo(f"{count} messages successfully produced")


@click.command()
@click.argument("topic")
@click.option("-s", "--subscription-name", required=True, help="subscription name")
@click.option("-n", "--num-messages", default=1, show_default=True, help="messages to consume (0: forever)")
@click.option("-t", "--subscription-type", type=SubscriptionType(), default="Exclusive",
              show_default=True)
@click.option("--earliest", is_flag=True, help="a new subscription starts at the earliest message")
@click.option("--timeout", "timeout_s", default=0.0, show_default=True, help="give up after this many seconds without a message (0: wait)")
@click.option("--hide-content", is_flag=True, help="print message ids only")
@click.option("--hex", "hex_dump", is_flag=True, help="print payloads as hex bytes (binary messages)")
@URL_OPTION
def consume(topic: str, subscription_name: str, num_messages: int, subscription_type: str, earliest: bool,
            timeout_s: float, hide_content: bool, hex_dump: bool, service_url: str) -> None:
    """Consume messages from TOPIC through a subscription, acknowledging each."""

    got = 0

    async def main() -> int:
        nonlocal got
        async with AsyncClient(service_url, **_client_options()) as client:
            consumer = await client.subscribe(
                topic, subscription_name, consumer_type=ConsumerType[subscription_type],
                initial_position=InitialPosition.Earliest if earliest else InitialPosition.Latest,
            )
            while num_messages == 0 or got < num_messages:
                try:
                    msg = await consumer.receive(int(timeout_s * 1000) if timeout_s > 0 else None)
                except errors.Timeout:
                    break
                got += 1
                line = str(msg.message_id()) if hide_content else format_message(msg, hex_dump)
                click.echo(line)
                await consumer.acknowledge(msg)
            await consumer.close()
            return got

    interrupted = _run_interruptible(main)
    click.echo(f"{got} messages successfully consumed" + (" (interrupted)" if interrupted else ""), err=True)


def parse_message_id(text: str) -> MessageId:
    """``earliest``, ``latest`` or ``ledger:entry[:partition[:batch_index]]``."""
    if text == "earliest":
        return MessageId.earliest
    if text == "latest":
        return MessageId.latest
    try:
        parts = [int(p) for p in text.split(":")]
    except ValueError:
        raise click.BadParameter(f"bad message id {text!r}") from None
    if not 2 <= len(parts) <= 4:
        raise click.BadParameter(f"bad message id {text!r}: ledger:entry[:partition[:batch]]")
    ledger, entry, partition, batch = (parts + [-1, -1])[:4]
    return MessageId(partition, ledger, entry, batch)


@click.command()
@click.argument("topic")
@click.option("--start", default="earliest", show_default=True, help="earliest, latest or ledger:entry[:partition[:batch]]")
@click.option("--inclusive", is_flag=True, help="include the start message")
@click.option("-n", "--num-messages", default=0, show_default=True, help="stop after this many (0: until caught up)")
@click.option("--follow", is_flag=True, help="keep waiting for new messages once caught up")
@click.option("--hex", "hex_dump", is_flag=True, help="print payloads as hex bytes (binary messages)")
@URL_OPTION
def read(topic: str, start: str, inclusive: bool, num_messages: int, follow: bool, hex_dump: bool,
         service_url: str) -> None:
    """Read TOPIC with a reader (no subscription is kept)."""
    start_id = parse_message_id(start)

    got = 0

    async def main() -> int:
        nonlocal got
        async with AsyncClient(service_url, **_client_options()) as client:
            reader = await client.create_reader(topic, start_id, start_message_id_inclusive=inclusive)
            while num_messages == 0 or got < num_messages:
                if not follow and not await reader.has_message_available():
                    break
                msg = await reader.read_next()
                got += 1
                click.echo(format_message(msg, hex_dump))
            await reader.close()
            return got

    interrupted = _run_interruptible(main)
    click.echo(f"{got} messages read" + (" (interrupted)" if interrupted else ""), err=True)

