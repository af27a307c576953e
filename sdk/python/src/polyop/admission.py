"""Admission webhooks: what a defaulter or validator receives, and how it denies.

Defaulters and validators take the object and the request, ``(obj, req)``:
the object as sent (on delete, the object being deleted), typed when the
kind was registered with its model class. A validator returns nothing (or
warnings) to allow a request, and raises :class:`DeniedError` to refuse it.
With field errors the API server answers 422 Invalid with one cause per
field, as its own validation does; without, 403 Forbidden with the message::

    @sidecar.validator("examples.polyop.dev/v1/Tenant")
    def validate(tenant: polyop.Object, req: polyop.AdmissionRequest) -> None:
        errors = []
        if not tenant.spec.get("owner"):
            errors.append(FieldError.required("spec.owner", "every tenant has an owner"))
        if errors:
            raise DeniedError("the tenant is invalid", errors)
"""

from __future__ import annotations

import enum
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polyop.objects import GVK, Object, encode
from polyop.v1alpha1 import admission_pb2

__all__ = [
    "AdmissionRequest",
    "DeniedError",
    "FailurePolicy",
    "FieldError",
    "FieldErrorType",
    "Operation",
    "UserInfo",
]


class Operation(enum.IntEnum):
    """An admission operation."""

    CREATE = admission_pb2.OPERATION_CREATE
    UPDATE = admission_pb2.OPERATION_UPDATE
    DELETE = admission_pb2.OPERATION_DELETE
    CONNECT = admission_pb2.OPERATION_CONNECT


class FailurePolicy(enum.IntEnum):
    """What the API server does when a webhook cannot answer."""

    FAIL = admission_pb2.FAILURE_POLICY_FAIL
    IGNORE = admission_pb2.FAILURE_POLICY_IGNORE


class FieldErrorType(enum.IntEnum):
    """What is wrong with a field, as k8s.io/apimachinery's field.ErrorType."""

    INVALID = admission_pb2.FIELD_ERROR_TYPE_INVALID
    REQUIRED = admission_pb2.FIELD_ERROR_TYPE_REQUIRED
    NOT_SUPPORTED = admission_pb2.FIELD_ERROR_TYPE_NOT_SUPPORTED
    FORBIDDEN = admission_pb2.FIELD_ERROR_TYPE_FORBIDDEN
    DUPLICATE = admission_pb2.FIELD_ERROR_TYPE_DUPLICATE
    TOO_LONG = admission_pb2.FIELD_ERROR_TYPE_TOO_LONG
    TOO_MANY = admission_pb2.FIELD_ERROR_TYPE_TOO_MANY
    NOT_FOUND = admission_pb2.FIELD_ERROR_TYPE_NOT_FOUND
    INTERNAL = admission_pb2.FIELD_ERROR_TYPE_INTERNAL


_NO_VALUE: Any = object()


@dataclass(frozen=True)
class FieldError:
    """One invalid field, as field.Error in Go. ``field`` is a path such as
    ``"spec.quota.cpu"`` or ``"spec.ports[0].name"``; ``bad_value`` is any JSON
    value, left out when not worth quoting."""

    field: str
    type: FieldErrorType = FieldErrorType.INVALID
    detail: str = ""
    bad_value: Any = _NO_VALUE

    @classmethod
    def invalid(cls, path: str, value: Any, detail: str) -> FieldError:
        return cls(path, FieldErrorType.INVALID, detail, value)

    @classmethod
    def required(cls, path: str, detail: str = "") -> FieldError:
        return cls(path, FieldErrorType.REQUIRED, detail)

    @classmethod
    def forbidden(cls, path: str, detail: str) -> FieldError:
        return cls(path, FieldErrorType.FORBIDDEN, detail)

    @classmethod
    def not_supported(cls, path: str, value: Any, supported: Sequence[str]) -> FieldError:
        return cls(path, FieldErrorType.NOT_SUPPORTED, "supported values: " + ", ".join(f'"{v}"' for v in supported), value)

    def to_proto(self) -> admission_pb2.FieldError:
        out = admission_pb2.FieldError(field=self.field, type=self.type.value, detail=self.detail)
        if self.bad_value is not _NO_VALUE:
            out.bad_value = encode(self.bad_value)
        return out


class DeniedError(Exception):
    """Raise it from a defaulter or validator to refuse the request.

    With ``field_errors`` the client gets a 422 Invalid with one cause per
    field, without them a 403 Forbidden. ``code`` (400 to 599) and ``reason``
    (a Kubernetes status reason such as ``"Conflict"``) replace those, as an
    ``apierrors.NewConflict`` returned by a Go webhook would::

        raise DeniedError("the port is taken by web-2", code=409)
    """

    def __init__(
        self,
        message: str,
        field_errors: Sequence[FieldError] = (),
        warnings: Sequence[str] = (),
        *,
        code: int = 0,
        reason: str = "",
    ) -> None:
        if code and not 400 <= code <= 599:
            raise ValueError(f"DeniedError code {code}: want an HTTP error code, 400 to 599 (or 0 for the default)")
        super().__init__(message)
        self.message = message
        self.field_errors = list(field_errors)
        self.warnings = list(warnings)
        self.code = code
        self.reason = reason

    def to_proto(self) -> admission_pb2.Denial:
        return admission_pb2.Denial(
            message=self.message,
            field_errors=[e.to_proto() for e in self.field_errors],
            code=self.code,
            reason=self.reason,
        )


@dataclass(frozen=True)
class UserInfo:
    """The requesting user, as the API server authenticated them."""

    username: str = ""
    uid: str = ""
    groups: tuple[str, ...] = ()
    extra: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class AdmissionRequest:
    """The request under admission, as the API server's AdmissionReview says.

    ``object`` is the object as sent (None on delete); ``old_object`` the
    object before the request (on update and delete); ``subresource`` the
    subresource written, such as ``"status"`` (empty for the object itself);
    ``user`` the requesting user. A request with ``dry_run`` set must change
    nothing outside the answer. :meth:`warn` sends the client a warning.
    """

    uid: str
    kind: GVK
    operation: Operation
    namespace: str
    name: str
    object: Object | None
    old_object: Object | None
    resource: str = ""
    subresource: str = ""
    user: UserInfo = field(default_factory=UserInfo)
    dry_run: bool = False
    warnings: list[str] = field(default_factory=list, compare=False)
    """The warnings :meth:`warn` gave, sent to the client with the answer."""

    def warn(self, message: str) -> None:
        """Send the client a warning with the answer (``kubectl`` prints it),
        whether the request is allowed or denied. A defaulter or validator may
        also return its warnings."""
        self.warnings.append(message)

    @classmethod
    def from_proto(cls, req: admission_pb2.AdmissionRequest) -> AdmissionRequest:
        return cls(
            uid=req.uid,
            kind=GVK.from_proto(req.kind),
            operation=Operation(req.operation),
            namespace=req.key.namespace,
            name=req.key.name,
            object=Object.from_json(req.object) if req.object else None,
            old_object=Object.from_json(req.old_object) if req.old_object else None,
            resource=req.resource,
            subresource=req.subresource,
            user=UserInfo(
                username=req.user_info.username,
                uid=req.user_info.uid,
                groups=tuple(req.user_info.groups),
                extra={k: tuple(v.values) for k, v in req.user_info.extra.items()},
            ),
            dry_run=req.dry_run,
        )
