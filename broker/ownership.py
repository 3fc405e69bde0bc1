"""Namespace-bundle ownership: which broker serves a topic.

A namespace's hash range is split into bundles (policy ``bundles.boundaries``); a topic falls
into the bundle holding crc32 of its name. The owner holds the ephemeral node
``/namespace/<tenant>/<ns>/<0xLOW_0xHIGH>`` with its URLs (Pulsar's NamespaceEphemeralData);
it disappears with the owner's metadata session, and the next lookup elects a new owner.
"""

from __future__ import annotations

import bisect
import logging
import zlib
from typing import Any, Awaitable, Callable

import trio

from broker.errors import BadRequestError, InvalidPoliciesError, ServiceNotReadyError
from broker.names import NamespaceName, TopicName
from broker.policies import parse_boundaries
from metadata import values
from metadata.errors import AlreadyExistsError, BadVersionError, MetadataError, NotFoundError
from metadata.store import MetadataStore


log = logging.getLogger(__name__)

def _checked(boundaries: list[str], what: object) -> list[int]:
    # Policies are validated when read, but whatever reaches here must never crash a lookup.
    try:
        return parse_boundaries(boundaries)
    except BadRequestError as exc:
        raise InvalidPoliciesError(f"{what} has invalid bundle boundaries: {exc}") from None


def bundle_of(topic: TopicName, boundaries: list[str]) -> str:
    bounds = _checked(boundaries, topic.namespace_name)
    h = zlib.crc32(str(topic).encode())
    i = max(0, min(len(bounds) - 2, bisect.bisect_right(bounds, h) - 1))
    return f"{boundaries[i]}_{boundaries[i + 1]}"


def bundles(boundaries: list[str]) -> list[str]:
    """Bundle names (``0xLOW_0xHIGH``) of a namespace with these boundaries."""
    _checked(boundaries, "the namespace")
    return [f"{lo}_{hi}" for lo, hi in zip(boundaries, boundaries[1:])]


# An assigner picks the broker for an unowned bundle: None = this broker, else that broker's
# registration data (``nativeUrl``/``httpUrl``), which the lookup redirects to.
Assigner = Callable[[NamespaceName, str], Awaitable[dict[str, Any] | None]]


async def reachable(native_url: str, timeout_s: float = 1.0) -> bool:
    """Does anything accept a TCP connection at this ``pulsar://host:port``? A killed broker's
    port refuses at once; a paused one still accepts (its kernel does), so only a dead process
    is told apart here. Its session then expires within the timeout and its node vanishes."""
    hostport = native_url.split("://", 1)[-1].rstrip("/")
    host, _, port = hostport.rpartition(":")
    try:
        with trio.fail_after(timeout_s):
            stream = await trio.open_tcp_stream(host.strip("[]"), int(port))
    except (OSError, ValueError):
        return False
    except trio.TooSlowError:
        return True  # a slow or paused host: not known to be dead
    await stream.aclose()
    return True


class OwnershipCache:
    """This broker's bundles and the lookups of everybody else's.

    ``wait_s`` bounds how long a lookup waits for a bundle node to go away: one of a dead
    owner (its port refuses; its session expires within the session timeout) or one marked
    ``disabled`` (being unloaded). The lookup is then answered the moment the node vanishes,
    so the client reaches the new owner without its own reconnect back-off."""

    def __init__(self, store: MetadataStore, native_url: str, http_url: str,
                 native_url_tls: str | None = None, http_url_tls: str | None = None, *, wait_s: float = 10.0,
                 probe: Callable[[str], Awaitable[bool]] = reachable) -> None:
        self.store = store
        self.native_url = native_url
        self.http_url = http_url
        self.native_url_tls = native_url_tls
        self.http_url_tls = http_url_tls
        self.wait_s = wait_s
        self.probe = probe
        self.owned: set[str] = set()
        # Bundles being unloaded here: lookups wait until the node is released (Pulsar's
        # "disabled" ownership), so no topic of them reopens here meanwhile.
        self.disabled: dict[str, trio.Event] = {}
        self._alive: dict[str, float] = {}  # nativeUrl -> when a probe last reached it
        self.on_change: Callable[[], None] = lambda: None  # our bundles changed (load report)

    @staticmethod
    def bundle_path(ns: NamespaceName, bundle: str) -> str:
        return f"/namespace/{ns.tenant}/{ns.namespace}/{bundle}"

    async def bundle_owner(self, ns: NamespaceName, bundle: str) -> dict[str, Any] | None:
        """Who owns this bundle now (None: nobody); never acquires it."""
        try:
            raw, _ = await self.store.get(self.bundle_path(ns, bundle))
        except NotFoundError:
            return None
        return values.unpack(raw)

    async def disable(self, path: str) -> None:
        """Mark our node ``disabled: true`` (an unload is under way): other brokers' lookups
        wait for it to go instead of redirecting clients to a broker that is giving it up."""
        self.disabled.setdefault(path, trio.Event())
        try:
            raw, stat = await self.store.get(path)
            data = values.unpack(raw)
            if data.get("nativeUrl") == self.native_url:
                data["disabled"] = True
                await self.store.put(path, values.pack(data), stat.version)
        except (NotFoundError, BadVersionError):
            pass

    async def release(self, path: str) -> None:
        """Give a bundle up: the next lookup, on any broker, elects a new owner."""
        self.owned.discard(path)
        try:
            raw, stat = await self.store.get(path)
            if values.unpack(raw).get("nativeUrl") == self.native_url:
                await self.store.delete(path, stat.version)
                log.info("ownership: %s released bundle %s", self.native_url, path.removeprefix("/namespace/"))
        except (NotFoundError, BadVersionError):
            pass  # gone already, or no longer ours
        finally:
            done = self.disabled.pop(path, None)
            if done is not None:
                done.set()
            self.on_change()

    @staticmethod
    def path(topic: TopicName, boundaries: list[str]) -> str:
        return f"/namespace/{topic.tenant}/{topic.namespace}/{bundle_of(topic, boundaries)}"

    async def owner(self, topic: TopicName, boundaries: list[str], acquire: bool = True,
                    assign: Assigner | None = None, wait: bool = False) -> dict[str, Any] | None:
        """The owner's data; an unowned bundle (with ``acquire``) goes to the broker ``assign``
        picks (its data is returned: redirect there) or, without one or when it picks us, is
        acquired here. With ``wait`` (lookups only), a dead or unloading owner's node is
        waited for (at most ``wait_s``); without, such a bundle answers at once (topic loads
        and admin calls must not hold a topic's load that long)."""
        return await self.bundle_owner_or_acquire(topic.namespace_name, bundle_of(topic, boundaries), acquire, assign, wait)

    async def bundle_owner_or_acquire(self, ns: NamespaceName, bundle: str, acquire: bool = True,
                                      assign: Assigner | None = None, wait: bool = False) -> dict[str, Any] | None:
        """``owner`` for a bundle named directly."""
        path = self.bundle_path(ns, bundle)
        deadline = trio.current_time() + (self.wait_s if wait else 0.0)
        while True:
            unloading = self.disabled.get(path)
            if unloading is not None:
                with trio.move_on_at(deadline):
                    await unloading.wait()
                if not unloading.is_set():
                    raise ServiceNotReadyError(f"Namespace bundle {path} is being unloaded")
                continue
            if path in self.owned:
                return self._mine()
            try:
                raw, stat = await self.store.get(path)
                data = values.unpack(raw)
                if data.get("nativeUrl") == self.native_url:
                    # Our address but not acquired by this process (an earlier run of this
                    # broker: it is gone, we hold its port), or held over from a session this
                    # broker has given up for lost. Adopting the node would make two owners once
                    # that session expires and another broker acquires the bundle; delete it
                    # and acquire the bundle properly.
                    try:
                        await self.store.delete(path, stat.version)
                    except (NotFoundError, BadVersionError):
                        pass
                    continue
                if trio.current_time() < deadline and (
                        data.get("disabled") or not await self.live(str(data.get("nativeUrl") or ""))):
                    # Being unloaded, or its broker is dead: answer once the node is gone.
                    await self._wait_gone(path, deadline)
                    continue
                return data
            except NotFoundError:
                if not acquire:
                    return None
            if assign is not None:
                target = await assign(ns, bundle)
                if target is not None and target.get("nativeUrl") != self.native_url:
                    return target
            try:
                await self.store.create(path, values.pack(self._mine()), ephemeral=True, make_parents=True)
                self.owned.add(path)
                log.info("ownership: %s acquired bundle %s/%s", self.native_url, ns, bundle)
                self.on_change()
                return self._mine()
            except AlreadyExistsError:
                continue

    async def live(self, url: str) -> bool:
        """Whether the broker at ``url`` (pulsar://) answers (a probe at most once a second)."""
        now = trio.current_time()
        if now - self._alive.get(url, -1e9) < 1.0:
            return True  # reached it within the last second
        if await self.probe(url):
            self._alive[url] = now
            return True
        self._alive.pop(url, None)
        return False

    async def _wait_gone(self, path: str, deadline: float) -> None:
        """Until the node at ``path`` is deleted or changed, or ``deadline``."""
        changed = trio.Event()
        try:
            if await self.store.exists(path, watch=lambda _event: changed.set()) is None:
                return
        except MetadataError:
            await trio.sleep(0.1)
            return
        with trio.move_on_at(deadline):
            await changed.wait()

    def _mine(self) -> dict[str, Any]:
        return {"nativeUrl": self.native_url, "nativeUrlTls": self.native_url_tls, "httpUrl": self.http_url,
                "httpUrlTls": self.http_url_tls, "disabled": False, "advertisedListeners": {}}

    def is_mine(self, data: dict[str, Any] | None) -> bool:
        return data is not None and data.get("nativeUrl") == self.native_url

    def forget_all(self) -> None:
        """The metadata session is (or may be) lost: nothing is ours until acquired again."""
        if self.owned:
            log.info("ownership: %s gave up %d bundles (metadata session lost)", self.native_url, len(self.owned))
        self.owned.clear()

    async def release_all(self) -> None:
        for path in list(self.owned):
            try:
                await self.store.delete(path)
            except NotFoundError:
                pass
        self.owned.clear()
