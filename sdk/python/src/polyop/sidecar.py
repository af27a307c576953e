"""The Sidecar: register functions with decorators, then serve them to the host.

:class:`Sidecar` is the facade over the SDK's layers: its decorators are
those of the registry (:class:`polyop._registry.Registry`), which records
what each function handles and builds the Describe answer; its serving
methods hand the registry and a :class:`ServeOptions` to the server.

A function may be ``async def``: :meth:`Sidecar.serve_async` serves on
grpc.aio and awaits it on the event loop, with an :class:`~polyop.AsyncContext`
whose cluster is an :class:`~polyop.AsyncCluster`; plain functions run on a
thread pool beside it, so that they never block the loop.
"""

from __future__ import annotations

import asyncio
import logging

from typing_extensions import Unpack

from polyop._clients import Clients
from polyop._registry import (
    OWNER_UID_INDEX,
    PROTOCOL_VERSION,
    ConvertFunc,
    DefaultFunc,
    DeletedFunc,
    FinalizeFunc,
    ReconcileFunc,
    Registry,
    TypedReconcileFunc,
    ValidateFunc,
    is_async,
)
from polyop._serving import (
    AsyncRunningSidecar,
    RunningSidecar,
    ServeOptions,
    ServeOverrides,
    serve,
    serve_async,
    serve_options,
    start,
    start_async,
    takes_serve_options,
)
from polyop.cluster import AsyncCluster, Cluster

__all__ = [
    "OWNER_UID_INDEX",
    "PROTOCOL_VERSION",
    "ConvertFunc",
    "DefaultFunc",
    "DeletedFunc",
    "FinalizeFunc",
    "ReconcileFunc",
    "ServeOptions",
    "Sidecar",
    "TypedReconcileFunc",
    "ValidateFunc",
    "is_async",
]


class Sidecar(Registry):
    """A polyop sidecar: the functions it registers, served to the host.

    ``name`` is a short name for the sidecar (lower-case letters, digits and
    '-'), used in the host's logs, metrics and leader election lease.
    ``cluster`` is the Cluster client handed to plain functions as
    ``ctx.cluster``, ``async_cluster`` the AsyncCluster handed to ``async def``
    ones; by default they are made, on first use, for the address the host
    sends in its DescribeRequest, or else POLYOP_CLUSTER_ADDRESS (the
    AsyncCluster on the serving event loop).

    Every serving method takes the same settings: a :class:`ServeOptions`,
    or its fields as keyword arguments, or both (the keywords win)::

        sidecar.serve()                                  # the defaults
        sidecar.serve(address="tcp://127.0.0.1:9443")    # keyword arguments
        sidecar.serve(polyop.ServeOptions(grace=10), reflection=False)
    """

    def __init__(
        self,
        name: str,
        *,
        cluster: Cluster | None = None,
        async_cluster: AsyncCluster | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        super().__init__(name, logger=logger)
        self._clients = Clients(cluster, async_cluster)

    @property
    def cluster(self) -> Cluster | None:
        """The Cluster client, or None while no address is known."""
        return self._clients.cluster

    @property
    def async_cluster(self) -> AsyncCluster | None:
        """The AsyncCluster client of the running event loop, or None while no
        address is known. One made here belongs to the loop it was first used
        on; on another loop (a second ``serve_async``) a new one is made."""
        return self._clients.async_cluster

    @takes_serve_options
    def serve(self, options: ServeOptions | str | None = None, /, **overrides: Unpack[ServeOverrides]) -> None:
        """Serve until SIGTERM or SIGINT, then stop gracefully: report NOT_SERVING,
        refuse new calls and wait up to ``grace`` seconds for the calls in flight.

        Next to the SidecarService the server serves grpc.health.v1.Health
        and, unless ``reflection`` is off, gRPC server reflection; see
        :class:`ServeOptions` for every setting.

        Each Reconcile, Finalize, Default, Validate and Convert call runs in a
        span that continues the host's trace (``opentelemetry.trace.
        get_current_span()`` in the function), and the Cluster calls made in
        it are spans of their own, when tracing is on: with
        ``tracer_provider`` when one is passed, else with the global
        TracerProvider when the application set one, else with one made from
        the OTEL_* environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,
        OTEL_TRACES_EXPORTER=otlp, ...; needs ``polyop[otlp]``). Otherwise
        tracing is off and costs nothing.

        With ``reconcile_stream`` (the default) the sidecar also serves
        ReconcileStream and says so in its Describe answer: the host then
        sends Reconcile and Finalize calls as messages on one long-lived
        stream per worker instead of a new gRPC call each, which costs less.
        Each call still runs the same function with the same deadline,
        cancellation, tracing, log fields and errors as a unary call. An open
        stream holds one of the ``max_workers`` threads of the threaded
        server (the default counts one per worker), which serves no streams
        when ``max_workers`` leaves no thread beside one per worker.

        When any registered function is ``async def``, this runs
        :meth:`serve_async` in a new event loop (``asyncio.run``).
        An address string in place of the options is the deprecated shape.
        """
        settings = serve_options(options, overrides)
        if self.has_async_handlers():
            asyncio.run(serve_async(self, self._clients, settings))
            return
        serve(self, self._clients, settings)

    @takes_serve_options
    def start(self, options: ServeOptions | str | None = None, /, **overrides: Unpack[ServeOverrides]) -> RunningSidecar:
        """Serve in the background, on threads, and return the
        :class:`RunningSidecar` (``stop()``, ``address``). See :meth:`serve`.
        ``async def`` functions need an event loop: use :meth:`start_async`."""
        return start(self, self._clients, serve_options(options, overrides))

    @takes_serve_options
    async def serve_async(self, options: ServeOptions | str | None = None, /, **overrides: Unpack[ServeOverrides]) -> None:
        """Serve on grpc.aio until SIGTERM or SIGINT (or until cancelled), then
        stop as :meth:`serve` does::

            asyncio.run(sidecar.serve_async())

        ``async def`` functions are awaited on the event loop, so that one
        waiting on the cluster or an external API holds no thread; they get
        an :class:`~polyop.AsyncContext`, and are cancelled when the host's
        deadline passes or the host cancels the call. Plain functions run on
        a pool of ``max_workers`` threads, so they never block the loop.
        """
        await serve_async(self, self._clients, serve_options(options, overrides))

    @takes_serve_options
    async def start_async(
        self, options: ServeOptions | str | None = None, /, **overrides: Unpack[ServeOverrides]
    ) -> AsyncRunningSidecar:
        """Serve on grpc.aio, on the running event loop, and return the
        :class:`AsyncRunningSidecar`. See :meth:`serve_async`."""
        return await start_async(self, self._clients, serve_options(options, overrides))
