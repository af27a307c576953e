"""Errors: how a reconcile fails, and what the Cluster client raises.

A reconcile (or finalize) function fails by raising. :class:`TerminalError`
tells the host not to retry (controller-runtime's ``reconcile.TerminalError``);
:class:`TemporaryError` says when to retry (``Failure.retry_after``, as Kopf's
``TemporaryError(delay=...)``); any other exception is retried with the
controller's exponential backoff.

The Cluster client raises :class:`APIError` subclasses for what the API server
answered, built from the ``metav1.Status`` the host sends with each such error
(the ``APIError`` detail of the gRPC status), so ``except polyop.NotFoundError``
reads as ``apierrors.IsNotFound`` does in Go. Failures that did not come from
the API server (the host is unreachable, a kind it cannot resolve, a malformed
request) raise :class:`ClusterError`, the base of them all.
"""

from __future__ import annotations

import contextlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

import grpc
from google.rpc import status_pb2
from grpc_status import rpc_status

from polyop.v1alpha1 import cluster_pb2

__all__ = [
    "APIError",
    "AlreadyExistsError",
    "BadRequestError",
    "ClusterError",
    "ConflictError",
    "ForbiddenError",
    "GoneError",
    "InvalidError",
    "NotFoundError",
    "ServerError",
    "StatusCause",
    "TemporaryError",
    "TerminalError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "api_error",
    "ignore_not_found",
]


class TerminalError(Exception):
    """A reconcile error that retrying cannot fix, such as an invalid spec.

    The host does not retry the object: it waits for the object's next event,
    as with controller-runtime's ``reconcile.TerminalError``. The status the
    reconcile function set is written all the same.
    """


class TemporaryError(Exception):
    """A reconcile error that says when to retry: after ``retry_after`` seconds
    (or a timedelta) instead of the controller's exponential backoff::

        raise polyop.TemporaryError("the bucket is still being created", retry_after=30)

    The failure still counts as one: the next request's ``retries`` is one
    higher, and a later failure without ``retry_after`` backs off as if every
    failure in the row had used the backoff. The status the function set is
    written all the same.
    """

    def __init__(self, message: str, retry_after: float | timedelta) -> None:
        seconds = retry_after.total_seconds() if isinstance(retry_after, timedelta) else float(retry_after)
        if not seconds > 0:
            raise ValueError(f"TemporaryError retry_after {retry_after!r}: want a positive duration")
        super().__init__(message)
        self.message = message
        self.retry_after = seconds
        """Seconds to wait before the retry."""


class ClusterError(Exception):
    """A Cluster service call failed: ``code`` is the gRPC status code."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class StatusCause:
    """One cause of an API error (metav1.StatusCause), for example one invalid
    field of an Invalid error."""

    type: str
    message: str
    field: str


class APIError(ClusterError):
    """An error the API server answered with.

    ``status`` is the API server's ``metav1.Status`` as a dict; ``reason``
    (``"NotFound"``, ``"Invalid"``, ...), ``http_code`` and ``causes`` are
    read from it. Subclasses name the common reasons.
    """

    def __init__(self, status: dict[str, Any], code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(str(status.get("message", "")), code)
        self.status = status
        self.reason: str = status.get("reason", "") or ""
        self.http_code: int = int(status.get("code", 0) or 0)
        details = status.get("details") or {}
        self.causes: list[StatusCause] = [
            StatusCause(type=c.get("reason", ""), message=c.get("message", ""), field=c.get("field", ""))
            for c in details.get("causes") or ()
        ]


class BadRequestError(APIError):
    """400 BadRequest."""


class UnauthorizedError(APIError):
    """401 Unauthorized."""


class ForbiddenError(APIError):
    """403 Forbidden: the host's credentials do not allow the call."""


class NotFoundError(APIError):
    """404 NotFound: the object does not exist."""


class AlreadyExistsError(APIError):
    """409 AlreadyExists: an object of that name exists."""


class ConflictError(APIError):
    """409 Conflict: the object changed since it was read (its resourceVersion is stale)."""


class GoneError(APIError):
    """410 Gone: an expired continue token or resource version."""


class InvalidError(APIError):
    """422 Invalid: the object failed validation; ``causes`` name the fields."""


class TooManyRequestsError(APIError):
    """429 TooManyRequests."""


class ServerError(APIError):
    """5xx: the API server failed."""


_BY_REASON: dict[str, type[APIError]] = {
    "BadRequest": BadRequestError,
    "Unauthorized": UnauthorizedError,
    "Forbidden": ForbiddenError,
    "NotFound": NotFoundError,
    "AlreadyExists": AlreadyExistsError,
    "Conflict": ConflictError,
    "Gone": GoneError,
    "Expired": GoneError,
    "Invalid": InvalidError,
    "TooManyRequests": TooManyRequestsError,
}

_BY_HTTP_CODE: dict[int, type[APIError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    410: GoneError,
    422: InvalidError,
    429: TooManyRequestsError,
}

_GRPC_CODE: dict[type[APIError], grpc.StatusCode] = {
    BadRequestError: grpc.StatusCode.FAILED_PRECONDITION,
    UnauthorizedError: grpc.StatusCode.UNAUTHENTICATED,
    ForbiddenError: grpc.StatusCode.PERMISSION_DENIED,
    NotFoundError: grpc.StatusCode.NOT_FOUND,
    AlreadyExistsError: grpc.StatusCode.ALREADY_EXISTS,
    ConflictError: grpc.StatusCode.ABORTED,
    GoneError: grpc.StatusCode.FAILED_PRECONDITION,
    InvalidError: grpc.StatusCode.INVALID_ARGUMENT,
    TooManyRequestsError: grpc.StatusCode.RESOURCE_EXHAUSTED,
    ServerError: grpc.StatusCode.INTERNAL,
}


def api_error(status: dict[str, Any], code: grpc.StatusCode | None = None) -> APIError:
    """Return the APIError subclass for a metav1.Status: by its reason, else
    its HTTP code. ``code`` defaults to the gRPC code the host maps that
    status to (see ClusterService in the proto)."""
    cls = _BY_REASON.get(status.get("reason") or "")
    if cls is None:
        http_code = int(status.get("code", 0) or 0)
        cls = ServerError if http_code >= 500 else _BY_HTTP_CODE.get(http_code, APIError)
    return cls(status, code if code is not None else _GRPC_CODE.get(cls, grpc.StatusCode.UNKNOWN))


def ignore_not_found() -> contextlib.suppress:
    """A context manager that swallows :class:`NotFoundError`, as
    controller-runtime's ``client.IgnoreNotFound`` does::

        with polyop.ignore_not_found():
            ctx.cluster.delete("v1/ConfigMap", "old", tenant.namespace)
    """
    return contextlib.suppress(NotFoundError)


def from_rpc_error(err: grpc.RpcError, what: str) -> ClusterError:
    """Turn a failed Cluster service call into the error the caller sees.

    An error carrying an APIError detail becomes an :class:`APIError`
    subclass; any other error a :class:`ClusterError` whose message says what
    was being done.
    """
    code: grpc.StatusCode = err.code() if isinstance(err, grpc.Call) else grpc.StatusCode.UNKNOWN
    details = (err.details() if isinstance(err, grpc.Call) else None) or str(err)
    if isinstance(err, grpc.Call):
        try:
            status = rpc_status.from_call(err)
        except ValueError:
            status = None
        for detail in status.details if status is not None else ():
            decoded = _api_status(detail)
            if decoded is not None:
                decoded.setdefault("message", details)
                return api_error(decoded, code)
    return ClusterError(f"{what}: {code.name}: {details}", code)


def from_aio_error(code: grpc.StatusCode, details: str, trailing_metadata: Any, what: str) -> ClusterError:
    """:func:`from_rpc_error` for grpc.aio, whose errors carry their trailer
    (``grpc-status-details-bin``) in their trailing metadata."""
    for key, value in trailing_metadata or ():
        if key != "grpc-status-details-bin" or not isinstance(value, bytes):
            continue
        status = status_pb2.Status.FromString(value)
        for detail in status.details:
            decoded = _api_status(detail)
            if decoded is not None:
                decoded.setdefault("message", details)
                return api_error(decoded, code)
    return ClusterError(f"{what}: {code.name}: {details}", code)


def _api_status(detail: Any) -> dict[str, Any] | None:
    if not detail.Is(cluster_pb2.APIError.DESCRIPTOR):
        return None
    api = cluster_pb2.APIError()
    detail.Unpack(api)
    try:
        decoded = json.loads(api.status)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None
