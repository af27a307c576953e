"""Errors: a reconcile's terminal error, and the Cluster client's errors.

A reconcile function fails by raising. :class:`TerminalError` tells the host
not to retry (controller-runtime's ``reconcile.TerminalError``); any other
exception is retried with backoff.

The Cluster client raises :class:`APIError` subclasses for what the API server
answered, built from the ``metav1.Status`` the host sends with each such error
(the ``APIError`` detail of the gRPC status), so ``except polyop.NotFound``
reads as ``apierrors.IsNotFound`` does in Go. Failures that did not come from
the API server (the host is unreachable, a kind it cannot resolve, a malformed
request) raise :class:`ClusterError`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import grpc
from grpc_status import rpc_status

from polyop.v1alpha1 import cluster_pb2

__all__ = [
    "APIError",
    "AlreadyExists",
    "BadRequest",
    "Cause",
    "ClusterError",
    "Conflict",
    "Forbidden",
    "Gone",
    "Invalid",
    "NotFound",
    "ServerError",
    "TerminalError",
    "TooManyRequests",
    "Unauthorized",
]


class TerminalError(Exception):
    """A reconcile error that retrying cannot fix, such as an invalid spec.

    The host does not retry the object: it waits for the object's next event,
    as with controller-runtime's ``reconcile.TerminalError``. The status the
    reconcile function set is written all the same.
    """


class ClusterError(Exception):
    """A Cluster service call failed: ``code`` is the gRPC status code."""

    def __init__(self, message: str, code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> None:
        super().__init__(message)
        self.message = message
        self.code = code


@dataclass(frozen=True)
class Cause:
    """One cause of an API error, for example one invalid field of an Invalid error."""

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
        self.causes: list[Cause] = [
            Cause(type=c.get("reason", ""), message=c.get("message", ""), field=c.get("field", ""))
            for c in details.get("causes") or ()
        ]


class BadRequest(APIError):
    """400 BadRequest."""


class Unauthorized(APIError):
    """401 Unauthorized."""


class Forbidden(APIError):
    """403 Forbidden: the host's credentials do not allow the call."""


class NotFound(APIError):
    """404 NotFound: the object does not exist."""


class AlreadyExists(APIError):
    """409 AlreadyExists: an object of that name exists."""


class Conflict(APIError):
    """409 Conflict: the object changed since it was read (its resourceVersion is stale)."""


class Gone(APIError):
    """410 Gone: an expired continue token or resource version."""


class Invalid(APIError):
    """422 Invalid: the object failed validation; ``causes`` name the fields."""


class TooManyRequests(APIError):
    """429 TooManyRequests."""


class ServerError(APIError):
    """5xx: the API server failed."""


_BY_REASON: dict[str, type[APIError]] = {
    "BadRequest": BadRequest,
    "Unauthorized": Unauthorized,
    "Forbidden": Forbidden,
    "NotFound": NotFound,
    "AlreadyExists": AlreadyExists,
    "Conflict": Conflict,
    "Gone": Gone,
    "Expired": Gone,
    "Invalid": Invalid,
    "TooManyRequests": TooManyRequests,
}

_BY_HTTP_CODE: dict[int, type[APIError]] = {
    400: BadRequest,
    401: Unauthorized,
    403: Forbidden,
    404: NotFound,
    409: Conflict,
    410: Gone,
    422: Invalid,
    429: TooManyRequests,
}


def api_error(status: dict[str, Any], code: grpc.StatusCode = grpc.StatusCode.UNKNOWN) -> APIError:
    """Return the APIError subclass for a metav1.Status: by its reason, else its HTTP code."""
    cls = _BY_REASON.get(status.get("reason") or "")
    if cls is None:
        http_code = int(status.get("code", 0) or 0)
        cls = ServerError if http_code >= 500 else _BY_HTTP_CODE.get(http_code, APIError)
    return cls(status, code)


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
            if not detail.Is(cluster_pb2.APIError.DESCRIPTOR):
                continue
            api = cluster_pb2.APIError()
            detail.Unpack(api)
            try:
                decoded = json.loads(api.status)
            except ValueError:
                continue
            if isinstance(decoded, dict):
                decoded.setdefault("message", details)
                return api_error(decoded, code)
    return ClusterError(f"{what}: {code.name}: {details}", code)
