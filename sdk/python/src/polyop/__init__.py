"""polyop: write a Kubernetes operator's logic in Python, served to the polyop host.

The polyop host runs controller-runtime (the cache, the workqueues, leader
election, the webhook server) and calls a sidecar over gRPC for every
reconcile and admission request. This package is the sidecar: register
functions on a :class:`Sidecar` and serve them::

    import polyop

    sidecar = polyop.Sidecar("tenant-operator")

    @sidecar.reconciler("examples.polyop.dev/v1/Tenant", owns=["v1/ConfigMap"],
                        update_filters=[polyop.UpdateFilter.GENERATION_CHANGED])
    def reconcile(tenant: polyop.Object, ctx: polyop.Context) -> polyop.Result:
        polyop.mark_condition_true(tenant.conditions, polyop.READY, "Reconciled",
                                   observed_generation=tenant.meta.generation)
        return polyop.Result(desired_children=[...], children_complete=True)

    @sidecar.validator("examples.polyop.dev/v1/Tenant")
    def validate(tenant: polyop.Object, req: polyop.AdmissionRequest) -> None:
        if not tenant.spec.get("owner"):
            raise polyop.DeniedError("invalid", [polyop.FieldError.required("spec.owner")])

    if __name__ == "__main__":
        sidecar.serve()  # unix:///var/run/polyop/sidecar.sock, the host's default

What the host learns through Describe is built from the registrations. Objects
arrive as the API server's JSON, decoded into :class:`Object` (a ``dict``);
changes to ``obj.status`` go back to the host, which writes them. Raise
:class:`TerminalError` for errors retrying cannot fix and
:class:`TemporaryError` to say when to retry; any other exception is retried
with backoff. ``ctx.cluster`` (:class:`Cluster`) reads and writes everything
else through the host. Functions may be ``async def``
(:meth:`Sidecar.serve_async`, with :class:`AsyncCluster` as ``ctx.cluster``).
:mod:`polyop.testing` calls the functions without a host, against an
in-memory cluster.

Every registration and Cluster call takes a kind as a model class (a
:class:`polyop.crd.Resource`, a lightkube resource such as
``lightkube.resources.apps_v1.Deployment``), a :class:`polyop.crd.KindInfo`, or
``"group/version/Kind"``; children and written objects may be typed objects
(lightkube's models of the built-in kinds, ``polyop.crd`` models).

The generated protobuf and gRPC code is in :mod:`polyop.v1alpha1`.
"""

import warnings
from typing import Any

from polyop._address import DEFAULT_SIDECAR_ADDRESS
from polyop._kinds import KindRef, ObjectLike
from polyop._serving import AsyncRunningSidecar, RunningSidecar, ServeOptions
from polyop._version import SDK_NAME, __version__
from polyop.admission import (
    AdmissionRequest,
    DeniedError,
    FailurePolicy,
    FieldError,
    FieldErrorType,
    Operation,
    UserInfo,
)
from polyop.cluster import (
    ADDRESS_ENV,
    OWNER_UID_INDEX,
    TLS_CA_FILE_ENV,
    TLS_CERT_FILE_ENV,
    TLS_KEY_FILE_ENV,
    AsyncCluster,
    Cluster,
    ObjectList,
    PatchType,
    Propagation,
    ReadSource,
    ResolvedKind,
    WatchEvent,
    WatchEventType,
    tls_credentials,
)
from polyop.conditions import (
    DEGRADED,
    READY,
    find_condition,
    is_condition_false,
    is_condition_true,
    is_condition_unknown,
    is_false,
    is_true,
    mark_condition_false,
    mark_condition_true,
    mark_condition_unknown,
    remove_condition,
    set_condition,
)
from polyop.errors import (
    AlreadyExistsError,
    APIError,
    BadRequestError,
    ClusterError,
    ConflictError,
    ForbiddenError,
    GoneError,
    InvalidError,
    NotFoundError,
    ServerError,
    StatusCause,
    TemporaryError,
    TerminalError,
    TooManyRequestsError,
    UnauthorizedError,
    ignore_not_found,
)
from polyop.objects import GVK, KindLike, Object, ObjectMeta, OwnerReference
from polyop.reconcile import (
    AsyncContext,
    Context,
    EventType,
    Owns,
    Request,
    Result,
    UpdateFilter,
    Watch,
)
from polyop.sidecar import PROTOCOL_VERSION, Sidecar

DEFAULT_ADDRESS = DEFAULT_SIDECAR_ADDRESS
"""The address a sidecar serves on by default, the host's default --sidecar-address."""

__all__ = [
    "ADDRESS_ENV",
    "DEFAULT_ADDRESS",
    "DEGRADED",
    "GVK",
    "OWNER_UID_INDEX",
    "PROTOCOL_VERSION",
    "READY",
    "SDK_NAME",
    "TLS_CA_FILE_ENV",
    "TLS_CERT_FILE_ENV",
    "TLS_KEY_FILE_ENV",
    "APIError",
    "AdmissionRequest",
    "AlreadyExistsError",
    "AsyncCluster",
    "AsyncContext",
    "AsyncRunningSidecar",
    "BadRequestError",
    "Cluster",
    "ClusterError",
    "ConflictError",
    "Context",
    "DeniedError",
    "EventType",
    "FailurePolicy",
    "FieldError",
    "FieldErrorType",
    "ForbiddenError",
    "GoneError",
    "InvalidError",
    "KindLike",
    "KindRef",
    "NotFoundError",
    "Object",
    "ObjectLike",
    "ObjectList",
    "ObjectMeta",
    "Operation",
    "OwnerReference",
    "Owns",
    "PatchType",
    "Propagation",
    "ReadSource",
    "Request",
    "ResolvedKind",
    "Result",
    "RunningSidecar",
    "ServeOptions",
    "ServerError",
    "Sidecar",
    "StatusCause",
    "TemporaryError",
    "TerminalError",
    "TooManyRequestsError",
    "UnauthorizedError",
    "UpdateFilter",
    "UserInfo",
    "Watch",
    "WatchEvent",
    "WatchEventType",
    "__version__",
    "find_condition",
    "ignore_not_found",
    "is_condition_false",
    "is_condition_true",
    "is_condition_unknown",
    "is_false",
    "is_true",
    "mark_condition_false",
    "mark_condition_true",
    "mark_condition_unknown",
    "remove_condition",
    "set_condition",
    "tls_credentials",
]

_RENAMED = {"Server": RunningSidecar, "AsyncServer": AsyncRunningSidecar}


def __getattr__(name: str) -> Any:
    """The deprecated names: Server and AsyncServer are RunningSidecar and AsyncRunningSidecar."""
    renamed = _RENAMED.get(name)
    if renamed is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(f"polyop.{name} is deprecated: use polyop.{renamed.__name__}", DeprecationWarning, stacklevel=2)
    return renamed
