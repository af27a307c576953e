"""gRPC server reflection: a client that has no proto file (grpcurl, or
grpcio-reflection's descriptor database here) lists the sidecar's services and
learns their methods and messages, on threads and on asyncio; off when asked."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)

import polyop

SERVICES = ["grpc.health.v1.Health", "grpc.reflection.v1alpha.ServerReflection", "polyop.v1alpha1.SidecarService"]


def sidecar() -> polyop.Sidecar:
    sidecar = polyop.Sidecar("widget-operator")

    @sidecar.reconciler("example.com/v1/Widget")
    def reconcile(obj: polyop.Object, ctx: polyop.Context) -> None:
        pass

    return sidecar


def reflected(socket: str) -> tuple[list[str], list[str], list[str]]:
    """The services the server at socket lists, the SidecarService's methods and
    the fields of ReconcileRequest, all learnt through reflection."""
    with grpc.insecure_channel(f"unix:{socket}") as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        services = sorted(database.get_services())
        pool = descriptor_pool.DescriptorPool(database)
        methods = [m.name for m in pool.FindServiceByName("polyop.v1alpha1.SidecarService").methods]
        fields = [f.name for f in pool.FindMessageTypeByName("polyop.v1alpha1.ReconcileRequest").fields]
        return services, methods, fields


@pytest.fixture
def socket(sock_dir: str) -> Iterator[str]:
    yield f"{sock_dir}/sidecar.sock"


def test_reflection_lists_the_services_and_describes_their_messages(socket: str) -> None:
    with sidecar().start(address=f"unix://{socket}"):
        services, methods, fields = reflected(socket)
    assert services == SERVICES
    assert methods == ["Describe", "Reconcile", "Finalize", "ReconcileStream", "Default", "Validate", "Convert"]
    assert {"controller", "key", "object", "retries"} <= set(fields)


def test_reflection_on_asyncio(socket: str) -> None:
    async def main() -> tuple[list[str], list[str], list[str]]:
        async with await sidecar().start_async(address=f"unix://{socket}"):
            # The blocking reflection client runs off the loop the server is on.
            return await asyncio.get_running_loop().run_in_executor(None, reflected, socket)

    services, methods, _ = asyncio.run(asyncio.wait_for(main(), 30))
    assert services == SERVICES
    assert "Reconcile" in methods


def test_reflection_can_be_turned_off(socket: str) -> None:
    with sidecar().start(address=f"unix://{socket}", reflection=False), pytest.raises(grpc.RpcError) as err:
        reflected(socket)
    assert err.value.code() == grpc.StatusCode.UNIMPLEMENTED
