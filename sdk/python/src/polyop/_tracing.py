"""Traces of the host's calls, with OpenTelemetry.

The host sends W3C trace context (``traceparent``, ``tracestate``, and the
``baggage`` that carries the reconcile ID) in the metadata of each Reconcile,
Finalize, Default, Validate and Convert call, and in the ``trace_context`` of
each call on a ReconcileStream. With
tracing on, the server runs the user's function inside a SERVER span that
continues the host's trace (:meth:`Tracing.server_span`), so
``opentelemetry.trace.get_current_span()`` in the function is that span; each
Cluster service call made inside it is a CLIENT span whose context travels in
the call's metadata (:func:`client_span`), so the host's span of that call is
its child.

Tracing is on with the TracerProvider passed to the server, else the global
one the application set, else one made from the standard OTEL_* environment
variables (:func:`configure`); otherwise it is off, and a call costs nothing
more than before: no extraction, no span, no metadata.

Spans are made through the OpenTelemetry API only, with the attributes the
host uses (``polyop.controller`` ...) and the RPC semantic conventions
(``rpc.system``, ``rpc.service``, ``rpc.method``, ``rpc.grpc.status_code``),
as OpenTelemetry's gRPC instrumentation names them. Its interceptors are not
used: an AsyncCluster may be handed a grpc.aio channel, which takes no
interceptor once made, and the span's polyop attributes are known only to the
servicer.
"""

from __future__ import annotations

import logging
import os
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

import grpc
from opentelemetry import baggage, propagate, trace
from opentelemetry import context as otel_context
from opentelemetry.trace import SpanKind, Status, StatusCode

from polyop._version import __version__

SIDECAR_SERVICE = "polyop.v1alpha1.SidecarService"
CLUSTER_SERVICE = "polyop.v1alpha1.ClusterService"

# The span attributes of the host's and every SDK's spans.
CONTROLLER = "polyop.controller"
KIND = "polyop.kind"
NAMESPACE = "polyop.namespace"
NAME = "polyop.name"
RECONCILE_ID = "polyop.reconcile_id"
RETRIES = "polyop.retries"
RESULT = "polyop.result"

# The values of polyop.result, as the host's.
SUCCESS = "success"
"""A call that succeeded without asking for a retry."""
REQUEUE = "requeue"
"""A reconcile or finalize that succeeded and asked to be called again after a while."""
ERROR = "error"
"""A call that failed; the host retries it with backoff."""
TERMINAL_ERROR = "terminal_error"
"""A reconcile or finalize that failed and is not retried until the object changes."""
DENIED = "denied"
"""An admission call that denied the request."""

BAGGAGE_RECONCILE_ID = "polyop.reconcile_id"
"""The W3C baggage member in which the host sends controller-runtime's ID of
the reconcile, the reconcileID of its log lines."""

_RPC_STATUS_CODE = "rpc.grpc.status_code"

_TRACER = otel_context.create_key("polyop-tracer")
"""The context key of the Tracing's tracer inside a server span: the Cluster
calls made there use it for their client spans."""

# The environment variables that turn tracing on (see configure).
_ENDPOINT_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "OTEL_EXPORTER_OTLP_ENDPOINT")
_EXPORTER_ENV = "OTEL_TRACES_EXPORTER"
_PROTOCOL_ENVS = ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL")
_INSTALL = "pip install 'polyop[otlp]'"


class Tracing:
    """The tracer of a serving sidecar's spans, from :func:`configure`.

    ``flush_at_stop``: the provider is the one polyop made from the
    environment, whose queued spans the server exports when it stops.
    """

    def __init__(self, provider: trace.TracerProvider, *, flush_at_stop: bool = False) -> None:
        self.provider = provider
        self.tracer = provider.get_tracer("polyop", __version__)
        self._flush_at_stop = flush_at_stop

    @contextmanager
    def server_span(self, method: str, carrier: Mapping[str, str]) -> Iterator[trace.Span]:
        """Run the body inside the SERVER span of a SidecarService call, the
        child of the span whose context ``carrier`` holds (a root span when
        it holds none): a unary call's metadata (:func:`metadata_carrier`), or
        a streamed call's ``trace_context``."""
        token = otel_context.attach(otel_context.set_value(_TRACER, self.tracer, propagate.extract(carrier)))
        try:
            with self.tracer.start_as_current_span(
                f"{SIDECAR_SERVICE}/{method}",
                kind=SpanKind.SERVER,
                attributes={"rpc.system": "grpc", "rpc.service": SIDECAR_SERVICE, "rpc.method": method},
            ) as span:
                yield span
        finally:
            otel_context.detach(token)

    def flush(self, timeout: float = 5.0) -> None:
        """Export the spans still queued, when polyop made the provider."""
        if self._flush_at_stop:
            force_flush = getattr(self.provider, "force_flush", None)
            if force_flush is not None:
                force_flush(int(timeout * 1000))


def metadata_carrier(metadata: Iterable[tuple[str, Any]] | None) -> dict[str, str]:
    """The text entries of a unary call's metadata, which carry its trace
    context."""
    return {key: value for key, value in metadata or () if isinstance(value, str)}


class ClientCall:
    """A Cluster call's tracing: the metadata to send, the span to mark."""

    def __init__(self, span: trace.Span | None, metadata: tuple[tuple[str, str], ...] | None) -> None:
        self.span = span
        self.metadata = metadata

    def failed(self, code: grpc.StatusCode, message: str) -> None:
        """The call failed with a gRPC status."""
        if self.span is not None:
            refused(self.span, code, message)


@contextmanager
def client_span(method: str) -> Iterator[ClientCall]:
    """Trace one Cluster service call.

    Inside a traced SidecarService call (or a span of the application's own),
    the call is a CLIENT span, child of the current span, and its context goes
    in the call's metadata; elsewhere it is not traced and sends no metadata.
    """
    tracer = otel_context.get_value(_TRACER)
    if not isinstance(tracer, trace.Tracer):
        if not trace.get_current_span().get_span_context().is_valid:
            yield ClientCall(None, None)
            return
        tracer = trace.get_tracer("polyop", __version__)
    with tracer.start_as_current_span(
        f"{CLUSTER_SERVICE}/{method}",
        kind=SpanKind.CLIENT,
        attributes={"rpc.system": "grpc", "rpc.service": CLUSTER_SERVICE, "rpc.method": method},
    ) as span:
        carrier: dict[str, str] = {}
        propagate.inject(carrier)
        yield ClientCall(span, tuple(carrier.items()))


def refused(span: trace.Span, code: grpc.StatusCode, message: str) -> None:
    """Mark a span whose call ended with a gRPC error status."""
    if span.is_recording():
        span.set_attribute(_RPC_STATUS_CODE, code.value[0])
        span.set_status(Status(StatusCode.ERROR, f"{code.name}: {message}"))


def set_attributes(attributes: Mapping[str, Any]) -> None:
    """Set attributes on the current span, when it records (the empty
    strings and Nones left out)."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attributes({k: v for k, v in attributes.items() if v is not None and v != ""})


def set_result(result: str, error: str = "") -> None:
    """Set ``polyop.result`` on the current span, and its status to an error
    with ``error`` when there is one."""
    span = trace.get_current_span()
    if span.is_recording():
        span.set_attribute(RESULT, result)
        if error:
            span.set_status(Status(StatusCode.ERROR, error))


def reconcile_id() -> str:
    """The reconcile ID the host sent in the current context's baggage, or ""."""
    value = baggage.get_baggage(BAGGAGE_RECONCILE_ID)
    return value if isinstance(value, str) else ""


def log_fields() -> dict[str, str]:
    """``trace_id`` and ``span_id`` (hex) of the current span, for a log
    line; empty outside a trace."""
    ctx = trace.get_current_span().get_span_context()
    if not ctx.is_valid:
        return {}
    return {"trace_id": trace.format_trace_id(ctx.trace_id), "span_id": trace.format_span_id(ctx.span_id)}


def configure(service_name: str, provider: trace.TracerProvider | None, log: logging.Logger) -> Tracing | None:
    """The tracing of a sidecar about to serve, or None when it is off.

    On with ``provider`` when one is passed; else with the global
    TracerProvider when the application set one; else with a provider made
    from the environment when OTEL_TRACES_EXPORTER names an exporter (otlp,
    console), or OTEL_EXPORTER_OTLP_ENDPOINT or
    OTEL_EXPORTER_OTLP_TRACES_ENDPOINT is set; OTEL_SDK_DISABLED=true and
    OTEL_TRACES_EXPORTER=none turn it off. The provider made from the
    environment becomes the global one, so the application's own spans use it.
    """
    if provider is not None:
        return None if isinstance(provider, trace.NoOpTracerProvider) else Tracing(provider)
    current = trace.get_tracer_provider()
    if not isinstance(current, trace.ProxyTracerProvider):
        return None if isinstance(current, trace.NoOpTracerProvider) else Tracing(current)
    made = _from_env(service_name, log)
    if made is None:
        return None
    trace.set_tracer_provider(made)
    return Tracing(made, flush_at_stop=True)


def _from_env(service_name: str, log: logging.Logger) -> trace.TracerProvider | None:
    env = os.environ
    if env.get("OTEL_SDK_DISABLED", "").strip().lower() == "true":
        return None
    exporters = [e.strip().lower() for e in env.get(_EXPORTER_ENV, "").split(",") if e.strip()]
    if not exporters:
        if not any(env.get(name) for name in _ENDPOINT_ENVS):
            return None
        exporters = ["otlp"]
    exporters = [e for e in exporters if e != "none"]
    if not exporters:
        return None
    try:
        from opentelemetry.sdk.resources import Resource
        from opentelemetry.sdk.trace import TracerProvider
        from opentelemetry.sdk.trace.export import (
            BatchSpanProcessor,
            ConsoleSpanExporter,
            SpanExporter,
        )
    except ImportError:
        log.warning("Tracing is off: the OTEL_* environment asks for traces, but the OpenTelemetry SDK is not installed (%s)", _INSTALL)
        return None
    chosen: list[SpanExporter] = []
    for name in exporters:
        if name == "otlp":
            otlp = _otlp_exporter(log)
            if otlp is not None:
                chosen.append(otlp)
        elif name == "console":
            chosen.append(ConsoleSpanExporter())
        else:
            log.warning("%s=%s: polyop exports traces with otlp or console; ignoring %r", _EXPORTER_ENV, env[_EXPORTER_ENV], name)
    if not chosen:
        return None
    # OTEL_SERVICE_NAME and OTEL_RESOURCE_ATTRIBUTES, else the sidecar's name.
    resource = Resource.create()
    if str(resource.attributes.get("service.name", "")).startswith("unknown_service"):
        resource = resource.merge(Resource({"service.name": service_name}))
    # The sampler comes from OTEL_TRACES_SAMPLER (parent-based, always on by
    # default); the batching from OTEL_BSP_*.
    made = TracerProvider(resource=resource)
    for exporter in chosen:
        made.add_span_processor(BatchSpanProcessor(exporter))
    return made


def _otlp_exporter(log: logging.Logger) -> Any:
    protocol = next((os.environ[name] for name in _PROTOCOL_ENVS if os.environ.get(name)), "grpc").strip()
    try:
        if protocol == "grpc":
            from opentelemetry.exporter.otlp.proto.grpc.trace_exporter import (
                OTLPSpanExporter as GRPCExporter,
            )

            return GRPCExporter()
        if protocol == "http/protobuf":
            from opentelemetry.exporter.otlp.proto.http.trace_exporter import (
                OTLPSpanExporter as HTTPExporter,
            )

            return HTTPExporter()
    except ImportError:
        log.warning("No OTLP export of traces: the OTLP exporter over %s is not installed (%s)", protocol, _INSTALL)
        return None
    log.warning("No OTLP export of traces: OTEL_EXPORTER_OTLP_PROTOCOL=%s, but polyop exports OTLP over grpc or http/protobuf", protocol)
    return None
