"""ReconcileStream: Reconcile and Finalize calls as messages on one stream,
sent by a real grpc.aio client over a real unix socket as the host sends
them, answered as the same unary calls are, on threads and on grpc.aio."""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import grpc
import grpc.aio
import pytest
from google.protobuf import duration_pb2
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import polyop
from polyop.v1alpha1 import describe_pb2, reconcile_pb2, sidecar_pb2_grpc, types_pb2
from tests.test_tracing import (
    HOST_SPAN_ID,
    TRACE_ID,
    TRACEPARENT,
    MetadataRecordingService,
    Seen,
    by_name,
    cluster_service,
    ids,
    spans,
    traced_sidecar,
)

__all__ = ["cluster_service", "spans"]  # fixtures, used by name

WIDGET = "example.com/v1/Widget"
LONG = 30.0  # generous: a limit only a broken implementation reaches

_T = TypeVar("_T")

# "threads": plain functions on grpc's threads; "asyncio": plain functions on
# the executor of grpc.aio; "async": async def functions on the event loop.
HOW = ["threads", "asyncio", "async"]


def widget(name: str, **labels: str) -> bytes:
    return json.dumps(
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "ns", "generation": 3, "labels": labels}}
    ).encode()


def reconcile(name: str, *, controller: str = "widget", obj: bytes | None = None, **labels: str) -> reconcile_pb2.ReconcileRequest:
    return reconcile_pb2.ReconcileRequest(
        controller=controller, key=types_pb2.ObjectKey(namespace="ns", name=name), object=widget(name, **labels) if obj is None else obj
    )


def finalize(name: str, **labels: str) -> reconcile_pb2.FinalizeRequest:
    return reconcile_pb2.FinalizeRequest(controller="widget", key=types_pb2.ObjectKey(namespace="ns", name=name), object=widget(name, **labels))


def widget_sidecar(how: str, threads: list[int] | None = None) -> polyop.Sidecar:
    """A sidecar whose functions answer as the labels of the object ask:
    "fail" terminal, temporary, crash, or bad-children: children that do not
    encode (an error of the sidecar, not of the function); plain or async def as
    ``how`` says."""
    sidecar = polyop.Sidecar("widget-operator")

    def outcome(obj: polyop.Object, ctx: polyop.Context | polyop.AsyncContext) -> polyop.Result:
        if threads is not None:
            threads.append(threading.get_ident())
        fail = obj.meta.labels.get("fail")
        if fail == "terminal":
            raise polyop.TerminalError("the spec cannot work")
        if fail == "temporary":
            raise polyop.TemporaryError("not yet", retry_after=7)
        if fail == "crash":
            raise RuntimeError("the function crashed")
        if fail == "bad-children":
            return polyop.Result(desired_children=[{"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}, "data": {1, 2}}])
        obj.status["observedGeneration"] = obj.meta.generation
        ctx.event("Normal", "Reconciled", f"reconciled {obj.name}")
        return polyop.Result(requeue_after=60)

    if how == "async":

        @sidecar.reconciler(WIDGET, finalizer="example.com/cleanup", owns=["v1/ConfigMap"])
        async def reconcile_async(obj: polyop.Object, ctx: polyop.AsyncContext) -> polyop.Result:
            await asyncio.sleep(0)
            return outcome(obj, ctx)

        @sidecar.finalizer(WIDGET)
        async def finalize_async(obj: polyop.Object, ctx: polyop.AsyncContext) -> polyop.Result:
            return outcome(obj, ctx)

        @sidecar.deleted(WIDGET)
        async def deleted_async(request: polyop.Request, ctx: polyop.AsyncContext) -> None:
            raise polyop.TemporaryError(f"{request.name} is still known outside", retry_after=2)

    else:

        @sidecar.reconciler(WIDGET, finalizer="example.com/cleanup", owns=["v1/ConfigMap"])
        def reconcile_plain(obj: polyop.Object, ctx: polyop.Context) -> polyop.Result:
            return outcome(obj, ctx)

        @sidecar.finalizer(WIDGET)
        def finalize_plain(obj: polyop.Object, ctx: polyop.Context) -> polyop.Result:
            return outcome(obj, ctx)

        @sidecar.deleted(WIDGET)
        def deleted_plain(request: polyop.Request, ctx: polyop.Context) -> None:
            raise polyop.TemporaryError(f"{request.name} is still known outside", retry_after=2)

    return sidecar


@asynccontextmanager
async def serving(sidecar: polyop.Sidecar, how: str, sock_dir: str, **kwargs: Any) -> AsyncIterator[Any]:
    """The sidecar on threads (``how`` "threads") or on grpc.aio, on a unix
    socket, and a grpc.aio stub calling it as the host does."""
    address = f"unix://{sock_dir}/sidecar.sock"
    loop = asyncio.get_running_loop()
    threaded = await loop.run_in_executor(None, lambda: sidecar.start(address=address, **kwargs)) if how == "threads" else None
    served = await sidecar.start_async(address=address, **kwargs) if threaded is None else None
    try:
        async with grpc.aio.insecure_channel(f"unix:{sock_dir}/sidecar.sock") as channel:
            yield sidecar_pb2_grpc.SidecarServiceStub(channel)
    finally:
        if threaded is not None:
            await loop.run_in_executor(None, lambda: threaded.stop(grace=None))
        if served is not None:
            await served.stop(grace=None)


def run(main: Callable[[], Awaitable[_T]]) -> _T:
    async def bounded() -> _T:
        return await asyncio.wait_for(main(), 2 * LONG)

    return asyncio.run(bounded())


async def unary(stub: Any, call: reconcile_pb2.ReconcileStreamRequest) -> reconcile_pb2.ReconcileStreamResponse:
    """What the unary call answers for the call of a stream request, as a
    stream answer: its response, or its status as a CallStatus."""
    try:
        if call.WhichOneof("call") == "finalize":
            return reconcile_pb2.ReconcileStreamResponse(id=call.id, finalize=await stub.Finalize(call.finalize, timeout=LONG))
        return reconcile_pb2.ReconcileStreamResponse(id=call.id, reconcile=await stub.Reconcile(call.reconcile, timeout=LONG))
    except grpc.aio.AioRpcError as err:
        return reconcile_pb2.ReconcileStreamResponse(
            id=call.id, error=reconcile_pb2.CallStatus(code=err.code().value[0], message=err.details() or "")
        )


async def one_by_one(stub: Any, calls: list[reconcile_pb2.ReconcileStreamRequest]) -> list[reconcile_pb2.ReconcileStreamResponse]:
    """Send calls on one stream as the host does, the next after the answer
    to the previous one, and close it."""
    stream = stub.ReconcileStream()
    answers = []
    for call in calls:
        await stream.write(call)
        answers.append(await stream.read())
    await stream.done_writing()
    assert await stream.read() == grpc.aio.EOF
    assert await stream.code() == grpc.StatusCode.OK
    return answers


def numbered(*calls: reconcile_pb2.ReconcileRequest | reconcile_pb2.FinalizeRequest) -> list[reconcile_pb2.ReconcileStreamRequest]:
    out = []
    for i, call in enumerate(calls, start=1):
        if isinstance(call, reconcile_pb2.FinalizeRequest):
            out.append(reconcile_pb2.ReconcileStreamRequest(id=i, finalize=call, timeout=duration_pb2.Duration(seconds=int(LONG))))
        else:
            out.append(reconcile_pb2.ReconcileStreamRequest(id=i, reconcile=call, timeout=duration_pb2.Duration(seconds=int(LONG))))
    return out


@pytest.mark.parametrize("how", HOW)
def test_a_call_on_the_stream_is_answered_as_the_unary_call(how: str, sock_dir: str) -> None:
    threads: list[int] = []
    calls = numbered(
        reconcile("ok"),
        reconcile("terminal", fail="terminal"),
        reconcile("temporary", fail="temporary"),
        reconcile("crash", fail="crash"),
        reconcile("gone", obj=b""),
        finalize("ok"),
        finalize("terminal", fail="terminal"),
        reconcile("again"),
    )

    async def main() -> tuple[describe_pb2.DescribeResponse, list[reconcile_pb2.ReconcileStreamResponse], list[reconcile_pb2.ReconcileStreamResponse]]:
        async with serving(widget_sidecar(how, threads), "threads" if how == "threads" else "asyncio", sock_dir) as stub:
            described = await stub.Describe(describe_pb2.DescribeRequest(protocol_version=polyop.PROTOCOL_VERSION), timeout=LONG)
            streamed = await one_by_one(stub, calls)
            return described, streamed, [await unary(stub, call) for call in calls]

    described, streamed, unaried = run(main)
    assert described.reconcile_stream
    assert streamed == unaried
    by_id = {a.id: a for a in streamed}
    assert json.loads(by_id[1].reconcile.status) == {"observedGeneration": 3} and by_id[1].reconcile.requeue_after.seconds == 60
    assert [e.message for e in by_id[1].reconcile.events] == ["reconciled ok"]
    # The function's failures stay in the response, as on the unary call.
    assert (by_id[2].reconcile.error.message, by_id[2].reconcile.error.terminal) == ("the spec cannot work", True)
    assert (by_id[3].reconcile.error.message, by_id[3].reconcile.error.retry_after.seconds) == ("not yet", 7)
    assert by_id[4].reconcile.error.message == "RuntimeError: the function crashed"
    assert (by_id[5].reconcile.error.message, by_id[5].reconcile.error.retry_after.seconds) == ("gone is still known outside", 2)
    assert by_id[6].WhichOneof("result") == "finalize" and by_id[7].finalize.error.terminal
    if how == "asyncio":
        assert threads and threading.get_ident() not in threads  # plain functions never run on the loop


@pytest.mark.parametrize("how", HOW)
def test_a_refused_call_is_answered_with_the_unary_calls_status_and_the_stream_goes_on(
    how: str, sock_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    calls = numbered(
        reconcile("w1", controller="nope"),
        reconcile("w1", obj=b"{not json"),
        reconcile("w1", obj=widget("other")),
        reconcile("", obj=b""),
        reconcile("bad", fail="bad-children"),
        reconcile("ok"),
    )
    no_call = reconcile_pb2.ReconcileStreamRequest(id=99, timeout=duration_pb2.Duration(seconds=5))

    async def main() -> tuple[list[reconcile_pb2.ReconcileStreamResponse], list[reconcile_pb2.ReconcileStreamResponse]]:
        async with serving(widget_sidecar(how), "threads" if how == "threads" else "asyncio", sock_dir) as stub:
            streamed = await one_by_one(stub, [*calls[:3], no_call, *calls[3:]])
            return streamed, [await unary(stub, call) for call in calls]

    with caplog.at_level(logging.ERROR, logger="polyop"):
        streamed, unaried = run(main)
    empty = streamed.pop(3)
    assert empty.id == 99 and empty.error.code == grpc.StatusCode.INVALID_ARGUMENT.value[0]
    assert "carries no call" in empty.error.message
    assert streamed == unaried
    codes = [grpc.StatusCode.NOT_FOUND, grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.INVALID_ARGUMENT,
             grpc.StatusCode.INVALID_ARGUMENT, grpc.StatusCode.UNKNOWN]
    assert [a.error.code for a in streamed[:5]] == [c.value[0] for c in codes]
    assert "has no controller named 'nope'" in streamed[0].error.message
    assert "is not JSON serializable" in streamed[4].error.message
    assert streamed[5].reconcile.requeue_after.seconds == 60
    # The sidecar's own failure is logged with the object it was for.
    assert any("Reconcile" in r.getMessage() and "ns/bad" in r.getMessage() and r.exc_info for r in caplog.records), caplog.text


def test_many_calls_sent_at_once_are_answered_in_order(sock_dir: str) -> None:
    """The host sends one call at a time; a client that sends many before
    reading gets each answered, in order."""
    calls = numbered(*(reconcile(f"w{i}") for i in range(50)))

    async def main() -> list[reconcile_pb2.ReconcileStreamResponse]:
        async with serving(widget_sidecar("async"), "asyncio", sock_dir) as stub:
            stream = stub.ReconcileStream()
            for call in calls:
                await stream.write(call)
            await stream.done_writing()
            return [answer async for answer in stream]

    answers = run(main)
    assert [a.id for a in answers] == [c.id for c in calls]
    assert all(a.reconcile.requeue_after.seconds == 60 for a in answers)


def test_a_calls_timeout_and_the_streams_cancellation_cancel_the_async_function(sock_dir: str) -> None:
    sidecar = polyop.Sidecar("w")
    started: dict[str, asyncio.Event] = {}
    cancelled: dict[str, asyncio.Event] = {}
    remaining: dict[str, float | None] = {}

    @sidecar.reconciler(WIDGET)
    async def reconcile_slowly(obj: polyop.Object, ctx: polyop.AsyncContext) -> polyop.Result | None:
        remaining[obj.name] = ctx.time_remaining()
        if obj.name == "quick":
            return polyop.Result(requeue_after=1)
        started[obj.name].set()
        try:
            await asyncio.sleep(2 * LONG)
        except asyncio.CancelledError:
            cancelled[obj.name].set()
            raise
        return None

    def call(name: str, timeout: float) -> reconcile_pb2.ReconcileStreamRequest:
        return reconcile_pb2.ReconcileStreamRequest(id=1, reconcile=reconcile(name), timeout=duration_pb2.Duration(seconds=int(timeout)))

    async def main() -> tuple[reconcile_pb2.ReconcileStreamResponse, reconcile_pb2.ReconcileStreamResponse]:
        for name in ("deadline", "cancel"):
            started[name], cancelled[name] = asyncio.Event(), asyncio.Event()
        async with serving(sidecar, "asyncio", sock_dir) as stub:
            # The call's deadline passes: its function is cancelled, as a unary call's.
            stream = stub.ReconcileStream()
            await stream.write(call("deadline", 1))
            expired: reconcile_pb2.ReconcileStreamResponse = await asyncio.wait_for(stream.read(), LONG)
            await asyncio.wait_for(cancelled["deadline"].wait(), LONG)
            # The host cancels the stream (it is stopping, or the call outlived the grace after its deadline):
            # the call in flight is cancelled.
            await stream.write(call("cancel", LONG))
            await asyncio.wait_for(started["cancel"].wait(), LONG)
            stream.cancel()
            await asyncio.wait_for(cancelled["cancel"].wait(), LONG)
            # The next stream works.
            return expired, (await one_by_one(stub, [call("quick", LONG)]))[0]

    expired, quick = run(main)
    assert expired.id == 1 and expired.error.code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0]
    assert quick.reconcile.requeue_after.seconds == 1
    deadline_left, quick_left = remaining["deadline"], remaining["quick"]
    assert deadline_left is not None and 0 <= deadline_left <= 1
    assert quick_left is not None and 1 < quick_left <= LONG


@pytest.mark.parametrize("how", HOW)
def test_a_call_past_its_deadline_is_answered_only_once_its_function_returned(how: str, sock_dir: str) -> None:
    """The host holds the object until the answer to its call comes, and then
    calls again: an answer sent while the function still ran would let a
    second call for the object run beside it. An async def function is
    cancelled at the deadline (this one catches it, and answers all the
    same); a plain one cannot be interrupted, and is answered when it
    returns: with its answer on threads, with the cancelled call's
    DEADLINE_EXCEEDED on grpc.aio."""
    sidecar = polyop.Sidecar("w")
    answered = threading.Event()  # the test has read the late call's answer
    order: list[str] = []
    seen: list[str] = []
    # Once past its deadline, the function gives an answer sent too early this long to arrive.
    early = 1.0

    if how == "async":

        @sidecar.reconciler(WIDGET)
        async def reconcile_late(obj: polyop.Object, ctx: polyop.AsyncContext) -> polyop.Result:
            if obj.name == "late":
                try:
                    await asyncio.sleep(2 * LONG)
                except asyncio.CancelledError:
                    seen.append("cancelled")
                await asyncio.to_thread(answered.wait, early)
                order.append("returned")
            return polyop.Result(requeue_after=7)

    else:

        @sidecar.reconciler(WIDGET)
        def reconcile_plain(obj: polyop.Object, ctx: polyop.Context) -> polyop.Result:
            if obj.name == "late":
                remaining = ctx.time_remaining()
                assert remaining is not None
                answered.wait(remaining + early)
                if ctx.time_remaining() == 0:
                    seen.append("past its deadline")
                order.append("returned")
            return polyop.Result(requeue_after=7)

    async def main() -> tuple[reconcile_pb2.ReconcileStreamResponse, reconcile_pb2.ReconcileStreamResponse]:
        async with serving(sidecar, "threads" if how == "threads" else "asyncio", sock_dir) as stub:
            stream = stub.ReconcileStream()
            await stream.write(reconcile_pb2.ReconcileStreamRequest(id=1, reconcile=reconcile("late"), timeout=duration_pb2.Duration(nanos=200_000_000)))
            late: reconcile_pb2.ReconcileStreamResponse = await asyncio.wait_for(stream.read(), LONG)
            order.append("answered")
            answered.set()
            # The stream goes on: the host's next call comes on it.
            await stream.write(reconcile_pb2.ReconcileStreamRequest(id=2, reconcile=reconcile("next"), timeout=duration_pb2.Duration(seconds=int(LONG))))
            after: reconcile_pb2.ReconcileStreamResponse = await asyncio.wait_for(stream.read(), LONG)
            await stream.done_writing()
            assert await stream.code() == grpc.StatusCode.OK
            return late, after

    late, after = run(main)
    assert order == ["returned", "answered"]
    assert seen == (["cancelled"] if how == "async" else ["past its deadline"])
    assert late.id == 1
    if how == "asyncio":
        assert late.error.code == grpc.StatusCode.DEADLINE_EXCEEDED.value[0], late
    else:
        assert late.reconcile.requeue_after.seconds == 7, late
    assert after.id == 2 and after.reconcile.requeue_after.seconds == 7


def test_a_call_without_a_timeout_has_no_deadline(sock_dir: str) -> None:
    remaining: list[float | None] = []
    sidecar = polyop.Sidecar("w")

    @sidecar.reconciler(WIDGET)
    def reconcile_plain(obj: polyop.Object, ctx: polyop.Context) -> None:
        remaining.append(ctx.time_remaining())

    async def main() -> list[reconcile_pb2.ReconcileStreamResponse]:
        async with serving(sidecar, "asyncio", sock_dir) as stub:
            return await one_by_one(stub, [reconcile_pb2.ReconcileStreamRequest(id=7, reconcile=reconcile("w1"))])

    assert run(main)[0].id == 7
    assert remaining == [None]


@pytest.mark.parametrize("how", HOW)
def test_a_streamed_call_runs_in_a_span_that_continues_the_trace_it_carries(
    how: str,
    sock_dir: str,
    cluster_service: tuple[MetadataRecordingService, str],
    spans: tuple[TracerProvider, InMemorySpanExporter],
    caplog: pytest.LogCaptureFixture,
) -> None:
    service, cluster_address = cluster_service
    provider, exporter = spans
    seen = Seen()
    sidecar = traced_sidecar(provider, seen, how)
    call = reconcile_pb2.ReconcileStreamRequest(
        id=1,
        reconcile=reconcile_pb2.ReconcileRequest(controller="widget", key=types_pb2.ObjectKey(namespace="ns", name="w1"), object=widget("w1"), retries=2),
        timeout=duration_pb2.Duration(seconds=int(LONG)),
        trace_context={"traceparent": TRACEPARENT, "baggage": "polyop.reconcile_id=6d1f0c7e-1234"},
    )

    async def main() -> reconcile_pb2.ReconcileStreamResponse:
        async with serving(sidecar, "threads" if how == "threads" else "asyncio", sock_dir, tracer_provider=provider) as stub:
            await stub.Describe(describe_pb2.DescribeRequest(protocol_version=polyop.PROTOCOL_VERSION, cluster_address=cluster_address), timeout=LONG)
            return (await one_by_one(stub, [call]))[0]

    with caplog.at_level(logging.INFO, logger="polyop"):
        answer = run(main)
    assert answer.reconcile.requeue_after.seconds == 60 and not answer.reconcile.error.message

    finished = exporter.get_finished_spans()
    server = by_name(finished, "polyop.v1alpha1.SidecarService/Reconcile")
    assert server.kind == trace.SpanKind.SERVER
    assert server.parent is not None and server.parent.is_remote and ids(server.parent) == (TRACE_ID, HOST_SPAN_ID)
    assert seen.span[0] == server.context
    assert dict(server.attributes or {}) == {
        "rpc.system": "grpc", "rpc.service": "polyop.v1alpha1.SidecarService", "rpc.method": "Reconcile",
        "polyop.controller": "widget", "polyop.kind": "Widget", "polyop.namespace": "ns", "polyop.name": "w1",
        "polyop.reconcile_id": "6d1f0c7e-1234", "polyop.retries": 2, "polyop.result": "requeue",
    }
    client = by_name(finished, "polyop.v1alpha1.ClusterService/Get")
    assert ids(client.context)[0] == TRACE_ID and service.metadata[-1]["traceparent"].split("-")[1] == TRACE_ID

    logged = [r for r in caplog.records if r.getMessage().startswith("Reconciling")]
    assert len(logged) == 1
    assert logged[0].__dict__["polyop"] == {
        "controller": "widget", "kind": "Widget", "namespace": "ns", "name": "w1", "reconcileID": "6d1f0c7e-1234",
        "retries": "2", "trace_id": TRACE_ID, "span_id": ids(server.context)[1],
    }


def test_a_refused_streamed_call_marks_its_span(sock_dir: str, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    call = reconcile_pb2.ReconcileStreamRequest(id=1, reconcile=reconcile("w1", controller="nope"), trace_context={"traceparent": TRACEPARENT})

    async def main() -> reconcile_pb2.ReconcileStreamResponse:
        async with serving(widget_sidecar("async"), "asyncio", sock_dir, tracer_provider=provider) as stub:
            return (await one_by_one(stub, [call]))[0]

    answer = run(main)
    assert answer.error.code == grpc.StatusCode.NOT_FOUND.value[0]
    server = by_name(exporter.get_finished_spans(), "polyop.v1alpha1.SidecarService/Reconcile")
    assert ids(server.parent) == (TRACE_ID, HOST_SPAN_ID)
    assert (server.attributes or {})["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]
    assert server.status.status_code == trace.StatusCode.ERROR


@pytest.mark.parametrize("how", ["threads", "asyncio"])
def test_with_reconcile_stream_off_describe_says_so_and_the_stream_is_unimplemented(how: str, sock_dir: str) -> None:
    async def main() -> tuple[describe_pb2.DescribeResponse, grpc.StatusCode, reconcile_pb2.ReconcileResponse]:
        async with serving(widget_sidecar("plain"), how, sock_dir, reconcile_stream=False) as stub:
            described = await stub.Describe(describe_pb2.DescribeRequest(protocol_version=polyop.PROTOCOL_VERSION), timeout=LONG)
            # Refused as soon as it opens (a write could race the refusal).
            code = await stub.ReconcileStream().code()
            return described, code, await stub.Reconcile(reconcile("w1"), timeout=LONG)

    described, code, reconciled = run(main)
    assert not described.reconcile_stream
    assert code == grpc.StatusCode.UNIMPLEMENTED
    assert reconciled.requeue_after.seconds == 60


def test_the_thread_pool_server_serves_no_streams_when_they_would_hold_every_thread(
    sock_dir: str, caplog: pytest.LogCaptureFixture
) -> None:
    """An open stream holds a thread of the pool: with no thread left beside
    one stream per worker, streams waiting for a thread would never be
    served, so the host is told to call the unary methods."""
    sidecar = polyop.Sidecar("w")

    @sidecar.reconciler(WIDGET, max_concurrent_reconciles=2)
    def reconcile_plain(obj: polyop.Object, ctx: polyop.Context) -> None: ...

    async def main() -> describe_pb2.DescribeResponse:
        async with serving(sidecar, "threads", sock_dir, max_workers=2) as stub:
            described: describe_pb2.DescribeResponse = await stub.Describe(
                describe_pb2.DescribeRequest(protocol_version=polyop.PROTOCOL_VERSION), timeout=LONG
            )
            return described

    with caplog.at_level(logging.WARNING, logger="polyop"):
        described = run(main)
    assert not described.reconcile_stream
    assert any("max_workers=2 leaves no thread beside the 2 reconcile streams" in r.getMessage() for r in caplog.records), caplog.text


@pytest.mark.parametrize("how", ["threads", "asyncio"])
def test_stopping_ends_an_idle_stream_at_once_and_a_busy_one_after_its_answer(how: str, sock_dir: str) -> None:
    """The host keeps its streams open between calls: a stopping server ends
    those at once rather than waiting its grace for them, and answers the call
    in flight on another before ending its stream."""
    sidecar = polyop.Sidecar("w")
    started, release = threading.Event(), threading.Event()

    @sidecar.reconciler(WIDGET, max_concurrent_reconciles=2)
    def reconcile_plain(obj: polyop.Object, ctx: polyop.Context) -> polyop.Result:
        if obj.name == "busy":
            started.set()
            assert release.wait(LONG), "never released"
        return polyop.Result(requeue_after=1)

    async def main() -> tuple[grpc.StatusCode, reconcile_pb2.ReconcileStreamResponse, grpc.StatusCode]:
        address = f"unix://{sock_dir}/sidecar.sock"
        loop = asyncio.get_running_loop()
        if how == "threads":
            threaded = await loop.run_in_executor(None, lambda: sidecar.start(address=address))
        else:
            served = await sidecar.start_async(address=address)
        async with grpc.aio.insecure_channel(f"unix:{sock_dir}/sidecar.sock") as channel:
            stub: Any = sidecar_pb2_grpc.SidecarServiceStub(channel)
            idle, busy = stub.ReconcileStream(), stub.ReconcileStream()
            for stream in (idle, busy):
                await stream.write(numbered(reconcile("quick"))[0])
                assert (await stream.read()).reconcile.requeue_after.seconds == 1
            await busy.write(numbered(reconcile("w"), reconcile("busy"))[1])
            await loop.run_in_executor(None, started.wait, LONG)
            stopping = (
                loop.run_in_executor(None, lambda: threaded.stop(grace=10 * LONG)) if how == "threads"
                else asyncio.ensure_future(served.stop(grace=10 * LONG))
            )
            # Well before the grace, the idle stream ends; the busy one's call is still answered.
            idle_code = await idle.code()
            release.set()
            answer = await busy.read()
            busy_code = await busy.code()
            await asyncio.wait_for(stopping, LONG)
            return idle_code, answer, busy_code

    idle_code, answer, busy_code = run(main)
    # The thread-pool server can only cancel a stream its thread waits on.
    assert idle_code == (grpc.StatusCode.CANCELLED if how == "threads" else grpc.StatusCode.UNAVAILABLE)
    assert answer.id == 2 and answer.reconcile.requeue_after.seconds == 1
    assert busy_code == grpc.StatusCode.UNAVAILABLE
