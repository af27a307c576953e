"""polyop: write a Kubernetes operator's logic in Python, served to the polyop host.

The polyop host runs controller-runtime (the cache, the workqueues, leader
election, the webhook server) and calls a sidecar over gRPC for every
reconcile and admission request. This package is the sidecar: register
functions on an :class:`Operator` and serve them::

    import polyop

    op = polyop.Operator("tenant-operator")

    @op.reconciler(kind="examples.polyop.dev/v1/Tenant", owns=["v1/ConfigMap"],
                   update_filters=[polyop.UpdateFilter.GENERATION_CHANGED])
    def reconcile(tenant: polyop.Object, ctx: polyop.Context) -> polyop.Result:
        polyop.set_condition(tenant.conditions, polyop.READY, True, "Reconciled",
                             observed_generation=tenant.meta.generation)
        return polyop.Result(children=[...], children_complete=True)

    @op.validator(kind="examples.polyop.dev/v1/Tenant")
    def validate(req: polyop.AdmissionRequest) -> None:
        if not req.object or not req.object.spec.get("owner"):
            raise polyop.Denied("invalid", [polyop.FieldError.required("spec.owner")])

    if __name__ == "__main__":
        op.serve()  # unix:///var/run/polyop/sidecar.sock, the host's default

What the host learns through Describe is built from the registrations. Objects
arrive as the API server's JSON, decoded into :class:`Object` (a ``dict``);
changes to ``obj.status`` go back to the host, which writes them. Raise
:class:`TerminalError` for errors retrying cannot fix; any other exception is
retried with backoff. ``ctx.cluster`` (:class:`Cluster`) reads and writes
everything else through the host. :mod:`polyop.testing` calls the functions
without a host.

The generated protobuf and gRPC code is in :mod:`polyop.v1alpha1`.
"""

from polyop._address import DEFAULT_SIDECAR_ADDRESS
from polyop.admission import (
    AdmissionRequest,
    Denied,
    FailurePolicy,
    FieldError,
    FieldErrorType,
    Operation,
    UserInfo,
)
from polyop.cluster import (
    ADDRESS_ENV,
    TLS_CA_FILE_ENV,
    TLS_CERT_FILE_ENV,
    TLS_KEY_FILE_ENV,
    Cluster,
    ObjectList,
    PatchType,
    Propagation,
    ReadSource,
    ResolvedKind,
    tls_credentials,
)
from polyop.conditions import (
    DEGRADED,
    READY,
    find_condition,
    is_false,
    is_true,
    remove_condition,
    set_condition,
)
from polyop.errors import (
    AlreadyExists,
    APIError,
    BadRequest,
    Cause,
    ClusterError,
    Conflict,
    Forbidden,
    Gone,
    Invalid,
    NotFound,
    ServerError,
    TerminalError,
    TooManyRequests,
    Unauthorized,
)
from polyop.objects import GVK, KindLike, Object, ObjectMeta, OwnerReference
from polyop.operator import PROTOCOL_VERSION, Operator
from polyop.reconcile import Context, Owns, Request, Result, UpdateFilter, Watch
from polyop.server import Server

DEFAULT_ADDRESS = DEFAULT_SIDECAR_ADDRESS
"""The address a sidecar serves on by default, the host's default --sidecar-address."""

__all__ = [
    "ADDRESS_ENV",
    "DEFAULT_ADDRESS",
    "DEGRADED",
    "GVK",
    "PROTOCOL_VERSION",
    "READY",
    "TLS_CA_FILE_ENV",
    "TLS_CERT_FILE_ENV",
    "TLS_KEY_FILE_ENV",
    "APIError",
    "AdmissionRequest",
    "AlreadyExists",
    "BadRequest",
    "Cause",
    "Cluster",
    "ClusterError",
    "Conflict",
    "Context",
    "Denied",
    "FailurePolicy",
    "FieldError",
    "FieldErrorType",
    "Forbidden",
    "Gone",
    "Invalid",
    "KindLike",
    "NotFound",
    "Object",
    "ObjectList",
    "ObjectMeta",
    "Operation",
    "Operator",
    "OwnerReference",
    "Owns",
    "PatchType",
    "Propagation",
    "ReadSource",
    "Request",
    "ResolvedKind",
    "Result",
    "Server",
    "ServerError",
    "TerminalError",
    "TooManyRequests",
    "Unauthorized",
    "UpdateFilter",
    "UserInfo",
    "Watch",
    "find_condition",
    "is_false",
    "is_true",
    "remove_condition",
    "set_condition",
    "tls_credentials",
]
