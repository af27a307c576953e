"""The sidecar over a real socket, called with a real gRPC client as the host calls it."""

from __future__ import annotations

import os
import signal
import stat
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Iterator
from typing import Any, cast

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

import polyop
from polyop.v1alpha1 import describe_pb2, reconcile_pb2, sidecar_pb2_grpc, types_pb2

WIDGET = "example.com/v1/Widget"
OBJECT = b'{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w1","namespace":"ns","generation":7}}'


def widget_sidecar() -> polyop.Sidecar:
    sidecar = polyop.Sidecar("widget-operator")

    @sidecar.reconciler(WIDGET, max_concurrent_reconciles=4)
    def reconcile(obj: polyop.Object, ctx: polyop.Context) -> polyop.Result:
        if obj.meta.labels.get("slow"):
            time.sleep(0.3)
        obj.status["observedGeneration"] = obj.meta.generation
        ctx.event("Normal", "Reconciled", "done")
        return polyop.Result(requeue_after=60)

    return sidecar


@pytest.fixture
def served(sock_dir: str) -> Iterator[tuple[polyop.RunningSidecar, grpc.Channel]]:
    server = widget_sidecar().start(address=f"unix://{sock_dir}/sidecar.sock")
    channel = grpc.insecure_channel(f"unix:{sock_dir}/sidecar.sock")
    yield server, channel
    channel.close()
    server.stop(grace=None)


def test_health_describe_and_reconcile_over_a_unix_socket(served: tuple[polyop.RunningSidecar, grpc.Channel]) -> None:
    _, channel = served
    health: Any = health_pb2_grpc.HealthStub(channel)  # the stubs' HealthStub declares no methods
    for service in ("", "polyop.v1alpha1.SidecarService"):
        assert health.Check(health_pb2.HealthCheckRequest(service=service), timeout=5).status == health_pb2.HealthCheckResponse.SERVING

    stub = sidecar_pb2_grpc.SidecarServiceStub(channel)
    desc = stub.Describe(describe_pb2.DescribeRequest(protocol_version=polyop.PROTOCOL_VERSION), timeout=5)
    assert (desc.protocol_version, desc.name, [c.name for c in desc.controllers]) == (
        describe_pb2.PROTOCOL_VERSION_V1ALPHA1, "widget-operator", ["widget"],
    )
    assert (desc.sdk_name, desc.sdk_version) == ("polyop-python", polyop.__version__)

    resp = stub.Reconcile(
        reconcile_pb2.ReconcileRequest(controller="widget", key=types_pb2.ObjectKey(namespace="ns", name="w1"), object=OBJECT),
        timeout=5,
    )
    assert resp.status == b'{"observedGeneration":7}'
    assert resp.requeue_after.seconds == 60 and [e.reason for e in resp.events] == ["Reconciled"]


def test_refusals_are_grpc_statuses(served: tuple[polyop.RunningSidecar, grpc.Channel]) -> None:
    stub = sidecar_pb2_grpc.SidecarServiceStub(served[1])
    with pytest.raises(grpc.RpcError) as err:
        stub.Reconcile(reconcile_pb2.ReconcileRequest(controller="nope", key=types_pb2.ObjectKey(name="x")), timeout=5)
    call = cast(grpc.Call, err.value)
    assert call.code() == grpc.StatusCode.NOT_FOUND
    assert "no controller named 'nope'" in (call.details() or "")


def test_reconciles_run_concurrently(served: tuple[polyop.RunningSidecar, grpc.Channel]) -> None:
    stub = sidecar_pb2_grpc.SidecarServiceStub(served[1])
    slow = OBJECT.replace(b'"generation":7', b'"generation":7,"labels":{"slow":"yes"}')
    request = reconcile_pb2.ReconcileRequest(controller="widget", key=types_pb2.ObjectKey(namespace="ns", name="w1"), object=slow)
    start = time.monotonic()
    calls = [stub.Reconcile.future(request, timeout=5) for _ in range(4)]
    assert all(c.result().status for c in calls)
    assert time.monotonic() - start < 1.0  # four calls of 0.3s each, side by side


def test_the_socket_is_readable_and_writable_by_owner_and_group_only(sock_dir: str) -> None:
    old = os.umask(0)  # whatever the umask, the socket is 0660
    try:
        server = widget_sidecar().start(address=f"unix://{sock_dir}/sidecar.sock")
    finally:
        os.umask(old)
    try:
        assert stat.S_IMODE(os.stat(f"{sock_dir}/sidecar.sock").st_mode) == 0o660
    finally:
        server.stop(grace=None)


def test_a_relative_socket_is_served_and_announced_at_its_absolute_path(sock_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(sock_dir)
    want = "unix://" + os.path.join(os.getcwd(), "run", "sidecar.sock")
    server = widget_sidecar().start(address="unix:run/sidecar.sock")
    try:
        assert server.address == want
        monkeypatch.chdir("/")
        with grpc.insecure_channel(server.address) as channel:
            health: Any = health_pb2_grpc.HealthStub(channel)  # the stubs' HealthStub declares no methods
            assert health.Check(health_pb2.HealthCheckRequest(service=""), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
    finally:
        server.stop(grace=None)


def test_stop_reports_not_serving_and_removes_the_socket(sock_dir: str) -> None:
    path = f"{sock_dir}/s.sock"
    server = widget_sidecar().start(address=f"unix://{path}")
    channel = grpc.insecure_channel(f"unix:{path}")
    health: Any = health_pb2_grpc.HealthStub(channel)  # the stubs' HealthStub declares no methods
    watch = health.Watch(health_pb2.HealthCheckRequest(service=""))
    assert next(watch).status == health_pb2.HealthCheckResponse.SERVING
    stopper = threading.Thread(target=server.stop, kwargs={"grace": 2})
    stopper.start()
    assert next(watch).status == health_pb2.HealthCheckResponse.NOT_SERVING
    stopper.join(5)
    assert server.wait(0) and not os.path.exists(path)
    channel.close()


def test_a_socket_another_sidecar_serves_is_left_alone(served: tuple[polyop.RunningSidecar, grpc.Channel], sock_dir: str) -> None:
    with pytest.raises(OSError, match="another process is serving"):
        widget_sidecar().start(address=f"unix://{sock_dir}/sidecar.sock")
    health: Any = health_pb2_grpc.HealthStub(served[1])
    assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING


def test_tcp_with_port_zero_reports_the_bound_port() -> None:
    with widget_sidecar().start(address="tcp://127.0.0.1:0") as server:
        assert server.address.startswith("tcp://127.0.0.1:") and not server.address.endswith(":0")
        with grpc.insecure_channel(server.address.removeprefix("tcp://")) as channel:
            health: Any = health_pb2_grpc.HealthStub(channel)  # the stubs' HealthStub declares no methods
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING


def test_registering_after_serving_is_refused(sock_dir: str) -> None:
    sidecar = widget_sidecar()
    with sidecar.start(address=f"unix://{sock_dir}/s.sock"):
        with pytest.raises(RuntimeError, match="before serving"):
            sidecar.reconciler("example.com/v1/Other")(lambda obj, ctx: None)
        with pytest.raises(RuntimeError, match="already serving"):
            sidecar.start(address=f"unix://{sock_dir}/t.sock")


def test_serve_stops_gracefully_on_sigterm(sock_dir: str) -> None:
    path = f"{sock_dir}/s.sock"
    program = textwrap.dedent(f"""
        import polyop
        sidecar = polyop.Sidecar("sig")
        sidecar.reconciler("v1/ConfigMap")(lambda obj, ctx: None)
        sidecar.serve(address="unix://{path}", grace=5)
    """)
    src = os.path.join(os.path.dirname(__file__), "..", "src")
    proc = subprocess.Popen([sys.executable, "-c", program], env={**os.environ, "PYTHONPATH": src}, stderr=subprocess.PIPE, text=True)
    try:
        with grpc.insecure_channel(f"unix:{path}") as channel:
            grpc.channel_ready_future(channel).result(timeout=20)
            health: Any = health_pb2_grpc.HealthStub(channel)  # the stubs' HealthStub declares no methods
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        proc.send_signal(signal.SIGTERM)
        _, stderr = proc.communicate(timeout=20)
    finally:
        proc.kill()
    assert proc.returncode == 0, stderr
    assert "Serving on unix://" in stderr and "Stopped" in stderr
    assert not os.path.exists(path)


def test_tls_on_tcp(sock_dir: str) -> None:
    key, cert = os.path.join(sock_dir, "tls.key"), os.path.join(sock_dir, "tls.crt")
    try:
        subprocess.run(
            ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", key, "-out", cert, "-days", "1",
             "-subj", "/CN=localhost", "-addext", "subjectAltName=DNS:localhost"],
            check=True, capture_output=True,
        )
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"openssl cannot make a certificate here: {err}")
    with open(key, "rb") as k, open(cert, "rb") as c:
        key_pem, cert_pem = k.read(), c.read()
    creds = grpc.ssl_server_credentials([(key_pem, cert_pem)])
    with widget_sidecar().start(address="tcp://127.0.0.1:0", credentials=creds) as server:
        target = server.address.removeprefix("tcp://")
        secure = grpc.secure_channel(target, grpc.ssl_channel_credentials(cert_pem), options=[("grpc.ssl_target_name_override", "localhost")])
        with secure:
            health: Any = health_pb2_grpc.HealthStub(secure)
            assert health.Check(health_pb2.HealthCheckRequest(), timeout=5).status == health_pb2.HealthCheckResponse.SERVING
        with grpc.insecure_channel(target) as plain:
            health = health_pb2_grpc.HealthStub(plain)
            with pytest.raises(grpc.RpcError):
                health.Check(health_pb2.HealthCheckRequest(), timeout=1)
