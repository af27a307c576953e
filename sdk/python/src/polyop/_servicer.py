"""The SidecarService: the host's calls, dispatched to the registered functions.

Each call is handled by a plain method taking the request and returning the
response, raising :class:`RPCError` for the calls the sidecar refuses (an
unknown controller, an object that does not decode); the gRPC methods turn
that into a gRPC status. Errors of the user's functions are not gRPC errors
where the contract has a place for them: a reconcile's error travels in the
response, so that the host still writes the status and records the events.
"""

from __future__ import annotations

import copy
import logging
from collections.abc import Callable, Mapping, MutableMapping, Sequence
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from polyop.admission import AdmissionRequest, Denied
from polyop.errors import TerminalError
from polyop.objects import GVK, Object, encode
from polyop.operator import PROTOCOL_VERSION, Operator, _Controller
from polyop.reconcile import Context, Request, Result
from polyop.v1alpha1 import (
    admission_pb2,
    describe_pb2,
    reconcile_pb2,
    sidecar_pb2_grpc,
)

_Req = TypeVar("_Req")
_Resp = TypeVar("_Resp")


class RPCError(Exception):
    """A call the sidecar refuses, answered with a gRPC status."""

    def __init__(self, code: grpc.StatusCode, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


if TYPE_CHECKING:
    _LoggerAdapter = logging.LoggerAdapter[logging.Logger]
else:  # LoggerAdapter is generic at run time from Python 3.11 on.
    _LoggerAdapter = logging.LoggerAdapter


class ObjectLog(_LoggerAdapter):
    """A logger whose records name the controller and the object at the end of
    the message, and as a dict in the record's ``polyop`` attribute."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        fields = self.extra or {}
        kwargs["extra"] = {"polyop": dict(fields), **kwargs.get("extra", {})}
        return f"{msg} " + " ".join(f"{k}={v}" for k, v in fields.items() if v != ""), kwargs


class Servicer(sidecar_pb2_grpc.SidecarServiceServicer):
    """polyop.v1alpha1.SidecarService for an Operator's registrations."""

    def __init__(self, op: Operator) -> None:
        self.op = op
        self.log = op.log

    # gRPC methods.

    def Describe(self, request: describe_pb2.DescribeRequest, context: grpc.ServicerContext) -> describe_pb2.DescribeResponse:
        return _serve(context, self.describe, request)

    def Reconcile(self, request: reconcile_pb2.ReconcileRequest, context: grpc.ServicerContext) -> reconcile_pb2.ReconcileResponse:
        return _serve(context, self.reconcile, request)

    def Finalize(self, request: reconcile_pb2.FinalizeRequest, context: grpc.ServicerContext) -> reconcile_pb2.FinalizeResponse:
        return _serve(context, self.finalize, request)

    def Default(self, request: admission_pb2.DefaultRequest, context: grpc.ServicerContext) -> admission_pb2.DefaultResponse:
        return _serve(context, self.default, request)

    def Validate(self, request: admission_pb2.ValidateRequest, context: grpc.ServicerContext) -> admission_pb2.ValidateResponse:
        return _serve(context, self.validate, request)

    def Convert(self, request: admission_pb2.ConvertRequest, context: grpc.ServicerContext) -> admission_pb2.ConvertResponse:
        return _serve(context, self.convert, request)

    # Handlers.

    def describe(self, req: describe_pb2.DescribeRequest) -> describe_pb2.DescribeResponse:
        if req.protocol_version != PROTOCOL_VERSION:
            self.log.warning(
                "The host speaks protocol %r, this sidecar %r; answering anyway, the host decides",
                req.protocol_version, PROTOCOL_VERSION,
            )
        self.op._described_to(req.cluster_address)
        return self.op.describe()

    def reconcile(self, req: reconcile_pb2.ReconcileRequest) -> reconcile_pb2.ReconcileResponse:
        c, request, log = self._controller(req.controller, req.kind, req.key.namespace, req.key.name, req.retries)
        if not req.object:
            log.debug("The object is gone; nothing to do")
            return reconcile_pb2.ReconcileResponse()
        obj = self._object(c, request, req.object)
        try:
            children = [Object.from_json(child) for child in req.children]
        except ValueError as err:
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"controller {c.description.name!r}: decoding a child: {err}") from err
        ctx = Context(request, children, log, self.op.cluster)
        resp = reconcile_pb2.ReconcileResponse()
        result = _call(log, "Reconciler error", lambda: c.reconcile(obj, ctx), resp.error)
        if result is not None:
            _decide(result, resp.requeue_after, resp)
            if result.children is not None:
                try:
                    resp.desired_children.extend(_children(c, result.children))
                    resp.children_complete = result.children_complete
                except ValueError as err:
                    log.error("Invalid desired children: %s", err)
                    resp.error.message = f"invalid desired children: {err}"
        status = obj.get("status")
        if isinstance(status, dict) and status:
            resp.status = encode(status)
        resp.events.extend(ctx.events)
        return resp

    def finalize(self, req: reconcile_pb2.FinalizeRequest) -> reconcile_pb2.FinalizeResponse:
        c, request, log = self._controller(req.controller, req.kind, req.key.namespace, req.key.name, req.retries)
        if c.finalize is None:
            raise RPCError(grpc.StatusCode.UNIMPLEMENTED, f"controller {c.description.name!r} has no finalizer")
        obj = self._object(c, request, req.object)
        ctx = Context(request, (), log, self.op.cluster)
        resp = reconcile_pb2.FinalizeResponse()
        finalize = c.finalize
        result = _call(log, "Finalizer error", lambda: finalize(obj, ctx), resp.error)
        if result is not None:
            _decide(result, resp.requeue_after, None)
        resp.events.extend(ctx.events)
        return resp

    def default(self, req: admission_pb2.DefaultRequest) -> admission_pb2.DefaultResponse:
        webhook, areq = self._admission(req.request, "default")
        if areq.object is None:
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"defaulting {areq.kind}: the request carries no object")
        assert webhook.default is not None
        obj = copy.deepcopy(areq.object)
        try:
            warnings = webhook.default(obj, areq)
        except Denied as denied:
            return admission_pb2.DefaultResponse(denied=denied.to_proto(), warnings=denied.warnings)
        except Exception as err:
            raise self._failed("defaulting", areq, err) from err
        resp = admission_pb2.DefaultResponse(warnings=list(warnings or ()))
        if obj != areq.object:
            resp.object = encode(obj)
        return resp

    def validate(self, req: admission_pb2.ValidateRequest) -> admission_pb2.ValidateResponse:
        webhook, areq = self._admission(req.request, "validate")
        assert webhook.validate is not None
        try:
            warnings = webhook.validate(areq)
        except Denied as denied:
            return admission_pb2.ValidateResponse(denied=denied.to_proto(), warnings=denied.warnings)
        except Exception as err:
            raise self._failed("validating", areq, err) from err
        return admission_pb2.ValidateResponse(warnings=list(warnings or ()))

    def convert(self, req: admission_pb2.ConvertRequest) -> admission_pb2.ConvertResponse:
        desired = req.desired_api_version
        converted: list[bytes] = []
        for i, data in enumerate(req.objects):
            try:
                obj = Object.from_json(data)
                if obj.api_version != desired:
                    obj = self._convert(obj, desired)
            except Exception as err:
                self.log.exception("Converting object %d to %s failed", i, desired)
                return admission_pb2.ConvertResponse(error=f"converting object {i} to {desired}: {_message(err)}")
            converted.append(encode(obj))
        return admission_pb2.ConvertResponse(objects=converted)

    # Plumbing.

    def _controller(
        self, name: str, kind: Any, namespace: str, obj_name: str, retries: int
    ) -> tuple[_Controller, Request, ObjectLog]:
        c = self.op._controllers.get(name)
        if c is None:
            raise RPCError(
                grpc.StatusCode.NOT_FOUND,
                f"sidecar {self.op.name!r} has no controller named {name!r}; it has {list(self.op._controllers)}",
            )
        if not obj_name:
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"controller {name!r}: the request has no object name")
        gvk = GVK.from_proto(kind) if kind.kind else c.kind
        request = Request(controller=name, kind=gvk, namespace=namespace, name=obj_name, retries=retries)
        fields = {"controller": name, "kind": gvk.kind, "namespace": namespace, "name": obj_name}
        if retries:
            fields["retries"] = str(retries)
        return c, request, ObjectLog(self.log, fields)

    def _object(self, c: _Controller, request: Request, data: bytes) -> Object:
        try:
            obj = Object.from_json(data)
        except ValueError as err:
            raise RPCError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"controller {request.controller!r}: decoding {request.kind.kind} {request.namespace}/{request.name}: {err}",
            ) from err
        if obj.name != request.name or obj.namespace != request.namespace:
            raise RPCError(
                grpc.StatusCode.INVALID_ARGUMENT,
                f"controller {request.controller!r}: the object is {obj.namespace}/{obj.name}, "
                f"but the request is for {request.namespace}/{request.name}",
            )
        if not obj.api_version or not obj.kind:
            obj["apiVersion"], obj["kind"] = c.kind.api_version, c.kind.kind
        return obj

    def _admission(self, req: admission_pb2.AdmissionRequest, call: str) -> tuple[Any, AdmissionRequest]:
        gvk = GVK.from_proto(req.kind)
        webhook = self.op._webhooks.get(gvk)
        if webhook is None or getattr(webhook, call) is None:
            raise RPCError(grpc.StatusCode.NOT_FOUND, f"sidecar {self.op.name!r} has no {call} webhook for {gvk}")
        try:
            return webhook, AdmissionRequest.from_proto(req)
        except ValueError as err:
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"{call} {gvk}: {err}") from err

    def _failed(self, what: str, req: AdmissionRequest, err: Exception) -> RPCError:
        self.log.exception("%s %s %s/%s failed", what.capitalize(), req.kind.kind, req.namespace, req.name)
        return RPCError(grpc.StatusCode.INTERNAL, f"{what} {req.kind.kind} {req.namespace}/{req.name}: {_message(err)}")

    def _convert(self, obj: Object, desired: str) -> Object:
        converter = self.op._converters.get((obj.gvk.group, obj.kind))
        if converter is None:
            raise ValueError(f"sidecar {self.op.name!r} converts no {obj.gvk.group}/{obj.kind}")
        out = Object(converter.convert(obj, desired))
        if out.api_version != desired:
            raise ValueError(f"the converter returned apiVersion {out.api_version!r}")
        return out


def _serve(context: grpc.ServicerContext, handler: Callable[[_Req], _Resp], request: _Req) -> _Resp:
    try:
        return handler(request)
    except RPCError as err:
        context.abort(err.code, err.message)
        raise  # abort raises; this keeps type checkers informed


def _call(
    log: logging.LoggerAdapter[logging.Logger],
    what: str,
    fn: Callable[[], Result | None],
    error: reconcile_pb2.ReconcileError,
) -> Result | None:
    """Call a reconcile or finalize function; an exception becomes the response's error.

    The host logs the error it receives; the sidecar logs it (with its traceback) at debug level only, so that it is not
    shown twice.
    """
    try:
        result = fn()
    except TerminalError as err:
        log.debug("%s (terminal): %s", what, err)
        error.message, error.terminal = str(err) or type(err).__name__, True
        return None
    except Exception as err:
        log.debug(what, exc_info=True)
        error.message = _message(err)
        return None
    if result is not None and not isinstance(result, Result):
        log.debug("%s: returned %r, not a polyop.Result or None", what, result)
        error.message = f"the function returned a {type(result).__name__}, not a polyop.Result or None"
        return None
    return result


def _decide(result: Result, requeue_after: Any, resp: reconcile_pb2.ReconcileResponse | None) -> None:
    seconds = result.requeue_after_seconds
    if seconds > 0:
        requeue_after.FromNanoseconds(int(seconds * 1e9))
    if resp is not None:
        resp.requeue = result.requeue


def _children(c: _Controller, children: Sequence[Mapping[str, Any]]) -> list[bytes]:
    out = []
    for child in children:
        obj = Object(child)
        if not obj.api_version or not obj.kind or not obj.name:
            raise ValueError("every child needs apiVersion, kind and metadata.name")
        if obj.gvk not in c.owns:
            raise ValueError(f"{obj.gvk} is not a kind controller {c.description.name!r} owns (owns={sorted(map(str, c.owns))})")
        out.append(encode(child))
    return out


def _message(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__
