"""quire's Pulsar client: a trio ``AsyncClient`` and a blocking ``Client`` facade.

The blocking names mirror the official ``pulsar`` package, so ``import clients as pulsar``
works for the common API: ``Client``, ``MessageId``, ``ConsumerType``, ``CompressionType``,
``InitialPosition``, ``ConsumerDeadLetterPolicy``, exceptions such as ``Timeout`` ...
The wire codec lives in ``clients.protocol``.
"""

from .async_client import AsyncClient
from .auth import Authentication, AuthenticationBasic, AuthenticationTLS, AuthenticationToken
from .blocking import Client, Consumer, Producer, Reader
from .errors import *  # noqa: F403 - the official exception names
from .errors import PulsarException
from .message import Message
from .message_id import MessageId
from .options import (
    BatchingType,
    BatchReceivePolicy,
    CompressionType,
    ConsumerBatchReceivePolicy,
    ConsumerDeadLetterPolicy,
    ConsumerKeySharedPolicy,
    ConsumerType,
    InitialPosition,
    KeySharedMode,
    PartitionsRoutingMode,
    ProducerAccessMode,
    RegexSubscriptionMode,
    Result,
)

__all__ = [
    "AsyncClient",
    "Authentication",
    "AuthenticationBasic",
    "AuthenticationTLS",
    "AuthenticationToken",
    "BatchReceivePolicy",
    "BatchingType",
    "Client",
    "CompressionType",
    "Consumer",
    "ConsumerBatchReceivePolicy",
    "ConsumerDeadLetterPolicy",
    "ConsumerKeySharedPolicy",
    "ConsumerType",
    "InitialPosition",
    "KeySharedMode",
    "Message",
    "MessageId",
    "PartitionsRoutingMode",
    "Producer",
    "ProducerAccessMode",
    "PulsarException",
    "Reader",
    "RegexSubscriptionMode",
    "Result",
]
