"""Traces: the sidecar continues the host's trace in the user's function and
passes it on to the Cluster calls made there, over real sockets, on threads
and on asyncio; the log lines of a traced call carry its trace and span IDs;
with tracing off nothing is extracted, recorded or sent; configured by the
OTEL_* environment, a sidecar process exports its spans over OTLP."""

from __future__ import annotations

import asyncio
import http.server
import logging
import os
import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Callable, Iterator
from concurrent import futures
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest
from opentelemetry import trace
from opentelemetry.proto.collector.trace.v1 import (
    trace_service_pb2,
    trace_service_pb2_grpc,
)
from opentelemetry.sdk.trace import ReadableSpan, TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

import polyop
from polyop import _tracing as polyop_tracing
from polyop.v1alpha1 import (
    admission_pb2,
    cluster_pb2_grpc,
    describe_pb2,
    reconcile_pb2,
    sidecar_pb2_grpc,
    types_pb2,
)
from tests.test_cluster import RecordingService

WIDGET = "example.com/v1/Widget"
OBJECT = b'{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","namespace":"ns"}}'
TRACE_ID = "4bf92f3577b34da6a3ce929d0e0e4736"
HOST_SPAN_ID = "00f067aa0ba902b7"
TRACEPARENT = f"00-{TRACE_ID}-{HOST_SPAN_ID}-01"
LONG = 30.0  # generous: a limit only a broken implementation reaches


class MetadataRecordingService(RecordingService):
    """A Cluster service that also records the metadata of every call."""

    def __init__(self) -> None:
        super().__init__()
        self.metadata: list[dict[str, str]] = []

    def _answer(self, request: Any, context: grpc.ServicerContext) -> None:
        self.metadata.append({k: v for k, v in context.invocation_metadata() if isinstance(v, str)})
        super()._answer(request, context)


@pytest.fixture
def cluster_service(sock_dir: str) -> Iterator[tuple[MetadataRecordingService, str]]:
    service = MetadataRecordingService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(service, server)
    server.add_insecure_port(f"unix:{sock_dir}/cluster.sock")
    server.start()
    yield service, f"unix://{sock_dir}/cluster.sock"
    server.stop(None)


@pytest.fixture
def spans() -> tuple[TracerProvider, InMemorySpanExporter]:
    """A TracerProvider that keeps its spans in memory (never the global one,
    which a process sets once)."""
    exporter = InMemorySpanExporter()
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(exporter))
    return provider, exporter


@dataclass
class Seen:
    """What the user's function saw of its span and logged."""

    span: list[trace.SpanContext] = field(default_factory=list)
    child: list[trace.SpanContext] = field(default_factory=list)


def traced_sidecar(provider: trace.TracerProvider, seen: Seen, how: str) -> polyop.Sidecar:
    """A sidecar whose reconciler logs, reads a Secret through the Cluster
    service inside a span of its own, and asks to be requeued; plain or
    ``async def`` as ``how`` says."""
    sidecar = polyop.Sidecar("widget-operator")
    tracer = provider.get_tracer("widget-operator")

    if how == "async":

        @sidecar.reconciler(WIDGET)
        async def reconcile_async(obj: polyop.Object, ctx: polyop.AsyncContext) -> polyop.Result:
            seen.span.append(trace.get_current_span().get_span_context())
            ctx.log.info("Reconciling")
            with tracer.start_as_current_span("read the secret") as child:
                seen.child.append(child.get_span_context())
                await ctx.cluster.get("v1/ConfigMap", "c1", namespace="ns")
            return polyop.Result(requeue_after=60)

    else:

        @sidecar.reconciler(WIDGET)
        def reconcile(obj: polyop.Object, ctx: polyop.Context) -> polyop.Result:
            seen.span.append(trace.get_current_span().get_span_context())
            ctx.log.info("Reconciling")
            with tracer.start_as_current_span("read the secret") as child:
                seen.child.append(child.get_span_context())
                ctx.cluster.get("v1/ConfigMap", "c1", namespace="ns")
            return polyop.Result(requeue_after=60)

    @sidecar.validator(WIDGET)
    def validate(obj: polyop.Object, req: polyop.AdmissionRequest) -> None:
        seen.span.append(trace.get_current_span().get_span_context())
        raise polyop.DeniedError("no widgets today")

    return sidecar


def call_sidecar(
    sidecar: polyop.Sidecar, how: str, sock_dir: str, cluster_address: str, metadata: tuple[tuple[str, str], ...], **kwargs: Any
) -> tuple[reconcile_pb2.ReconcileResponse, admission_pb2.ValidateResponse]:
    """Describe (announcing the Cluster service), Reconcile and Validate, with
    ``metadata``, served on threads (``how`` "threads") or on grpc.aio."""
    address = f"unix://{sock_dir}/sidecar.sock"
    reconcile = reconcile_pb2.ReconcileRequest(
        controller="widget", key=types_pb2.ObjectKey(namespace="ns", name="w1"), object=OBJECT, retries=2
    )
    validate = admission_pb2.ValidateRequest(
        request=admission_pb2.AdmissionRequest(
            uid="u1", kind=types_pb2.GroupVersionKind(group="example.com", version="v1", kind="Widget"),
            key=types_pb2.ObjectKey(namespace="ns", name="w1"), operation=admission_pb2.OPERATION_CREATE, object=OBJECT,
        )
    )

    # One call after the other (a grpc.aio call starts when it is made).
    def calls(stub: Any) -> list[Callable[[], Any]]:
        return [
            lambda: stub.Describe(
                describe_pb2.DescribeRequest(protocol_version=polyop.PROTOCOL_VERSION, cluster_address=cluster_address), timeout=LONG
            ),
            lambda: stub.Reconcile(reconcile, timeout=LONG, metadata=metadata),
            lambda: stub.Validate(validate, timeout=LONG, metadata=metadata),
        ]

    if how == "threads":
        with sidecar.start(address=address, **kwargs), grpc.insecure_channel(f"unix:{sock_dir}/sidecar.sock") as channel:
            _, reconciled, validated = [call() for call in calls(sidecar_pb2_grpc.SidecarServiceStub(channel))]
            return reconciled, validated

    async def main() -> tuple[reconcile_pb2.ReconcileResponse, admission_pb2.ValidateResponse]:
        async with await sidecar.start_async(address=address, **kwargs), grpc.aio.insecure_channel(f"unix:{sock_dir}/sidecar.sock") as channel:
            _, reconciled, validated = [await call() for call in calls(sidecar_pb2_grpc.SidecarServiceStub(channel))]
            return reconciled, validated

    return asyncio.run(asyncio.wait_for(main(), LONG))


def by_name(finished: tuple[ReadableSpan, ...], name: str) -> ReadableSpan:
    found = [s for s in finished if s.name == name]
    assert len(found) == 1, f"spans named {name!r}: {[s.name for s in finished]}"
    return found[0]


def ids(ctx: trace.SpanContext | None) -> tuple[str, str]:
    assert ctx is not None
    return trace.format_trace_id(ctx.trace_id), trace.format_span_id(ctx.span_id)


# "threads": plain functions on grpc's threads; "asyncio": plain functions on
# the executor of grpc.aio (the context must cross into the thread); "async":
# async def functions on the event loop.
HOW = ["threads", "asyncio", "async"]


@pytest.mark.parametrize("how", HOW)
def test_the_function_runs_in_a_span_that_continues_the_hosts_trace(
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
    metadata = (("traceparent", TRACEPARENT), ("baggage", "polyop.reconcile_id=6d1f0c7e-1234"))
    with caplog.at_level(logging.INFO, logger="polyop"):
        reconciled, validated = call_sidecar(
            sidecar, "threads" if how == "threads" else "asyncio", sock_dir, cluster_address, metadata, tracer_provider=provider
        )
    assert reconciled.requeue_after.seconds == 60 and not reconciled.error.message
    assert validated.denied.message == "no widgets today"

    finished = exporter.get_finished_spans()
    server = by_name(finished, "polyop.v1alpha1.SidecarService/Reconcile")
    # The host's span is the parent; the function saw its own span as current.
    assert server.kind == trace.SpanKind.SERVER
    assert server.parent is not None and server.parent.is_remote
    assert ids(server.parent) == (TRACE_ID, HOST_SPAN_ID)
    assert ids(server.context)[0] == TRACE_ID
    assert seen.span[0] == server.context
    assert dict(server.attributes or {}) == {
        "rpc.system": "grpc", "rpc.service": "polyop.v1alpha1.SidecarService", "rpc.method": "Reconcile",
        "polyop.controller": "widget", "polyop.kind": "Widget", "polyop.namespace": "ns", "polyop.name": "w1",
        "polyop.reconcile_id": "6d1f0c7e-1234", "polyop.retries": 2, "polyop.result": "requeue",
    }

    # The user's own span is the handler span's child; the Cluster call a
    # client span under it, whose context the Cluster service received.
    child = by_name(finished, "read the secret")
    assert child.parent == server.context and child.context == seen.child[0]
    client = by_name(finished, "polyop.v1alpha1.ClusterService/Get")
    assert client.kind == trace.SpanKind.CLIENT and client.parent == child.context
    assert service.metadata[-1]["traceparent"] == f"00-{TRACE_ID}-{ids(client.context)[1]}-01"

    # The log line carries the trace, the span current when it was logged, and
    # the keys the host's lines use.
    logged = [r for r in caplog.records if r.getMessage().startswith("Reconciling")]
    assert len(logged) == 1
    assert logged[0].__dict__["polyop"] == {
        "controller": "widget", "kind": "Widget", "namespace": "ns", "name": "w1", "reconcileID": "6d1f0c7e-1234",
        "retries": "2", "trace_id": TRACE_ID, "span_id": ids(server.context)[1],
    }
    assert f"trace_id={TRACE_ID} span_id={ids(server.context)[1]}" in logged[0].getMessage()

    # An admission call is a span of its own, its result the denial.
    validated_span = by_name(finished, "polyop.v1alpha1.SidecarService/Validate")
    assert ids(validated_span.parent) == (TRACE_ID, HOST_SPAN_ID) and seen.span[1] == validated_span.context
    assert (validated_span.attributes or {})["polyop.result"] == "denied"
    # Describe, health checks and reflection are not traced.
    assert not [s for s in finished if "Describe" in s.name]


def test_a_call_without_trace_context_is_a_root_span(
    sock_dir: str, cluster_service: tuple[MetadataRecordingService, str], spans: tuple[TracerProvider, InMemorySpanExporter]
) -> None:
    service, cluster_address = cluster_service
    provider, exporter = spans
    seen = Seen()
    call_sidecar(traced_sidecar(provider, seen, "threads"), "threads", sock_dir, cluster_address, (), tracer_provider=provider)
    server = by_name(exporter.get_finished_spans(), "polyop.v1alpha1.SidecarService/Reconcile")
    assert server.parent is None
    assert ids(server.context)[0] != TRACE_ID
    assert service.metadata[-1]["traceparent"].split("-")[1] == ids(server.context)[0]


@pytest.mark.parametrize("how", ["threads", "asyncio"])
def test_with_tracing_off_nothing_is_traced_or_sent(
    how: str,
    sock_dir: str,
    cluster_service: tuple[MetadataRecordingService, str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """No provider passed, none set globally, no OTEL_* variable: the function
    sees no span, the Cluster call carries no trace context, the log line no
    trace ID, though the host sent one."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    service, cluster_address = cluster_service
    seen = Seen()
    # The function's own tracer is the global (no-op) one.
    sidecar = traced_sidecar(trace.get_tracer_provider(), seen, "plain")
    with caplog.at_level(logging.INFO, logger="polyop"):
        call_sidecar(sidecar, how, sock_dir, cluster_address, (("traceparent", TRACEPARENT),))
    assert not seen.span[0].is_valid
    assert "traceparent" not in service.metadata[-1]
    logged = [r for r in caplog.records if r.getMessage().startswith("Reconciling")]
    assert "trace_id" not in logged[0].__dict__["polyop"]
    assert "tracing off," in [r.getMessage() for r in caplog.records if r.getMessage().startswith("Serving on")][0]


@pytest.mark.parametrize("how", ["threads", "asyncio"])
def test_with_tracing_off_a_call_does_no_span_work(
    how: str,
    sock_dir: str,
    cluster_service: tuple[MetadataRecordingService, str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """With tracing off there is no span to set attributes on and no baggage
    to read a reconcile ID from: Reconcile and Validate skip that work, which
    was a fixed cost of every call."""
    assert isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)
    for name in [k for k in os.environ if k.startswith("OTEL_")]:
        monkeypatch.delenv(name)
    touched: list[str] = []

    def reconcile_id() -> str:
        touched.append("reconcile_id")
        return ""

    monkeypatch.setattr(polyop_tracing, "set_attributes", lambda attributes: touched.append("set_attributes"))
    monkeypatch.setattr(polyop_tracing, "reconcile_id", reconcile_id)
    reconciled, validated = call_sidecar(
        traced_sidecar(trace.get_tracer_provider(), Seen(), "plain"), how, sock_dir, cluster_service[1], (("traceparent", TRACEPARENT),)
    )
    assert reconciled.requeue_after.seconds == 60
    assert validated.denied.message == "no widgets today"
    assert touched == []


def test_a_cluster_call_outside_a_traced_call_sends_no_trace_context(cluster_service: tuple[MetadataRecordingService, str]) -> None:
    service, cluster_address = cluster_service
    with polyop.Cluster(cluster_address) as cluster:
        cluster.get("v1/ConfigMap", "c1", namespace="ns")
    assert "traceparent" not in service.metadata[-1]


def test_a_refused_call_fails_its_span(sock_dir: str, spans: tuple[TracerProvider, InMemorySpanExporter]) -> None:
    provider, exporter = spans
    sidecar = traced_sidecar(provider, Seen(), "threads")
    with sidecar.start(address=f"unix://{sock_dir}/sidecar.sock", tracer_provider=provider), grpc.insecure_channel(
        f"unix:{sock_dir}/sidecar.sock"
    ) as channel:
        request = reconcile_pb2.ReconcileRequest(controller="nope", key=types_pb2.ObjectKey(namespace="ns", name="w1"), object=OBJECT)
        with pytest.raises(grpc.RpcError) as err:
            sidecar_pb2_grpc.SidecarServiceStub(channel).Reconcile(request, timeout=LONG, metadata=(("traceparent", TRACEPARENT),))
    assert err.value.code() == grpc.StatusCode.NOT_FOUND
    server = by_name(exporter.get_finished_spans(), "polyop.v1alpha1.SidecarService/Reconcile")
    assert server.status.status_code == trace.StatusCode.ERROR
    assert (server.attributes or {})["rpc.grpc.status_code"] == grpc.StatusCode.NOT_FOUND.value[0]


class Collector(trace_service_pb2_grpc.TraceServiceServicer):
    """An OTLP trace receiver: keeps the spans it is sent, over gRPC
    (``Export``) or over HTTP (``http_handler``)."""

    def __init__(self) -> None:
        self.spans: list[Any] = []
        self.resources: list[dict[str, str]] = []
        self.received = threading.Condition()

    def Export(
        self, request: trace_service_pb2.ExportTraceServiceRequest, context: grpc.ServicerContext
    ) -> trace_service_pb2.ExportTraceServiceResponse:
        self.record(request)
        return trace_service_pb2.ExportTraceServiceResponse()

    def record(self, request: trace_service_pb2.ExportTraceServiceRequest) -> None:
        with self.received:
            for resource_spans in request.resource_spans:
                self.resources.append({a.key: a.value.string_value for a in resource_spans.resource.attributes})
                for scope_spans in resource_spans.scope_spans:
                    self.spans.extend(scope_spans.spans)
            self.received.notify_all()

    def http_handler(self) -> type[http.server.BaseHTTPRequestHandler]:
        collector = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers["Content-Length"]))
                ok = self.path == "/v1/traces" and self.headers["Content-Type"] == "application/x-protobuf"
                if ok:
                    collector.record(trace_service_pb2.ExportTraceServiceRequest.FromString(body))
                answer = trace_service_pb2.ExportTraceServiceResponse().SerializeToString()
                self.send_response(200 if ok else 400)
                self.send_header("Content-Type", "application/x-protobuf")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        return Handler


@contextmanager
def receiving(collector: Collector, protocol: str) -> Iterator[str]:
    """An OTLP endpoint over ``protocol`` (grpc or http/protobuf) that hands
    what it receives to ``collector``; yields its address."""
    if protocol == "grpc":
        server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
        trace_service_pb2_grpc.add_TraceServiceServicer_to_server(collector, server)  # type: ignore[no-untyped-call]
        port = server.add_insecure_port("127.0.0.1:0")
        server.start()
        try:
            yield f"http://127.0.0.1:{port}"
        finally:
            server.stop(None)
        return
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), collector.http_handler())
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}"
    finally:
        httpd.shutdown()
        httpd.server_close()
        thread.join()


SIDECAR_MAIN = textwrap.dedent(
    """
    import sys

    import polyop

    sidecar = polyop.Sidecar("widget-operator")

    @sidecar.reconciler("example.com/v1/Widget")
    def reconcile(obj, ctx):
        ctx.cluster.get("v1/ConfigMap", "c1", namespace="ns")

    sidecar.serve(address=sys.argv[1], grace=5)
    """
)


@pytest.mark.parametrize("protocol", ["grpc", "http/protobuf"])
def test_the_otel_environment_exports_the_spans_over_otlp(
    protocol: str, sock_dir: str, cluster_service: tuple[MetadataRecordingService, str]
) -> None:
    """A sidecar process configured by OTEL_EXPORTER_OTLP_ENDPOINT (and
    OTEL_EXPORTER_OTLP_PROTOCOL) sends its spans to an OTLP receiver, at the
    latest when it stops."""
    _, cluster_address = cluster_service
    collector = Collector()
    socket = f"{sock_dir}/sidecar.sock"
    with receiving(collector, protocol) as endpoint:
        env = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
        env.update(OTEL_EXPORTER_OTLP_ENDPOINT=endpoint, OTEL_EXPORTER_OTLP_PROTOCOL=protocol, PYTHONPATH=os.pathsep.join(sys.path))
        proc = subprocess.Popen(
            [sys.executable, "-c", SIDECAR_MAIN, f"unix://{socket}"], env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        try:
            with grpc.insecure_channel(f"unix:{socket}") as channel:
                grpc.channel_ready_future(channel).result(timeout=LONG)
                stub = sidecar_pb2_grpc.SidecarServiceStub(channel)
                describe = describe_pb2.DescribeRequest(protocol_version=polyop.PROTOCOL_VERSION, cluster_address=cluster_address)
                stub.Describe(describe, timeout=LONG)
                request = reconcile_pb2.ReconcileRequest(
                    controller="widget", key=types_pb2.ObjectKey(namespace="ns", name="w1"), object=OBJECT
                )
                stub.Reconcile(request, timeout=LONG, metadata=(("traceparent", TRACEPARENT),))
            proc.send_signal(signal.SIGTERM)
            output, _ = proc.communicate(timeout=LONG)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.communicate()
        assert proc.returncode == 0, output
        with collector.received:
            assert collector.received.wait_for(lambda: len(collector.spans) >= 2, timeout=LONG), output
    names = {s.name: s for s in collector.spans}
    server, client = names["polyop.v1alpha1.SidecarService/Reconcile"], names["polyop.v1alpha1.ClusterService/Get"]
    assert (server.trace_id.hex(), server.parent_span_id.hex()) == (TRACE_ID, HOST_SPAN_ID)
    assert (client.trace_id.hex(), client.parent_span_id) == (TRACE_ID, server.span_id)
    # service.name defaults to the sidecar's name.
    assert collector.resources[0]["service.name"] == "widget-operator"
    assert "tracing on" in output


def test_an_admission_function_that_fails_logs_with_its_trace(
    sock_dir: str, spans: tuple[TracerProvider, InMemorySpanExporter], caplog: pytest.LogCaptureFixture
) -> None:
    provider, exporter = spans
    sidecar = polyop.Sidecar("widget-operator")

    @sidecar.defaulter(WIDGET)
    def default(obj: polyop.Object, req: polyop.AdmissionRequest) -> None:
        raise RuntimeError("the size table is missing")

    request = admission_pb2.DefaultRequest(
        request=admission_pb2.AdmissionRequest(
            uid="u1", kind=types_pb2.GroupVersionKind(group="example.com", version="v1", kind="Widget"),
            key=types_pb2.ObjectKey(namespace="ns", name="w1"), operation=admission_pb2.OPERATION_CREATE, object=OBJECT,
        )
    )
    with (
        caplog.at_level(logging.INFO, logger="polyop"),
        sidecar.start(address=f"unix://{sock_dir}/sidecar.sock", tracer_provider=provider),
        grpc.insecure_channel(f"unix:{sock_dir}/sidecar.sock") as channel,
        pytest.raises(grpc.RpcError) as err,
    ):
        sidecar_pb2_grpc.SidecarServiceStub(channel).Default(request, timeout=LONG, metadata=(("traceparent", TRACEPARENT),))
    assert err.value.code() == grpc.StatusCode.INTERNAL
    span = by_name(exporter.get_finished_spans(), "polyop.v1alpha1.SidecarService/Default")
    assert span.status.status_code == trace.StatusCode.ERROR
    assert {k: v for k, v in (span.attributes or {}).items() if k.startswith("polyop.")} == {
        "polyop.kind": "Widget", "polyop.namespace": "ns", "polyop.name": "w1",
    }
    logged = [r for r in caplog.records if r.getMessage().startswith("Defaulting failed")]
    assert len(logged) == 1
    assert logged[0].__dict__["polyop"] == {
        "kind": "Widget", "namespace": "ns", "name": "w1", "trace_id": TRACE_ID, "span_id": ids(span.context)[1],
    }
