"""Bugs the chaos runs found, as regression tests against real processes.

A client whose TCP connection ends in a reset (its process killed, a load balancer timing it
out, a client giving up on a broker that was frozen) must not take the broker down. Found by
`bench/chaos.py --seconds 40 --seed 1 --cluster` (expire_broker_session(broker1): after the
SIGCONT every client connection reset, and the broker exited with status 1).
Cause: `ServerConnection.serve` (broker/connection.py) caught `trio.BrokenResourceError`
with a plain ``except``, but trio (0.35, strict exception groups) raises it wrapped in an
``ExceptionGroup`` from the connection's nursery, so it reached the listener's nursery and
ended the broker process. Fixed by the connection error boundary (``except*``, issue 10).
"""

from __future__ import annotations

import socket
import struct
import time
from pathlib import Path

from tests.e2e.conftest import start_standalone


def test_a_client_connection_reset_does_not_end_the_broker(tmp_path: Path) -> None:
    node = start_standalone(tmp_path)
    try:
        sock = socket.create_connection(("127.0.0.1", node.port), timeout=5)
        time.sleep(0.3)  # the broker is reading this connection
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()  # RST instead of FIN
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and node.proc.is_running:
            time.sleep(0.1)
        assert node.proc.is_running, node.proc.log_tail(15)
        with socket.create_connection(("127.0.0.1", node.port), timeout=5):
            pass  # and it still accepts connections
    finally:
        node.proc.kill()
