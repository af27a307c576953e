"""The Cluster and AsyncCluster clients against a ClusterService served over a real unix socket."""

from __future__ import annotations

import json
import subprocess
from collections.abc import AsyncIterator, Iterator
from concurrent import futures
from typing import Any

import grpc
import pytest
from google.protobuf import any_pb2
from google.rpc import status_pb2
from grpc_status import rpc_status

import polyop
from polyop import GVK, PatchType, Propagation, ReadSource
from polyop.testing import Harness
from polyop.v1alpha1 import cluster_pb2, cluster_pb2_grpc, types_pb2

CM = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c1", "namespace": "ns", "resourceVersion": "5"}}


def api_error(context: grpc.ServicerContext, code: grpc.StatusCode, status: dict[str, Any]) -> None:
    detail = any_pb2.Any()
    detail.Pack(cluster_pb2.APIError(status=json.dumps(status).encode()))
    context.abort_with_status(
        rpc_status.to_status(status_pb2.Status(code=code.value[0], message=status["message"], details=[detail]))
    )


class RecordingService(cluster_pb2_grpc.ClusterServiceServicer):
    """Records every request; answers from ``objects``, or with ``error`` when set."""

    def __init__(self) -> None:
        self.requests: list[Any] = []
        self.error: tuple[grpc.StatusCode, dict[str, Any] | None, str] | None = None

    def _answer(self, request: Any, context: grpc.ServicerContext) -> None:
        self.requests.append(request)
        if self.error is not None:
            code, status, message = self.error
            if status is not None:
                api_error(context, code, status)
            context.abort(code, message)

    def Watch(
        self, request: cluster_pb2.WatchRequest, context: grpc.ServicerContext
    ) -> Iterator[cluster_pb2.WatchResponse] | AsyncIterator[cluster_pb2.WatchResponse]:
        """A stream that ends at once, recorded like the other calls; the
        watch tests (test_watch.py) serve one of their own on grpc.aio."""
        self._answer(request, context)
        return iter(())

    def Get(self, request: cluster_pb2.GetRequest, context: grpc.ServicerContext) -> cluster_pb2.GetResponse:
        self._answer(request, context)
        return cluster_pb2.GetResponse(object=json.dumps(CM).encode(), source=cluster_pb2.READ_SOURCE_CACHE)

    def List(self, request: cluster_pb2.ListRequest, context: grpc.ServicerContext) -> cluster_pb2.ListResponse:
        self._answer(request, context)
        return cluster_pb2.ListResponse(
            items=[json.dumps(CM).encode()], continue_token="next", resource_version="9", source=cluster_pb2.READ_SOURCE_API_SERVER
        )

    def Create(self, request: cluster_pb2.CreateRequest, context: grpc.ServicerContext) -> cluster_pb2.CreateResponse:
        self._answer(request, context)
        return cluster_pb2.CreateResponse(object=request.object)

    def Update(self, request: cluster_pb2.UpdateRequest, context: grpc.ServicerContext) -> cluster_pb2.UpdateResponse:
        self._answer(request, context)
        return cluster_pb2.UpdateResponse(object=request.object)

    def Patch(self, request: cluster_pb2.PatchRequest, context: grpc.ServicerContext) -> cluster_pb2.PatchResponse:
        self._answer(request, context)
        return cluster_pb2.PatchResponse(object=json.dumps(CM).encode())

    def Delete(self, request: cluster_pb2.DeleteRequest, context: grpc.ServicerContext) -> cluster_pb2.DeleteResponse:
        self._answer(request, context)
        return cluster_pb2.DeleteResponse()

    def RecordEvent(self, request: cluster_pb2.RecordEventRequest, context: grpc.ServicerContext) -> cluster_pb2.RecordEventResponse:
        self._answer(request, context)
        return cluster_pb2.RecordEventResponse()

    def ResolveKind(self, request: cluster_pb2.ResolveKindRequest, context: grpc.ServicerContext) -> cluster_pb2.ResolveKindResponse:
        self._answer(request, context)
        kind = types_pb2.GroupVersionKind(group="apps", version="v1", kind=request.kind.kind)
        return cluster_pb2.ResolveKindResponse(kind=kind, resource="deployments", namespaced=True)


@pytest.fixture
def fake(sock_dir: str) -> Iterator[tuple[RecordingService, polyop.Cluster]]:
    fake = RecordingService()
    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(fake, server)
    server.add_insecure_port(f"unix:{sock_dir}/cluster.sock")
    server.start()
    client = polyop.Cluster(f"unix://{sock_dir}/cluster.sock", field_manager="widget-operator", timeout=5)
    yield fake, client
    client.close()
    server.stop(None)


def test_reads(fake: tuple[RecordingService, polyop.Cluster]) -> None:
    server, client = fake
    got = client.get("v1/ConfigMap", "c1", "ns", uncached=True)
    assert got == CM and got.meta.resource_version == "5"
    listed = client.list("v1/ConfigMap", "ns", label_selector="a=b", field_selector="metadata.name=c1", limit=10, continue_token="t")
    assert (listed.items, listed.continue_token, listed.resource_version, listed.source) == ([CM], "next", "9", ReadSource.API_SERVER)
    resolved = client.resolve_kind(GVK("apps", "", "Deployment"))
    assert resolved == polyop.ResolvedKind(GVK("apps", "v1", "Deployment"), "deployments", True)

    get, lst, _ = server.requests
    assert (GVK.from_proto(get.kind), get.key.namespace, get.key.name, get.options.uncached) == (GVK("", "v1", "ConfigMap"), "ns", "c1", True)
    assert (lst.namespace, lst.label_selector, lst.field_selector, lst.limit, lst.continue_token) == ("ns", "a=b", "metadata.name=c1", 10, "t")
    assert not lst.options.uncached


def test_writes(fake: tuple[RecordingService, polyop.Cluster]) -> None:
    server, client = fake
    assert client.create(CM, dry_run=True) == CM
    assert client.update(CM, subresource="status", field_manager="me") == CM
    client.patch("v1/ConfigMap", "c1", [{"op": "remove", "path": "/data/x"}], "ns", type=PatchType.JSON)
    client.apply({**CM, "data": {"a": "1"}}, force=True)
    client.delete("v1/ConfigMap", "c1", "ns", propagation=Propagation.FOREGROUND, precondition_uid="u", grace_period_seconds=0)
    client.delete("v1/ConfigMap", "c2", "ns")
    client.record_event("v1/ConfigMap", "c1", "ns", type="Warning", reason="Touched", message="hi")

    create, update, patch, apply, delete, delete2, event = server.requests
    assert json.loads(create.object) == CM and create.options.dry_run and create.options.field_manager == "widget-operator"
    assert update.subresource == "status" and update.options.field_manager == "me"
    # Create and Update name their object by kind and key, as every other call does.
    for req in (create, update):
        assert (GVK.from_proto(req.kind), req.key.namespace, req.key.name) == (GVK("", "v1", "ConfigMap"), "ns", "c1")
    assert patch.type == cluster_pb2.PATCH_TYPE_JSON and json.loads(patch.patch) == [{"op": "remove", "path": "/data/x"}]
    assert not patch.options.force
    assert (apply.type, apply.options.force, apply.key.name, apply.key.namespace) == (cluster_pb2.PATCH_TYPE_APPLY, True, "c1", "ns")
    assert json.loads(apply.patch)["data"] == {"a": "1"}
    assert (delete.propagation, delete.precondition_uid, delete.HasField("grace_period_seconds"), delete.grace_period_seconds) == (
        cluster_pb2.DELETE_PROPAGATION_FOREGROUND, "u", True, 0,
    )
    assert not delete2.HasField("grace_period_seconds")
    assert (event.event.reason, event.event.type) == ("Touched", 2)


def test_subresources(fake: tuple[RecordingService, polyop.Cluster]) -> None:
    server, client = fake
    client.get("apps/v1/Deployment", "web", "ns", subresource="scale")
    eviction = {"apiVersion": "policy/v1", "kind": "Eviction"}
    assert client.create_subresource("v1/Pod", "web-0", "ns", subresource="eviction", body=eviction, dry_run=True) == eviction

    get, create = server.requests
    assert (GVK.from_proto(get.kind), get.key.name, get.subresource) == (GVK("apps", "v1", "Deployment"), "web", "scale")
    # A subresource create names the parent by the same kind and key.
    assert (create.subresource, GVK.from_proto(create.kind), create.key.namespace, create.key.name) == (
        "eviction", GVK("", "v1", "Pod"), "ns", "web-0",
    )
    assert json.loads(create.object) == eviction and create.options.dry_run


def status(reason: str, code: int, message: str, **details: Any) -> dict[str, Any]:
    return {"kind": "Status", "apiVersion": "v1", "status": "Failure", "message": message, "reason": reason, "code": code, "details": details}


@pytest.mark.parametrize(
    ("code", "st", "want"),
    [
        pytest.param(grpc.StatusCode.NOT_FOUND, status("NotFound", 404, 'configmaps "c1" not found'), polyop.NotFoundError, id="NotFound"),
        pytest.param(grpc.StatusCode.ALREADY_EXISTS, status("AlreadyExists", 409, "exists"), polyop.AlreadyExistsError, id="AlreadyExists"),
        pytest.param(grpc.StatusCode.ABORTED, status("Conflict", 409, "modified"), polyop.ConflictError, id="Conflict"),
        pytest.param(grpc.StatusCode.PERMISSION_DENIED, status("Forbidden", 403, "no"), polyop.ForbiddenError, id="Forbidden"),
        pytest.param(grpc.StatusCode.UNAUTHENTICATED, status("Unauthorized", 401, "who"), polyop.UnauthorizedError, id="Unauthorized"),
        pytest.param(grpc.StatusCode.RESOURCE_EXHAUSTED, status("TooManyRequests", 429, "slow down"), polyop.TooManyRequestsError, id="TooManyRequests"),
        pytest.param(grpc.StatusCode.UNAVAILABLE, status("ServiceUnavailable", 503, "down"), polyop.ServerError, id="a 5xx is a ServerError"),
        pytest.param(grpc.StatusCode.FAILED_PRECONDITION, status("", 410, "expired"), polyop.GoneError, id="a reason-less status falls back on its HTTP code"),
    ],
)
def test_api_errors_keep_their_kubernetes_meaning(
    fake: tuple[RecordingService, polyop.Cluster], code: grpc.StatusCode, st: dict[str, Any], want: type[polyop.APIError]
) -> None:
    server, client = fake
    server.error = (code, st, "")
    with pytest.raises(want) as err:
        client.get("v1/ConfigMap", "c1", "ns")
    assert type(err.value) is want
    assert (err.value.message, err.value.http_code, err.value.code, err.value.status) == (st["message"], st["code"], code, st)


def test_an_invalid_error_carries_its_causes(fake: tuple[RecordingService, polyop.Cluster]) -> None:
    server, client = fake
    causes = [{"reason": "FieldValueInvalid", "message": "Invalid value: -1", "field": "spec.size"}]
    server.error = (grpc.StatusCode.INVALID_ARGUMENT, status("Invalid", 422, "Widget is invalid", causes=causes), "")
    with pytest.raises(polyop.InvalidError) as err:
        client.create(CM)
    assert err.value.causes == [polyop.StatusCause("FieldValueInvalid", "Invalid value: -1", "spec.size")]
    assert isinstance(err.value, polyop.ClusterError)


def test_errors_that_did_not_come_from_the_api_server(fake: tuple[RecordingService, polyop.Cluster]) -> None:
    server, client = fake
    server.error = (grpc.StatusCode.NOT_FOUND, None, "no kind Widget in group example.com")
    with pytest.raises(polyop.ClusterError) as err:
        client.get("example.com/v1/Widget", "w", "ns")
    assert not isinstance(err.value, polyop.APIError)
    assert err.value.code == grpc.StatusCode.NOT_FOUND
    assert str(err.value) == "getting Widget ns/w: NOT_FOUND: no kind Widget in group example.com"


def test_an_unreachable_host_is_unavailable(sock_dir: str) -> None:
    with polyop.Cluster(f"unix://{sock_dir}/nobody.sock", timeout=2) as client, pytest.raises(polyop.ClusterError) as err:
        client.get("v1/ConfigMap", "c1")
    assert err.value.code == grpc.StatusCode.UNAVAILABLE


def test_the_address_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch, sock_dir: str) -> None:
    monkeypatch.delenv(polyop.ADDRESS_ENV, raising=False)
    with pytest.raises(polyop.ClusterError, match="POLYOP_CLUSTER_ADDRESS"):
        polyop.Cluster()
    monkeypatch.setenv(polyop.ADDRESS_ENV, f"unix://{sock_dir}/c.sock")
    polyop.Cluster().close()


def test_a_reconcile_reaches_the_cluster_the_host_announced(fake: tuple[RecordingService, polyop.Cluster], sock_dir: str) -> None:
    server, _ = fake
    sidecar = polyop.Sidecar("w")

    @sidecar.reconciler("v1/ConfigMap")
    def reconcile(obj: polyop.Object, ctx: polyop.Context) -> None:
        try:
            ctx.cluster.get("v1/Secret", obj.name, obj.namespace)
        except polyop.NotFoundError:
            obj.status["secret"] = "missing"

    server.error = (grpc.StatusCode.NOT_FOUND, status("NotFound", 404, "gone"), "")
    harness = Harness(sidecar)
    harness.describe(cluster_address=f"unix://{sock_dir}/cluster.sock")
    assert harness.reconcile(CM).status == {"secret": "missing"}


def openssl(*args: str) -> None:
    try:
        subprocess.run(["openssl", *args], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as err:
        pytest.skip(f"openssl cannot make a certificate here: {err}")


@pytest.fixture
def mtls(tmp_path: Any) -> dict[str, str]:
    """A CA, a server certificate it signed for 127.0.0.1 and localhost, and a
    client certificate it signed: the host's mutual TLS and the sidecar's."""
    f = {name: str(tmp_path / name) for name in ("ca.crt", "ca.key", "server.crt", "server.key", "client.crt", "client.key")}
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f["ca.key"], "-out", f["ca.crt"], "-days", "1",
            "-subj", "/CN=polyop test CA")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f["server.key"], "-out", f["server.crt"], "-days", "1",
            "-CA", f["ca.crt"], "-CAkey", f["ca.key"], "-subj", "/CN=localhost",
            "-addext", "subjectAltName=DNS:localhost,IP:127.0.0.1", "-addext", "extendedKeyUsage=serverAuth")
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", f["client.key"], "-out", f["client.crt"], "-days", "1",
            "-CA", f["ca.crt"], "-CAkey", f["ca.key"], "-subj", "/CN=polyop sidecar", "-addext", "extendedKeyUsage=clientAuth")
    return f


def test_the_cluster_is_dialed_with_mutual_tls_from_the_environment(mtls: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    def read(name: str) -> bytes:
        with open(mtls[name], "rb") as f:
            return f.read()

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    cluster_pb2_grpc.add_ClusterServiceServicer_to_server(RecordingService(), server)
    creds = grpc.ssl_server_credentials([(read("server.key"), read("server.crt"))], root_certificates=read("ca.crt"), require_client_auth=True)
    port = server.add_secure_port("127.0.0.1:0", creds)
    server.start()
    address = f"tcp://127.0.0.1:{port}"
    try:
        monkeypatch.setenv(polyop.TLS_CA_FILE_ENV, mtls["ca.crt"])
        monkeypatch.setenv(polyop.TLS_CERT_FILE_ENV, mtls["client.crt"])
        monkeypatch.setenv(polyop.TLS_KEY_FILE_ENV, mtls["client.key"])
        with polyop.Cluster(address, timeout=10) as client:
            assert client.get("v1/ConfigMap", "c1", "ns") == CM

        with (
            polyop.Cluster(address, timeout=10, credentials=polyop.tls_credentials(mtls["ca.crt"])) as client,
            pytest.raises(polyop.ClusterError),
        ):
            client.get("v1/ConfigMap", "c1", "ns")

        for env in (polyop.TLS_CA_FILE_ENV, polyop.TLS_CERT_FILE_ENV, polyop.TLS_KEY_FILE_ENV):
            monkeypatch.delenv(env)
        with polyop.Cluster(address, timeout=10) as client, pytest.raises(polyop.ClusterError):
            client.get("v1/ConfigMap", "c1", "ns")

        monkeypatch.setenv(polyop.TLS_CERT_FILE_ENV, mtls["client.crt"])
        with pytest.raises(polyop.ClusterError, match=polyop.TLS_CA_FILE_ENV):
            polyop.Cluster(address)
    finally:
        server.stop(None)


def test_a_relative_cluster_address_is_dialed_at_its_absolute_path(fake: tuple[RecordingService, polyop.Cluster], sock_dir: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(sock_dir)
    client = polyop.Cluster("unix:cluster.sock", timeout=5)
    monkeypatch.chdir("/")
    with client:
        assert client.get("v1/ConfigMap", "c1", "ns") == CM
