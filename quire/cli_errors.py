"""What a person sees when a `quire` command fails: one line that says what to do, no traceback.

``run(cli)`` is the console entry point around the click group: usage errors stay click's
(exit 2), Ctrl-C exits 130 without a traceback (or ends ``consume -n 0`` / ``read --follow`` /
``perf`` with their summary), even in a process that inherited SIGINT ignored, a closed pipe (``quire read | head``) ends
quietly, and any other failure prints ``error: <one line>`` and exits 1. ``--debug`` (anywhere
on the command line) or ``QUIRE_DEBUG=1`` prints the full traceback instead. trio wraps errors
raised inside nurseries in exception groups; the line describes the innermost real cause.
"""

from __future__ import annotations

import errno
import os
import re
import signal
import sys
import traceback
from collections.abc import Awaitable, Callable
from typing import TypeVar

import click
import trio

from quire.config import exception_leaves

NOT_LISTENING = "nothing is listening; is `quire standalone` running?"

# (command, config key) -> the flag that sets that port
PORT_FLAGS = {
    ("standalone", "broker_service_port"): "--port", ("standalone", "web_service_port"): "--web-port",
    ("standalone", "bookie_port"): "--bookie-port", ("standalone", "http_server_port"): "--bookie-http-port",
    ("broker", "broker_service_port"): "--port", ("broker", "web_service_port"): "--web-port",
    ("bookie", "bookie_port"): "--port", ("bookie", "http_server_port"): "--http-port",
}
_command = ""  # the subcommand being run (set by run())
T = TypeVar("T")


def cause(exc: BaseException) -> BaseException:
    """The one exception worth describing: a KeyboardInterrupt or broken pipe wins, then the first
    leaf that is not a cancellation."""
    found = list(exception_leaves(exc))
    for kind in (KeyboardInterrupt, BrokenPipeError):
        for leaf in found:
            if isinstance(leaf, kind):
                return leaf
    for leaf in found:
        if type(leaf).__name__ != "Cancelled":
            return leaf
    return found[0] if found else exc


def describe(exc: BaseException) -> str:
    """One line for a person: what failed and, where we know it, what to do."""
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    name = type(exc).__name__
    module = type(exc).__module__ or ""
    if module.startswith("httpx"):
        url = getattr(getattr(exc, "request", None), "url", None)
        where = f"{url.host}:{url.port}" if url is not None else "the admin URL"
        if "refused" in text.lower() or name == "ConnectError":
            return f"cannot connect to {where}: {NOT_LISTENING}"
        return f"admin request to {where} failed: {text or name}"
    if name == "ConnectError" and module.startswith("clients"):
        m = re.match(r"cannot connect to (\S+:\d+)", text)
        if m and ("all attempts to connect" in text or "refused" in text.lower()):
            return f"cannot connect to {m.group(1)}: {NOT_LISTENING}"
        return _client_error(name, text)
    if isinstance(exc, ConnectionRefusedError):
        return f"connection refused: {NOT_LISTENING}"
    if module.startswith("clients") or module.startswith("pulsar"):
        return _client_error(name, text)
    if name == "PortInUseError":
        flag = PORT_FLAGS.get((_command, getattr(exc, "key", "")))
        return text + (f"; choose another with {flag}" if flag else "")
    if name == "ConfigError":
        return text
    if isinstance(exc, OSError) and exc.errno == errno.EADDRINUSE:
        return f"address already in use: {text}"
    return f"{name}: {text}" if text else name


def _client_error(name: str, text: str) -> str:
    """A broker's answer to a client command, with what to do about it where we know."""
    m = re.search(r"Namespace (\S+) does not exist", text)
    if m:
        return f"namespace {m.group(1)} does not exist: create it with `quire admin namespaces create {m.group(1)}`"
    if name == "InvalidTopicName":
        return (f"invalid topic name {text!r}: write NAME (in public/default), tenant/namespace/NAME or "
                "persistent://tenant/namespace/NAME")
    m = re.search(r"Subscription (\S+) is of type (\w+), not (\w+)", text)
    if m:
        return (f"subscription {m.group(1)} is {m.group(2)}, not {m.group(3)}: use -t {m.group(2)}, another "
                "subscription name, or close its other consumers first")
    if "bad handshake reply" in text and "1213486160" in text:  # b"HTTP" read as a frame size
        return (f"{text.split(': bad handshake', 1)[0]} answered in HTTP: that is the admin/HTTP port; the "
                "service URL needs the binary protocol port (broker --port, default 6650)")
    if name == "ConnectError":
        return text
    return f"{name}: {text}" if text else name


def _debug_requested(argv: list[str]) -> bool:
    if "--debug" in argv:
        argv.remove("--debug")
        return True
    return os.environ.get("QUIRE_DEBUG", "") not in ("", "0")


def _quiet_broken_pipe() -> None:
    # Python flushes stdout at exit; point it at /dev/null so that flush cannot fail again.
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError:
        pass


# Options every client command accepts before or after the subcommand (as pulsar-client's
# --url); they travel to the subcommand's option through its environment variable.
GLOBAL_OPTIONS = {"--url": "QUIRE_SERVICE_URL", "--admin-url": "QUIRE_ADMIN_URL"}


# The commands that take them after the subcommand too (others, e.g. `quire metadata --url`,
# keep their own option of that name).
CLIENT_COMMANDS = {"produce", "consume", "read", "perf", "admin", "cluster-status"}


def take_global_options(args: list[str], environ: dict[str, str] | os._Environ[str] = os.environ) -> None:
    """Remove ``--url X`` / ``--admin-url=X`` from before the subcommand, and from anywhere for a
    client command, and put them in ``environ`` (the last one wins, as a repeated option does)."""
    command = None
    i = 0
    while i < len(args):
        arg = args[i]
        if arg == "--":
            return
        name, eq, value = arg.partition("=")
        if name in GLOBAL_OPTIONS and (command is None or command in CLIENT_COMMANDS) and (eq or i + 1 < len(args)):
            if eq:
                del args[i]
            else:
                value = args[i + 1]
                del args[i:i + 2]
            environ[GLOBAL_OPTIONS[name]] = value
            continue
        if command is None and not arg.startswith("-"):
            command = arg
        i += 1


def listen_to_ctrl_c() -> None:
    """Make SIGINT raise KeyboardInterrupt again if this process inherited it ignored.

    A shell without job control (a script, ``cmd &`` in CI or a tool's shell) starts background
    commands with SIGINT ignored, and Python then installs no handler; trio only turns SIGINT
    into KeyboardInterrupt when Python's default handler is in place. So ``quire consume -n 0``
    started that way ignored every SIGINT and never ended (its loop idle, its tasks waiting)."""
    if signal.getsignal(signal.SIGINT) in (signal.SIG_IGN, signal.SIG_DFL):
        signal.signal(signal.SIGINT, signal.default_int_handler)


def run_trio(main: Callable[[], Awaitable[T]]) -> T:
    """``trio.run(main)`` for a client command: Ctrl-C raises KeyboardInterrupt in the main task
    at its next wait, never inside another task or inside trio. Raised wherever code runs (trio's
    default), it could land in ``nursery.start_soon`` between adding a child and scheduling it:
    the child never ran and its nursery (a connection's, then the client's) waited for it forever,
    so a Ctrl-C while ``quire consume`` connected hung it."""
    return trio.run(main, restrict_keyboard_interrupt_to_checkpoints=True)


def run(group: click.Group, prog_name: str = "quire", argv: list[str] | None = None) -> None:
    global _command
    listen_to_ctrl_c()
    args = list(sys.argv[1:] if argv is None else argv)
    debug = _debug_requested(args)
    take_global_options(args)
    _command = next((a for a in args if not a.startswith("-")), "")
    try:
        code = group.main(args, prog_name=prog_name, standalone_mode=False)
    except click.exceptions.Abort:
        sys.exit(130)
    except click.ClickException as e:
        e.show()
        sys.exit(e.exit_code)
    except BaseException as e:  # noqa: BLE001 - the last line of defence of a CLI
        if isinstance(e, SystemExit):
            raise
        leaf = cause(e)
        if isinstance(leaf, KeyboardInterrupt):
            sys.exit(130)
        if isinstance(leaf, BrokenPipeError) or (isinstance(leaf, OSError) and leaf.errno == errno.EPIPE):
            _quiet_broken_pipe()
            sys.exit(0)
        if isinstance(leaf, click.ClickException):
            leaf.show()
            sys.exit(leaf.exit_code)
        if debug:
            traceback.print_exception(e)
        else:
            click.echo(f"error: {describe(leaf)}", err=True)
            click.echo("(run with --debug or QUIRE_DEBUG=1 for the traceback)", err=True)
        sys.exit(1)
    sys.exit(code if isinstance(code, int) else 0)


__all__: list[str] = ["run", "run_trio", "describe", "cause", "listen_to_ctrl_c", "take_global_options",
                      "GLOBAL_OPTIONS", "NOT_LISTENING"]
