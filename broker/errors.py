"""The broker package's exception hierarchy.

Every error a client can see maps to a Pulsar ``ServerError`` code (``server_error``), so the
connection layer answers with the right ERROR / SEND_ERROR without guessing.
"""

from __future__ import annotations


class BrokerError(Exception):
    """Base of every broker error; ``server_error`` is the Pulsar ServerError name."""

    server_error = "UnknownError"
    http_status = 500


class InvalidTopicNameError(BrokerError, ValueError):
    server_error = "InvalidTopicName"
    http_status = 412


class InvalidSubscriptionNameError(BrokerError):
    server_error = "NotAllowedError"
    http_status = 412


class TopicNotFoundError(BrokerError):
    server_error = "TopicNotFound"
    http_status = 404


class SubscriptionNotFoundError(BrokerError):
    server_error = "SubscriptionNotFound"
    http_status = 404


class ConsumerNotFoundError(BrokerError):
    server_error = "ConsumerNotFound"
    http_status = 404


class NamespaceNotFoundError(BrokerError):
    server_error = "TopicNotFound"
    http_status = 404


class ConflictError(BrokerError):
    """An admin resource that already exists (HTTP 409)."""

    server_error = "NotAllowedError"
    http_status = 409


class NotAllowedError(BrokerError):
    server_error = "NotAllowedError"
    http_status = 412


class ConsumerBusyError(BrokerError):
    server_error = "ConsumerBusy"
    http_status = 409


class ProducerBusyError(BrokerError):
    server_error = "ProducerBusy"
    http_status = 409


class ProducerBlockedQuotaExceededError(BrokerError):
    """The topic's backlog is over its quota and the policy is producer_request_hold: the
    client keeps its messages and retries the producer."""

    server_error = "ProducerBlockedQuotaExceededError"
    http_status = 412


class ProducerBlockedQuotaExceededException(BrokerError):
    """The topic's backlog is over its quota and the policy is producer_exception: the
    client fails the sends."""

    server_error = "ProducerBlockedQuotaExceededException"
    http_status = 412


class ProducerFencedError(BrokerError):
    server_error = "ProducerFenced"
    http_status = 409


class TopicFencedError(BrokerError):
    """The topic is closing or failed a write: clients reconnect and look it up again."""

    server_error = "ServiceNotReady"
    http_status = 503


class TopicTerminatedError(BrokerError):
    server_error = "TopicTerminatedError"
    http_status = 412


class PersistenceError(BrokerError):
    server_error = "PersistenceError"
    http_status = 500


class ServiceNotReadyError(BrokerError):
    server_error = "ServiceNotReady"
    http_status = 503


class MetadataStoreError(BrokerError):
    server_error = "MetadataError"
    http_status = 500


class ChecksumError(BrokerError):
    server_error = "ChecksumError"
    http_status = 400


class InvalidMessageError(BrokerError):
    """A SEND whose metadata does not parse or makes no sense: nothing is stored. Answered
    ChecksumError, Pulsar's code for a corrupt message (the client drops that message and
    keeps the connection)."""

    server_error = "ChecksumError"
    http_status = 400


class InvalidTopicsPatternError(BrokerError):
    server_error = "NotAllowedError"
    http_status = 400


class IncompatibleSchemaError(BrokerError):
    server_error = "IncompatibleSchema"
    http_status = 409


class BadRequestError(BrokerError):
    """Malformed admin input (HTTP 400)."""

    server_error = "UnknownError"
    http_status = 400


class PreconditionFailedError(BrokerError):
    """Admin input that is well-formed but not applicable (HTTP 412)."""

    server_error = "NotAllowedError"
    http_status = 412


class InvalidPoliciesError(PreconditionFailedError):
    """A namespace's stored policies do not validate (written by an older version): its
    lookups and admin calls fail with this error until the field is fixed. NotAllowedError
    (inherited) is one the clients do not retry: only an operator can fix it."""
