"""Call an Operator's functions without a host, through the code path the host's
calls take, for unit tests::

    from polyop.testing import Harness

    def test_ready():
        got = Harness(op).reconcile(tenant("team-a"))
        assert got.error == ""
        assert got.status["conditions"][0]["status"] == "True"

Each method builds the request the host would send, hands it to the
sidecar's SidecarService in-process, and decodes the response. A call the
sidecar refuses (an unknown controller, a missing object name) raises
:class:`RPCError` with the gRPC status code it would have answered with.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from polyop._servicer import RPCError, Servicer
from polyop.admission import FieldErrorType, Operation
from polyop.objects import GVK, Object, encode
from polyop.operator import PROTOCOL_VERSION, Operator
from polyop.v1alpha1 import admission_pb2, describe_pb2, reconcile_pb2, types_pb2

__all__ = ["Admitted", "Event", "Harness", "RPCError", "Reconciled"]


@dataclass(frozen=True)
class Event:
    type: str
    reason: str
    message: str
    action: str = ""


@dataclass
class Reconciled:
    """A decoded ReconcileResponse or FinalizeResponse."""

    response: Any
    status: dict[str, Any] | None = None
    events: list[Event] = field(default_factory=list)
    children: list[Object] = field(default_factory=list)
    children_complete: bool = False
    requeue: bool = False
    requeue_after: float = 0.0
    error: str = ""
    terminal: bool = False


@dataclass
class Admitted:
    """A decoded DefaultResponse or ValidateResponse."""

    allowed: bool
    message: str = ""
    field_errors: list[tuple[str, FieldErrorType, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    object: Object | None = None
    """The defaulted object; None when the defaulter changed nothing."""
    code: int = 0
    """The denial's HTTP status code; 0 for the default (422 with field errors, 403 without)."""
    reason: str = ""
    """The denial's status reason; empty for the default."""


class Harness:
    """Calls an Operator's registered functions in-process."""

    def __init__(self, op: Operator) -> None:
        self.op = op
        self.servicer = Servicer(op)

    def describe(self, cluster_address: str = "") -> describe_pb2.DescribeResponse:
        return self.servicer.describe(
            describe_pb2.DescribeRequest(protocol_version=PROTOCOL_VERSION, cluster_address=cluster_address)
        )

    def reconcile(
        self,
        obj: Mapping[str, Any],
        *,
        controller: str = "",
        children: Sequence[Mapping[str, Any]] = (),
        retries: int = 0,
    ) -> Reconciled:
        o = Object(obj)
        resp = self.servicer.reconcile(
            reconcile_pb2.ReconcileRequest(
                controller=controller or self._controller_for(o.gvk),
                kind=o.gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=o.namespace, name=o.name),
                object=encode(obj),
                retries=retries,
                children=[encode(c) for c in children],
            )
        )
        got = _decoded(resp)
        got.status = json.loads(resp.status) if resp.status else None
        got.children = [Object.from_json(c) for c in resp.desired_children]
        got.children_complete = resp.children_complete
        got.requeue = resp.requeue
        return got

    def finalize(self, obj: Mapping[str, Any], *, controller: str = "", retries: int = 0) -> Reconciled:
        o = Object(obj)
        resp = self.servicer.finalize(
            reconcile_pb2.FinalizeRequest(
                controller=controller or self._controller_for(o.gvk),
                kind=o.gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=o.namespace, name=o.name),
                object=encode(obj),
                retries=retries,
            )
        )
        return _decoded(resp)

    def default(self, obj: Mapping[str, Any], *, old: Mapping[str, Any] | None = None, operation: Operation | None = None) -> Admitted:
        resp = self.servicer.default(admission_pb2.DefaultRequest(request=_admission(obj, old, operation)))
        got = _admitted(resp.denied if resp.HasField("denied") else None, resp.warnings)
        got.object = Object.from_json(resp.object) if resp.object else None
        return got

    def validate(self, obj: Mapping[str, Any], *, old: Mapping[str, Any] | None = None, operation: Operation | None = None) -> Admitted:
        resp = self.servicer.validate(admission_pb2.ValidateRequest(request=_admission(obj, old, operation)))
        return _admitted(resp.denied if resp.HasField("denied") else None, resp.warnings)

    def convert(self, objects: Sequence[Mapping[str, Any]], api_version: str) -> list[Object]:
        """Convert objects; raises ValueError with the response's error."""
        resp = self.servicer.convert(
            admission_pb2.ConvertRequest(desired_api_version=api_version, objects=[encode(o) for o in objects])
        )
        if resp.error:
            raise ValueError(resp.error)
        return [Object.from_json(o) for o in resp.objects]

    def _controller_for(self, gvk: GVK) -> str:
        names = [name for name, c in self.op._controllers.items() if c.kind == gvk]
        if len(names) != 1:
            raise ValueError(f"{len(names)} controllers reconcile {gvk}: pass controller=")
        return names[0]


def _decoded(resp: Any) -> Reconciled:
    got = Reconciled(response=resp)
    got.events = [
        Event("Warning" if e.type == reconcile_pb2.EVENT_TYPE_WARNING else "Normal", e.reason, e.message, e.action)
        for e in resp.events
    ]
    if resp.HasField("requeue_after"):
        got.requeue_after = resp.requeue_after.ToTimedelta().total_seconds()
    if resp.HasField("error"):
        got.error, got.terminal = resp.error.message, resp.error.terminal
    return got


def _admission(
    obj: Mapping[str, Any], old: Mapping[str, Any] | None, operation: Operation | None
) -> admission_pb2.AdmissionRequest:
    o = Object(obj)
    if operation is None:
        operation = Operation.CREATE if old is None else Operation.UPDATE
    return admission_pb2.AdmissionRequest(
        uid="test",
        kind=o.gvk.to_proto(),
        key=types_pb2.ObjectKey(namespace=o.namespace, name=o.name),
        operation=operation.value,
        object=encode(obj) if operation is not Operation.DELETE else b"",
        old_object=encode(old) if old is not None else b"",
    )


def _admitted(denied: admission_pb2.Denial | None, warnings: Sequence[str]) -> Admitted:
    if denied is None:
        return Admitted(allowed=True, warnings=list(warnings))
    return Admitted(
        allowed=False,
        message=denied.message,
        field_errors=[(e.field, FieldErrorType(e.type), e.detail) for e in denied.field_errors],
        warnings=list(warnings),
        code=denied.code,
        reason=denied.reason,
    )
