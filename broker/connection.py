"""One client connection speaking the Pulsar binary protocol.

Three tasks per connection, all owned by the connection's nursery: the reader decodes frames
in bulk and handles each command (quick ones inline; ones that touch the metadata store or a
cursor in their own task so the connection keeps reading), the writer (``quire.outbox``, the
one coalescing writer every connection of the project uses) sends everything queued since its
last send at once (batched socket writes), and the keep-alive task
pings an idle client and closes a dead one. The outbox is bounded: dispatch waits for it to
drain, so a slow consumer applies backpressure instead of growing memory.

Error boundary: whatever one command raises stays with that command. Broker, metadata and
managed-ledger errors are answered with their Pulsar error code; anything else is a bug, logged
once with its traceback and context, and answered UnknownError (or, for a command that carries
no request id, the connection is closed). The connection's own failure closes only itself.

Security: CONNECT's credentials are checked by the broker's AuthenticationService (a refusal is
ERROR AuthenticationError, then close); every command is authorized as
``broker.authorization.COMMAND_ACCESS`` declares (AuthorizationError in the command's answer);
once the credentials expire, AUTH_CHALLENGE asks for fresh ones and the role must stay the same.
"""

from __future__ import annotations

import functools
import itertools
import logging
import os
import time
import uuid
from collections import OrderedDict
from typing import TYPE_CHECKING, Any, Awaitable, Callable, cast

import trio

from broker.authorization import COMMAND_ACCESS, Access, command_scope
from broker.consumer import Consumer, Delivery
from broker.errors import BrokerError, ChecksumError, ConsumerNotFoundError, NotAllowedError, ServiceNotReadyError
from broker.lone_send import LONE_SEND_FRAME, SendFields, decode_lone_send
from broker.message_frame import message_frames
from broker.names import NamespaceName, TopicName
from broker.producer import Producer, check_message
from broker.receipt_frame import send_receipt_frame
from broker.schemas import version_bytes, version_int
from broker.topic_pattern import compile_topics_pattern
from broker.topic import EARLIEST, LATEST
from quire.lazy_event import LazyEvent
from quire.outbox import Outbox
from quire import hop_trace, input_batch, socket_io
from clients.protocol import commands as C
from clients.protocol import frames
from clients.protocol import pulsar_api_pb2 as pb
from clients.protocol.errors import ProtocolError
from managed_ledger import Position
from managed_ledger.errors import ManagedLedgerError
from metadata.errors import MetadataError
from quire.security.errors import AuthenticationError, SecurityError
from quire.security.providers import AuthResult, PeerCert

if TYPE_CHECKING:
    from broker.service import BrokerService
    from broker.subscription import Subscription

log = logging.getLogger(__name__)

T = pb.BaseCommand
SERVER_VERSION = "Pulsar Server quire-0.1"
_conn_ids = itertools.count(1)
_RECENTLY_CLOSED = 1000  # producer ids remembered after a close (their late SENDs are dropped)
# Errors a command may end with that are answered with their code, not logged as bugs.
EXPECTED_ERRORS = (BrokerError, MetadataError, ManagedLedgerError, SecurityError)
_NO_REQUEST = 0xFFFFFFFFFFFFFFFF  # request id -1: an ERROR about the connection itself
_STREAM_ERRORS = (trio.BrokenResourceError, trio.ClosedResourceError)  # the socket is gone
_CONNECTION_ERRORS = (*_STREAM_ERRORS, OSError)
_SEND = pb.BaseCommand.SEND
# Reads in a row the reader takes without waiting (socket_io.read_now after a lone SEND's
# receipt) before it waits again: that wait is its scheduler round, which lets the process's
# other tasks and connections run and a cancellation reach it.
_READ_NOW_MAX = 16
# A producer whose next SEND is seldom there at once (the official client's turn-around is
# slower than ours) would pay a failed read per message: the reader reads at once while its
# tries keep finding the SEND (a score 0-3, +1 on a hit, -1 on a miss; it tries while the score
# is above 0: a fast producer's odd miss does not stop it, a slow producer's run of misses
# does) and otherwise only every _READ_NOW_PROBE-th read, to see whether that changed.
_READ_NOW_PROBE = 16


def server_error_code(exc: BaseException) -> int:
    name = getattr(exc, "server_error", None)
    if isinstance(exc, MetadataError):
        name = "MetadataError"
    elif isinstance(exc, ManagedLedgerError):
        name = "PersistenceError"
    try:
        return pb.ServerError.Value(name or "UnknownError")
    except ValueError:
        return pb.ServerError.UnknownError


def _position(mid: pb.MessageIdData) -> Position:
    return Position(C.signed64(mid.ledgerId), C.signed64(mid.entryId))


def _seek_position(mid: pb.MessageIdData) -> Position:
    """A start/seek id: below the first ledger = earliest, at or past INT64_MAX = latest."""
    pos = _position(mid)
    if pos.ledger_id < 0:
        return EARLIEST
    if pos.ledger_id >= LATEST.ledger_id:
        return LATEST
    return pos


def request_id_of(command: pb.BaseCommand) -> int | None:
    """The request id a command carries (None for SEND, FLOW, an ACK without one, ...)."""
    try:
        sub = C.sub_command(command)
    except (KeyError, ValueError, AttributeError):
        return None
    if "request_id" not in sub.DESCRIPTOR.fields_by_name or not sub.HasField("request_id"):
        return None
    return int(sub.request_id)


def error_reply(command: pb.BaseCommand, request_id: int, code: int, message: str) -> pb.BaseCommand:
    """The failure answer the client waits for: the command's own response type where it has an
    error field (the official client matches those by request id per type), else ERROR."""
    t = command.type
    if t == T.LOOKUP:
        return C.lookup_response(request_id, error=code, message=message)
    if t == T.PARTITIONED_METADATA:
        return C.partitioned_metadata_response(request_id, error=code, message=message)
    if t == T.GET_SCHEMA:
        return C.get_schema_response(request_id, error_code=code, error_message=message)
    if t == T.GET_OR_CREATE_SCHEMA:
        return C.get_or_create_schema_response(request_id, error_code=code, error_message=message)
    if t == T.CONSUMER_STATS:
        return C.consumer_stats_response(request_id, error_code=code, error_message=message)
    if t == T.ACK:
        return C.ack_response(command.ack.consumer_id, request_id, error=code, message=message)
    return C.error(request_id, code, message)


class ServerConnection:
    def __init__(self, service: "BrokerService", stream: trio.abc.Stream) -> None:
        self.service = service
        self.config = service.config
        self.stream = stream
        self.id = next(_conn_ids)
        sock = stream.socket if isinstance(stream, trio.SocketStream) else stream.transport_stream.socket  # type: ignore[attr-defined]
        self.tls = not isinstance(stream, trio.SocketStream)
        try:
            host, port = sock.getpeername()[:2]
            self.address = f"{host}:{port}"
        except OSError:
            self.address = "unknown"
        try:
            # LOOKUP answers "connect here" with the address this client reached us at, so a
            # single broker works whatever name or interface the client used.
            host = sock.getsockname()[0]
            host = f"[{host}]" if ":" in host else host
            self.local_service_url = f"pulsar://{host}:{service.port}"
            self.local_service_url_tls = f"pulsar+ssl://{host}:{service.tls_port}" if service.tls_port is not None else None
        except OSError:
            self.local_service_url = service.service_url
            self.local_service_url_tls = service.service_url_tls
        self.decoder = frames.FrameDecoder(self.config.max_message_size + frames.MESSAGE_SIZE_FRAME_PADDING)
        self.remote_version = 0
        self.client_version = ""
        self.connected = False
        self.closed = False
        # Who this connection is (None role: authentication is off); refreshed by AUTH_RESPONSE.
        self.auth: AuthResult | None = None
        self.peer_cert: PeerCert = None
        self.supports_auth_refresh = False
        self._challenged_at: float | None = None
        self.producers: dict[int, Producer] = {}
        self.consumers: dict[int, Consumer] = {}
        self._creating_producers: set[int] = set()
        self._closed_producers: OrderedDict[int, None] = OrderedDict()
        self._creating_consumers: set[int] = set()
        self._ready_consumers: set[int] = set()
        self._early_active: dict[int, bool] = {}
        # A plain TCP connection is read and written on its fd (quire/socket_io.py); the
        # outbox then sends receipts right after a journal group, not from its writer task.
        self._fd = socket_io.stream_fd(stream)
        self.outbox = Outbox(write=functools.partial(os.write, self._fd) if self._fd is not None else None)
        self._pending_publish = 0
        self._publish_room = LazyEvent()  # set per receipt; an Event only while a SEND waits for room
        self._reads = 0  # socket reads so far (the keep-alive check looks for progress)
        self._nursery: trio.Nursery | None = None
        self.connected_since = time.time()

    # -- task structure --------------------------------------------------------------------

    async def serve(self) -> None:
        self.service.metrics.connections_opened()
        try:
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                nursery.start_soon(self.outbox.run, self.stream.send_all)
                nursery.start_soon(self._keep_alive)
                if self.service.authn.enabled:
                    nursery.start_soon(self._auth_refresh)
                try:
                    if not await self._reader():
                        await self._drain_outbox()  # e.g. the SEND_ERROR that says why
                finally:
                    nursery.cancel_scope.cancel()
        except* _CONNECTION_ERRORS:
            pass  # the peer went away (reset, broken pipe): nothing to answer
        except* Exception as group:
            log.error("connection %s closed after an unexpected error", self.address,
                      exc_info=group.exceptions[0] if len(group.exceptions) == 1 else group)
        finally:
            self.closed = True
            self.outbox.close()
            self._cleanup()
            self.service.metrics.connections_closed()
            with trio.CancelScope(shield=True):
                with trio.move_on_after(1):
                    await self.stream.aclose()

    def _cleanup(self) -> None:
        if self.producers or self.consumers:
            log.info("connection %s closed: its %d producers and %d consumers close with it", self.address,
                     len(self.producers), len(self.consumers))
        for p in list(self.producers.values()):
            p.topic.remove_producer(p)
        self.producers.clear()
        for c in list(self.consumers.values()):
            if c.subscription is not None:
                c.subscription.remove_consumer(c)
        self.consumers.clear()

    async def _reader(self) -> bool:
        """Handle commands until the peer closes (True) or we close the connection (False)."""
        fd, stream = self._fd, self.stream
        # After a lone SEND's receipt the producer's next SEND is often there already (a fast
        # client takes the other core or preempts us with it): read it at once, without the
        # scheduler round, epoll_ctl and epoll_wait of a wait (one failed read when it is not).
        unwaited, score = 0, 2  # (trusting at first: a slow producer's misses bring it down)
        while True:
            data: bytes | bytearray | None = None
            if unwaited and (score or self._reads % _READ_NOW_PROBE == 0):
                data = socket_io.read_now(stream, fd, 256 * 1024)  # type: ignore[arg-type]
                if data is None:
                    if score:
                        score -= 1
                elif score < 3:
                    score += 1
            if data is None:
                unwaited = 0
                if fd is None:
                    data = await self.stream.receive_some(256 * 1024)
                else:
                    data = await socket_io.receive_some(stream, fd, 256 * 1024)  # type: ignore[arg-type]
            if not data:
                return True
            self._reads += 1
            # One whole plain SEND in this read (a producer sending one at a time): decoded
            # and checked by hand, without the general decoder; its frame is a placeholder,
            # the fields and the entry to store are lone's (broker/lone_send.py).
            if not self.decoder.buffered and self.connected:
                lone = decode_lone_send(data, self.decoder.max_frame_size)
                if lone is not None:
                    # (the loop below for its one SEND: no list, no command type to read)
                    input_batch.begin()
                    try:
                        keep = self._send_now(lone, LONE_SEND_FRAME, lone.entry)
                        if keep is None:
                            keep = await self._on_send(lone, LONE_SEND_FRAME, lone.entry)
                    except _STREAM_ERRORS:
                        raise
                    except Exception as exc:
                        keep = self._command_failed(lone.command(), exc)
                    finally:
                        input_batch.end()
                    if not keep:
                        return False
                    if fd is not None:
                        unwaited = unwaited + 1 if unwaited < _READ_NOW_MAX else 0
                    continue
            unwaited = 0  # (any other read: wait before the next, as before)
            try:
                decoded = self.decoder.feed(data)
            except ProtocolError as exc:
                log.info("closing connection %s: %s", self.address, exc)
                await self._answer_http(data)
                return False
            # A run of SENDs is one input batch (quire/input_batch.py): their journal group is
            # written when the run ends, in this task step. Closed before anything that may
            # yield: any other command, and a SEND that waits for room (_on_send).
            try:
                for frame in decoded:
                    cmd = frame.command
                    try:
                        if cmd.type == _SEND and self.connected:
                            input_batch.begin()
                            # Handled in this task step, no coroutine per SEND (only one that
                            # must wait for room goes through _on_send).
                            send: SendFields = cmd.send
                            keep = self._send_now(send, frame, None)
                            if keep is None:
                                keep = await self._on_send(send, frame, None)
                        else:
                            input_batch.end()
                            keep = await self._handle(frame)
                    except _STREAM_ERRORS:
                        raise
                    except Exception as exc:
                        keep = self._command_failed(frame.command, exc)
                    if not keep:
                        return False
            finally:
                input_batch.end()

    async def _answer_http(self, data: bytes | bytearray) -> None:
        """An HTTP request on this port: answer in HTTP, naming the admin port (broker/wrong_port.py)."""
        from broker.wrong_port import http_reply

        reply = http_reply(bytes(data[:8]), self.service.service_url, self.service.web_url)
        if reply is not None:
            with trio.move_on_after(1):
                try:
                    await self.stream.send_all(reply)
                except (trio.BrokenResourceError, trio.BusyResourceError, trio.ClosedResourceError):
                    pass  # the peer left, or a reply is being written: nothing more to say

    async def _drain_outbox(self, timeout: float = 1.0) -> None:
        with trio.move_on_after(timeout):
            while not self.outbox.idle:
                await trio.sleep(0.005)

    async def _keep_alive(self) -> None:
        interval = self.config.keep_alive_interval_seconds
        if interval <= 0:
            return
        # A read counter, not a clock per read (that cost three Python calls per SEND): idle
        # means no read since the check that last saw one.
        seen, last_read = self._reads, trio.current_time()
        while True:
            await trio.sleep(interval)
            if self._reads != seen:
                seen, last_read = self._reads, trio.current_time()
            elif trio.current_time() - last_read > 2 * interval:
                log.info("closing idle connection %s (no keep-alive answer)", self.address)
                if self._nursery is not None:
                    self._nursery.cancel_scope.cancel()
                return
            if self.connected:
                self.write(C.ping())

    async def _auth_refresh(self) -> None:
        """Pulsar's authenticationRefreshCheckSeconds: once the credentials have expired, ask a
        client that supports it for fresh ones (AUTH_CHALLENGE); close the connection when it
        cannot or does not answer within one more period."""
        interval = max(1, self.config.authentication_refresh_check_seconds)
        while True:
            await trio.sleep(interval)
            auth = self.auth
            if auth is None or not auth.expired():
                continue
            now = trio.current_time()
            if self._challenged_at is not None and now - self._challenged_at >= interval:
                log.info("closing connection %s of %s: expired credentials were not refreshed", self.address, auth.role)
                break
            if not self.supports_auth_refresh:
                log.info("closing connection %s of %s: its credentials expired", self.address, auth.role)
                break
            if self._challenged_at is None:
                self._challenged_at = now
                self.write(C.auth_challenge(SERVER_VERSION, "refresh", b"refresh",
                                            min(self.remote_version, C.PROTOCOL_VERSION)))
        self.write(C.error(_NO_REQUEST, pb.ServerError.AuthenticationError, "credentials expired"))
        await self._drain_outbox()
        if self._nursery is not None:
            self._nursery.cancel_scope.cancel()

    # -- output ----------------------------------------------------------------------------

    def write(self, command: pb.BaseCommand) -> None:
        self.write_raw(frames.encode_command(command))

    def write_raw(self, data: bytes) -> None:
        if not self.closed:
            self.outbox.put(data)

    async def wait_writable(self) -> None:
        if hop_trace.ENABLED and self.outbox.queued_bytes > self.config.connection_outbox_bytes:
            hop_trace.mark("d.full", self.outbox.queued_bytes)
        await self.outbox.wait_below(self.config.connection_outbox_bytes)

    # -- peer interface used by producers and consumers ------------------------------------

    def send_receipt(self, producer_id: int, sequence_id: int, highest_sequence_id: int, ledger_id: int, entry_id: int) -> None:
        if not self.closed:  # (write_raw, inlined: once per stored entry)
            self.outbox.put(send_receipt_frame(producer_id, sequence_id, highest_sequence_id, ledger_id, entry_id))

    def send_send_error(self, producer_id: int, sequence_id: int, error: str, message: str) -> None:
        self.write(C.send_error(producer_id, sequence_id, pb.ServerError.Value(error), message))

    def send_close_producer(self, producer_id: int) -> None:
        self.producers.pop(producer_id, None)
        self._producer_closed(producer_id)
        self.write(C.close_producer(producer_id, -1 & 0xFFFFFFFFFFFFFFFF))

    def send_close_consumer(self, consumer_id: int) -> None:
        self.consumers.pop(consumer_id, None)
        self._ready_consumers.discard(consumer_id)
        self.write(C.close_consumer(consumer_id, -1 & 0xFFFFFFFFFFFFFFFF))

    def send_active_consumer_change(self, consumer_id: int, is_active: bool) -> None:
        if self.remote_version < 12:
            return
        if consumer_id not in self._ready_consumers:
            self._early_active[consumer_id] = is_active  # sent right after SUCCESS
            return
        self.write(C.active_consumer_change(consumer_id, is_active))

    async def send_messages(self, consumer_id: int, partition: int, deliveries: list[Delivery],
                            consumer_epoch: int | None = None) -> None:
        out, nbytes = message_frames(consumer_id, partition, consumer_epoch,
                                     [(d.position[0], d.position[1], d.redelivery_count, d.ack_set, d.data) for d in deliveries])
        if not self.closed:
            self.outbox.put_many(out, nbytes)
        self.service.metrics.dispatched(len(deliveries), sum(d.num_messages for d in deliveries), nbytes)
        await self.wait_writable()

    # -- dispatch of incoming commands -----------------------------------------------------

    def _spawn(self, fn: Callable[[Any], Awaitable[None]], command: pb.BaseCommand, arg: Any) -> None:
        assert self._nursery is not None
        self._nursery.start_soon(self._guarded, fn, command, arg)

    async def _guarded(self, fn: Callable[[Any], Awaitable[None]], command: pb.BaseCommand, arg: Any) -> None:
        try:
            await self._authorize(command)
            await fn(arg)
        except _STREAM_ERRORS:
            raise
        except Exception as exc:
            if not self._command_failed(command, exc) and self._nursery is not None:
                self._nursery.cancel_scope.cancel()

    def _command_failed(self, command: pb.BaseCommand, exc: Exception) -> bool:
        """The error boundary of one command: answer it, log a bug once; False = close the
        connection (an unexpected error on a command the client expects no answer to)."""
        request_id = request_id_of(command)
        expected = isinstance(exc, EXPECTED_ERRORS)
        if expected and not isinstance(exc, (BrokerError, SecurityError)):
            log.warning("%s (request %s) from %s failed: %r", C.type_name(command), request_id, self.address, exc)
        elif not expected:
            log.error("%s (request %s) from %s failed unexpectedly; %s", C.type_name(command), request_id,
                      self.address, "answered UnknownError" if request_id is not None else "closing the connection",
                      exc_info=exc)
        if request_id is None:
            if isinstance(exc, (BrokerError, SecurityError)):
                log.info("%s from %s failed: %r", C.type_name(command), self.address, exc)
            return expected
        if not expected:
            message = f"internal error: {type(exc).__name__}"
        elif isinstance(exc, MetadataError):
            message = f"metadata store error: {type(exc).__name__}"  # its text can name files on this host
        else:
            message = str(exc)
        self.write(error_reply(command, request_id, server_error_code(exc), message or type(exc).__name__))
        return True

    async def _handle(self, frame: frames.Frame) -> bool:
        cmd = frame.command
        t = cmd.type
        if not self.connected:
            if t != T.CONNECT:
                log.info("connection %s sent %s before CONNECT", self.address, C.type_name(cmd))
                return False
            return await self._on_connect(cmd.connect)
        if t not in COMMAND_ACCESS:
            # No declared access rule (see broker/authorization.py): refused, whoever asks.
            await self._authorize(cmd)
        if t == T.SEND:  # (the reader handles a SEND itself once connected)
            return await self._on_send(cmd.send, frame, None)
        elif t == T.FLOW:
            c = self.consumers.get(cmd.flow.consumer_id)
            if c is not None and c.subscription is not None:
                c.subscription.on_flow(c, cmd.flow.messagePermits)
        elif t == T.ACK:
            self._on_ack(cmd.ack)
        elif t == T.PING:
            self.write(C.pong())
        elif t == T.PONG:
            pass
        elif t == T.PARTITIONED_METADATA:
            self._spawn(self._on_partitioned_metadata, cmd, cmd.partitionMetadata)
        elif t == T.LOOKUP:
            self._spawn(self._on_lookup, cmd, cmd.lookupTopic)
        elif t == T.PRODUCER:
            self._spawn(self._on_producer, cmd, cmd.producer)
        elif t == T.SUBSCRIBE:
            self._spawn(self._on_subscribe, cmd, cmd.subscribe)
        elif t == T.REDELIVER_UNACKNOWLEDGED_MESSAGES:
            self._on_redeliver(cmd.redeliverUnacknowledgedMessages)
        elif t == T.CLOSE_PRODUCER:
            self._on_close_producer(cmd.close_producer)
        elif t == T.CLOSE_CONSUMER:
            self._on_close_consumer(cmd.close_consumer)
        elif t == T.UNSUBSCRIBE:
            self._spawn(self._on_unsubscribe, cmd, cmd.unsubscribe)
        elif t == T.SEEK:
            self._spawn(self._on_seek, cmd, cmd.seek)
        elif t == T.GET_LAST_MESSAGE_ID:
            self._spawn(self._on_get_last_message_id, cmd, cmd.getLastMessageId)
        elif t == T.GET_TOPICS_OF_NAMESPACE:
            self._spawn(self._on_get_topics, cmd, cmd.getTopicsOfNamespace)
        elif t == T.CONSUMER_STATS:
            self._on_consumer_stats(cmd.consumerStats)
        elif t == T.GET_SCHEMA:
            self._spawn(self._on_get_schema, cmd, cmd.getSchema)
        elif t == T.GET_OR_CREATE_SCHEMA:
            self._spawn(self._on_get_or_create_schema, cmd, cmd.getOrCreateSchema)
        elif t == T.AUTH_RESPONSE:
            self._spawn(self._on_auth_response, cmd, cmd.authResponse)
        else:
            log.info("connection %s: unsupported command %s", self.address, C.type_name(cmd))
        return True

    async def _authenticate(self, method: str, data: bytes) -> AuthResult:
        """The role these credentials prove (AuthenticationError if none); bcrypt off the loop."""
        provider = self.service.authn.provider(method)
        if provider is None:
            return self.service.authn.anonymous(self.peer_cert)
        if provider.blocking:
            return await trio.to_thread.run_sync(provider.authenticate, data, self.peer_cert,
                                                 limiter=self.service.auth_limiter)
        return provider.authenticate(data, self.peer_cert)

    async def _authorize(self, command: pb.BaseCommand) -> None:
        """The access check ``COMMAND_ACCESS`` declares for this command."""
        access = COMMAND_ACCESS.get(command.type)
        if access in (Access.CONNECTION, Access.OPEN_HANDLE, Access.NOT_SERVED):
            return
        topic, namespace = command_scope(command)
        sub = command.subscribe.subscription if command.type == T.SUBSCRIBE else None
        role = self.auth.role if self.auth is not None else None
        await self.service.authz.check(role, access, topic=topic, namespace=namespace, subscription=sub)

    async def _on_connect(self, c: pb.CommandConnect) -> bool:
        # A version below 0 means nothing: treat it as the oldest one (v0), never echo it.
        self.remote_version = max(0, c.protocol_version)
        self.client_version = c.client_version
        self.supports_auth_refresh = c.feature_flags.supports_auth_refresh
        try:
            self.auth = await self._authenticate(c.auth_method_name if c.HasField("auth_method_name") else "none",
                                                 c.auth_data)
        except SecurityError as exc:
            # Pulsar answers ERROR and closes; the reason says what is wrong, never the secret.
            log.info("connection %s failed authentication (%s): %s", self.address,
                     c.auth_method_name[:20] or "none", exc)
            self.service.metrics.authentication_failed(c.auth_method_name, str(exc))
            self.write(C.error(_NO_REQUEST, pb.ServerError.AuthenticationError, f"Unable to authenticate: {exc}"))
            return False
        self.connected = True
        if self.auth.role is not None:
            self.service.metrics.authenticated(self.auth.method)
        self.write(C.connected(SERVER_VERSION, min(self.remote_version, C.PROTOCOL_VERSION),
                               max_message_size=self.config.max_message_size))
        return True

    async def _on_auth_response(self, c: pb.CommandAuthResponse) -> None:
        """Fresh credentials for this connection: same role, new expiry; else it is closed."""
        old = self.auth
        if old is None or not self.service.authn.enabled:
            return
        try:
            new = await self._authenticate(c.response.auth_method_name or "none", c.response.auth_data)
            if new.role != old.role:
                raise AuthenticationError("the role cannot change when credentials are refreshed")
        except SecurityError as exc:
            log.info("connection %s of %s: refreshed credentials refused: %s", self.address, old.role, exc)
            self.write(C.error(_NO_REQUEST, pb.ServerError.AuthenticationError, f"Unable to authenticate: {exc}"))
            await self._drain_outbox()
            if self._nursery is not None:
                self._nursery.cancel_scope.cancel()
            return
        self.auth = new
        self._challenged_at = None

    def _error(self, request_id: int, exc: BaseException) -> None:
        self.write(C.error(request_id, server_error_code(exc), str(exc) or type(exc).__name__))

    # -- lookup ----------------------------------------------------------------------------

    # Handlers raise; _command_failed answers with the command's error response.

    async def _on_partitioned_metadata(self, c: pb.CommandPartitionedTopicMetadata) -> None:
        name = TopicName.parse(c.topic)
        n = await self.service.partitioned_metadata(name)
        self.write(C.partitioned_metadata_response(c.request_id, n))

    async def _on_lookup(self, c: pb.CommandLookupTopic) -> None:
        name = TopicName.parse(c.topic)
        url, url_tls, redirect, authoritative = await self.service.lookup_urls(name, authoritative=c.authoritative)
        if not redirect:
            url, url_tls = self.local_service_url, self.local_service_url_tls
        self.write(C.lookup_response(c.request_id, broker_service_url=url, broker_service_url_tls=url_tls,
                                     redirect=redirect, authoritative=authoritative))

    async def _on_get_topics(self, c: pb.CommandGetTopicsOfNamespace) -> None:
        ns = NamespaceName.parse(c.namespace)
        topics = [] if c.mode == pb.CommandGetTopicsOfNamespace.NON_PERSISTENT else await self.service.list_topics(ns)
        matches = None
        if c.HasField("topics_pattern"):
            matches = compile_topics_pattern(c.topics_pattern, self.config.subscription_pattern_max_length)
        if matches is not None:
            topics = await self.service.filter_topics(topics, matches)
        self.write(C.get_topics_of_namespace_response(c.request_id, topics, filtered=matches is not None))

    # -- producers -------------------------------------------------------------------------

    async def _on_producer(self, c: pb.CommandProducer) -> None:
        pid = c.producer_id
        existing = self.producers.get(pid)
        if existing is not None:
            self.write(C.producer_success(c.request_id, existing.name, existing.topic.last_sequence_id(existing.name),
                                          schema_version=existing.schema_version, topic_epoch=existing.epoch))
            return
        if pid in self._creating_producers:
            self._error(c.request_id, ServiceNotReadyError("Producer is already present on the connection"))
            return
        self._creating_producers.add(pid)
        try:
            name = TopicName.parse(c.topic)
            topic = await self.service.get_available_topic(name, create=True)
            schema_version = None
            if c.HasField("schema"):
                v = await self.service.schemas.get_or_create(
                    name, c.schema.type, c.schema.name, c.schema.schema_data, {p.key: p.value for p in c.schema.properties})
                schema_version = version_bytes(v)
            pname = c.producer_name if c.HasField("producer_name") and c.producer_name else self.service.new_producer_name()
            producer = Producer(topic, self, pid, pname, access_mode=c.producer_access_mode,
                                user_provided_name=c.user_provided_producer_name,
                                metadata={kv.key: kv.value for kv in c.metadata}, schema_version=schema_version)
            wait = await topic.add_producer(producer, c.topic_epoch if c.HasField("topic_epoch") else None)
            # Registered at once so a connection closing meanwhile detaches it (also from the
            # WaitForExclusive queue).
            self.producers[pid] = producer
            if wait is not None:
                self.write(C.producer_success(c.request_id, pname, -1, schema_version=schema_version, producer_ready=False))
                await wait.wait()
                if topic.closed or producer.closed:
                    self.producers.pop(pid, None)
                    self._error(c.request_id, ServiceNotReadyError("Topic closed while waiting for exclusive access"))
                    return
            self.write(C.producer_success(c.request_id, pname, topic.last_sequence_id(pname),
                                          schema_version=schema_version, topic_epoch=producer.epoch))
            log.info("producer %s opened on %s from %s", pname, name, self.address)
        finally:
            self._creating_producers.discard(pid)

    async def _on_send(self, c: SendFields, frame: frames.Frame, entry: bytes | None) -> bool:
        """Persist one SEND (receipts in order), waiting for room first (at most
        max_pending_publish_requests_per_connection in flight); False = close the connection."""
        limit = self.config.max_pending_publish_requests_per_connection
        while self._pending_publish >= limit:
            # The SENDs before this one are written now (their group was deferred to the end
            # of the input batch): that may already make room, before a new Event would miss it.
            input_batch.end()
            if self._pending_publish < limit:
                break
            await self._publish_room.wait()
        keep = self._send_now(c, frame, entry)
        assert keep is not None  # room was made above, nothing awaited since
        return keep

    def _send_now(self, c: SendFields, frame: frames.Frame, entry: bytes | None) -> bool | None:
        """Persist one SEND without awaiting (receipts in order); False = close the connection,
        None = no room now (nothing done: the caller awaits ``_on_send``). ``entry``: the
        entry to store, already checked (a lone SEND), or None: the frame's, checked here."""
        if self._pending_publish >= self.config.max_pending_publish_requests_per_connection:
            return None
        pid = c.producer_id
        producer = self.producers.get(pid)
        if producer is None or producer.closed:
            if producer is not None or pid in self._closed_producers:
                # Closed by the broker (unload, fencing) or by the client while this SEND was
                # on its way: dropped, as Pulsar does; the client resends after re-creating it.
                return True
            # Never created here (or still being created): the client's view of this connection
            # is out of sync with ours. Pulsar closes the connection; we say why first.
            log.info("connection %s sent SEND for producer %d that is not open here; closing", self.address, pid)
            self.write(C.send_error(pid, c.sequence_id, pb.ServerError.NotAllowedError,
                                    f"Producer {pid} is not open on this connection"))
            return False
        highest = c.highest_sequence_id  # 0 when absent (its default)
        if entry is None:
            if frame.checksum_ok is False:
                slot = producer.new_pending(c.sequence_id, highest, c.num_messages, 0)
                producer.complete(slot, -1, -1, ChecksumError("Checksum failed on the broker"))
                return True
            try:
                check_message(frame)
            except BrokerError as exc:
                # Stored, it would fail every consumer and every restart that reads it.
                log.info("rejected a SEND of producer %s on %s: %s", producer.name, producer.topic.name, exc)
                slot = producer.new_pending(c.sequence_id, highest, c.num_messages, 0)
                producer.complete(slot, -1, -1, exc)
                return True
            # A large entry of a frame that arrived in pieces is a read-only view of that
            # frame's own bytes (no copy): bytes-like all along the add path and in the entry
            # cache, as the entries that range reads from bookies hand on are.
            entry = cast(bytes, frame.stored_entry())
        data = entry
        slot = producer.new_pending(c.sequence_id, highest, c.num_messages, len(data))
        self._pending_publish += 1
        self.service.metrics.published(c.num_messages, len(data))
        producer.topic.publish(producer, slot, data, self._publish_done)
        return True

    def _publish_done(self) -> None:
        self._pending_publish -= 1
        self._publish_room.set()

    def _on_close_producer(self, c: pb.CommandCloseProducer) -> None:
        producer = self.producers.pop(c.producer_id, None)
        if producer is not None:
            producer.topic.remove_producer(producer)
            log.info("producer %s closed on %s from %s", producer.name, producer.topic.name, self.address)
        self._producer_closed(c.producer_id)
        self.write(C.success(c.request_id))

    def _producer_closed(self, producer_id: int) -> None:
        """Remember a closed producer id for a while: SENDs already on their way are dropped."""
        self._closed_producers[producer_id] = None
        self._closed_producers.move_to_end(producer_id)
        if len(self._closed_producers) > _RECENTLY_CLOSED:
            self._closed_producers.popitem(last=False)

    # -- consumers -------------------------------------------------------------------------

    async def _on_subscribe(self, c: pb.CommandSubscribe) -> None:
        cid = c.consumer_id
        if cid in self.consumers:
            self.write(C.success(c.request_id))
            return
        if cid in self._creating_consumers:
            self._error(c.request_id, ServiceNotReadyError("Consumer is already present on the connection"))
            return
        self._creating_consumers.add(cid)
        try:
            name = TopicName.parse(c.topic)
            topic = await self.service.get_available_topic(name, create=c.force_topic_creation)
            if c.HasField("schema") and c.schema.type != 0:
                await self.service.schemas.get_or_create(
                    name, c.schema.type, c.schema.name, c.schema.schema_data, {p.key: p.value for p in c.schema.properties})
            start = _seek_position(c.start_message_id) if c.HasField("start_message_id") else None
            ranges = None
            mode = 0
            if c.HasField("keySharedMeta"):
                mode = c.keySharedMeta.keySharedMode
                ranges = [(r.start, r.end) for r in c.keySharedMeta.hashRanges] or None
            consumer = Consumer(
                subscription=None,  # attached by the topic below
                peer=self, consumer_id=cid,
                name=c.consumer_name if c.consumer_name else uuid.uuid4().hex[:10],
                sub_type=c.subType, priority_level=c.priority_level,
                metadata={kv.key: kv.value for kv in c.metadata}, key_ranges=ranges,
                epoch=c.consumer_epoch if c.HasField("consumer_epoch") else None,
            )
            self.consumers[cid] = consumer
            initial = "earliest" if c.initialPosition == pb.CommandSubscribe.Earliest else "latest"
            try:
                await topic.subscribe(consumer, c.subscription, durable=c.durable, initial_position=initial,
                                      start=start, key_shared_mode=mode)
            except BaseException:
                self.consumers.pop(cid, None)
                raise
            if self.consumers.get(cid) is not consumer:
                return  # closed meanwhile
            self.write(C.success(c.request_id))
            log.info("consumer %s opened on %s subscription %s (%s) from %s", consumer.name, name,
                     consumer.subscription.name if consumer.subscription else c.subscription,
                     pb.CommandSubscribe.SubType.Name(c.subType), self.address)
            self._ready_consumers.add(cid)
            if cid in self._early_active:
                self.write(C.active_consumer_change(cid, self._early_active.pop(cid)))
        finally:
            self._creating_consumers.discard(cid)

    def _on_ack(self, c: pb.CommandAck) -> None:
        consumer = self.consumers.get(c.consumer_id)
        request_id = c.request_id if c.HasField("request_id") else None
        if consumer is None or consumer.subscription is None:
            if request_id is not None:
                self.write(C.ack_response(c.consumer_id, request_id, error=pb.ServerError.ConsumerNotFound,
                                          message="Consumer not found"))
            return
        ids = [(_position(m), list(m.ack_set) if len(m.ack_set) else None) for m in c.message_id]
        # Nothing past the last written entry can have been delivered: Pulsar's cursor refuses
        # such a mark-delete/delete (logged) and the ack itself is answered without error.
        last = consumer.subscription.topic.ml.last_confirmed_entry
        if any(p > last for p, _ in ids):
            log.info("consumer %d on %s acked past the last entry %s: ignored", c.consumer_id, self.address, last)
            ids = [(p, s) for p, s in ids if p <= last]
        if not ids:
            if request_id is not None:
                self.write(C.ack_response(c.consumer_id, request_id))
            return
        callback = None
        if request_id is not None:
            def callback(exc: BaseException | None, cid: int = c.consumer_id, rid: int = request_id) -> None:
                if exc is None:
                    self.write(C.ack_response(cid, rid))
                else:
                    self.write(C.ack_response(cid, rid, error=server_error_code(exc), message=str(exc)))
        consumer.subscription.on_ack(consumer, c.ack_type == pb.CommandAck.Cumulative, ids, callback)

    def _on_redeliver(self, c: pb.CommandRedeliverUnacknowledgedMessages) -> None:
        consumer = self.consumers.get(c.consumer_id)
        if consumer is None or consumer.subscription is None:
            return
        ids = [_position(m) for m in c.message_ids] if len(c.message_ids) else None
        if c.HasField("consumer_epoch"):
            consumer.epoch = c.consumer_epoch
        consumer.subscription.on_redeliver(consumer, ids)

    def _on_close_consumer(self, c: pb.CommandCloseConsumer) -> None:
        consumer = self.consumers.pop(c.consumer_id, None)
        self._ready_consumers.discard(c.consumer_id)
        if consumer is not None and consumer.subscription is not None:
            consumer.subscription.remove_consumer(consumer)
            log.info("consumer %s closed on %s subscription %s from %s", consumer.name,
                     consumer.subscription.topic.name, consumer.subscription.name, self.address)
        self.write(C.success(c.request_id))

    def _consumer(self, consumer_id: int) -> tuple[Consumer, Subscription]:
        """The consumer and the subscription it is attached to (ConsumerNotFoundError if none)."""
        consumer = self.consumers.get(consumer_id)
        if consumer is None or consumer.subscription is None:
            raise ConsumerNotFoundError(f"Consumer {consumer_id} not found")
        return consumer, consumer.subscription

    async def _on_unsubscribe(self, c: pb.CommandUnsubscribe) -> None:
        consumer, sub = self._consumer(c.consumer_id)
        if any(other is not consumer for other in sub.consumers):
            raise NotAllowedError("Subscription has other connected consumers")
        self.consumers.pop(c.consumer_id, None)
        self._ready_consumers.discard(c.consumer_id)
        sub.remove_consumer(consumer)
        if sub.durable:
            await sub.topic.delete_subscription(sub.name, force=True)
        self.write(C.success(c.request_id))

    async def _on_seek(self, c: pb.CommandSeek) -> None:
        _, sub = self._consumer(c.consumer_id)
        if c.HasField("message_id"):
            await sub.reset(_seek_position(c.message_id))
        elif c.HasField("message_publish_time"):
            await sub.reset(timestamp_ms=c.message_publish_time)
        else:
            raise NotAllowedError("Message id and message publish time were not present")
        self.write(C.success(c.request_id))

    async def _on_get_last_message_id(self, c: pb.CommandGetLastMessageId) -> None:
        _, sub = self._consumer(c.consumer_id)
        topic = sub.topic
        last, batch_index = await topic.last_message_id()
        partition = topic.name.partition_index
        last_id = C.message_id(last.ledger_id, last.entry_id, partition, batch_index)
        md = sub.cursor.mark_delete_position
        md_id = C.message_id(md.ledger_id, md.entry_id, partition) if md.ledger_id >= 0 else None
        self.write(C.get_last_message_id_response(c.request_id, last_id, mark_delete_position=md_id))

    def _on_consumer_stats(self, c: pb.CommandConsumerStats) -> None:
        consumer = self.consumers.get(c.consumer_id)
        if consumer is None or consumer.subscription is None:
            self.write(C.consumer_stats_response(c.request_id, error_code=pb.ServerError.ConsumerNotFound,
                                                 error_message="Consumer not found"))
            return
        sub = consumer.subscription
        self.write(C.consumer_stats_response(
            c.request_id, msgRateOut=consumer.rates.get("msgRateOut"),
            msgThroughputOut=consumer.rates.get("msgThroughputOut"),
            msgRateRedeliver=consumer.rates.get("msgRateRedeliver"),
            consumerName=consumer.name, availablePermits=max(0, consumer.permits),
            unackedMessages=consumer.unacked_messages, blockedConsumerOnUnackedMsgs=consumer.blocked,
            address=self.address,
            connectedSince=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(consumer.connected_since)),
            type=sub.stats()["type"], msgRateExpired=0.0,
            msgBacklog=sub.cursor.number_of_entries_in_backlog, messageAckRate=0.0,
        ))

    # -- schema ----------------------------------------------------------------------------

    async def _on_get_schema(self, c: pb.CommandGetSchema) -> None:
        name = TopicName.parse(c.topic)
        version = version_int(c.schema_version) if c.HasField("schema_version") else None
        s = await self.service.schemas.get(name, version)
        if s is None:
            self.write(C.get_schema_response(c.request_id, error_code=pb.ServerError.TopicNotFound,
                                             error_message="Topic not found or no-schema"))
            return
        schema = C.schema(s["name"], s["type"], s["data"], s.get("properties"))
        self.write(C.get_schema_response(c.request_id, schema_=schema, schema_version=version_bytes(s["version"])))

    async def _on_get_or_create_schema(self, c: pb.CommandGetOrCreateSchema) -> None:
        name = TopicName.parse(c.topic)
        v = await self.service.schemas.get_or_create(
            name, c.schema.type, c.schema.name, c.schema.schema_data, {p.key: p.value for p in c.schema.properties})
        self.write(C.get_or_create_schema_response(c.request_id, schema_version=version_bytes(v)))
