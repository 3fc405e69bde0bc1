"""Keep one HTTP connection's failure inside that connection (hypercorn on trio).

hypercorn's trio ``TCPServer.run`` (0.18) lets every exception but ``OSError`` escape the
connection's task, which ends hypercorn's ``serve()`` and with it the whole process (a bookie,
a broker, a standalone with all three parts). One client triggers it: a request whose
body never arrives followed by a half-close makes hypercorn's error reply and its ``send_eof``
collide on the socket (``trio.BusyResourceError``). The connection's setup is as exposed:
``worker_serve`` builds the ``TCPServer`` (and our app hooks, e.g. quire.asgi_tls's TLS scope)
inside the listener's handler task, outside ``run``.

``guard_connections()`` replaces the ``TCPServer`` name ``worker_serve`` calls per accepted
connection by one coroutine that applies the app hooks, builds the server, does the TLS
handshake and runs it, all under one ``except Exception``: an error drops that connection,
logged as one line, and the server keeps serving.
"""

from __future__ import annotations

import logging
from typing import Any, Callable

log = logging.getLogger(__name__)  # bookie and broker HTTP servers alike

# (app, stream) -> the app this connection serves; applied in order to every connection.
AppHook = Callable[[Any, Any], Any]
_hooks: list[AppHook] = []


def guard_connections(app_hook: AppHook | None = None) -> None:
    """Install the per-connection guard (idempotent; affects every hypercorn server in the
    process), adding ``app_hook`` to what wraps each connection's app."""
    if app_hook is not None and app_hook not in _hooks:
        _hooks.append(app_hook)
    from hypercorn.trio import run as trio_run
    from hypercorn.trio import tcp_server

    if getattr(trio_run.TCPServer, "_quire_guarded", False):
        return
    server_class: Any = tcp_server.TCPServer

    async def connection(app: Any, config: Any, context: Any, state: Any, stream: Any) -> None:
        try:
            for hook in _hooks:
                app = hook(app, stream)
            await server_class(app, config, context, state, stream).run()
        except Exception as exc:  # never trio.Cancelled: shutdown still cancels everything
            log.warning("HTTP connection dropped after a server-side error: %r", exc)

    connection._quire_guarded = True  # type: ignore[attr-defined]
    setattr(trio_run, "TCPServer", connection)  # the name worker_serve looks up per connection
