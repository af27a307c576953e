"""The SidecarService on grpc's thread pool (:class:`Servicer`) and on
grpc.aio (:class:`AsyncServicer`): each method hands the request to
:class:`~polyop._calls.Calls`, runs the invocation, and turns an RPCError into
a gRPC status.

A Reconcile or Finalize call runs through one function whether it comes as a
unary call or as a message on a ReconcileStream (``_reconcile``,
``_finalize``, inside :func:`_traced`): only where its deadline and trace
context come from, and how a refusal travels back, differ. A unary call's
refusal ends the call with a gRPC status; a streamed call's is the answer's
CallStatus, with the same code and message, and the stream goes on.
"""

from __future__ import annotations

import asyncio
import sys
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from concurrent import futures
from typing import Any, TypeVar

import grpc
import grpc.aio

from polyop._calls import (
    Calls,
    Invocation,
    RPCError,
    convert,
    convert_async,
    run,
    run_async,
)
from polyop._clients import Clients
from polyop._registry import Registry
from polyop._tracing import Tracing, metadata_carrier, refused
from polyop.v1alpha1 import admission_pb2, describe_pb2, reconcile_pb2, sidecar_pb2_grpc

__all__ = ["AsyncServicer", "RPCError", "Servicer"]

_Resp = TypeVar("_Resp")

_NO_CALL = "set reconcile or finalize"
_STOPPING = "the sidecar is stopping"


class Servicer(sidecar_pb2_grpc.SidecarServiceServicer):
    """polyop.v1alpha1.SidecarService on grpc's thread pool. A
    ReconcileStream holds one of the pool's threads while it is open."""

    def __init__(
        self, registry: Registry, clients: Clients, tracing: Tracing | None = None, *, reconcile_stream: bool = True
    ) -> None:
        self.calls = Calls(registry, clients, traced=tracing is not None, reconcile_stream=reconcile_stream)
        self.registry = registry
        self.clients = clients
        self.tracing = tracing
        self.reconcile_stream = reconcile_stream
        self._lock = threading.Lock()
        self._stopping = False
        self._idle: set[grpc.ServicerContext] = set()  # the streams waiting for their next call

    def stop_streams(self) -> None:
        """End the ReconcileStreams, as the server stops: those waiting for a
        call at once (cancelled: the thread-pool server cannot end a stream
        its thread waits on with a status of its own), the others once their
        call is answered, with UNAVAILABLE."""
        with self._lock:
            self._stopping = True
            idle, self._idle = self._idle, set()
        for context in idle:
            context.cancel()

    def Describe(self, request: describe_pb2.DescribeRequest, context: grpc.ServicerContext) -> describe_pb2.DescribeResponse:
        return _serve(context, lambda: self.calls.describe(request))

    def Reconcile(self, request: reconcile_pb2.ReconcileRequest, context: grpc.ServicerContext) -> reconcile_pb2.ReconcileResponse:
        return _serve(context, lambda: self._reconcile(request, _deadline(context)), self.tracing, "Reconcile")

    def Finalize(self, request: reconcile_pb2.FinalizeRequest, context: grpc.ServicerContext) -> reconcile_pb2.FinalizeResponse:
        return _serve(context, lambda: self._finalize(request, _deadline(context)), self.tracing, "Finalize")

    def ReconcileStream(
        self, request_iterator: Iterator[reconcile_pb2.ReconcileStreamRequest], context: grpc.ServicerContext
    ) -> Iterator[reconcile_pb2.ReconcileStreamResponse]:
        if not self.reconcile_stream:
            context.abort(grpc.StatusCode.UNIMPLEMENTED, _stream_off(self.registry))
        try:
            while self._waiting(context):
                req = next(request_iterator, None)
                if req is None:
                    return  # the host closed the stream
                with self._lock:
                    self._idle.discard(context)
                yield self._streamed(req)
            context.abort(grpc.StatusCode.UNAVAILABLE, _STOPPING)
        finally:
            with self._lock:
                self._idle.discard(context)

    def _waiting(self, context: grpc.ServicerContext) -> bool:
        """Mark the stream as waiting for its next call, unless the server is stopping."""
        with self._lock:
            if not self._stopping:
                self._idle.add(context)
            return not self._stopping

    def Default(self, request: admission_pb2.DefaultRequest, context: grpc.ServicerContext) -> admission_pb2.DefaultResponse:
        return _serve(context, lambda: run(self.calls.default(request), None), self.tracing, "Default")

    def Validate(self, request: admission_pb2.ValidateRequest, context: grpc.ServicerContext) -> admission_pb2.ValidateResponse:
        return _serve(context, lambda: run(self.calls.validate(request), None), self.tracing, "Validate")

    def Convert(self, request: admission_pb2.ConvertRequest, context: grpc.ServicerContext) -> admission_pb2.ConvertResponse:
        return _serve(context, lambda: convert(self.calls, request), self.tracing, "Convert")

    def _reconcile(self, request: reconcile_pb2.ReconcileRequest, deadline: float | None) -> reconcile_pb2.ReconcileResponse:
        inv = self.calls.reconcile(request, deadline)
        return inv if isinstance(inv, reconcile_pb2.ReconcileResponse) else run(inv, self.clients.cluster)

    def _finalize(self, request: reconcile_pb2.FinalizeRequest, deadline: float | None) -> reconcile_pb2.FinalizeResponse:
        return run(self.calls.finalize(request, deadline), self.clients.cluster)

    def _streamed(self, req: reconcile_pb2.ReconcileStreamRequest) -> reconcile_pb2.ReconcileStreamResponse:
        """The answer to one call on a ReconcileStream."""
        try:
            which = req.WhichOneof("call")
            deadline = _stream_deadline(req)
            if which == "reconcile":
                answer = _traced(self.tracing, "Reconcile", req.trace_context, lambda: self._reconcile(req.reconcile, deadline))
                return reconcile_pb2.ReconcileStreamResponse(id=req.id, reconcile=answer)
            if which == "finalize":
                answered = _traced(self.tracing, "Finalize", req.trace_context, lambda: self._finalize(req.finalize, deadline))
                return reconcile_pb2.ReconcileStreamResponse(id=req.id, finalize=answered)
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"stream call {req.id} carries no call: {_NO_CALL}")
        except RPCError as err:
            return _call_status(req.id, err.code, err.message)
        except Exception as err:
            # What grpc's thread-pool server answers a unary call whose method raised.
            _log_unexpected(self.registry, req, err)
            return _call_status(req.id, grpc.StatusCode.UNKNOWN, f"Exception calling application: {err}")


class AsyncServicer(sidecar_pb2_grpc.SidecarServiceServicer):
    """polyop.v1alpha1.SidecarService on grpc.aio: ``async def`` functions are
    awaited on the loop, plain ones run on ``executor``."""

    def __init__(
        self,
        registry: Registry,
        clients: Clients,
        executor: futures.Executor | None,
        tracing: Tracing | None = None,
        *,
        reconcile_stream: bool = True,
    ) -> None:
        self.calls = Calls(registry, clients, traced=tracing is not None, reconcile_stream=reconcile_stream)
        self.registry = registry
        self.clients = clients
        self.executor = executor
        self.tracing = tracing
        self.reconcile_stream = reconcile_stream
        self._stopping = False
        self._idle: set[asyncio.Task[Any]] = set()  # the streams waiting for their next call

    def stop_streams(self) -> None:
        """End the ReconcileStreams with UNAVAILABLE, as the server stops:
        those waiting for a call at once, the others once their call is
        answered."""
        self._stopping = True
        idle, self._idle = self._idle, set()
        for task in idle:
            task.cancel()

    async def Describe(
        self, request: describe_pb2.DescribeRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> describe_pb2.DescribeResponse:
        return await _serve_async(context, self._sync(lambda: self.calls.describe(request)))

    async def Reconcile(
        self, request: reconcile_pb2.ReconcileRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> reconcile_pb2.ReconcileResponse:
        return await _serve_async(context, self._reconcile(request, _deadline(context)), self.tracing, "Reconcile")

    async def Finalize(
        self, request: reconcile_pb2.FinalizeRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> reconcile_pb2.FinalizeResponse:
        return await _serve_async(context, self._finalize(request, _deadline(context)), self.tracing, "Finalize")

    async def ReconcileStream(
        self, request_iterator: AsyncIterator[reconcile_pb2.ReconcileStreamRequest], context: grpc.aio.ServicerContext[Any, Any]
    ) -> AsyncIterator[reconcile_pb2.ReconcileStreamResponse]:
        """One call at a time, in order: the next request is read only once
        the answer to this one is written, so a client sending many waits on
        HTTP/2 flow control rather than growing this process's memory. When
        the client cancels the stream, grpc.aio cancels this task, and with it
        the call in flight, as it cancels a unary call's."""
        if not self.reconcile_stream:
            await context.abort(grpc.StatusCode.UNIMPLEMENTED, _stream_off(self.registry))
        task = asyncio.current_task()
        assert task is not None
        while not self._stopping:
            self._idle.add(task)
            try:
                req = await context.read()
            except asyncio.CancelledError:
                if not self._stopping:
                    raise  # the host cancelled the stream
                _uncancel(task)  # stop_streams cancelled the wait
                break
            finally:
                self._idle.discard(task)
            if req is grpc.aio.EOF:
                return  # the host closed the stream
            yield await self._streamed(req)
        await context.abort(grpc.StatusCode.UNAVAILABLE, _STOPPING)

    async def Default(
        self, request: admission_pb2.DefaultRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> admission_pb2.DefaultResponse:
        return await _serve_async(context, self._run(self.calls.default, request), self.tracing, "Default")

    async def Validate(
        self, request: admission_pb2.ValidateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> admission_pb2.ValidateResponse:
        return await _serve_async(context, self._run(self.calls.validate, request), self.tracing, "Validate")

    async def Convert(
        self, request: admission_pb2.ConvertRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> admission_pb2.ConvertResponse:
        return await _serve_async(context, convert_async(self.calls, request, self.executor), self.tracing, "Convert")

    async def _reconcile(self, request: reconcile_pb2.ReconcileRequest, deadline: float | None) -> reconcile_pb2.ReconcileResponse:
        inv = self.calls.reconcile(request, deadline)
        if isinstance(inv, reconcile_pb2.ReconcileResponse):
            return inv
        return await self._invoke(inv)

    async def _finalize(self, request: reconcile_pb2.FinalizeRequest, deadline: float | None) -> reconcile_pb2.FinalizeResponse:
        return await self._invoke(self.calls.finalize(request, deadline))

    async def _streamed(self, req: reconcile_pb2.ReconcileStreamRequest) -> reconcile_pb2.ReconcileStreamResponse:
        """The answer to one call on a ReconcileStream. At the call's
        deadline its function is cancelled, as grpc.aio cancels a unary
        call's when its deadline passes, and the call is answered once the
        function has returned (a plain function runs on until it does; see
        :func:`~polyop._calls.run_async`): the host sends the object's next
        call only after this answer."""
        try:
            which = req.WhichOneof("call")
            deadline = _stream_deadline(req)
            if which == "reconcile":
                answer = await _traced_async(self.tracing, "Reconcile", req.trace_context, _until(deadline, self._reconcile(req.reconcile, deadline)))
                return reconcile_pb2.ReconcileStreamResponse(id=req.id, reconcile=answer)
            if which == "finalize":
                answered = await _traced_async(self.tracing, "Finalize", req.trace_context, _until(deadline, self._finalize(req.finalize, deadline)))
                return reconcile_pb2.ReconcileStreamResponse(id=req.id, finalize=answered)
            raise RPCError(grpc.StatusCode.INVALID_ARGUMENT, f"stream call {req.id} carries no call: {_NO_CALL}")
        except RPCError as err:
            return _call_status(req.id, err.code, err.message)
        except Exception as err:
            # What grpc.aio answers a unary call whose method raised.
            _log_unexpected(self.registry, req, err)
            return _call_status(req.id, grpc.StatusCode.UNKNOWN, f"Unexpected {type(err)}: {err}")

    async def _run(self, decode: Callable[[Any], Invocation[_Resp]], request: Any) -> _Resp:
        return await self._invoke(decode(request))

    async def _invoke(self, inv: Invocation[_Resp]) -> _Resp:
        return await run_async(inv, lambda: self.clients.cluster, lambda: self.clients.async_cluster, self.executor)

    @staticmethod
    async def _sync(fn: Callable[[], _Resp]) -> _Resp:
        return fn()


def _deadline(context: grpc.ServicerContext | grpc.aio.ServicerContext[Any, Any]) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


def _stream_deadline(req: reconcile_pb2.ReconcileStreamRequest) -> float | None:
    """The deadline of a streamed call, from its timeout, as a unary call's
    from its grpc-timeout header."""
    if not req.HasField("timeout"):
        return None
    return time.monotonic() + req.timeout.seconds + req.timeout.nanos / 1e9


if sys.version_info >= (3, 11):

    async def _until(deadline: float | None, call: Awaitable[_Resp]) -> _Resp:
        """Await call, cancelling it at deadline (time.monotonic's clock,
        which is the event loop's)."""
        if deadline is None:
            return await call
        try:
            async with asyncio.timeout_at(deadline):
                return await call
        except TimeoutError as err:
            raise RPCError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from err

else:

    async def _until(deadline: float | None, call: Awaitable[_Resp]) -> _Resp:
        if deadline is None:
            return await call
        try:
            return await asyncio.wait_for(call, deadline - time.monotonic())
        except asyncio.TimeoutError as err:
            raise RPCError(grpc.StatusCode.DEADLINE_EXCEEDED, "Deadline Exceeded") from err


def _uncancel(task: asyncio.Task[Any]) -> None:
    if sys.version_info >= (3, 11):
        task.uncancel()


def _call_status(call_id: int, code: grpc.StatusCode, message: str) -> reconcile_pb2.ReconcileStreamResponse:
    return reconcile_pb2.ReconcileStreamResponse(id=call_id, error=reconcile_pb2.CallStatus(code=code.value[0], message=message))


def _log_unexpected(sidecar: Registry, req: reconcile_pb2.ReconcileStreamRequest, err: Exception) -> None:
    which = req.WhichOneof("call")
    call = req.reconcile if which == "reconcile" else req.finalize
    sidecar.log.error(
        "%s of %s %s/%s (controller %r) failed on the stream", (which or "call").capitalize(), call.kind.kind or "object",
        call.key.namespace, call.key.name, call.controller, exc_info=err,
    )


def _stream_off(sidecar: Registry) -> str:
    return f"sidecar {sidecar.name!r} serves ReconcileStream with reconcile_stream=True only: call Reconcile and Finalize"


def _traced(tracing: Tracing | None, method: str, carrier: Mapping[str, str], handler: Callable[[], _Resp]) -> _Resp:
    """handler(), inside the call's server span when tracing is on; a refusal
    (RPCError) marks the span."""
    if tracing is None:
        return handler()
    with tracing.server_span(method, carrier) as span:
        try:
            return handler()
        except RPCError as err:
            refused(span, err.code, err.message)
            raise


async def _traced_async(tracing: Tracing | None, method: str, carrier: Mapping[str, str], call: Awaitable[_Resp]) -> _Resp:
    """As :func:`_traced`, awaiting call."""
    if tracing is None:
        return await call
    with tracing.server_span(method, carrier) as span:
        try:
            return await call
        except RPCError as err:
            refused(span, err.code, err.message)
            raise


def _serve(context: grpc.ServicerContext, handler: Callable[[], _Resp], tracing: Tracing | None = None, method: str = "") -> _Resp:
    try:
        carrier = metadata_carrier(context.invocation_metadata()) if tracing is not None else {}
        return _traced(tracing, method, carrier, handler)
    except RPCError as err:
        context.abort(err.code, err.message)
        raise  # abort raises; this keeps type checkers informed


async def _serve_async(
    context: grpc.aio.ServicerContext[Any, Any], call: Awaitable[_Resp], tracing: Tracing | None = None, method: str = ""
) -> _Resp:
    try:
        carrier = metadata_carrier(context.invocation_metadata()) if tracing is not None else {}
        return await _traced_async(tracing, method, carrier, call)
    except RPCError as err:
        await context.abort(err.code, err.message)
        raise
