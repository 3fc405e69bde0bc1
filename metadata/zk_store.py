"""The `zk://host:port[,host:port...]/chroot` backend: a real ZooKeeper through kazoo.

Requests go out through kazoo's asynchronous API; its completion, watch and state callbacks
run on kazoo's threads and are handed to our trio loop with the trio token, so no worker
thread is held per request (10,000 creates can be in flight at once). Every operation waits
at most `operation_timeout_s`: if ZooKeeper is down or restarting it fails with
StoreUnavailableError (outcome unknown, as with ZooKeeper's ConnectionLoss) and later calls
work again once kazoo has reconnected.

Sessions: a lost connection (SUSPENDED) is not a lost session; kazoo reconnects and the
session goes on if the server still has it. An expired session (kazoo LOST) runs the
`on_session_lost` callbacks, by then the server has removed its ephemeral nodes; kazoo then
opens a new session and the store keeps working (callers re-create their ephemerals).

Watches: one-shot, one firing per (path, kind, callback). kazoo drops all registered watches
when the connection drops; we remember those and, once connected again, fire each with a
CHANGED (data) or CHILDREN (children) event so the owner re-reads and re-watches.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Callable
from typing import Any

import trio
from kazoo.client import KazooClient, KazooState
from kazoo.exceptions import (
    BadArgumentsError,
    ConnectionClosedError,
    ConnectionLoss,
    KazooException,
    NodeExistsError,
    NoNodeError,
    OperationTimeoutError,
    SessionExpiredError,
)
from kazoo.exceptions import BadVersionError as KazooBadVersionError
from kazoo.exceptions import NoChildrenForEphemeralsError as KazooNoChildrenForEphemeralsError
from kazoo.exceptions import NotEmptyError as KazooNotEmptyError
from kazoo.handlers.threading import KazooTimeoutError
from kazoo.protocol.states import EventType as KazooEventType
from kazoo.protocol.states import WatchedEvent, ZnodeStat
from kazoo.retry import KazooRetry

from metadata import paths
from metadata.callbacks import deliver
from metadata.errors import (
    AlreadyExistsError,
    BadVersionError,
    InvalidPathError,
    MetadataError,
    NoChildrenForEphemeralsError,
    NotEmptyError,
    NotFoundError,
    SessionLostError,
    StoreUnavailableError,
)
from metadata.store import EventType, MetadataStore, Stat, WatchCallback, WatchEvent

log = logging.getLogger(__name__)

MAX_IN_FLIGHT = 200  # requests outstanding per store (kazoo's wake-up socketpair holds ~278)

_EVENT_TYPES = {
    KazooEventType.CREATED: EventType.CREATED,
    KazooEventType.CHANGED: EventType.CHANGED,
    KazooEventType.DELETED: EventType.DELETED,
    KazooEventType.CHILD: EventType.CHILDREN,
}


def _stat(zstat: ZnodeStat) -> Stat:
    return Stat(
        version=zstat.version,
        ctime_ms=zstat.ctime,
        mtime_ms=zstat.mtime,
        ephemeral=zstat.ephemeralOwner != 0,
        num_children=zstat.numChildren,
    )


def _translate(exc: BaseException, what: str) -> MetadataError:
    """Map a kazoo exception to ours."""
    if isinstance(exc, NoNodeError):
        return NotFoundError(what)
    if isinstance(exc, NodeExistsError):
        return AlreadyExistsError(what)
    if isinstance(exc, KazooBadVersionError):
        return BadVersionError(what)
    if isinstance(exc, KazooNotEmptyError):
        return NotEmptyError(what)
    if isinstance(exc, KazooNoChildrenForEphemeralsError):
        return NoChildrenForEphemeralsError(what)
    if isinstance(exc, SessionExpiredError):
        return SessionLostError(f"ZooKeeper session expired during {what}")
    if isinstance(exc, (ConnectionLoss, ConnectionClosedError, OperationTimeoutError, KazooTimeoutError)):
        return StoreUnavailableError(f"ZooKeeper connection lost during {what}: {exc!r}")
    if isinstance(exc, BadArgumentsError):
        return InvalidPathError(f"ZooKeeper rejected {what}")
    return MetadataError(f"ZooKeeper error during {what}: {exc!r}")


async def _probe_hosts(hosts: str, timeout_s: float = 3.0) -> None:
    """Fail at once, with one clear error, when no ZooKeeper host accepts a TCP connection
    (instead of kazoo retrying and warning for the whole start timeout)."""
    errors: list[str] = []
    for host_port in hosts.split(","):
        host, _, port = host_port.strip().rpartition(":")
        host = host.strip("[]") or "localhost"
        try:
            with trio.fail_after(timeout_s):
                stream = await trio.open_tcp_stream(host, int(port or 2181))
        except (OSError, trio.TooSlowError, ValueError) as exc:
            root = exc.__cause__ if isinstance(exc.__cause__, OSError) else exc
            reason = root.strerror if isinstance(root, OSError) and root.strerror else (str(root) or "timed out")
            errors.append(f"{host_port.strip()}: {reason.lower()}")
            continue
        await stream.aclose()
        return
    raise StoreUnavailableError(f"cannot connect to ZooKeeper at {hosts} ({'; '.join(errors)}); is ZooKeeper running?")


class ZooKeeperStore(MetadataStore):
    """MetadataStore over one kazoo client (one ZooKeeper session at a time)."""

    session_expires_by_timeout = True

    def __init__(self, client: KazooClient, *, operation_timeout_s: float) -> None:
        self._client = client
        self._operation_timeout_s = operation_timeout_s
        self._token = trio.lowlevel.current_trio_token()
        self._closing = False
        self._lost_callbacks: list[Callable[[], None]] = []
        # (path, kind, user callback) -> kazoo watcher; lets one callback fire once per change.
        self._watchers: dict[tuple[str, str, WatchCallback], Callable[[WatchedEvent], None]] = {}
        self._dropped: list[tuple[str, str, WatchCallback]] = []  # watches kazoo dropped
        self._lock = threading.Lock()  # guards the two above (kazoo threads touch them)
        self._connected_event = trio.Event()
        # Bounded in-flight requests keep kazoo's wake-up socketpair (see _drain_wakeups)
        # from filling while connected, so submitting never blocks the event loop.
        self._in_flight = trio.CapacityLimiter(MAX_IN_FLIGHT)
        client.add_listener(self._on_state)

    @classmethod
    async def connect(
        cls,
        hosts: str,
        chroot: str = "",
        *,
        session_timeout_s: float = 30.0,
        operation_timeout_s: float = 10.0,
    ) -> ZooKeeperStore:
        """Open a session (creating `chroot` if missing); StoreUnavailableError if ZooKeeper
        does not answer within `operation_timeout_s`."""
        if chroot:
            paths.validate_path(chroot)
        client = KazooClient(
            hosts=hosts,
            timeout=session_timeout_s,
            # Reconnect quickly after a ZooKeeper restart; retry forever (ops time out instead).
            connection_retry=KazooRetry(max_tries=-1, delay=0.1, backoff=2, max_delay=1.0),
        )

        def start() -> None:
            try:
                client.start(timeout=operation_timeout_s)
                if chroot and chroot != "/":
                    client.ensure_path(chroot)
                    client.chroot = chroot  # from now on every path is relative to it
            except BaseException:
                client.stop()
                client.close()
                raise

        await _probe_hosts(hosts)
        try:
            await trio.to_thread.run_sync(start)
        except (KazooException, KazooTimeoutError) as exc:
            raise StoreUnavailableError(
                f"cannot connect to ZooKeeper at {hosts} within {operation_timeout_s}s: {exc!r}"
            ) from exc
        return cls(client, operation_timeout_s=operation_timeout_s)

    # -- session -------------------------------------------------------------------------------

    @property
    def session_id(self) -> int:
        client_id = self._client.client_id
        return client_id[0] if client_id else 0

    @property
    def client_id(self) -> tuple[int, bytes] | None:
        """(session id, session password): lets an admin tool or test take over or expire it."""
        return self._client.client_id

    @property
    def connected(self) -> bool:
        return self._client.connected

    def on_session_lost(self, callback: Callable[[], None]) -> None:
        self._lost_callbacks.append(callback)

    def _on_state(self, state: str) -> None:
        # kazoo's connection thread; must not block. It is the socketpair's only reader and
        # is not reading it right now, so the wake-ups can be re-counted safely.
        self._drain_wakeups()
        if self._closing:
            return
        if state == KazooState.LOST:
            log.warning("ZooKeeper session expired")
            for callback in list(self._lost_callbacks):
                deliver(self._token, callback)
        elif state == KazooState.CONNECTED:  # kazoo marks itself connected before telling us
            deliver(self._token, self._set_connected)
            with self._lock:
                dropped, self._dropped = self._dropped, []
            for path, kind, watcher in dropped:
                event_type = EventType.CHILDREN if kind == "children" else EventType.CHANGED
                deliver(self._token, watcher, WatchEvent(event_type, path))

    def _drain_wakeups(self) -> None:
        """Re-count kazoo's wake-up socketpair on every connection state change.

        kazoo writes one byte per request into a socketpair that holds only ~278 of them and
        reads a byte back only when it sends that request. Requests failed by a disconnect
        leave their bytes behind; once it is full, the next request blocks its caller (our
        event loop) until kazoo reconnects. So: empty it, then put back one byte per request
        still queued so none is stranded."""
        connection = getattr(self._client, "_connection", None)
        read_sock = getattr(connection, "_read_sock", None)
        write_sock = getattr(connection, "_write_sock", None)
        if read_sock is None or write_sock is None:
            return
        try:
            while read_sock.recv(4096, socket.MSG_DONTWAIT):
                pass
        except OSError:
            pass  # empty (EAGAIN) or closed
        for _ in range(len(self._client._queue)):
            try:
                write_sock.send(b"\0", socket.MSG_DONTWAIT)
            except OSError:
                break

    def _watcher(self, path: str, kind: str, callback: WatchCallback | None) -> Callable[[WatchedEvent], None] | None:
        if callback is None:
            return None
        key = (path, kind, callback)
        with self._lock:
            existing = self._watchers.get(key)
            if existing is not None:
                return existing

            def watcher(event: WatchedEvent) -> None:
                event_type = _EVENT_TYPES.get(event.type)
                with self._lock:
                    self._watchers.pop(key, None)
                    if event_type is None:
                        # Connection dropped: kazoo forgot the watch. Tell the owner once we are
                        # connected again (now, if kazoo already reconnected before this ran;
                        # the state listener flushes the rest under the same lock).
                        if self._closing:
                            return
                        if not self._client.connected:
                            self._dropped.append(key)
                            return
                        event_type = EventType.CHILDREN if kind == "children" else EventType.CHANGED
                deliver(self._token, callback, WatchEvent(event_type, path))

            self._watchers[key] = watcher
            return watcher

    def _forget_watcher(self, path: str, kind: str, callback: WatchCallback | None) -> None:
        if callback is not None:
            with self._lock:
                self._watchers.pop((path, kind, callback), None)

    # -- request plumbing ----------------------------------------------------------------------

    async def _wait(self, start: Callable[[], Any], what: str) -> Any:
        """Issue a kazoo async request and wait for it, at most operation_timeout_s."""
        if self._closing:
            raise SessionLostError("the store is closed")
        done = trio.Event()
        token = self._token

        def completed(_: Any) -> None:
            try:
                token.run_sync_soon(done.set)
            except trio.RunFinishedError:
                pass

        result = None
        try:
            with trio.move_on_after(self._operation_timeout_s):
                async with self._in_flight:
                    # Submit only while connected: kazoo would queue a request made while it is
                    # reconnecting and send it whenever it gets through, long after we gave up.
                    await self._until_connected()
                    try:
                        result = start()
                    except (KazooException, KazooTimeoutError) as exc:
                        raise _translate(exc, what) from exc
                    result.rawlink(completed)
                    await done.wait()
        finally:
            if result is not None and not done.is_set():
                result.unlink(completed)
        if result is None or not result.ready():
            raise StoreUnavailableError(
                f"ZooKeeper did not answer {what} within {self._operation_timeout_s}s "
                f"(client state {self._client.state})"
            )
        try:
            return result.get(block=False)
        except (KazooException, KazooTimeoutError) as exc:
            raise _translate(exc, what) from exc

    async def _until_connected(self) -> None:
        while not self._client.connected:
            if self._connected_event.is_set():  # stale: the connection dropped again since
                self._connected_event = trio.Event()
            # The state listener sets the event on reconnect; the timeout is a safety net.
            with trio.move_on_after(0.1):
                await self._connected_event.wait()

    def _set_connected(self) -> None:
        self._connected_event.set()

    # -- operations ----------------------------------------------------------------------------

    async def get(self, path: str, watch: WatchCallback | None = None) -> tuple[bytes, Stat]:
        paths.validate_path(path)
        watcher = self._watcher(path, "data", watch)
        try:
            value, zstat = await self._wait(lambda: self._client.get_async(path, watch=watcher), f"get {path}")
        except NotFoundError:
            self._forget_watcher(path, "data", watch)  # ZooKeeper sets no watch on a missing node
            raise
        return value, _stat(zstat)

    async def exists(self, path: str, watch: WatchCallback | None = None) -> Stat | None:
        paths.validate_path(path)
        watcher = self._watcher(path, "data", watch)
        zstat = await self._wait(lambda: self._client.exists_async(path, watch=watcher), f"exists {path}")
        return _stat(zstat) if zstat is not None else None

    async def create(
        self,
        path: str,
        value: bytes = b"",
        *,
        ephemeral: bool = False,
        sequential: bool = False,
        make_parents: bool = False,
    ) -> str:
        paths.validate_create_path(path, sequential)
        value = paths.check_value(value)
        return await self._wait(
            lambda: self._client.create_async(
                path, value, ephemeral=ephemeral, sequence=sequential, makepath=make_parents
            ),
            f"create {path}",
        )

    async def put(
        self, path: str, value: bytes, expected_version: int | None = None, *, make_parents: bool = False
    ) -> Stat:
        paths.validate_path(path)
        value = paths.check_value(value)
        if expected_version is not None and (not isinstance(expected_version, int) or expected_version < -1):
            raise ValueError(f"expected_version must be None, -1 or >= 0, got {expected_version!r}")
        if expected_version == -1:
            return await self._create_with_stat(path, value, make_parents)
        if expected_version is not None:
            zstat = await self._wait(
                lambda: self._client.set_async(path, value, version=expected_version), f"put {path}"
            )
            return _stat(zstat)
        while True:  # unconditional: set, or create if missing (racing creators retry the set)
            try:
                zstat = await self._wait(lambda: self._client.set_async(path, value, version=-1), f"put {path}")
                return _stat(zstat)
            except NotFoundError:
                pass
            try:
                return await self._create_with_stat(path, value, make_parents)
            except AlreadyExistsError:
                continue

    async def _create_with_stat(self, path: str, value: bytes, make_parents: bool) -> Stat:
        _, zstat = await self._wait(
            lambda: self._client.create_async(path, value, makepath=make_parents, include_data=True),
            f"create {path}",
        )
        return _stat(zstat)

    async def delete(self, path: str, expected_version: int | None = None) -> None:
        paths.validate_path(path)
        if path == paths.ROOT:
            raise InvalidPathError("cannot delete the root node")
        version = -1 if expected_version is None else expected_version
        await self._wait(lambda: self._client.delete_async(path, version=version), f"delete {path}")

    async def children(self, path: str, watch: WatchCallback | None = None) -> list[str]:
        paths.validate_path(path)
        watcher = self._watcher(path, "children", watch)
        try:
            names = await self._wait(
                lambda: self._client.get_children_async(path, watch=watcher), f"children {path}"
            )
        except NotFoundError:
            self._forget_watcher(path, "children", watch)
            raise
        return sorted(names)

    async def close(self) -> None:
        """Close the session (the server removes its ephemerals at once). Bounded: if ZooKeeper
        is unreachable we give up after operation_timeout_s and drop the connection."""
        if self._closing:
            return
        self._closing = True

        def stop() -> None:
            try:
                self._client.stop()
            finally:
                self._client.close()

        with trio.CancelScope(shield=True):
            with trio.move_on_after(self._operation_timeout_s + 1):
                await trio.to_thread.run_sync(stop, abandon_on_cancel=True)
