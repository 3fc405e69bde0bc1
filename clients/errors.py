"""The client's exceptions, named like the official ``pulsar`` package's (``pulsar.exceptions``).

Everything derives from ``PulsarException``; ``from_server_error`` maps a broker ``ServerError``
code to the matching class. Code written against ``pulsar.Timeout`` etc. keeps working when it
imports these instead.
"""

from __future__ import annotations

from .protocol import pulsar_api_pb2 as pb


class PulsarException(Exception):
    """Base of every client error."""


def _make(name: str, doc: str) -> type[PulsarException]:
    return type(name, (PulsarException,), {"__doc__": doc, "__module__": __name__})


UnknownError = _make("UnknownError", "An error the broker did not classify.")
InvalidConfiguration = _make("InvalidConfiguration", "A client, producer or consumer option is invalid.")
Timeout = _make("Timeout", "The operation did not complete within its timeout.")
LookupError = _make("LookupError", "Topic lookup failed.")  # noqa: A001 - official name
ConnectError = _make("ConnectError", "Could not connect to a broker.")
ReadError = _make("ReadError", "Reading from the broker connection failed.")
AuthenticationError = _make("AuthenticationError", "The broker rejected the credentials.")
AuthorizationError = _make("AuthorizationError", "The role is not allowed to do this.")
ErrorGettingAuthenticationData = _make("ErrorGettingAuthenticationData", "Could not get authentication data.")
BrokerMetadataError = _make("BrokerMetadataError", "The broker failed on its metadata store.")
BrokerPersistenceError = _make("BrokerPersistenceError", "The broker could not persist the message.")
ChecksumError = _make("ChecksumError", "A checksum did not match.")
ConsumerBusy = _make("ConsumerBusy", "An exclusive subscription already has a consumer.")
NotConnected = _make("NotConnected", "The producer or consumer is not connected.")
AlreadyClosed = _make("AlreadyClosed", "The client, producer or consumer is closed.")
InvalidMessage = _make("InvalidMessage", "The message is invalid.")
ConsumerNotInitialized = _make("ConsumerNotInitialized", "The consumer is not ready.")
ProducerNotInitialized = _make("ProducerNotInitialized", "The producer is not ready.")
ProducerBusy = _make("ProducerBusy", "A producer with this name is already connected.")
TooManyLookupRequestException = _make("TooManyLookupRequestException", "Too many concurrent lookups.")
InvalidTopicName = _make("InvalidTopicName", "The topic name is invalid.")
InvalidUrl = _make("InvalidUrl", "The service URL is invalid.")
ServiceUnitNotReady = _make("ServiceUnitNotReady", "The topic's bundle is not served right now.")
OperationNotSupported = _make("OperationNotSupported", "The operation is not supported here.")
ProducerBlockedQuotaExceededError = _make("ProducerBlockedQuotaExceededError", "Backlog quota exceeded.")
ProducerBlockedQuotaExceededException = _make("ProducerBlockedQuotaExceededException", "Backlog quota exceeded.")
ProducerQueueIsFull = _make("ProducerQueueIsFull", "max_pending_messages reached and block_if_queue_full is off.")
MessageTooBig = _make("MessageTooBig", "The message exceeds the broker's max_message_size.")
TopicNotFound = _make("TopicNotFound", "The topic does not exist.")
SubscriptionNotFound = _make("SubscriptionNotFound", "The subscription does not exist.")
ConsumerNotFound = _make("ConsumerNotFound", "The consumer does not exist.")
UnsupportedVersionError = _make("UnsupportedVersionError", "The broker does not support this protocol version.")
TopicTerminated = _make("TopicTerminated", "The topic was terminated.")
CryptoError = _make("CryptoError", "End-to-end encryption failed.")
IncompatibleSchema = _make("IncompatibleSchema", "The schema is incompatible with the topic's.")
ConsumerAssignError = _make("ConsumerAssignError", "The broker could not assign the consumer.")
CumulativeAcknowledgementNotAllowedError = _make(
    "CumulativeAcknowledgementNotAllowedError", "Cumulative acks are not allowed on Shared subscriptions."
)
TransactionCoordinatorNotFoundError = _make("TransactionCoordinatorNotFoundError", "No transaction coordinator.")
InvalidTxnStatusError = _make("InvalidTxnStatusError", "Invalid transaction status.")
NotAllowedError = _make("NotAllowedError", "The broker does not allow this operation.")
TransactionConflict = _make("TransactionConflict", "Transaction conflict.")
TransactionNotFound = _make("TransactionNotFound", "Transaction not found.")
ProducerFenced = _make("ProducerFenced", "Another exclusive producer took over the topic.")
MemoryBufferIsFull = _make("MemoryBufferIsFull", "The client memory limit is reached.")
Interrupted = _make("Interrupted", "The operation was interrupted.")

_BY_SERVER_ERROR: dict[int, type[PulsarException]] = {
    pb.UnknownError: UnknownError,
    pb.MetadataError: BrokerMetadataError,
    pb.PersistenceError: BrokerPersistenceError,
    pb.AuthenticationError: AuthenticationError,
    pb.AuthorizationError: AuthorizationError,
    pb.ConsumerBusy: ConsumerBusy,
    pb.ServiceNotReady: ServiceUnitNotReady,
    pb.ProducerBlockedQuotaExceededError: ProducerBlockedQuotaExceededError,
    pb.ProducerBlockedQuotaExceededException: ProducerBlockedQuotaExceededException,
    pb.ChecksumError: ChecksumError,
    pb.UnsupportedVersionError: UnsupportedVersionError,
    pb.TopicNotFound: TopicNotFound,
    pb.SubscriptionNotFound: SubscriptionNotFound,
    pb.ConsumerNotFound: ConsumerNotFound,
    pb.TooManyRequests: TooManyLookupRequestException,
    pb.TopicTerminatedError: TopicTerminated,
    pb.ProducerBusy: ProducerBusy,
    pb.InvalidTopicName: InvalidTopicName,
    pb.IncompatibleSchema: IncompatibleSchema,
    pb.ConsumerAssignError: ConsumerAssignError,
    pb.TransactionCoordinatorNotFound: TransactionCoordinatorNotFoundError,
    pb.InvalidTxnStatus: InvalidTxnStatusError,
    pb.NotAllowedError: NotAllowedError,
    pb.TransactionConflict: TransactionConflict,
    pb.TransactionNotFound: TransactionNotFound,
    pb.ProducerFenced: ProducerFenced,
}

# Errors after which reconnecting cannot help (the producer/consumer fails instead). Transient
# states such as TopicNotFound while a broker is still creating its namespaces are retried.
FATAL = (
    AuthenticationError,
    AuthorizationError,
    TopicTerminated,
    ProducerFenced,
    InvalidTopicName,
    IncompatibleSchema,
    NotAllowedError,
    AlreadyClosed,
    InvalidConfiguration,
    UnsupportedVersionError,
)


def from_server_error(code: int, message: str = "") -> PulsarException:
    """The exception for a broker ``ServerError`` code."""
    cls = _BY_SERVER_ERROR.get(code, UnknownError)
    name = pb.ServerError.Name(code) if code in pb.ServerError.values() else str(code)
    return cls(message or name)
