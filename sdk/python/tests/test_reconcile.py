"""Reconcile, Finalize, Default, Validate and Convert, called in-process."""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import timedelta
from typing import Any

import grpc
import pytest

import polyop
from polyop import DeniedError, FieldError, FieldErrorType, Object, Result
from polyop._calls import Calls, run
from polyop._clients import Clients
from polyop.sidecar import ReconcileFunc
from polyop.testing import Admitted, Event, Harness, RPCError
from polyop.v1alpha1 import admission_pb2, reconcile_pb2, types_pb2

WIDGET = "example.com/v1/Widget"


def widget(name: str = "w1", **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "example.com/v1",
        "kind": "Widget",
        "metadata": {"name": name, "namespace": "ns", "generation": 2},
        "spec": spec,
    }


def sidecar_with(fn: ReconcileFunc, **kwargs: Any) -> polyop.Sidecar:
    sidecar = polyop.Sidecar("w")
    sidecar.reconciler(WIDGET, owns=["v1/ConfigMap"], **kwargs)(fn)
    return sidecar


def reconcile_request(sidecar: polyop.Sidecar, **fields: Any) -> reconcile_pb2.ReconcileResponse:
    """Send a ReconcileRequest as the host would, field by field."""
    inv = Calls(sidecar, Clients()).reconcile(reconcile_pb2.ReconcileRequest(**fields))
    return inv if isinstance(inv, reconcile_pb2.ReconcileResponse) else run(inv, None)


def test_the_status_events_and_requeue_go_back() -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> Result:
        assert ctx.request == polyop.Request("widget", polyop.GVK("example.com", "v1", "Widget"), "ns", "w1", retries=3)
        obj.status["observedGeneration"] = obj.meta.generation
        ctx.event("Normal", "Scaled", "to 3")
        ctx.event("Warning", "Slow", "took long", action="Scaling")
        return Result(requeue_after=timedelta(minutes=10))

    got = Harness(sidecar_with(reconcile)).reconcile(widget(), retries=3)

    assert got.error == ""
    assert got.status == {"observedGeneration": 2}
    assert got.events == [Event("Normal", "Scaled", "to 3"), Event("Warning", "Slow", "took long", "Scaling")]
    assert got.requeue_after == 600
    assert not got.response.HasField("error")


def test_no_result_and_no_status_leave_everything_as_it_is() -> None:
    got = Harness(sidecar_with(lambda obj, ctx: None)).reconcile(widget())
    assert got.response == reconcile_pb2.ReconcileResponse()


def test_requeue_after_takes_float_seconds() -> None:
    got = Harness(sidecar_with(lambda obj, ctx: Result(requeue_after=1.5))).reconcile(widget())
    assert got.requeue_after == 1.5


def test_result_has_no_requeue_as_controller_runtime_keeps_only_requeue_after() -> None:
    with pytest.raises(TypeError):
        Result(requeue=True)  # type: ignore[call-arg]
    assert "requeue" not in reconcile_pb2.ReconcileResponse.DESCRIPTOR.fields_by_name


def test_an_event_takes_type_reason_message_in_that_order() -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> None:
        ctx.event("Scaled", "to 3", "by the autoscaler")  # type: ignore[arg-type]

    got = Harness(sidecar_with(reconcile)).reconcile(widget())
    assert "event type 'Scaled': want 'Normal' or 'Warning'" in got.error and got.events == []


def test_a_temporary_error_says_when_to_retry() -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> None:
        obj.status["phase"] = "Waiting"
        raise polyop.TemporaryError("the bucket is still being created", retry_after=timedelta(seconds=30))

    got = Harness(sidecar_with(reconcile)).reconcile(widget())
    assert (got.error, got.terminal, got.retry_after, got.requeue_after) == ("the bucket is still being created", False, 30, 0)
    assert got.status == {"phase": "Waiting"}
    assert polyop.TemporaryError("x", 0.25).retry_after == 0.25
    with pytest.raises(ValueError, match="positive"):
        polyop.TemporaryError("x", retry_after=0)


def test_a_terminal_error_is_reported_with_the_status() -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> None:
        polyop.set_condition(obj.conditions, polyop.READY, False, "InvalidSpec", "size < 0")
        ctx.event("Warning", "InvalidSpec", "size < 0")
        raise polyop.TerminalError("size must not be negative")

    got = Harness(sidecar_with(reconcile)).reconcile(widget())

    assert (got.error, got.terminal, got.retry_after) == ("size must not be negative", True, 0)
    assert got.status is not None and got.status["conditions"][0]["reason"] == "InvalidSpec"
    assert [e.reason for e in got.events] == ["InvalidSpec"]


def test_any_other_exception_is_retried_and_logged_at_debug_level_only(caplog: pytest.LogCaptureFixture) -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> None:
        obj.status["phase"] = "Failing"
        raise KeyError("spec")

    with caplog.at_level(logging.DEBUG, logger="polyop"):
        got = Harness(sidecar_with(reconcile)).reconcile(widget())

    assert (got.error, got.terminal) == ("KeyError: 'spec'", False)
    assert got.status == {"phase": "Failing"}
    assert "Reconciler error" in caplog.text and "controller=widget" in caplog.text and "name=w1" in caplog.text
    # The host logs the error; the sidecar only at debug level, with the traceback.
    errors = [r for r in caplog.records if "Reconciler error" in r.getMessage()]
    assert [r.levelno for r in errors] == [logging.DEBUG] and errors[0].exc_info is not None


def test_a_result_of_another_type_is_an_error() -> None:
    got = Harness(sidecar_with(lambda obj, ctx: 5)).reconcile(widget())  # type: ignore[arg-type]
    assert "not a polyop.Result" in got.error


def test_desired_children_go_back_with_children_complete() -> None:
    def reconcile(obj: Object, ctx: polyop.Context) -> Result:
        cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": obj.name}, "data": {"size": str(obj.spec["size"])}}
        return Result(desired_children=[cm], children_complete=True)

    got = Harness(sidecar_with(reconcile)).reconcile(widget(size=3))

    assert got.desired_children == [{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "w1"}, "data": {"size": "3"}}]
    assert got.children_complete


@pytest.mark.parametrize(
    ("child", "match"),
    [
        pytest.param({"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "x"}}, "not a kind controller 'widget' owns", id="a kind not owned"),
        pytest.param({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}, "metadata.name", id="a child without a name"),
    ],
)
def test_invalid_children_are_an_error_and_none_is_sent(child: dict[str, Any], match: str) -> None:
    got = Harness(sidecar_with(lambda obj, ctx: Result(desired_children=[child], children_complete=True))).reconcile(widget())
    assert match in got.error and not got.terminal
    assert got.desired_children == [] and not got.children_complete


def test_observed_children_arrive_in_the_context() -> None:
    seen: list[list[str]] = []

    def reconcile(obj: Object, ctx: polyop.Context) -> None:
        seen.append([c.name for c in ctx.observed_children("v1/ConfigMap")])
        seen.append([c.kind for c in ctx.observed_children()])

    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "namespace": "ns"}}
    Harness(sidecar_with(reconcile)).reconcile(widget(), observed_children=[cm, {**cm, "kind": "Secret"}])
    assert seen == [["c1"], ["ConfigMap", "Secret"]]


def test_a_gone_object_without_a_deleted_function_gets_an_empty_answer() -> None:
    called = []
    sidecar = sidecar_with(lambda obj, ctx: called.append(obj))
    resp = reconcile_request(sidecar, controller="widget", key=types_pb2.ObjectKey(namespace="ns", name="gone"))
    assert resp == reconcile_pb2.ReconcileResponse() and called == []
    assert Harness(sidecar).reconcile_deleted(WIDGET, "gone", "ns").response == reconcile_pb2.ReconcileResponse()


def test_a_gone_object_is_handed_to_the_deleted_function() -> None:
    sidecar = polyop.Sidecar("w")
    gone: list[polyop.Request] = []

    @sidecar.reconciler(WIDGET)
    def reconcile(obj: Object, ctx: polyop.Context) -> None:
        raise AssertionError("not for a gone object")

    @sidecar.deleted(WIDGET)
    def forget(request: polyop.Request, ctx: polyop.Context) -> Result | None:
        gone.append(request)
        if request.name == "locked":
            raise polyop.TemporaryError("the external record is locked", retry_after=5)
        return Result(requeue_after=60) if request.name == "later" else None

    h = Harness(sidecar)
    assert h.reconcile_deleted(WIDGET, "w1", "ns", retries=2).response == reconcile_pb2.ReconcileResponse()
    assert gone == [polyop.Request("widget", polyop.GVK("example.com", "v1", "Widget"), "ns", "w1", retries=2)]
    assert h.reconcile_deleted(WIDGET, "later", "ns").requeue_after == 60
    locked = h.reconcile_deleted(WIDGET, "locked", "ns")
    assert (locked.error, locked.retry_after) == ("the external record is locked", 5)


def test_a_deleted_function_declares_no_children() -> None:
    sidecar = sidecar_with(lambda obj, ctx: None)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    sidecar.deleted(WIDGET)(lambda request, ctx: Result(desired_children=[cm]))
    assert "declares no desired_children" in Harness(sidecar).reconcile_deleted(WIDGET, "w1", "ns").error


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
    with pytest.raises(RPCError, match=match) as err:
        reconcile_request(sidecar_with(lambda obj, ctx: None), **request_fields)
    assert err.value.code == code


def test_the_object_gets_its_kind_when_the_json_has_none() -> None:
    kinds = []
    reconcile_request(
        sidecar_with(lambda obj, ctx: kinds.append(obj.gvk)),
        controller="widget", key=types_pb2.ObjectKey(name="w1"), object=b'{"metadata":{"name":"w1"}}',
    )
    assert kinds == [polyop.GVK("example.com", "v1", "Widget")]


def test_finalize() -> None:
    sidecar = polyop.Sidecar("w")
    calls: list[int] = []

    @sidecar.reconciler(WIDGET, finalizer="example.com/cleanup")
    def reconcile(obj: Object, ctx: polyop.Context) -> None: ...

    @sidecar.finalizer(WIDGET)
    def finalize(obj: Object, ctx: polyop.Context) -> Result | None:
        calls.append(1)
        ctx.event("Normal", "CleaningUp", "waiting for the bucket")
        return Result(requeue_after=30) if len(calls) == 1 else None

    h = Harness(sidecar)
    first = h.finalize(widget())
    assert first.requeue_after == 30 and [e.reason for e in first.events] == ["CleaningUp"]
    assert not h.finalize(widget()).response.HasField("requeue_after")


def test_finalize_errors() -> None:
    sidecar = polyop.Sidecar("w")
    sidecar.reconciler(WIDGET, finalizer="example.com/cleanup")(lambda obj, ctx: None)

    def finalize(obj: Object, ctx: polyop.Context) -> None:
        raise polyop.TerminalError("bucket is locked")

    sidecar.finalizer(WIDGET)(finalize)
    got = Harness(sidecar).finalize(widget())
    assert (got.error, got.terminal) == ("bucket is locked", True)


def test_a_finalizer_declares_no_children() -> None:
    sidecar = polyop.Sidecar("w")
    sidecar.reconciler(WIDGET, owns=["v1/ConfigMap"], finalizer="example.com/cleanup")(lambda obj, ctx: None)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    sidecar.finalizer(WIDGET)(lambda obj, ctx: Result(desired_children=[cm]))
    assert "declares no desired_children" in Harness(sidecar).finalize(widget()).error


def test_calls_the_sidecar_declares_nothing_for_are_not_found_naming_what_is_missing() -> None:
    sidecar = polyop.Sidecar("w")
    sidecar.reconciler(WIDGET, finalizer="example.com/cleanup")(lambda obj, ctx: None)
    sidecar.finalizer(WIDGET)(lambda obj, ctx: None)
    sidecar.reconciler("example.com/v1/Gadget")(lambda obj, ctx: None)
    sidecar.validator(WIDGET)(lambda obj, req: None)
    sidecar.converter(WIDGET, ["v1", "v2"])(lambda obj, v: obj)
    h = Harness(sidecar)
    gadget = {**widget(), "kind": "Gadget"}

    cases: list[tuple[Callable[[], object], grpc.StatusCode, str]] = [
        (lambda: h.finalize(gadget), grpc.StatusCode.NOT_FOUND, "controller 'gadget' declares no finalizer"),
        (lambda: h.default(widget()), grpc.StatusCode.UNIMPLEMENTED, "sidecar 'w' declares no default webhook"),
        (lambda: h.validate(gadget), grpc.StatusCode.NOT_FOUND, "declares no validate webhook for example.com/v1/Gadget"),
        (lambda: h.convert([gadget], "example.com/v2"), grpc.StatusCode.NOT_FOUND, "declares no conversion for Gadget.example.com"),
    ]
    for call, code, message in cases:
        with pytest.raises(RPCError) as err:
            call()
        assert (err.value.code, message in err.value.message) == (code, True), err.value.message

    bare = polyop.Sidecar("bare")
    bare.reconciler(WIDGET)(lambda obj, ctx: None)
    unimplemented: list[tuple[Callable[[], object], str]] = [
        (lambda: Harness(bare).finalize(widget()), "declares no finalizer"),
        (lambda: Harness(bare).validate(widget()), "declares no validate webhook"),
        (lambda: Harness(bare).convert([widget()], "example.com/v2"), "declares no conversion"),
    ]
    for call, what in unimplemented:
        with pytest.raises(RPCError, match=what) as err:
            call()
        assert err.value.code == grpc.StatusCode.UNIMPLEMENTED


def test_default_returns_the_changed_object_only() -> None:
    sidecar = polyop.Sidecar("w")

    @sidecar.defaulter(WIDGET)
    def default(obj: Object, req: polyop.AdmissionRequest) -> list[str]:
        assert req.operation is polyop.Operation.CREATE
        obj.spec.setdefault("size", 1)
        return ["size defaulted"] if obj.spec["size"] == 1 else []

    h = Harness(sidecar)
    got = h.default(widget())
    assert got.allowed and got.object is not None and got.object.spec == {"size": 1} and got.warnings == ["size defaulted"]
    assert h.default(widget(size=3)).object is None


def test_default_works_on_a_fresh_decoding_not_a_deep_copy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The defaulter's object is decoded again from the request's bytes,
    five times as fast as copy.deepcopy of the decoded one; the request's
    object stays as the API server sent it."""
    sidecar = polyop.Sidecar("w")
    seen: list[polyop.AdmissionRequest] = []

    @sidecar.defaulter(WIDGET)
    def default(obj: Object, req: polyop.AdmissionRequest) -> None:
        obj.spec["labels"] = {"a": "b"}
        seen.append(req)

    def refused(*_: Any, **__: Any) -> Any:
        raise AssertionError("copy.deepcopy was used")

    monkeypatch.setattr("copy.deepcopy", refused)
    got = Harness(sidecar).default(widget(size=3))
    assert got.object is not None and got.object.spec == {"size": 3, "labels": {"a": "b"}}
    assert seen[0].object is not None and seen[0].object.spec == {"size": 3}


def test_validate_allows_warns_and_denies() -> None:
    sidecar = polyop.Sidecar("w")

    @sidecar.validator(WIDGET)
    def validate(obj: polyop.Object, req: polyop.AdmissionRequest) -> list[str]:
        if req.operation is polyop.Operation.DELETE:
            raise DeniedError("widgets are forever")
        size = obj.spec.get("size", 0)
        if size < 0:
            raise DeniedError("the widget is invalid", [FieldError.invalid("spec.size", size, "must not be negative")], warnings=["w"])
        if req.old_object is not None and req.old_object.spec.get("color") != obj.spec.get("color"):
            raise DeniedError("spec.color is immutable", [FieldError.forbidden("spec.color", "immutable")])
        return ["big"] if size > 10 else []

    h = Harness(sidecar)
    assert h.validate(widget(size=1)) == Admitted(allowed=True)
    assert h.validate(widget(size=11)).warnings == ["big"]
    denied = h.validate(widget(size=-1))
    assert (denied.allowed, denied.message, denied.warnings) == (False, "the widget is invalid", ["w"])
    assert denied.field_errors == [("spec.size", FieldErrorType.INVALID, "must not be negative")]
    changed = h.validate(widget(color="red"), old=widget(color="blue"))
    assert changed.field_errors == [("spec.color", FieldErrorType.FORBIDDEN, "immutable")]
    gone = h.validate(widget(), operation=polyop.Operation.DELETE)
    assert (gone.allowed, gone.message) == (False, "widgets are forever")


def test_an_admission_call_can_set_operation_old_dry_run_subresource_and_user() -> None:
    sidecar = polyop.Sidecar("w")
    seen: list[polyop.AdmissionRequest] = []
    sidecar.validator(WIDGET)(lambda obj, req: seen.append(req))

    h = Harness(sidecar)
    h.validate(widget(), old=widget(size=1), operation=polyop.Operation.UPDATE, dry_run=True, subresource="status",
               user=polyop.UserInfo(username="alice", groups=("system:authenticated", "team-a")))
    h.validate(widget(), user="bob")
    h.validate(widget(), operation=polyop.Operation.DELETE)

    update, create, delete = seen
    assert (update.operation, update.dry_run, update.subresource) == (polyop.Operation.UPDATE, True, "status")
    assert update.old_object is not None and update.old_object.spec == {"size": 1}
    assert (update.user.username, update.user.groups) == ("alice", ("system:authenticated", "team-a"))
    assert (create.operation, create.dry_run, create.subresource, create.user.username, create.old_object) == (
        polyop.Operation.CREATE, False, "", "bob", None,
    )
    # On delete the API server sends the object being deleted as the old object, and no object.
    assert (delete.object, delete.old_object) == (None, widget())


def test_the_subresource_travels_as_the_contract_names_it() -> None:
    request = admission_pb2.AdmissionRequest(
        kind=polyop.GVK("example.com", "v1", "Widget").to_proto(), operation=admission_pb2.OPERATION_UPDATE, subresource="status"
    )
    assert polyop.AdmissionRequest.from_proto(request).subresource == "status"


def test_a_denial_may_carry_its_own_code_and_reason() -> None:
    sidecar = polyop.Sidecar("w")

    @sidecar.validator(WIDGET)
    def validate(obj: polyop.Object, req: polyop.AdmissionRequest) -> None:
        raise DeniedError("the port is taken by web-2", code=409)

    denied = Harness(sidecar).validate(widget())
    assert (denied.allowed, denied.message, denied.code, denied.reason) == (False, "the port is taken by web-2", 409, "")
    assert DeniedError("x", code=409, reason="AlreadyExists").to_proto().reason == "AlreadyExists"
    assert DeniedError("x").to_proto().code == 0
    with pytest.raises(ValueError, match="want an HTTP error code"):
        DeniedError("fine", code=200)


def test_a_denial_carries_the_bad_value_as_json() -> None:
    proto = DeniedError("x", [FieldError.invalid("spec.size", -1, "neg"), FieldError.required("spec.name")]).to_proto()
    assert [e.bad_value for e in proto.field_errors] == [b"-1", b""]
    assert FieldError.not_supported("spec.tier", "gold", ["small", "large"]).detail == 'supported values: "small", "large"'


def test_a_failing_webhook_is_a_grpc_error_so_the_host_applies_its_failure_policy() -> None:
    sidecar = polyop.Sidecar("w")
    @sidecar.validator(WIDGET)
    def validate(obj: polyop.Object, req: polyop.AdmissionRequest) -> None:
        # A bug in the user's handler, on purpose.
        1 / 0  # noqa: B018
    with pytest.raises(RPCError, match="ZeroDivisionError") as err:
        Harness(sidecar).validate(widget())
    assert err.value.code == grpc.StatusCode.INTERNAL


def test_a_webhook_that_is_not_registered_is_not_found() -> None:
    sidecar = polyop.Sidecar("w")
    sidecar.validator(WIDGET)(lambda obj, req: None)
    sidecar.validator("example.com/v2/Widget")(lambda obj, req: None)
    sidecar.defaulter("example.com/v2/Widget")(lambda obj, req: None)
    with pytest.raises(RPCError, match="declares no default webhook for example.com/v1/Widget") as err:
        Harness(sidecar).default(widget())
    assert err.value.code == grpc.StatusCode.NOT_FOUND


def test_convert() -> None:
    sidecar = polyop.Sidecar("w")

    @sidecar.converter(WIDGET, ["v1", "v2"])
    def convert(obj: Object, api_version: str) -> Object:
        if api_version == "example.com/v2":
            obj["spec"] = {"replicas": obj.spec.pop("size")}
        obj["apiVersion"] = api_version
        return obj

    h = Harness(sidecar)
    v2 = {**widget("already"), "apiVersion": "example.com/v2"}
    got = h.convert([widget(size=3), v2], "example.com/v2")
    assert [o.spec for o in got] == [{"replicas": 3}, {}]
    with pytest.raises(ValueError, match="converting object 0 to example.com/v2: KeyError"):
        h.convert([widget()], "example.com/v2")
    with pytest.raises(RPCError, match="declares no conversion for Widget.other.com") as err:
        h.convert([{**widget(), "apiVersion": "other.com/v1"}], "example.com/v2")
    assert err.value.code == grpc.StatusCode.NOT_FOUND
