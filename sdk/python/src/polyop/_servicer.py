"""The SidecarService on grpc's thread pool (:class:`Servicer`) and on
grpc.aio (:class:`AsyncServicer`): each method hands the request to
:class:`~polyop._calls.Calls`, runs the invocation, and turns an RPCError into
a gRPC status."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
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
from polyop._tracing import Tracing, refused
from polyop.cluster import Cluster
from polyop.sidecar import Sidecar
from polyop.v1alpha1 import admission_pb2, describe_pb2, reconcile_pb2, sidecar_pb2_grpc

__all__ = ["AsyncServicer", "RPCError", "Servicer"]

_Resp = TypeVar("_Resp")


class Servicer(sidecar_pb2_grpc.SidecarServiceServicer):
    """polyop.v1alpha1.SidecarService on grpc's thread pool."""

    def __init__(self, sidecar: Sidecar, tracing: Tracing | None = None) -> None:
        self.calls = Calls(sidecar, traced=tracing is not None)
        self.sidecar = sidecar
        self.tracing = tracing

    def Describe(self, request: describe_pb2.DescribeRequest, context: grpc.ServicerContext) -> describe_pb2.DescribeResponse:
        return _serve(context, lambda: self.calls.describe(request))

    def Reconcile(self, request: reconcile_pb2.ReconcileRequest, context: grpc.ServicerContext) -> reconcile_pb2.ReconcileResponse:
        return _serve(context, lambda: _answer(self.calls.reconcile(request, _deadline(context)), self.sidecar.cluster), self.tracing, "Reconcile")

    def Finalize(self, request: reconcile_pb2.FinalizeRequest, context: grpc.ServicerContext) -> reconcile_pb2.FinalizeResponse:
        return _serve(context, lambda: run(self.calls.finalize(request, _deadline(context)), self.sidecar.cluster), self.tracing, "Finalize")

    def Default(self, request: admission_pb2.DefaultRequest, context: grpc.ServicerContext) -> admission_pb2.DefaultResponse:
        return _serve(context, lambda: run(self.calls.default(request), None), self.tracing, "Default")

    def Validate(self, request: admission_pb2.ValidateRequest, context: grpc.ServicerContext) -> admission_pb2.ValidateResponse:
        return _serve(context, lambda: run(self.calls.validate(request), None), self.tracing, "Validate")

    def Convert(self, request: admission_pb2.ConvertRequest, context: grpc.ServicerContext) -> admission_pb2.ConvertResponse:
        return _serve(context, lambda: convert(self.calls, request), self.tracing, "Convert")


class AsyncServicer(sidecar_pb2_grpc.SidecarServiceServicer):
    """polyop.v1alpha1.SidecarService on grpc.aio: ``async def`` functions are
    awaited on the loop, plain ones run on ``executor``."""

    def __init__(self, sidecar: Sidecar, executor: futures.Executor | None, tracing: Tracing | None = None) -> None:
        self.calls = Calls(sidecar, traced=tracing is not None)
        self.sidecar = sidecar
        self.executor = executor
        self.tracing = tracing

    async def Describe(
        self, request: describe_pb2.DescribeRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> describe_pb2.DescribeResponse:
        return await _serve_async(context, self._sync(lambda: self.calls.describe(request)))

    async def Reconcile(
        self, request: reconcile_pb2.ReconcileRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> reconcile_pb2.ReconcileResponse:
        async def call() -> reconcile_pb2.ReconcileResponse:
            inv = self.calls.reconcile(request, _deadline(context))
            if isinstance(inv, reconcile_pb2.ReconcileResponse):
                return inv
            return await self._run(inv)

        return await _serve_async(context, call(), self.tracing, "Reconcile")

    async def Finalize(
        self, request: reconcile_pb2.FinalizeRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> reconcile_pb2.FinalizeResponse:
        async def call() -> reconcile_pb2.FinalizeResponse:
            return await self._run(self.calls.finalize(request, _deadline(context)))

        return await _serve_async(context, call(), self.tracing, "Finalize")

    async def Default(
        self, request: admission_pb2.DefaultRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> admission_pb2.DefaultResponse:
        async def call() -> admission_pb2.DefaultResponse:
            return await self._run(self.calls.default(request))

        return await _serve_async(context, call(), self.tracing, "Default")

    async def Validate(
        self, request: admission_pb2.ValidateRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> admission_pb2.ValidateResponse:
        async def call() -> admission_pb2.ValidateResponse:
            return await self._run(self.calls.validate(request))

        return await _serve_async(context, call(), self.tracing, "Validate")

    async def Convert(
        self, request: admission_pb2.ConvertRequest, context: grpc.aio.ServicerContext[Any, Any]
    ) -> admission_pb2.ConvertResponse:
        return await _serve_async(context, convert_async(self.calls, request, self.executor), self.tracing, "Convert")

    async def _run(self, inv: Invocation[_Resp]) -> _Resp:
        return await run_async(inv, lambda: self.sidecar.cluster, lambda: self.sidecar.async_cluster, self.executor)

    @staticmethod
    async def _sync(fn: Callable[[], _Resp]) -> _Resp:
        return fn()


def _answer(
    inv: Invocation[reconcile_pb2.ReconcileResponse] | reconcile_pb2.ReconcileResponse, cluster: Cluster | None
) -> reconcile_pb2.ReconcileResponse:
    return inv if isinstance(inv, reconcile_pb2.ReconcileResponse) else run(inv, cluster)


def _deadline(context: grpc.ServicerContext | grpc.aio.ServicerContext[Any, Any]) -> float | None:
    remaining = context.time_remaining()
    return None if remaining is None else time.monotonic() + remaining


def _serve(context: grpc.ServicerContext, handler: Callable[[], _Resp], tracing: Tracing | None = None, method: str = "") -> _Resp:
    try:
        if tracing is None:
            return handler()
        with tracing.server_span(method, context.invocation_metadata()) as span:
            try:
                return handler()
            except RPCError as err:
                refused(span, err.code, err.message)
                raise
    except RPCError as err:
        context.abort(err.code, err.message)
        raise  # abort raises; this keeps type checkers informed


async def _serve_async(
    context: grpc.aio.ServicerContext[Any, Any], call: Awaitable[_Resp], tracing: Tracing | None = None, method: str = ""
) -> _Resp:
    try:
        if tracing is None:
            return await call
        with tracing.server_span(method, context.invocation_metadata()) as span:
            try:
                return await call
            except RPCError as err:
                refused(span, err.code, err.message)
                raise
    except RPCError as err:
        await context.abort(err.code, err.message)
        raise
