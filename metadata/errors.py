"""The metadata package's exception hierarchy: one type per failure a caller must handle."""

from __future__ import annotations


class MetadataError(Exception):
    """Base of every metadata-store error."""


class NotFoundError(MetadataError):
    """The node does not exist."""


class AlreadyExistsError(MetadataError):
    """create() of a node that exists, or put(expected_version=-1) of an existing node."""


class BadVersionError(MetadataError):
    """A compare-and-set lost: the node's version is not the expected one.

    This is how fencing works at the metadata level: a stale writer gets this error.
    """


class NotEmptyError(MetadataError):
    """delete() of a node that still has children."""


class SessionLostError(MetadataError):
    """The session expired or was closed; its ephemeral nodes are gone."""


class StoreUnavailableError(MetadataError):
    """The store did not answer within the operation timeout (e.g. ZooKeeper down)."""


class InvalidPathError(MetadataError, ValueError):
    """A malformed path (must be absolute, no trailing '/', no empty or '.' components)."""


class ValueTooLargeError(MetadataError, ValueError):
    """A value over the store's size limit."""


class NoChildrenForEphemeralsError(MetadataError):
    """create() under an ephemeral node: ephemeral nodes cannot have children (as in ZooKeeper)."""
