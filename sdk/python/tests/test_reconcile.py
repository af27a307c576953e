"""Reconcile, Finalize, Default, Validate and Convert, called in-process."""

from __future__ import annotations

import logging
from datetime import timedelta
from typing import Any

import grpc
import pytest

import polyop
from polyop import Denied, FieldError, FieldErrorType, Object, Result
from polyop.operator import ReconcileFunc
from polyop.testing import Admitted, Event, Harness, RPCError
from polyop.v1alpha1 import reconcile_pb2, types_pb2

WIDGET = "example.com/v1/Widget"


def widget(name: str = "w1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "ns", "generation": 2},
        "spec": spec,
    }


def operator_with(fn: ReconcileFunc, **kwargs: Any) -> polyop.Operator:
    op = polyop.Operator("w")
    op.reconciler(WIDGET, owns=["v1/ConfigMap"], **kwargs)(fn)
    return op


def test_the_status_events_and_requeue_go_back() -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> Result:
        assert ctx.request == polyop.Request("widget", polyop.GVK("example.com", "v1", "Widget"), "ns", "w1", retries=3)
        obj.status["observedGeneration"] = obj.meta.generation
        ctx.event("Scaled", "to 3")
        ctx.event("Slow", "took long", type="Warning", action="Scaling")
        return Result(requeue_after=timedelta(minutes=10))

    got = Harness(operator_with(reconcile)).reconcile(widget(), retries=3)

    assert got.error == ""
    assert got.status == {"observedGeneration": 2}
    assert got.events == [Event("Normal", "Scaled", "to 3"), Event("Warning", "Slow", "took long", "Scaling")]
    assert got.requeue_after == 600
    assert not got.response.HasField("error")


def test_no_result_and_no_status_leave_everything_as_it_is() -> None:
    got = Harness(operator_with(lambda obj, ctx: None)).reconcile(widget())
    assert got.response == reconcile_pb2.ReconcileResponse()


def test_requeue_and_float_seconds() -> None:
    got = Harness(operator_with(lambda obj, ctx: Result(requeue=True, requeue_after=1.5))).reconcile(widget())
    assert got.requeue and got.requeue_after == 1.5


def test_a_terminal_error_is_reported_with_the_status() -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> None:
        polyop.set_condition(obj.conditions, polyop.READY, False, "InvalidSpec", "size < 0")
        ctx.event("InvalidSpec", "size < 0", type="Warning")
        raise polyop.TerminalError("size must not be negative")

    got = Harness(operator_with(reconcile)).reconcile(widget())

    assert (got.error, got.terminal) == ("size must not be negative", True)
    assert got.status is not None and got.status["conditions"][0]["reason"] == "InvalidSpec"
    assert [e.reason for e in got.events] == ["InvalidSpec"]


def test_any_other_exception_is_retried_and_logged_at_debug_level_only(caplog: pytest.LogCaptureFixture) -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> None:
        obj.status["phase"] = "Failing"
        raise KeyError("spec")

    with caplog.at_level(logging.DEBUG, logger="polyop"):
        got = Harness(operator_with(reconcile)).reconcile(widget())

    assert (got.error, got.terminal) == ("KeyError: 'spec'", False)
    assert got.status == {"phase": "Failing"}
    assert "Reconciler error" in caplog.text and "controller=widget" in caplog.text and "name=w1" in caplog.text
    # The host logs the error; the sidecar only at debug level, with the traceback.
    errors = [r for r in caplog.records if "Reconciler error" in r.getMessage()]
    assert [r.levelno for r in errors] == [logging.DEBUG] and errors[0].exc_info is not None


def test_a_result_of_another_type_is_an_error() -> None:
    got = Harness(operator_with(lambda obj, ctx: 5)).reconcile(widget())  # type: ignore[arg-type, return-value]
    assert "not a polyop.Result" in got.error


def test_desired_children_go_back_with_children_complete() -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> Result:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": obj.name}, "data": {"size": str(obj.spec["size"])}}
        return Result(children=[cm], children_complete=True)

    got = Harness(operator_with(reconcile)).reconcile(widget(size=3))

    assert got.children == [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1"}, "data": {"size": "3"}}]
    assert got.children_complete


@pytest.mark.parametrize(
    ("child", "match"),
    [
        pytest.param({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}, "not a kind controller 'widget' owns", id="a kind not owned"),
        pytest.param({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, "metadata.name", id="a child without a name"),
    ],
)
def test_invalid_children_are_an_error_and_none_is_sent(child: dict[str, Any], match: str) -> None:
    got = Harness(operator_with(lambda obj, ctx: Result(children=[child], children_complete=True))).reconcile(widget())
    assert match in got.error and not got.terminal
    assert got.children == [] and not got.children_complete


def test_observed_children_arrive_in_the_context() -> None:
    seen: list[str] = []

    def reconcile(obj: Object, ctx: polyop.Context) -> None:
        seen.extend(c.name for c in ctx.children_of("v1/ConfigMap"))

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "namespace": "ns"}}
    Harness(operator_with(reconcile)).reconcile(widget(), children=[cm, {**cm, "kind": "Secret"}])
    assert seen == ["c1"]


def test_a_deleted_object_gets_an_empty_answer() -> None:
    called = []
    h = Harness(operator_with(lambda obj, ctx: called.append(obj)))
    resp = h.servicer.reconcile(
        reconcile_pb2.ReconcileRequest(controller="widget", key=types_pb2.ObjectKey(namespace="ns", name="gone"))
    )
    assert resp == reconcile_pb2.ReconcileResponse() and called == []


@pytest.mark.parametrize(
    ("request_fields", "code", "match"),
    [
        pytest.param({"controller": "nope", "key": {"name": "w1"}}, grpc.StatusCode.NOT_FOUND, "no controller named 'nope'", id="an unknown controller"),
        pytest.param({"controller": "widget", "key": {}}, grpc.StatusCode.INVALID_ARGUMENT, "no object name", id="a request without a name"),
        pytest.param({"controller": "widget", "key": {"name": "w1", "namespace": "ns"}, "object": b"{"}, grpc.StatusCode.INVALID_ARGUMENT, "decoding", id="an object that does not decode"),
        pytest.param(
            {"controller": "widget", "key": {"name": "other", "namespace": "ns"}, "object": b'{"metadata":{"name":"w1","namespace":"ns"}}'},
            grpc.StatusCode.INVALID_ARGUMENT, "but the request is for ns/other", id="an object that is not the one named",
        ),
    ],
)
def test_refused_requests(request_fields: dict[str, Any], code: grpc.StatusCode, match: str) -> None:
    h = Harness(operator_with(lambda obj, ctx: None))
    with pytest.raises(RPCError, match=match) as err:
        h.servicer.reconcile(reconcile_pb2.ReconcileRequest(**request_fields))
    assert err.value.code == code


def test_the_object_gets_its_kind_when_the_json_has_none() -> None:
    kinds = []
    h = Harness(operator_with(lambda obj, ctx: kinds.append(obj.gvk)))
    h.servicer.reconcile(
        reconcile_pb2.ReconcileRequest(
            controller="widget", key=types_pb2.ObjectKey(name="w1"), object=b'{"metadata":{"name":"w1"}}'
        )
    )
    assert kinds == [polyop.GVK("example.com", "v1", "Widget")]


def test_finalize() -> None:
    op = polyop.Operator("w")
    calls: list[int] = []

    @op.reconciler(WIDGET, finalizer="example.com/cleanup")
    def reconcile(obj: Object, ctx: polyop.Context) -> None: ...

    @op.finalizer(WIDGET)
    def finalize(obj: Object, ctx: polyop.Context) -> Result | None:
        calls.append(1)
        ctx.event("CleaningUp", "waiting for the bucket")
        return Result(requeue_after=30) if len(calls) == 1 else None

    h = Harness(op)
    first = h.finalize(widget())
    assert first.requeue_after == 30 and [e.reason for e in first.events] == ["CleaningUp"]
    assert not h.finalize(widget()).response.HasField("requeue_after")


def test_finalize_errors() -> None:
    op = polyop.Operator("w")
    op.reconciler(WIDGET, finalizer="example.com/cleanup")(lambda obj, ctx: None)

    def finalize(obj: Object, ctx: polyop.Context) -> None:
        raise polyop.TerminalError("bucket is locked")

    op.finalizer(WIDGET)(finalize)
    got = Harness(op).finalize(widget())
    assert (got.error, got.terminal) == ("bucket is locked", True)


def test_default_returns_the_changed_object_only() -> None:
    op = polyop.Operator("w")

    @op.defaulter(WIDGET)
    def default(obj: Object, req: polyop.AdmissionRequest) -> list[str]:
        assert req.operation is polyop.Operation.CREATE
        obj.spec.setdefault("size", 1)
        return ["size defaulted"] if obj.spec["size"] == 1 else []

    h = Harness(op)
    got = h.default(widget())
    assert got.allowed and got.object is not None and got.object.spec == {"size": 1} and got.warnings == ["size defaulted"]
    assert h.default(widget(size=3)).object is None


def test_validate_allows_warns_and_denies() -> None:
    op = polyop.Operator("w")

    @op.validator(WIDGET)
    def validate(req: polyop.AdmissionRequest) -> list[str]:
        assert req.object is not None
        size = req.object.spec.get("size", 0)
        if size < 0:
            raise Denied("the widget is invalid", [FieldError.invalid("spec.size", size, "must not be negative")], warnings=["w"])
        if req.old_object is not None and req.old_object.spec.get("color") != req.object.spec.get("color"):
            raise Denied("spec.color is immutable", [FieldError.forbidden("spec.color", "immutable")])
        if req.operation is polyop.Operation.DELETE:
            raise Denied("widgets are forever")
        return ["big"] if size > 10 else []

    h = Harness(op)
    assert h.validate(widget(size=1)) == Admitted(allowed=True)
    assert h.validate(widget(size=11)).warnings == ["big"]
    denied = h.validate(widget(size=-1))
    assert (denied.allowed, denied.message, denied.warnings) == (False, "the widget is invalid", ["w"])
    assert denied.field_errors == [("spec.size", FieldErrorType.INVALID, "must not be negative")]
    changed = h.validate(widget(color="red"), old=widget(color="blue"))
    assert changed.field_errors == [("spec.color", FieldErrorType.FORBIDDEN, "immutable")]


def test_a_denial_may_carry_its_own_code_and_reason() -> None:
    op = polyop.Operator("w")

    @op.validator(WIDGET)
    def validate(req: polyop.AdmissionRequest) -> None:
        raise Denied("the port is taken by web-2", code=409)

    denied = Harness(op).validate(widget())
    assert (denied.allowed, denied.message, denied.code, denied.reason) == (False, "the port is taken by web-2", 409, "")
    assert Denied("x", code=409, reason="AlreadyExists").to_proto().reason == "AlreadyExists"
    assert Denied("x").to_proto().code == 0
    with pytest.raises(ValueError, match="want an HTTP error code"):
        Denied("fine", code=200)


def test_a_denial_carries_the_bad_value_as_json() -> None:
    proto = Denied("x", [FieldError.invalid("spec.size", -1, "neg"), FieldError.required("spec.name")]).to_proto()
    assert [e.bad_value for e in proto.field_errors] == [b"-1", b""]
    assert FieldError.not_supported("spec.tier", "gold", ["small", "large"]).detail == 'supported values: "small", "large"'


def test_a_failing_webhook_is_a_grpc_error_so_the_host_applies_its_failure_policy() -> None:
    op = polyop.Operator("w")
    @op.validator(WIDGET)
    def validate(req: polyop.AdmissionRequest) -> None:
        # A bug in the user's handler, on purpose.
        1 / 0  # noqa: B018
    with pytest.raises(RPCError, match="ZeroDivisionError") as err:
        Harness(op).validate(widget())
    assert err.value.code == grpc.StatusCode.INTERNAL


def test_a_webhook_that_is_not_registered_is_not_found() -> None:
    op = polyop.Operator("w")
    op.validator(WIDGET)(lambda req: None)
    with pytest.raises(RPCError, match="no default webhook") as err:
        Harness(op).default(widget())
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_convert() -> None:
    op = polyop.Operator("w")

    @op.converter("example.com", "Widget", ["v1", "v2"])
    def convert(obj: Object, api_version: str) -> Object:
        if api_version == "example.com/v2":
            obj["spec"] = {"replicas": obj.spec.pop("size")}
        obj["apiVersion"] = api_version
        return obj

    h = Harness(op)
    v2 = {**widget("already"), "apiVersion": "example.com/v2"}
    got = h.convert([widget(size=3), v2], "example.com/v2")
    assert [o.spec for o in got] == [{"replicas": 3}, {}]
    with pytest.raises(ValueError, match="converting object 0 to example.com/v2: KeyError"):
        h.convert([widget()], "example.com/v2")
    with pytest.raises(ValueError, match="converts no other.com/Widget"):
        h.convert([{**widget(), "apiVersion": "other.com/v1"}], "example.com/v2")
