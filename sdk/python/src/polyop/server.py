"""Serving an Operator: a gRPC server with the SidecarService and health checking."""

from __future__ import annotations

import contextlib
import logging
import os
import signal
import threading
from concurrent import futures

import grpc
from grpc_health.v1 import health, health_pb2, health_pb2_grpc

from polyop._address import parse_address, prepare_socket
from polyop._servicer import Servicer
from polyop.operator import PROTOCOL_VERSION, Operator
from polyop.v1alpha1 import sidecar_pb2, sidecar_pb2_grpc

__all__ = ["Server"]

SIDECAR_SERVICE = sidecar_pb2.DESCRIPTOR.services_by_name["SidecarService"].full_name

SOCKET_MODE = 0o660
"""The mode of the unix socket a sidecar serves on: read and write for its
owner and group, nothing for others."""


class Server:
    """A running sidecar server, from :meth:`Operator.start`.

    ``address`` is the address it serves on, with the port it bound for a TCP
    address with port 0. Use it as a context manager, or call :meth:`stop`.
    """

    def __init__(self, op: Operator, address: str, grpc_server: grpc.Server, health: health.HealthServicer, socket: str) -> None:
        self.address = address
        self._op = op
        self._server = grpc_server
        self._health = health
        self._socket = socket
        self._stopped = threading.Event()

    def stop(self, grace: float | None = None) -> None:
        """Report NOT_SERVING, refuse new calls, wait up to ``grace`` seconds for
        the calls in flight (None: do not wait), then close every connection."""
        if self._stopped.is_set():
            return
        self._op.log.info("Stopping: waiting for the calls in flight (grace %ss)", grace)
        self._health.enter_graceful_shutdown()
        self._server.stop(grace).wait()
        if self._socket:
            with contextlib.suppress(FileNotFoundError):
                os.remove(self._socket)
        self._stopped.set()
        self._op.log.info("Stopped")

    def wait(self, timeout: float | None = None) -> bool:
        """Wait until the server has stopped; False when timeout passed first."""
        return self._stopped.wait(timeout)

    def __enter__(self) -> Server:
        return self

    def __exit__(self, *_: object) -> None:
        self.stop(grace=None)


def start(
    op: Operator,
    address: str,
    *,
    max_message_size: int,
    max_workers: int | None,
    credentials: grpc.ServerCredentials | None = None,
) -> Server:
    parsed = parse_address(address)
    op._start_serving()
    if max_workers is None:
        concurrency = sum(max(c.description.max_concurrent_reconciles, 1) for c in op._controllers.values())
        max_workers = concurrency + 2 * len(op._webhooks) + len(op._converters) + 4
    server = grpc.server(
        futures.ThreadPoolExecutor(max_workers=max_workers, thread_name_prefix="polyop"),
        options=[
            ("grpc.max_send_message_length", max_message_size),
            ("grpc.max_receive_message_length", max_message_size),
            ("grpc.so_reuseport", 0),
        ],
    )
    sidecar_pb2_grpc.add_SidecarServiceServicer_to_server(Servicer(op), server)
    health_servicer = health.HealthServicer()
    health_pb2_grpc.add_HealthServicer_to_server(health_servicer, server)
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
        served = "unix://" + parsed.unix_path
    else:
        host = f"[{parsed.host}]" if ":" in parsed.host else parsed.host
        served = f"tcp://{host}:{port}"
    server.start()
    for service in ("", SIDECAR_SERVICE):
        health_servicer.set(service, health_pb2.HealthCheckResponse.SERVING)
    op.log.info(
        "Serving on %s: protocol %s, controllers %s, webhooks %s, conversions %s",
        served, PROTOCOL_VERSION, list(op._controllers), [str(k) for k in op._webhooks],
        [f"{g}/{k}" for g, k in op._converters],
    )
    return Server(op, served, server, health_servicer, parsed.unix_path)


def serve(
    op: Operator,
    address: str,
    *,
    max_message_size: int,
    max_workers: int | None,
    credentials: grpc.ServerCredentials | None,
    grace: float,
) -> None:
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    server = start(op, address, max_message_size=max_message_size, max_workers=max_workers, credentials=credentials)
    stop = threading.Event()
    if threading.current_thread() is threading.main_thread():
        for sig in (signal.SIGTERM, signal.SIGINT):
            signal.signal(sig, lambda *_: stop.set())
    try:
        while not stop.wait(3600):
            pass
    finally:
        server.stop(grace)
