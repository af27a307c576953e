"""asyncio: async def functions served on grpc.aio over a real socket, called
as the host calls them, beside plain functions that must not block the loop."""

from __future__ import annotations

import asyncio
import json
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from concurrent import futures
from contextlib import asynccontextmanager
from typing import Any, TypeVar

import grpc
import grpc.aio
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import polyop
from polyop._calls import Invocation, run_async
from polyop.testing import FakeCluster, Harness
from polyop.v1alpha1 import (
    admission_pb2,
    cluster_pb2_grpc,
    describe_pb2,
    reconcile_pb2,
    sidecar_pb2_grpc,
    types_pb2,
)
from tests.test_cluster import RecordingService, api_error, status

WIDGET = "example.com/v1/Widget"
LONG = 30.0  # generous: a limit only a broken implementation reaches

_T = TypeVar("_T")


def widget(name: str = "w1", **labels: str) -> bytes:
    return json.dumps(
        {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": name, "namespace": "ns", "generation": 3, "labels": labels}}
    ).encode()


def reconcile_request(name: str = "w1", **labels: str) -> reconcile_pb2.ReconcileRequest:
    return reconcile_pb2.ReconcileRequest(controller="widget", key=types_pb2.ObjectKey(namespace="ns", name=name), object=widget(name, **labels))


@pytest.fixture
def cluster_service(sock_dir: str) -> Iterator[tuple[RecordingService, str]]:
    """A ClusterService (the host's side) on a unix socket, and its address."""
    service = RecordingService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(service, server)
    server.add_insecure_port(f"unix:{sock_dir}/cluster.sock")
    server.start()
    yield service, f"unix://{sock_dir}/cluster.sock"
    server.stop(None)


@asynccontextmanager
async def serving(sidecar: polyop.Sidecar, sock_dir: str, **kwargs: Any) -> AsyncIterator[Any]:
    """The sidecar on grpc.aio on a unix socket, and a stub calling it as the
    host does (the generated stubs type the synchronous stub only)."""
    server = await sidecar.start_async(address=f"unix://{sock_dir}/sidecar.sock", **kwargs)
    try:
        async with grpc.aio.insecure_channel(f"unix:{sock_dir}/sidecar.sock") as channel:
            yield sidecar_pb2_grpc.SidecarServiceStub(channel)
    finally:
        await server.stop(grace=None)


def run(main: Callable[[], Awaitable[_T]]) -> _T:
    async def bounded() -> _T:
        return await asyncio.wait_for(main(), 2 * LONG)

    return asyncio.run(bounded())


def test_an_async_reconciler_awaits_the_cluster_the_host_announced(
    sock_dir: str, cluster_service: tuple[RecordingService, str], monkeypatch: pytest.MonkeyPatch
) -> None:
    service, address = cluster_service
    sidecar = polyop.Sidecar("w")

    @sidecar.reconciler(WIDGET)
    async def reconcile(obj: polyop.Object, ctx: polyop.AsyncContext) -> polyop.Result:
        assert isinstance(ctx.cluster, polyop.AsyncCluster)
        cm = await ctx.cluster.get("v1/ConfigMap", "c1", obj.namespace)
        obj.status["configResourceVersion"] = cm.meta.resource_version
        try:
            await ctx.cluster.get("v1/Secret", "s", obj.namespace)
        except polyop.NotFoundError as err:
            obj.status["secret"] = f"{err.reason} {err.http_code}"
        ctx.event("Normal", "Reconciled", "read the cluster")
        return polyop.Result(requeue_after=60)

    async def main() -> reconcile_pb2.ReconcileResponse:
        async with serving(sidecar, sock_dir) as stub:
            await stub.Describe(describe_pb2.DescribeRequest(protocol_version=polyop.PROTOCOL_VERSION, cluster_address=address), timeout=LONG)
            resp: reconcile_pb2.ReconcileResponse = await stub.Reconcile(reconcile_request(), timeout=LONG)
            return resp

    def answer(request: Any, context: grpc.ServicerContext) -> None:
        if request.kind.kind == "Secret":
            api_error(context, grpc.StatusCode.NOT_FOUND, status("NotFound", 404, 'secrets "s" not found'))

    monkeypatch.setattr(service, "_answer", answer)
    resp = run(main)
    assert resp.error.message == ""
    assert json.loads(resp.status) == {"configResourceVersion": "5", "secret": "NotFound 404"}
    assert [e.reason for e in resp.events] == ["Reconciled"] and resp.requeue_after.seconds == 60


def test_async_reconciles_overlap_on_the_event_loop_thread(sock_dir: str) -> None:
    """Two reconciles that each wait for the other can only both finish if they
    run at once; both run on the loop's thread, holding none of the pool."""
    sidecar = polyop.Sidecar("w")
    arrived: list[str] = []
    threads: set[int] = set()
    both = asyncio.Event()

    @sidecar.reconciler(WIDGET, max_concurrent_reconciles=2)
    async def reconcile(obj: polyop.Object, ctx: polyop.AsyncContext) -> None:
        threads.add(threading.get_ident())
        arrived.append(obj.name)
        if len(arrived) == 2:
            both.set()
        await asyncio.wait_for(both.wait(), LONG)
        obj.status["met"] = sorted(arrived)

    async def main() -> list[reconcile_pb2.ReconcileResponse]:
        async with serving(sidecar, sock_dir, max_workers=1) as stub:
            calls = [stub.Reconcile(reconcile_request(name), timeout=LONG) for name in ("a", "b")]
            return list(await asyncio.gather(*calls))

    responses = run(main)
    assert [json.loads(r.status) for r in responses] == [{"met": ["a", "b"]}] * 2
    assert threads == {threading.get_ident()}  # asyncio.run's loop runs on this thread


def test_a_plain_reconciler_under_serve_async_runs_on_a_thread_and_does_not_block_the_loop(sock_dir: str) -> None:
    sidecar = polyop.Sidecar("w")
    release = threading.Event()
    blocked = threading.Event()
    threads: list[int] = []

    @sidecar.reconciler(WIDGET)
    def reconcile(obj: polyop.Object, ctx: polyop.Context) -> polyop.Result:
        threads.append(threading.get_ident())
        if obj.meta.labels.get("block"):
            blocked.set()
            assert release.wait(LONG), "never released"
        obj.status["done"] = True
        return polyop.Result(requeue_after=1)

    @sidecar.validator(WIDGET)
    async def validate(obj: polyop.Object, req: polyop.AdmissionRequest) -> list[str]:
        return ["checked on the loop"]

    async def main() -> tuple[reconcile_pb2.ReconcileResponse, reconcile_pb2.ReconcileResponse, Any]:
        async with serving(sidecar, sock_dir) as stub:
            slow = asyncio.ensure_future(stub.Reconcile(reconcile_request("slow", block="yes"), timeout=LONG))
            await asyncio.get_running_loop().run_in_executor(None, blocked.wait, LONG)
            # The plain function holds its thread; the loop still serves other calls.
            fast = await stub.Reconcile(reconcile_request("fast"), timeout=LONG)
            validated = await stub.Validate(
                admission_pb2.ValidateRequest(
                    request=admission_pb2.AdmissionRequest(
                        kind=polyop.GVK.parse(WIDGET).to_proto(), operation=admission_pb2.OPERATION_CREATE, object=widget()
                    )
                ),
                timeout=LONG,
            )
            assert not slow.done()
            release.set()
            return await slow, fast, validated

    slow, fast, validated = run(main)
    assert json.loads(slow.status) == json.loads(fast.status) == {"done": True}
    assert list(validated.warnings) == ["checked on the loop"]
    assert len(threads) == 2 and threading.get_ident() not in threads


def test_the_hosts_deadline_and_cancellation_reach_the_async_reconciler(sock_dir: str) -> None:
    sidecar = polyop.Sidecar("w")
    cancelled: list[str] = []
    started: dict[str, asyncio.Event] = {}
    remaining: list[float | None] = []

    @sidecar.reconciler(WIDGET)
    async def reconcile(obj: polyop.Object, ctx: polyop.AsyncContext) -> None:
        remaining.append(ctx.time_remaining())
        started[obj.name].set()
        try:
            await asyncio.sleep(2 * LONG)
        except asyncio.CancelledError:
            cancelled.append(obj.name)
            raise

    async def main() -> grpc.StatusCode:
        started.update(deadline=asyncio.Event(), cancel=asyncio.Event())
        async with serving(sidecar, sock_dir) as stub:
            with pytest.raises(grpc.aio.AioRpcError) as expired:
                await stub.Reconcile(reconcile_request("deadline"), timeout=1)
            call = stub.Reconcile(reconcile_request("cancel"), timeout=LONG)
            await asyncio.wait_for(started["cancel"].wait(), LONG)
            call.cancel()
            with pytest.raises(asyncio.CancelledError):
                await call
            for _ in range(int(LONG * 100)):  # until the server has seen both calls end, or LONG
                if len(cancelled) == 2:
                    break
                await asyncio.sleep(0.01)
            return expired.value.code()

    code = run(main)
    assert code == grpc.StatusCode.DEADLINE_EXCEEDED
    assert sorted(cancelled) == ["cancel", "deadline"]
    # The host's 1s, as gRPC carries it (its grpc-timeout header may round up a little).
    deadline_left = remaining[0]
    assert deadline_left is not None and 0 < deadline_left < 2


def test_serve_uses_asyncio_for_async_functions_and_stops_on_sigterm(sock_dir: str) -> None:
    path = f"{sock_dir}/s.sock"
    program = textwrap.dedent(f"""
        import polyop
        sidecar = polyop.Sidecar("sig")

        @sidecar.reconciler("v1/ConfigMap")
        async def reconcile(obj, ctx):
            return None

        sidecar.serve(address="unix://{path}", grace=5)
    """)
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    proc = subprocess.Popen([sys.executable, "-c", program], env={**os.environ, "PYTHONPATH": src}, stderr=subprocess.PIPE, text=True)
    try:
        with grpc.insecure_channel(f"unix:{path}") as channel:
            grpc.channel_ready_future(channel).result(timeout=LONG)
            health: Any = health_pb2_grpc.HealthStub(channel)  # the stubs' HealthStub declares no methods
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=LONG).status == health_pb2.HealthCheckResponse.SERVING
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=LONG)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "(asyncio)" in stderr and "Stopped" in stderr
    assert not os.path.exists(path)


def test_start_on_threads_refuses_async_functions(sock_dir: str) -> None:
    sidecar = polyop.Sidecar("w")

    @sidecar.reconciler(WIDGET)
    async def reconcile(obj: polyop.Object, ctx: polyop.AsyncContext) -> None: ...

    with pytest.raises(RuntimeError, match="serve_async"):
        sidecar.start(address=f"unix://{sock_dir}/s.sock")


def async_sidecar() -> polyop.Sidecar:
    sidecar = polyop.Sidecar("w")

    @sidecar.reconciler(WIDGET, finalizer="example.com/cleanup")
    async def reconcile(obj: polyop.Object, ctx: polyop.AsyncContext) -> polyop.Result:
        await ctx.cluster.apply({"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": obj.name, "namespace": obj.namespace}, "data": {"a": "1"}})
        listed = await ctx.cluster.list("v1/ConfigMap", obj.namespace)
        obj.status["configs"] = len(listed.items)
        return polyop.Result(requeue_after=5)

    @sidecar.finalizer(WIDGET)
    async def finalize(obj: polyop.Object, ctx: polyop.AsyncContext) -> None:
        with polyop.ignore_not_found():
            await ctx.cluster.delete("v1/ConfigMap", obj.name, obj.namespace)

    @sidecar.deleted(WIDGET)
    async def deleted(request: polyop.Request, ctx: polyop.AsyncContext) -> None:
        raise polyop.TemporaryError(f"{request.name} is still known outside", retry_after=2)

    @sidecar.defaulter(WIDGET)
    async def default(obj: polyop.Object, req: polyop.AdmissionRequest) -> None:
        await asyncio.sleep(0)
        obj.spec.setdefault("size", 1)

    @sidecar.converter(WIDGET, ["v1", "v2"])
    async def convert(obj: polyop.Object, api_version: str) -> polyop.Object:
        await asyncio.sleep(0)
        return polyop.Object({**obj, "apiVersion": api_version})

    return sidecar


def test_the_harness_runs_async_functions_against_the_fake_cluster() -> None:
    fake = FakeCluster()
    h = Harness(async_sidecar(), cluster=fake)
    w = json.loads(widget())

    got = h.reconcile(w)
    assert (got.error, got.status, got.requeue_after) == ("", {"configs": 1}, 5)
    assert fake.get("v1/ConfigMap", "w1", "ns")["data"] == {"a": "1"}
    assert h.finalize(w).error == ""
    with pytest.raises(polyop.NotFoundError):
        fake.get("v1/ConfigMap", "w1", "ns")
    assert (h.reconcile_deleted(WIDGET, "w1", "ns").retry_after) == 2
    defaulted = h.default(w).object
    assert defaulted is not None and defaulted.spec == {"size": 1}
    assert [o.api_version for o in h.convert([w], "example.com/v2")] == ["example.com/v2"]

    # Also from a test that runs an event loop itself.
    async def inside_a_loop() -> str:
        return h.reconcile(w).error

    assert run(inside_a_loop) == ""


def test_a_harness_timeout_cancels_an_async_function() -> None:
    sidecar = polyop.Sidecar("w")
    cancelled = threading.Event()

    @sidecar.reconciler(WIDGET)
    async def reconcile(obj: polyop.Object, ctx: polyop.AsyncContext) -> None:
        try:
            await asyncio.sleep(2 * LONG)
        except asyncio.CancelledError:
            cancelled.set()
            raise

    with pytest.raises(TimeoutError):
        Harness(sidecar).reconcile(json.loads(widget()), timeout=0.1)
    assert cancelled.is_set()


def test_a_cancelled_call_of_a_plain_function_ends_only_when_its_thread_is_done() -> None:
    """A plain function cannot be interrupted: a cancelled call waits for it
    to return before it raises its cancellation; one still queued behind a
    busy thread when its call is cancelled never starts."""
    executor = futures.ThreadPoolExecutor(max_workers=1)
    busy, release = threading.Event(), threading.Event()
    ran: list[str] = []

    def block() -> None:
        busy.set()
        assert release.wait(LONG), "never released"
        ran.append("blocked")

    def queued() -> None:
        ran.append("queued")

    def call(fn: Callable[[], None]) -> Invocation[None]:
        return Invocation(fn, (), None, lambda value, err, ctx: None)

    async def main() -> None:
        running = asyncio.ensure_future(run_async(call(block), lambda: None, lambda: None, executor))
        await asyncio.to_thread(busy.wait, LONG)
        waiting = asyncio.ensure_future(run_async(call(queued), lambda: None, lambda: None, executor))
        await asyncio.sleep(0)  # the waiting call hands its function to the busy executor
        running.cancel()
        waiting.cancel()
        await asyncio.sleep(0)
        try:
            assert not running.done(), "the call of a function still running ended"
        finally:
            release.set()
        for cancelled in (running, waiting):
            with pytest.raises(asyncio.CancelledError):
                await cancelled
        assert ran == ["blocked"]

    try:
        run(main)
    finally:
        executor.shutdown()


def test_the_async_cluster_has_the_clusters_methods_as_coroutines() -> None:
    import inspect

    def public(cls: type) -> dict[str, Any]:
        return {name: fn for name, fn in vars(cls).items() if not name.startswith("_") and callable(fn)}

    sync, aio = public(polyop.Cluster), public(polyop.AsyncCluster)
    # watch is AsyncCluster's alone: an async iterator rather than a
    # coroutine (tests/test_watch.py).
    assert aio.pop("watch", None) is not None
    assert set(sync) == set(aio) and len(sync) >= 11
    for name, fn in aio.items():
        assert inspect.iscoroutinefunction(fn), f"AsyncCluster.{name} is not a coroutine function"
        if name != "close":
            assert inspect.signature(fn).parameters.keys() == inspect.signature(sync[name]).parameters.keys(), name
