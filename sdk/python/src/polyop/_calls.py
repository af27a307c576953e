"""The SidecarService's calls, up to the user's function, for both servers.

:class:`Calls` turns each request into an :class:`Invocation` (the user's
function, its arguments, and how its outcome becomes the response), raising
:class:`RPCError` for the calls the sidecar refuses (an unknown controller, a
call it declared nothing for, an object that does not decode). Two runners
call the function: :func:`run` on the calling thread, :func:`run_async` on the
event loop for ``async def`` functions and on a thread pool for the others.
Errors of the user's functions are not gRPC errors where the contract has a
place for them: a reconcile's error travels in the response, so that the host
still writes the status and records the events.
"""

from __future__ import annotations

import asyncio
import contextvars
import logging
from collections.abc import Callable, MutableMapping, Sequence
from concurrent import futures
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Generic, TypeVar

import grpc

from polyop import _tracing
from polyop._clients import Clients
from polyop._kinds import to_mapping
from polyop._registry import (
    PROTOCOL_VERSION,
    Controller,
    Converter,
    Registry,
    Webhook,
    is_async,
)
from polyop.admission import AdmissionRequest, DeniedError
from polyop.cluster import AsyncCluster, Cluster
from polyop.errors import TemporaryError, TerminalError
from polyop.objects import GVK, Object, encode
from polyop.reconcile import AsyncContext, Context, Request, Result, _CallContext
from polyop.v1alpha1 import admission_pb2, describe_pb2, reconcile_pb2

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
    the message, and as a dict in the record's ``polyop`` attribute: the keys
    ``controller``, ``kind``, ``namespace``, ``name`` (and ``retries``) the
    host's log lines use too, and inside a traced call ``reconcileID`` (when
    the host sent it) and the ``trace_id`` and ``span_id`` (hex) of the span
    current when the line is logged."""

    def process(self, msg: Any, kwargs: MutableMapping[str, Any]) -> tuple[Any, MutableMapping[str, Any]]:
        fields = {**(self.extra or {}), **_tracing.log_fields()}
        kwargs["extra"] = {"polyop": fields, **kwargs.get("extra", {})}
        return f"{msg} " + " ".join(f"{k}={v}" for k, v in fields.items() if v != ""), kwargs


@dataclass
class CallInfo:
    """What a reconcile, finalize or deleted function's context is made of."""

    request: Request
    observed_children: Sequence[Object]
    log: ObjectLog
    deadline: float | None


@dataclass
class Invocation(Generic[_Resp]):
    """One call of a user's function: ``fn(*args)``, with the context made
    from ``call`` appended when set; ``finish(value, error, ctx)`` makes the
    response from what it returned or raised."""

    fn: Callable[..., Any]
    args: tuple[Any, ...]
    call: CallInfo | None
    finish: Callable[[Any, Exception | None, _CallContext | None], _Resp]


ClusterSource = Callable[[], Cluster | None]
AsyncClusterSource = Callable[[], AsyncCluster | None]


def run(inv: Invocation[_Resp], cluster: Cluster | None) -> _Resp:
    """Call a plain function on this thread."""
    ctx = None
    if inv.call is not None:
        c = inv.call
        ctx = Context(c.request, c.observed_children, c.log, cluster, deadline=c.deadline)
    try:
        value = inv.fn(*inv.args, ctx) if ctx is not None else inv.fn(*inv.args)
    except Exception as err:
        return inv.finish(None, err, ctx)
    return inv.finish(value, None, ctx)


async def run_async(
    inv: Invocation[_Resp],
    cluster: ClusterSource,
    async_cluster: AsyncClusterSource,
    executor: futures.Executor | None,
) -> _Resp:
    """Await an ``async def`` function on the running loop, or run a plain one
    on the executor, so that it does not block the loop. Cancellation
    (``asyncio.CancelledError``) reaches the awaited function and is not
    caught.

    A plain function cannot be interrupted: when the call is cancelled, it
    goes on until it returns, and the cancellation is raised only then. The
    call ends when the function does, never before, so that the host, which
    holds the object until the call's answer, sends no other call for the
    object while this one still runs. A plain function that has not started
    when the call is cancelled never starts."""
    if not is_async(inv.fn):
        return await _run_in_thread(inv, cluster, executor)
    ctx = None
    if inv.call is not None:
        c = inv.call
        ctx = AsyncContext(c.request, c.observed_children, c.log, async_cluster(), deadline=c.deadline)
    try:
        value = await (inv.fn(*inv.args, ctx) if ctx is not None else inv.fn(*inv.args))
    except Exception as err:
        return inv.finish(None, err, ctx)
    return inv.finish(value, None, ctx)


async def _run_in_thread(inv: Invocation[_Resp], cluster: ClusterSource, executor: futures.Executor | None) -> _Resp:
    """:func:`run` on the executor; see :func:`run_async`."""
    # In the context of the call (its span), which run_in_executor does not pass on.
    call_context = contextvars.copy_context()
    cancelled = False

    def call() -> _Resp:
        if cancelled:
            raise asyncio.CancelledError  # the call was cancelled before the function started
        return call_context.run(run, inv, cluster())

    running = asyncio.get_running_loop().run_in_executor(executor, call)
    try:
        return await asyncio.shield(running)
    except asyncio.CancelledError:
        cancelled = True
        await _returned(running)
        raise


async def _returned(running: asyncio.Future[Any]) -> None:
    """Wait until the function a thread runs has returned, whatever else
    cancels the wait meanwhile: the caller raises the cancellation then."""
    while not running.done():
        try:
            await asyncio.wait((running,))
        except asyncio.CancelledError:
            continue
    if not running.cancelled():
        running.exception()  # retrieved: its exception is the cancelled call's, which nobody reads


class Calls:
    """The SidecarService's calls for a registry, up to the user's function:
    each method decodes a request into an Invocation (or answers itself when
    there is nothing to call). ``clients`` learns the Cluster service's
    address from the host's Describe.

    ``traced``: the calls run inside the server spans of :mod:`polyop._tracing`
    (the server's tracing is on). When False, there is no span to set
    attributes on and no baggage to read the reconcile ID from, and the calls
    skip that work.

    ``reconcile_stream``: the server serves ReconcileStream, and Describe says so.
    """

    def __init__(self, registry: Registry, clients: Clients, *, traced: bool = True, reconcile_stream: bool = False) -> None:
        self.registry = registry
        self.clients = clients
        self.log = registry.log
        self.traced = traced
        self.reconcile_stream = reconcile_stream

    def describe(self, req: describe_pb2.DescribeRequest) -> describe_pb2.DescribeResponse:
        if req.protocol_version != PROTOCOL_VERSION:
            self.log.warning(
                "The host speaks protocol %s, this sidecar %s; answering anyway, the host decides",
                _protocol_name(req.protocol_version), _protocol_name(PROTOCOL_VERSION),
            )
        self.clients.announced(req.cluster_address)
        resp = self.registry.describe()
        resp.reconcile_stream = self.reconcile_stream
        return resp

    def reconcile(
        self, req: reconcile_pb2.ReconcileRequest, deadline: float | None = None
    ) -> Invocation[reconcile_pb2.ReconcileResponse] | reconcile_pb2.ReconcileResponse:
        c, request, log = self._controller(req.controller, req.kind, req.key.namespace, req.key.name, req.retries)
        if not req.object:
            if c.deleted is None:
                log.debug("The object is gone and the controller has no deleted function; nothing to do")
                return reconcile_pb2.ReconcileResponse()
            return Invocation(
                c.deleted, (request,), CallInfo(request, (), log, deadline),
                lambda value, err, ctx: self._gone(c, log, value, err),
            )
        obj = self._object(c, request, req.object)
        try:
            observed = [Object.from_json(child) for child in req.observed_children]
        except ValueError as err:
            raise RPCError(
                grpc.StatusCode.INVALID_ARGUMENT, f"controller {c.description.name!r}: decoding an observed child: {err}"
            ) from err
        return Invocation(
            c.reconcile, (obj,), CallInfo(request, observed, log, deadline),
            lambda value, err, ctx: self._reconciled(c, log, obj, value, err, ctx),
        )

    def finalize(
        self, req: reconcile_pb2.FinalizeRequest, deadline: float | None = None
    ) -> Invocation[reconcile_pb2.FinalizeResponse]:
        if not any(c.finalize is not None for c in self.registry._controllers.values()):
            raise RPCError(grpc.StatusCode.UNIMPLEMENTED, f"sidecar {self.registry.name!r} declares no finalizer")
        c, request, log = self._controller(req.controller, req.kind, req.key.namespace, req.key.name, req.retries)
        if c.finalize is None:
            raise RPCError(grpc.StatusCode.NOT_FOUND, f"controller {c.description.name!r} declares no finalizer")
        obj = self._object(c, request, req.object)

        def finish(value: Any, err: Exception | None, ctx: _CallContext | None) -> reconcile_pb2.FinalizeResponse:
            resp = reconcile_pb2.FinalizeResponse()
            result = _outcome(log, "Finalizer error", value, err, resp.error)
            if result is not None:
                if result.desired_children is not None:
                    resp.error.message = "a finalizer declares no desired_children: the object is being deleted"
                else:
                    _requeue_after(result, resp)
            if ctx is not None:
                resp.events.extend(ctx.events)
            return resp

        return Invocation(c.finalize, (obj,), CallInfo(request, (), log, deadline), finish)

    def default(self, req: admission_pb2.DefaultRequest) -> Invocation[admission_pb2.DefaultResponse]:
        webhook, areq = self._admission(req.request, "default")
        if areq.object is None:
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"defaulting {areq.kind}: the request carries no object")
        assert webhook.default is not None
        # The function's own copy, to compare with the request's object:
        # decoding the bytes again costs a fifth of copy.deepcopy.
        obj = Object.from_json(req.request.object)

        def finish(value: Any, err: Exception | None, _: _CallContext | None) -> admission_pb2.DefaultResponse:
            if isinstance(err, DeniedError):
                _tracing.set_result(_tracing.DENIED)
                return admission_pb2.DefaultResponse(denied=err.to_proto(), warnings=[*areq.warnings, *err.warnings])
            if err is not None:
                raise self._failed("defaulting", areq, err) from err
            _tracing.set_result(_tracing.SUCCESS)
            resp = admission_pb2.DefaultResponse(warnings=[*areq.warnings, *(value or ())])
            if obj != areq.object:
                resp.object = encode(obj)
            return resp

        return Invocation(webhook.default, (obj, areq), None, finish)

    def validate(self, req: admission_pb2.ValidateRequest) -> Invocation[admission_pb2.ValidateResponse]:
        webhook, areq = self._admission(req.request, "validate")
        assert webhook.validate is not None
        # On delete the request carries the object being deleted as the old object.
        obj = areq.object if areq.object is not None else areq.old_object
        if obj is None:
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"validating {areq.kind}: the request carries no object")

        def finish(value: Any, err: Exception | None, _: _CallContext | None) -> admission_pb2.ValidateResponse:
            if isinstance(err, DeniedError):
                _tracing.set_result(_tracing.DENIED)
                return admission_pb2.ValidateResponse(denied=err.to_proto(), warnings=[*areq.warnings, *err.warnings])
            if err is not None:
                raise self._failed("validating", areq, err) from err
            _tracing.set_result(_tracing.SUCCESS)
            return admission_pb2.ValidateResponse(warnings=[*areq.warnings, *(value or ())])

        return Invocation(webhook.validate, (obj, areq), None, finish)

    def convert(self, req: admission_pb2.ConvertRequest) -> list[Object | Invocation[Object]]:
        """Each object: as it is when at the desired version already, else the
        call of its kind's converter."""
        if not self.registry._converters:
            raise RPCError(grpc.StatusCode.UNIMPLEMENTED, f"sidecar {self.registry.name!r} declares no conversion")
        desired = req.desired_api_version
        steps: list[Object | Invocation[Object]] = []
        for i, data in enumerate(req.objects):
            try:
                obj = Object.from_json(data)
            except ValueError as err:
                raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"converting object {i}: {err}") from err
            converter = self.registry._converters.get((obj.gvk.group, obj.kind))
            if converter is None:
                raise RPCError(
                    grpc.StatusCode.NOT_FOUND,
                    f"sidecar {self.registry.name!r} declares no conversion for {obj.kind}.{obj.gvk.group} (object {i})",
                )
            steps.append(obj if obj.api_version == desired else self._conversion(i, obj, desired, converter))
        return steps

    @staticmethod
    def converted(req: admission_pb2.ConvertRequest, objects: Sequence[Object | Exception]) -> admission_pb2.ConvertResponse:
        for i, got in enumerate(objects):
            if isinstance(got, Exception):
                error = f"converting object {i} to {req.desired_api_version}: {_message(got)}"
                _tracing.set_result(_tracing.ERROR, error)
                return admission_pb2.ConvertResponse(error=error)
        _tracing.set_result(_tracing.SUCCESS)
        return admission_pb2.ConvertResponse(objects=[encode(o) for o in objects])

    # Plumbing.

    def _conversion(self, i: int, obj: Object, desired: str, converter: Converter) -> Invocation[Object]:
        def finish(value: Any, err: Exception | None, _: _CallContext | None) -> Object:
            if err is None:
                out = Object(value)
                if out.api_version == desired:
                    return out
                err = ValueError(f"the converter returned apiVersion {out.api_version!r}")
            log = ObjectLog(self.log, {"kind": obj.kind, "namespace": obj.namespace, "name": obj.name})
            log.error("Converting object %d to %s failed: %s", i, desired, _message(err))
            raise _ConversionFailed(err)

        return Invocation(converter.convert, (obj, desired), None, finish)

    def _reconciled(
        self, c: Controller, log: ObjectLog, obj: Object, value: Any, err: Exception | None, ctx: _CallContext | None
    ) -> reconcile_pb2.ReconcileResponse:
        resp = reconcile_pb2.ReconcileResponse()
        result = _outcome(log, "Reconciler error", value, err, resp.error)
        if result is not None:
            _requeue_after(result, resp)
            if result.desired_children is not None:
                try:
                    resp.desired_children.extend(_children(c, result.desired_children))
                    resp.children_complete = result.children_complete
                except ValueError as bad:
                    log.error("Invalid desired children: %s", bad)
                    resp.error.message = f"invalid desired children: {bad}"
                    _tracing.set_result(_tracing.ERROR, resp.error.message)
        status = obj.get("status")
        if isinstance(status, dict) and status:
            resp.status = encode(status)
        if ctx is not None:
            resp.events.extend(ctx.events)
        return resp

    def _gone(self, c: Controller, log: ObjectLog, value: Any, err: Exception | None) -> reconcile_pb2.ReconcileResponse:
        resp = reconcile_pb2.ReconcileResponse()
        result = _outcome(log, "Deleted error", value, err, resp.error)
        if result is not None:
            if result.desired_children is not None:
                resp.error.message = f"controller {c.description.name!r}: the object is gone; a deleted function declares no desired_children"
            else:
                _requeue_after(result, resp)
        return resp

    def _controller(self, name: str, kind: Any, namespace: str, obj_name: str, retries: int) -> tuple[Controller, Request, ObjectLog]:
        c = self.registry._controllers.get(name)
        if c is None:
            raise RPCError(
                grpc.StatusCode.NOT_FOUND,
                f"sidecar {self.registry.name!r} has no controller named {name!r}; it has {list(self.registry._controllers)}",
            )
        if not obj_name:
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"controller {name!r}: the request has no object name")
        gvk = GVK.from_proto(kind) if kind.kind else c.kind
        request = Request(controller=name, kind=gvk, namespace=namespace, name=obj_name, retries=retries)
        fields = {"controller": name, "kind": gvk.kind, "namespace": namespace, "name": obj_name}
        if self.traced:
            reconcile_id = _tracing.reconcile_id()
            if reconcile_id:
                fields["reconcileID"] = reconcile_id
            _tracing.set_attributes({
                _tracing.CONTROLLER: name, _tracing.KIND: gvk.kind, _tracing.NAMESPACE: namespace, _tracing.NAME: obj_name,
                _tracing.RECONCILE_ID: reconcile_id, _tracing.RETRIES: retries,
            })
        if retries:
            fields["retries"] = str(retries)
        return c, request, ObjectLog(self.log, fields)

    def _object(self, c: Controller, request: Request, data: bytes) -> Object:
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

    def _admission(self, req: admission_pb2.AdmissionRequest, call: str) -> tuple[Webhook, AdmissionRequest]:
        webhooks = self.registry._webhooks
        if not any(getattr(w, call) is not None for w in webhooks.values()):
            raise RPCError(grpc.StatusCode.UNIMPLEMENTED, f"sidecar {self.registry.name!r} declares no {call} webhook")
        gvk = GVK.from_proto(req.kind)
        webhook = webhooks.get(gvk)
        if webhook is None or getattr(webhook, call) is None:
            raise RPCError(grpc.StatusCode.NOT_FOUND, f"sidecar {self.registry.name!r} declares no {call} webhook for {gvk}")
        if self.traced:
            _tracing.set_attributes({_tracing.KIND: gvk.kind, _tracing.NAMESPACE: req.key.namespace, _tracing.NAME: req.key.name})
        try:
            return webhook, AdmissionRequest.from_proto(req)
        except ValueError as err:
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"{call} {gvk}: {err}") from err

    def _failed(self, what: str, req: AdmissionRequest, err: Exception) -> RPCError:
        log = ObjectLog(self.log, {"kind": req.kind.kind, "namespace": req.namespace, "name": req.name})
        log.error("%s failed", what.capitalize(), exc_info=err)
        return RPCError(grpc.StatusCode.INTERNAL, f"{what} {req.kind.kind} {req.namespace}/{req.name}: {_message(err)}")


class _ConversionFailed(Exception):
    """A converter failed: the response's error, not a gRPC error."""

    def __init__(self, err: Exception) -> None:
        super().__init__(str(err))
        self.err = err


def convert(calls: Calls, req: admission_pb2.ConvertRequest, cluster: Cluster | None = None) -> admission_pb2.ConvertResponse:
    out: list[Object | Exception] = []
    for step in calls.convert(req):
        try:
            out.append(step if isinstance(step, Object) else run(step, cluster))
        except _ConversionFailed as failed:
            out.append(failed.err)
            break
    return Calls.converted(req, out)


async def convert_async(
    calls: Calls, req: admission_pb2.ConvertRequest, executor: futures.Executor | None
) -> admission_pb2.ConvertResponse:
    out: list[Object | Exception] = []
    for step in calls.convert(req):
        try:
            converted: Object = step if isinstance(step, Object) else await run_async(step, lambda: None, lambda: None, executor)
            out.append(converted)
        except _ConversionFailed as failed:
            out.append(failed.err)
            break
    return Calls.converted(req, out)


def _outcome(
    log: logging.LoggerAdapter[logging.Logger],
    what: str,
    value: Any,
    err: Exception | None,
    failure: reconcile_pb2.Failure,
) -> Result | None:
    """What a reconcile, finalize or deleted function returned, or its
    exception as the response's Failure.

    The host logs the error it receives; the sidecar logs it (with its
    traceback) at debug level only, so that it is not shown twice.
    """
    result = _failure(log, what, value, err, failure)
    if failure.message:
        _tracing.set_result(_tracing.TERMINAL_ERROR if failure.terminal else _tracing.ERROR, failure.message)
    else:
        _tracing.set_result(_tracing.REQUEUE if result is not None and result.requeue_after_seconds > 0 else _tracing.SUCCESS)
    return result


def _failure(
    log: logging.LoggerAdapter[logging.Logger],
    what: str,
    value: Any,
    err: Exception | None,
    failure: reconcile_pb2.Failure,
) -> Result | None:
    if isinstance(err, TerminalError):
        log.debug("%s (terminal): %s", what, err)
        failure.message, failure.terminal = str(err) or type(err).__name__, True
        return None
    if isinstance(err, TemporaryError):
        log.debug("%s (retry after %ss): %s", what, err.retry_after, err)
        failure.message = str(err) or type(err).__name__
        failure.retry_after.FromNanoseconds(int(err.retry_after * 1e9))
        return None
    if err is not None:
        log.debug(what, exc_info=err)
        failure.message = _message(err)
        return None
    if value is not None and not isinstance(value, Result):
        log.debug("%s: returned %r, not a polyop.Result or None", what, value)
        failure.message = f"the function returned a {type(value).__name__}, not a polyop.Result or None"
        return None
    return value


def _requeue_after(result: Result, resp: reconcile_pb2.ReconcileResponse | reconcile_pb2.FinalizeResponse) -> None:
    seconds = result.requeue_after_seconds
    if seconds > 0:
        resp.requeue_after.FromNanoseconds(int(seconds * 1e9))


def _children(c: Controller, children: Sequence[Any]) -> list[bytes]:
    out = []
    for child in children:
        obj = Object(to_mapping(child))
        if not obj.api_version or not obj.kind or not obj.name:
            raise ValueError("every child needs apiVersion, kind and metadata.name")
        if obj.gvk not in c.owns:
            raise ValueError(f"{obj.gvk} is not a kind controller {c.description.name!r} owns (owns={sorted(map(str, c.owns))})")
        out.append(encode(obj))
    return out


def _protocol_name(version: int) -> str:
    try:
        return describe_pb2.ProtocolVersion.Name(version)  # type: ignore[arg-type]
    except ValueError:
        return str(version)


def _message(err: BaseException) -> str:
    return f"{type(err).__name__}: {err}" if str(err) else type(err).__name__

