"""A typed Python client for the Iris API.

from iris_client import IrisClient, MemoryWriteIn

with IrisClient("https://iris.example", token="iris_...") as iris:
    entry = iris.memories_write(MemoryWriteIn(...))
"""

from __future__ import annotations

from iris_client import _generated as models
from iris_client._generated import *  # noqa: F403 - the models are the public API
from iris_client._generated import Operations
from iris_client._model import DecodeError, Model
from iris_client._transport import HeldForApproval
from iris_client.errors import (
    Conflict,
    ConsentRequired,
    FieldError,
    Forbidden,
    IrisError,
    MemoryConflict,
    NotAuthenticated,
    NotFound,
    OffTheRecord,
    PayloadTooLarge,
    ProblemError,
    RateLimited,
    ServerError,
    ServiceUnavailable,
    TransportError,
    Unprocessable,
    ValidationProblem,
)


class IrisClient(Operations):
    """`IrisClient(base_url, token)`: one method per API operation (see `Operations`).

    Every mutating call sends an `Idempotency-Key` (a new UUID unless you pass
    `idempotency_key=`; retries reuse it, so a retried write happens once). 429 and 503
    are retried up to `max_retries` times, waiting as `Retry-After` says, or with
    exponential backoff and jitter when it says nothing. Error answers raise a
    `ProblemError` subclass.
    """

    def __enter__(self) -> IrisClient:
        return self


__all__ = [
    "Conflict",
    "ConsentRequired",
    "DecodeError",
    "FieldError",
    "Forbidden",
    "HeldForApproval",
    "IrisClient",
    "IrisError",
    "MemoryConflict",
    "Model",
    "NotAuthenticated",
    "NotFound",
    "OffTheRecord",
    "PayloadTooLarge",
    "ProblemError",
    "RateLimited",
    "ServerError",
    "ServiceUnavailable",
    "TransportError",
    "Unprocessable",
    "ValidationProblem",
    "models",
]
__all__ += models.__all__
