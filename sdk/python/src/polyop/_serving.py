"""Serving a registry: ``serve(registry, clients, options)``, a gRPC server
with the SidecarService, health checking and server reflection, on threads
(:class:`RunningSidecar`) or on asyncio with grpc.aio
(:class:`AsyncRunningSidecar`). :class:`ServeOptions` are the settings."""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import inspect
import logging
import os
import signal
import threading
import warnings
from collections.abc import Callable
from concurrent import futures
from dataclasses import dataclass
from typing import Any, TypedDict, TypeVar

import grpc
import grpc.aio
from grpc_health.v1 import health, health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha import reflection as grpc_reflection
from opentelemetry import trace

from polyop._address import (
    DEFAULT_SIDECAR_ADDRESS,
    Address,
    parse_address,
    prepare_socket,
)
from polyop._clients import Clients
from polyop._registry import Registry
from polyop._servicer import AsyncServicer, Servicer
from polyop._tracing import Tracing, configure
from polyop._version import SDK_NAME, __version__
from polyop.v1alpha1 import describe_pb2, sidecar_pb2, sidecar_pb2_grpc

__all__ = [
    "AsyncRunningSidecar",
    "RunningSidecar",
    "ServeOptions",
    "ServeOverrides",
    "serve",
    "serve_async",
    "serve_options",
    "start",
    "start_async",
    "takes_serve_options",
]

SIDECAR_SERVICE = sidecar_pb2.DESCRIPTOR.services_by_name["SidecarService"].full_name
HEALTH_SERVICE = health_pb2.DESCRIPTOR.services_by_name["Health"].full_name

SOCKET_MODE = 0o660
"""The mode of the unix socket a sidecar serves on: read and write for its
owner and group, nothing for others."""


@dataclass(frozen=True)
class ServeOptions:
    """How a sidecar serves: one set of settings for :meth:`Sidecar.serve`,
    :meth:`Sidecar.start`, :meth:`Sidecar.serve_async` and
    :meth:`Sidecar.start_async`, each of which also takes them as keyword
    arguments (``sidecar.serve(address="tcp://127.0.0.1:9443")``)::

        options = polyop.ServeOptions(address="unix:///var/run/polyop/sidecar.sock", grace=10)
        sidecar.serve(options)
    """

    address: str = DEFAULT_SIDECAR_ADDRESS
    """Where to serve, in the forms of the host's --sidecar-address
    (``unix:///abs.sock``, ``unix:rel.sock``, ``tcp://host:port``,
    ``host:port``). Defaults to unix:///var/run/polyop/sidecar.sock, the
    host's default."""
    max_message_size: int = 64 << 20
    """The largest message sent or received; should match the host's
    --max-message-size. Defaults to 64 MiB."""
    max_workers: int | None = None
    """The threads that run plain functions. Defaults to the controllers'
    concurrency plus room for webhooks and health checks."""
    credentials: grpc.ServerCredentials | None = None
    """``grpc.ssl_server_credentials(...)`` to serve TLS or mTLS, for a
    sidecar on a TCP address. Defaults to plaintext, as on the unix socket a
    pod's containers share."""
    grace: float = 30.0
    """Seconds :meth:`Sidecar.serve` waits, once stopped, for the calls in
    flight. Defaults to 30."""
    reflection: bool = True
    """Serve gRPC server reflection (grpc.reflection.v1alpha) next to the
    SidecarService, so that ``grpcurl -plaintext -unix <socket> list`` lists
    and calls the services without the proto files. Defaults to on."""
    tracer_provider: trace.TracerProvider | None = None
    """The TracerProvider of the calls' spans. Defaults to the global one
    when the application set one, else to one made from the OTEL_*
    environment variables (needs ``polyop[otlp]``), else tracing is off."""
    reconcile_stream: bool = True
    """Serve ReconcileStream, and say so in the Describe answer, so that the
    host sends Reconcile and Finalize calls on one long-lived stream per
    worker. Defaults to on; off makes the host call the unary Reconcile and
    Finalize."""


class ServeOverrides(TypedDict, total=False):
    """:class:`ServeOptions`' fields, as the keyword arguments of the serving methods."""

    address: str
    max_message_size: int
    max_workers: int | None
    credentials: grpc.ServerCredentials | None
    grace: float
    reflection: bool
    tracer_provider: trace.TracerProvider | None
    reconcile_stream: bool


_F = TypeVar("_F", bound=Callable[..., Any])


def takes_serve_options(method: _F) -> _F:
    """Give a serving method the signature it is called with: the options,
    then each of their fields as a keyword argument with its default, so that
    ``help()`` and ``inspect.signature`` show what ``**overrides`` takes."""
    signature = inspect.signature(method)
    keywords = [
        inspect.Parameter(f.name, inspect.Parameter.KEYWORD_ONLY, default=f.default, annotation=f.type)
        for f in dataclasses.fields(ServeOptions)
    ]
    positional = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    method.__signature__ = signature.replace(parameters=[*positional, *keywords])  # type: ignore[attr-defined]
    return method


def serve_options(options: ServeOptions | str | None, overrides: ServeOverrides) -> ServeOptions:
    """The options a serving method was given: ``options`` (by default
    ServeOptions()) with the keyword arguments over them. An address string in
    place of the options is the deprecated shape."""
    if isinstance(options, str):
        warnings.warn(
            "passing the address positionally is deprecated: pass address=... or ServeOptions(address=...)",
            DeprecationWarning,
            stacklevel=3,
        )
        options = ServeOptions(address=options)
    return dataclasses.replace(options or ServeOptions(), **overrides)


class RunningSidecar:
    """A sidecar serving in the background, from :meth:`Sidecar.start`.

    ``address`` is the address it serves on, with the port it bound for a TCP
    address with port 0. Use it as a context manager, or call :meth:`stop`.
    """

    def __init__(
        self,
        sidecar: Registry,
        address: str,
        grpc_server: grpc.Server,
        health: health.HealthServicer,
        socket: str,
        servicer: Servicer,
        tracing: Tracing | None = None,
    ) -> None:
        self.address = address
        self._sidecar = sidecar
        self._server = grpc_server
        self._servicer = servicer
        self._health = health
        self._socket = socket
        self._tracing = tracing
        self._stopped = threading.Event()

    def stop(self, grace: float | None = None) -> None:
        """Report NOT_SERVING, refuse new calls, wait up to ``grace`` seconds for
        the calls in flight (None: do not wait), then close every connection.
        A reconcile stream ends at once when it has no call in flight, else
        once its call is answered."""
        if self._stopped.is_set():
            return
        self._sidecar.log.info("Stopping: waiting for the calls in flight (grace %ss)", grace)
        self._health.enter_graceful_shutdown()
        self._servicer.stop_streams()
        self._server.stop(grace).wait()
        _remove(self._socket)
        if self._tracing is not None:
            self._tracing.flush()
        self._sidecar._stopped_serving()
        self._stopped.set()
        self._sidecar.log.info("Stopped")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the server has stopped; False when timeout passed first."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> RunningSidecar:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop(grace=None)


class AsyncRunningSidecar:
    """A sidecar serving on grpc.aio, from :meth:`Sidecar.start_async`.

    ``address`` is as :attr:`RunningSidecar.address`. Use it as an async
    context manager, or await :meth:`stop`.
    """

    def __init__(
        self,
        sidecar: Registry,
        clients: Clients,
        address: str,
        grpc_server: grpc.aio.Server,
        health: health.aio.HealthServicer,
        socket: str,
        executor: futures.ThreadPoolExecutor,
        servicer: AsyncServicer,
        tracing: Tracing | None = None,
    ) -> None:
        self.address = address
        self._sidecar = sidecar
        self._server = grpc_server
        self._servicer = servicer
        self._health = health
        self._socket = socket
        self._executor = executor
        self._clients = clients
        self._tracing = tracing
        self._stopped = asyncio.Event()

    async def stop(self, grace: float | None = None) -> None:
        """As :meth:`RunningSidecar.stop`: calls still running after ``grace``
        are cancelled."""
        if self._stopped.is_set():
            return
        self._sidecar.log.info("Stopping: waiting for the calls in flight (grace %ss)", grace)
        await self._health.enter_graceful_shutdown()
        self._servicer.stop_streams()
        await self._server.stop(grace)
        _remove(self._socket)
        self._executor.shutdown(wait=False, cancel_futures=True)
        await self._clients.close_async_cluster()
        if self._tracing is not None:
            await asyncio.get_running_loop().run_in_executor(None, self._tracing.flush)
        self._sidecar._stopped_serving()
        self._stopped.set()
        self._sidecar.log.info("Stopped")

    async def wait(self) -> None:
        """Wait until the server has stopped."""
        await self._stopped.wait()

    async def __aenter__(self) -> AsyncRunningSidecar:
        return self

    async def __aexit__(self, *_: object) -> None:
        await self.stop(grace=None)


def _concurrency(sidecar: Registry) -> int:
    """How many Reconcile and Finalize calls the host makes at once at most:
    one per worker of each controller, and as many ReconcileStreams."""
    return sum(max(c.description.max_concurrent_reconciles, 1) for c in sidecar._controllers.values())


def _max_workers(sidecar: Registry, max_workers: int | None) -> int:
    if max_workers is not None:
        return max_workers
    return _concurrency(sidecar) + 2 * len(sidecar._webhooks) + len(sidecar._converters) + 4


def _threads_stream(sidecar: Registry, workers: int, reconcile_stream: bool) -> bool:
    """Whether the thread-pool server serves ReconcileStream: each open stream
    holds a thread, also between calls, so the pool must have a thread left
    beside the host's streams for the other calls (health checks above all),
    or streams waiting for a thread would never be served."""
    if not reconcile_stream or workers > _concurrency(sidecar):
        return reconcile_stream
    sidecar.log.warning(
        "Serving Reconcile and Finalize as unary calls only: max_workers=%d leaves no thread beside the %d reconcile "
        "streams the host would open (one per worker of each controller); give max_workers more than %d to serve them",
        workers, _concurrency(sidecar), _concurrency(sidecar),
    )
    return False


def _options(max_message_size: int) -> list[tuple[str, Any]]:
    return [
        ("grpc.max_send_message_length", max_message_size),
        ("grpc.max_receive_message_length", max_message_size),
        ("grpc.so_reuseport", 0),
    ]


def _bind(server: grpc.Server | grpc.aio.Server, parsed: Address, credentials: grpc.ServerCredentials | None) -> str:
    if parsed.unix_path:
        prepare_socket(parsed.unix_path)
    if credentials is None:
        port = server.add_insecure_port(parsed.grpc_target)
    else:
        port = server.add_secure_port(parsed.grpc_target, credentials)
    if parsed.unix_path:
        # Owner and group only, as the host makes its own socket: the host's
        # container needs the same user, or a group the pod's fsGroup gives both.
        os.chmod(parsed.unix_path, SOCKET_MODE)
        return "unix://" + parsed.unix_path
    host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
    return f"tcp://{host}:{port}"


def _log_serving(sidecar: Registry, served: str, how: str, reflecting: bool, tracing: Tracing | None, streaming: bool) -> None:
    sidecar.log.info(
        "Serving on %s (%s): protocol %s, %s %s, controllers %s, webhooks %s, conversions %s, reflection %s, tracing %s, "
        "reconcile stream %s",
        served, how, describe_pb2.ProtocolVersion.Name(describe_pb2.PROTOCOL_VERSION_V1ALPHA1), SDK_NAME, __version__,
        list(sidecar._controllers), [str(k) for k in sidecar._webhooks], [f"{g}/{k}" for g, k in sidecar._converters],
        "on" if reflecting else "off", "off" if tracing is None else "on", "on" if streaming else "off",
    )


def _reflect(server: grpc.Server | grpc.aio.Server, reflecting: bool) -> None:
    """Serve gRPC server reflection of the server's services, so that grpcurl
    lists and calls them without the proto files."""
    if reflecting:
        grpc_reflection.enable_server_reflection((SIDECAR_SERVICE, HEALTH_SERVICE, grpc_reflection.SERVICE_NAME), server)


def _remove(socket: str) -> None:
    if socket:
        with contextlib.suppress(FileNotFoundError):
            os.remove(socket)


def start(registry: Registry, clients: Clients, options: ServeOptions) -> RunningSidecar:
    """Serve registry on threads in the background."""
    parsed = parse_address(options.address)
    if registry.has_async_handlers():
        raise RuntimeError(
            f"sidecar {registry.name!r} registers async def functions, which need an event loop: "
            "serve it with serve_async or start_async (serve uses serve_async by itself)"
        )
    registry._start_serving()
    try:
        workers = _max_workers(registry, options.max_workers)
        reconcile_stream = _threads_stream(registry, workers, options.reconcile_stream)
        server = grpc.server(
            futures.ThreadPoolExecutor(max_workers=workers, thread_name_prefix="polyop"), options=_options(options.max_message_size)
        )
        tracing = configure(registry.name, options.tracer_provider, registry.log)
        servicer = Servicer(registry, clients, tracing, reconcile_stream=reconcile_stream)
        sidecar_pb2_grpc.add_SidecarServiceServicer_to_server(servicer, server)
        health_servicer = health.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        _reflect(server, options.reflection)
        served = _bind(server, parsed, options.credentials)
        server.start()
    except BaseException:
        registry._stopped_serving()
        raise
    for service in ("", SIDECAR_SERVICE):
        health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    _log_serving(registry, served, "threads", options.reflection, tracing, reconcile_stream)
    return RunningSidecar(registry, served, server, health_servicer, parsed.unix_path, servicer, tracing)


def serve(registry: Registry, clients: Clients, options: ServeOptions) -> None:
    """Serve registry on threads until SIGTERM or SIGINT, then stop within options.grace."""
    _default_logging()
    running = start(registry, clients, options)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(3600):
            pass
    finally:
        running.stop(options.grace)


async def start_async(registry: Registry, clients: Clients, options: ServeOptions) -> AsyncRunningSidecar:
    """Serve registry on grpc.aio, on the running event loop."""
    parsed = parse_address(options.address)
    registry._start_serving()
    # Plain functions run here, never on the event loop.
    executor = futures.ThreadPoolExecutor(max_workers=_max_workers(registry, options.max_workers), thread_name_prefix="polyop")
    try:
        server = grpc.aio.server(options=_options(options.max_message_size))
        tracing = configure(registry.name, options.tracer_provider, registry.log)
        async_servicer = AsyncServicer(registry, clients, executor, tracing, reconcile_stream=options.reconcile_stream)
        sidecar_pb2_grpc.add_SidecarServiceServicer_to_server(async_servicer, server)
        health_servicer = health.aio.HealthServicer()
        health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
        _reflect(server, options.reflection)
        served = _bind(server, parsed, options.credentials)
        await server.start()
    except BaseException:
        executor.shutdown(wait=False)
        registry._stopped_serving()
        raise
    for service in ("", SIDECAR_SERVICE):
        await health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    _log_serving(registry, served, "asyncio", options.reflection, tracing, options.reconcile_stream)
    return AsyncRunningSidecar(registry, clients, served, server, health_servicer, parsed.unix_path, executor, async_servicer, tracing)


async def serve_async(registry: Registry, clients: Clients, options: ServeOptions) -> None:
    """Serve registry on grpc.aio until SIGTERM or SIGINT (or until cancelled),
    then stop within options.grace."""
    _default_logging()
    running = await start_async(registry, clients, options)
    loop = asyncio.get_running_loop()
    stop = asyncio.Event()
    handled: list[signal.Signals] = []
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            with contextlib.suppress(NotImplementedError, RuntimeError):
                loop.add_signal_handler(sig, stop.set)
                handled.append(sig)
    try:
        await stop.wait()
    finally:
        for sig in handled:
            loop.remove_signal_handler(sig)
        # Also when cancelled: a shielded stop lets the calls in flight finish.
        await asyncio.shield(running.stop(options.grace))


def _default_logging() -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
