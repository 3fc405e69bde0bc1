"""Namespace-bundle ownership: which broker serves a topic.

A namespace's hash range is split into bundles (policy ``bundles.boundaries``); a topic falls
into the bundle holding crc32 of its name. The owner holds the ephemeral node
``/namespace/<tenant>/<ns>/<0xLOW_0xHIGH>`` with its URLs (Pulsar's NamespaceEphemeralData);
it disappears with the owner's metadata session, and the next lookup elects a new owner.
"""

from __future__ import annotations

import bisect
import zlib
from typing import Any

from broker.errors import BadRequestError, InvalidPoliciesError, ServiceNotReadyError
from broker.names import NamespaceName, TopicName
from broker.policies import parse_boundaries
from metadata import values
from metadata.errors import AlreadyExistsError, BadVersionError, NotFoundError
from metadata.store import MetadataStore


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


class OwnershipCache:
    def __init__(self, store: MetadataStore, native_url: str, http_url: str,
                 native_url_tls: str | None = None, http_url_tls: str | None = None) -> None:
        self.store = store
        self.native_url = native_url
        self.http_url = http_url
        self.native_url_tls = native_url_tls
        self.http_url_tls = http_url_tls
        self.owned: set[str] = set()
        # Bundles being unloaded: no lookup or topic load until their node is gone (Pulsar's
        # "disabled" ownership), so no topic of them reopens here meanwhile.
        self.disabled: set[str] = set()

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

    async def release(self, path: str) -> None:
        """Give a bundle up: the next lookup, on any broker, elects a new owner."""
        self.owned.discard(path)
        try:
            raw, stat = await self.store.get(path)
            if values.unpack(raw).get("nativeUrl") == self.native_url:
                await self.store.delete(path, stat.version)
        except (NotFoundError, BadVersionError):
            pass  # gone already, or no longer ours

    @staticmethod
    def path(topic: TopicName, boundaries: list[str]) -> str:
        return f"/namespace/{topic.tenant}/{topic.namespace}/{bundle_of(topic, boundaries)}"

    async def owner(self, topic: TopicName, boundaries: list[str], acquire: bool = True) -> dict[str, Any] | None:
        """The owner's data; acquires the bundle when nobody owns it (and ``acquire``)."""
        path = self.path(topic, boundaries)
        if path in self.disabled:
            raise ServiceNotReadyError(f"Namespace bundle {path} is being unloaded")
        if path in self.owned:
            return self._mine()
        while True:
            try:
                raw, stat = await self.store.get(path)
                data = values.unpack(raw)
                if data.get("nativeUrl") == self.native_url:
                    # Our address but not acquired by this process: an earlier run of this
                    # broker (it is gone: we hold its port) whose session has not expired yet.
                    # Adopting the node would make two owners once it expires and another
                    # broker acquires the bundle; delete it and acquire the bundle properly.
                    try:
                        await self.store.delete(path, stat.version)
                    except (NotFoundError, BadVersionError):
                        pass
                    continue
                return data
            except NotFoundError:
                if not acquire:
                    return None
            try:
                await self.store.create(path, values.pack(self._mine()), ephemeral=True, make_parents=True)
                self.owned.add(path)
                return self._mine()
            except AlreadyExistsError:
                continue

    def _mine(self) -> dict[str, Any]:
        return {"nativeUrl": self.native_url, "nativeUrlTls": self.native_url_tls, "httpUrl": self.http_url,
                "httpUrlTls": self.http_url_tls, "disabled": False, "advertisedListeners": {}}

    def is_mine(self, data: dict[str, Any] | None) -> bool:
        return data is not None and data.get("nativeUrl") == self.native_url

    async def release_all(self) -> None:
        for path in list(self.owned):
            try:
                await self.store.delete(path)
            except NotFoundError:
                pass
        self.owned.clear()
