"""Keep one HTTP connection's failure inside that connection (hypercorn on trio).

hypercorn's trio ``TCPServer.run`` (0.18) lets every exception but ``OSError`` escape the
connection's task, which ends hypercorn's ``serve()`` and with it the whole process (a bookie,
a broker, a standalone with all three parts). One client triggers it: a request whose
body never arrives followed by a half-close makes hypercorn's error reply and its ``send_eof``
collide on the socket (``trio.BusyResourceError``). ``guard_connections()`` wraps ``run`` so
such an error drops that connection, logged once, and the server keeps serving.
"""

from __future__ import annotations

import logging
from typing import Any

log = logging.getLogger("quire.http")  # bookie and broker HTTP servers alike


def guard_connections() -> None:
    """Install the per-connection guard (idempotent; affects every hypercorn server in the process)."""
    from hypercorn.trio import tcp_server

    server_class: Any = tcp_server.TCPServer
    if getattr(server_class.run, "_quire_guarded", False):
        return
    original = server_class.run

    async def run(self: Any) -> None:
        try:
            await original(self)
        except Exception as exc:  # never trio.Cancelled: shutdown still cancels everything
            log.warning("HTTP connection dropped after a server-side error: %r", exc)

    run._quire_guarded = True  # type: ignore[attr-defined]
    server_class.run = run
