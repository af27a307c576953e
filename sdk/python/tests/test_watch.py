"""AsyncCluster.watch against a Watch stream served on grpc.aio over a real
unix socket, each stream scripted by the test as the host would send it; and
FakeCluster's watch."""

from __future__ import annotations

import asyncio
import contextlib
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import grpc
import grpc.aio
import pytest

import polyop
from polyop import WatchEvent, WatchEventType
from polyop.testing import FakeCluster
from polyop.v1alpha1 import cluster_pb2, cluster_pb2_grpc
from tests.test_cluster import RecordingService

LONG = 30.0  # generous: a limit only a broken implementation reaches
ADDED, MODIFIED, DELETED = (
    cluster_pb2.WATCH_EVENT_TYPE_ADDED,
    cluster_pb2.WATCH_EVENT_TYPE_MODIFIED,
    cluster_pb2.WATCH_EVENT_TYPE_DELETED,
)


def cm(name: str, rv: str, namespace: str = "shop", **data: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": name, "namespace": namespace, "resourceVersion": rv, "labels": {"app": "web"}},
        "data": data,
    }


@dataclass
class Stream:
    """One Watch stream the service serves: what the client asked, and what
    the test sends on it."""

    request: cluster_pb2.WatchRequest
    sends: asyncio.Queue[cluster_pb2.WatchResponse | tuple[grpc.StatusCode, str]] = field(default_factory=asyncio.Queue)
    ended: asyncio.Event = field(default_factory=asyncio.Event)
    """Set when the server's side of the stream is over (it ended, or the client cancelled)."""

    def send(self, type: cluster_pb2.WatchEventType.ValueType, obj: dict[str, Any]) -> None:
        self.sends.put_nowait(
            cluster_pb2.WatchResponse(type=type, object=json.dumps(obj).encode(), resource_version=obj["metadata"]["resourceVersion"])
        )

    def done(self, rv: str) -> None:
        self.sends.put_nowait(cluster_pb2.WatchResponse(type=cluster_pb2.WATCH_EVENT_TYPE_INITIAL_LIST_DONE, resource_version=rv))

    def bookmark(self, rv: str) -> None:
        self.sends.put_nowait(cluster_pb2.WatchResponse(type=cluster_pb2.WATCH_EVENT_TYPE_BOOKMARK, resource_version=rv))

    def end(self, code: grpc.StatusCode, message: str) -> None:
        self.sends.put_nowait((code, message))


class WatchService(RecordingService):
    """The recording service, with Watch streams served on grpc.aio as the
    test scripts them: each stream opened is put on ``streams``."""

    def __init__(self) -> None:
        super().__init__()
        self.streams: asyncio.Queue[Stream] = asyncio.Queue()

    async def Watch(self, request: cluster_pb2.WatchRequest, context: Any) -> AsyncIterator[cluster_pb2.WatchResponse]:
        self.requests.append(request)
        stream = Stream(request)
        await self.streams.put(stream)
        try:
            while True:
                item = await stream.sends.get()
                if isinstance(item, tuple):
                    await context.abort(*item)
                else:
                    yield item
        finally:
            stream.ended.set()

    async def next_stream(self) -> Stream:
        return await asyncio.wait_for(self.streams.get(), LONG)


def run(main: Callable[[WatchService, polyop.AsyncCluster], Awaitable[None]], sock_dir: str) -> None:
    """main against a WatchService on grpc.aio on a unix socket, in an event loop of its own."""

    async def serve() -> None:
        service = WatchService()
        server = grpc.aio.server()
        cluster_pb2_grpc.add_ClusterServiceServicer_to_server(service, server)
        server.add_insecure_port(f"unix:{sock_dir}/cluster.sock")
        await server.start()
        try:
            async with polyop.AsyncCluster(f"unix://{sock_dir}/cluster.sock") as cluster:
                await asyncio.wait_for(main(service, cluster), 2 * LONG)
        finally:
            await server.stop(grace=None)

    asyncio.run(serve())


async def next_event(events: AsyncGenerator[WatchEvent, None]) -> WatchEvent:
    return await asyncio.wait_for(events.__anext__(), LONG)


def seen(event: WatchEvent) -> tuple[str, str]:
    return event.type.value, event.object.name


def test_a_watch_delivers_the_initial_list_then_synced_then_every_change(sock_dir: str) -> None:
    async def main(service: WatchService, cluster: polyop.AsyncCluster) -> None:
        events = cluster.watch("v1/ConfigMap", "shop", label_selector="app=web", field_selector="metadata.name!=skip")
        async with contextlib.aclosing(events):
            stream_task = asyncio.ensure_future(service.next_stream())
            first = asyncio.ensure_future(next_event(events))
            stream = await stream_task
            assert stream.request.kind.version == "v1" and stream.request.kind.kind == "ConfigMap"
            assert stream.request.namespace == "shop"
            assert stream.request.label_selector == "app=web"
            assert stream.request.field_selector == "metadata.name!=skip"
            assert stream.request.resource_version == ""

            stream.send(ADDED, cm("a", "3"))
            stream.send(ADDED, cm("b", "4"))
            stream.done("7")
            stream.bookmark("8")
            stream.send(MODIFIED, cm("a", "9", size="2"))
            stream.send(DELETED, cm("b", "10"))
            got = [seen(await first)] + [seen(await next_event(events)) for _ in range(4)]
            assert got == [("ADDED", "a"), ("ADDED", "b"), ("SYNCED", ""), ("MODIFIED", "a"), ("DELETED", "b")]

            stream.send(ADDED, cm("c", "11"))
            event = await next_event(events)
            assert event == WatchEvent(WatchEventType.ADDED, polyop.Object(cm("c", "11")))
            assert event.object.meta.resource_version == "11"

    run(main, sock_dir)


def test_a_watch_resumes_from_the_last_version_after_the_stream_ends(sock_dir: str) -> None:
    async def main(service: WatchService, cluster: polyop.AsyncCluster) -> None:
        async with contextlib.aclosing(cluster.watch("v1/ConfigMap", "shop")) as events:
            pending = asyncio.ensure_future(next_event(events))
            stream = await service.next_stream()
            stream.send(ADDED, cm("a", "3"))
            stream.done("7")
            stream.send(MODIFIED, cm("a", "9"))
            assert [seen(await pending), seen(await next_event(events)), seen(await next_event(events))] == [
                ("ADDED", "a"), ("SYNCED", ""), ("MODIFIED", "a"),
            ]
            stream.end(grpc.StatusCode.UNAVAILABLE, "the host is shutting down: watch again once it is back")

            pending = asyncio.ensure_future(next_event(events))
            stream = await service.next_stream()
            assert stream.request.resource_version == "9", "resumes from the last event's version, without a list"
            stream.send(MODIFIED, cm("a", "12"))
            assert seen(await pending) == ("MODIFIED", "a")
            stream.bookmark("15")
            stream.end(grpc.StatusCode.RESOURCE_EXHAUSTED, "the watch fell behind and was cut off")

            pending = asyncio.ensure_future(next_event(events))
            stream = await service.next_stream()
            assert stream.request.resource_version == "15", "a bookmark's version is the one to resume from"
            stream.send(ADDED, cm("b", "16"))
            assert seen(await pending) == ("ADDED", "b")

    run(main, sock_dir)


def test_a_watch_interrupted_in_its_initial_list_lists_again(sock_dir: str) -> None:
    async def main(service: WatchService, cluster: polyop.AsyncCluster) -> None:
        async with contextlib.aclosing(cluster.watch("v1/ConfigMap", "shop")) as events:
            pending = asyncio.ensure_future(next_event(events))
            stream = await service.next_stream()
            stream.send(ADDED, cm("a", "30"))
            assert seen(await pending) == ("ADDED", "a")
            stream.end(grpc.StatusCode.UNAVAILABLE, "gone")

            pending = asyncio.ensure_future(next_event(events))
            stream = await service.next_stream()
            assert stream.request.resource_version == "", "an object's version in a list is no place to resume from"
            stream.send(ADDED, cm("a", "30"))
            stream.send(ADDED, cm("b", "20"))
            stream.done("31")
            got = [seen(await pending)] + [seen(await next_event(events)) for _ in range(2)]
            assert got == [("MODIFIED", "a"), ("ADDED", "b"), ("SYNCED", "")]

    run(main, sock_dir)


def test_a_watch_whose_version_expired_lists_again_and_reports_what_went_as_deleted(sock_dir: str) -> None:
    async def main(service: WatchService, cluster: polyop.AsyncCluster) -> None:
        async with contextlib.aclosing(cluster.watch("v1/ConfigMap", "shop")) as events:
            pending = asyncio.ensure_future(next_event(events))
            stream = await service.next_stream()
            for name, rv in (("a", "3"), ("b", "4"), ("c", "5")):
                stream.send(ADDED, cm(name, rv))
            stream.done("10")
            got = [seen(await pending)] + [seen(await next_event(events)) for _ in range(3)]
            assert got == [("ADDED", "a"), ("ADDED", "b"), ("ADDED", "c"), ("SYNCED", "")]
            stream.end(grpc.StatusCode.UNAVAILABLE, "the host is shutting down")

            pending = asyncio.ensure_future(next_event(events))
            stream = await service.next_stream()
            assert stream.request.resource_version == "10"
            stream.end(grpc.StatusCode.FAILED_PRECONDITION, "resource version 10 expired: the host remembers from 500, relist")

            stream = await service.next_stream()
            assert stream.request.resource_version == "", "an expired version lists again"
            stream.send(ADDED, cm("a", "600", size="3"))
            stream.send(ADDED, cm("d", "601"))
            stream.done("700")
            relisted = [await pending] + [await next_event(events) for _ in range(4)]
            assert [seen(e) for e in relisted] == [("MODIFIED", "a"), ("ADDED", "d"), ("DELETED", "b"), ("DELETED", "c"), ("SYNCED", "")]
            assert relisted[2].object == {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "b", "namespace": "shop"}}, (
                "an object that went while the watch was away is known by its key only"
            )

            stream.end(grpc.StatusCode.UNAVAILABLE, "again")
            pending = asyncio.ensure_future(next_event(events))
            stream = await service.next_stream()
            assert stream.request.resource_version == "700", "after a relist, resume from its INITIAL_LIST_DONE"
            stream.send(DELETED, cm("d", "701"))
            assert seen(await pending) == ("DELETED", "d")

    run(main, sock_dir)


@pytest.mark.parametrize(
    ("code", "message"),
    [
        (grpc.StatusCode.FAILED_PRECONDITION, "the host does not cache Secret in namespace shop, and watches only the kinds it caches"),
        (grpc.StatusCode.INVALID_ARGUMENT, "the field selector spec.x is not supported"),
    ],
)
def test_a_watch_the_host_will_not_serve_raises(sock_dir: str, code: grpc.StatusCode, message: str) -> None:
    async def main(service: WatchService, cluster: polyop.AsyncCluster) -> None:
        events = cluster.watch("v1/Secret", "shop")
        pending = asyncio.ensure_future(next_event(events))
        stream = await service.next_stream()
        stream.end(code, message)
        with pytest.raises(polyop.ClusterError) as err:
            await pending
        assert err.value.code == code
        assert str(err.value) == f"watching Secret in shop: {code.name}: {message}"
        assert service.streams.empty(), "no second attempt"

    run(main, sock_dir)


def test_closing_a_watch_cancels_its_stream(sock_dir: str) -> None:
    async def main(service: WatchService, cluster: polyop.AsyncCluster) -> None:
        events = cluster.watch("v1/ConfigMap", "shop")
        pending = asyncio.ensure_future(next_event(events))
        stream = await service.next_stream()
        stream.done("1")
        assert (await pending).type is WatchEventType.SYNCED
        await events.aclose()
        await asyncio.wait_for(stream.ended.wait(), LONG)

        # A task reading a watch, cancelled while it waits for an event.
        async def read() -> None:
            async with contextlib.aclosing(cluster.watch("v1/ConfigMap", "shop")) as events:
                async for _ in events:
                    pass

        reader = asyncio.ensure_future(read())
        stream = await service.next_stream()
        reader.cancel()
        await asyncio.wait_for(stream.ended.wait(), LONG)
        with pytest.raises(asyncio.CancelledError):
            await reader

    run(main, sock_dir)


def test_a_fake_cluster_watch_delivers_its_objects_then_every_change_of_the_selection() -> None:
    async def main() -> None:
        fake = FakeCluster([cm("a", ""), cm("other", "", namespace="elsewhere")])
        cluster = fake.async_client()
        async with contextlib.aclosing(cluster.watch("v1/ConfigMap", "shop", label_selector="app=web")) as events:
            assert seen(await next_event(events)) == ("ADDED", "a")
            assert seen(await next_event(events)) == ("SYNCED", "")

            created = await cluster.create(cm("b", ""))
            event = await next_event(events)
            assert event == WatchEvent(WatchEventType.ADDED, created)

            await cluster.patch("v1/ConfigMap", "a", {"data": {"size": "2"}}, "shop")
            event = await next_event(events)
            assert seen(event) == ("MODIFIED", "a") and event.object["data"] == {"size": "2"}

            fake.create(cm("c", "", namespace="elsewhere"))  # not selected: no event
            await cluster.patch("v1/ConfigMap", "a", {"metadata": {"labels": {"app": "db"}}}, "shop")
            assert seen(await next_event(events)) == ("DELETED", "a"), "leaving the selection is a delete"

            await cluster.delete("v1/ConfigMap", "b", "shop")
            assert seen(await next_event(events)) == ("DELETED", "b")

    asyncio.run(asyncio.wait_for(main(), LONG))


def test_a_fake_cluster_watch_refuses_a_field_selector_the_host_refuses() -> None:
    async def main() -> None:
        events = FakeCluster().async_client().watch("v1/ConfigMap", "shop", field_selector="data.size=2")
        with pytest.raises(polyop.BadRequestError, match="metadata.name and metadata.namespace only"):
            await next_event(events)

    asyncio.run(main())
