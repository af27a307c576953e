"""A watch of one kind through the host's Watch stream, as an async iterator
of typed events that resumes by itself (see :meth:`AsyncCluster.watch`)."""

from __future__ import annotations

import asyncio
import contextlib
import enum
import logging
from collections.abc import AsyncGenerator, Callable
from dataclasses import dataclass

import grpc

from polyop.errors import ClusterError
from polyop.objects import GVK, Object
from polyop.v1alpha1 import cluster_pb2

__all__ = ["WatchEvent", "WatchEventType"]

log = logging.getLogger("polyop")


class WatchEventType(enum.Enum):
    """What a :class:`WatchEvent` reports."""

    ADDED = "ADDED"
    """The object appeared, or was there when the watch listed."""
    MODIFIED = "MODIFIED"
    """The object changed (or was listed again after the watch relisted)."""
    DELETED = "DELETED"
    """The object went, or left the selection; ``object`` is its last state
    (only its kind, name and namespace when it went while the watch was away
    and the watch had to list again)."""
    SYNCED = "SYNCED"
    """Every object the host held when the watch listed (or listed again)
    has been delivered: a view built from the events is complete. ``object``
    is empty."""


@dataclass(frozen=True)
class WatchEvent:
    """One change of a watched kind."""

    type: WatchEventType
    object: Object
    """The object, as the API server's JSON; an empty Object for SYNCED."""


RETRY_WAIT = (0.1, 5.0)
"""The first and the longest wait, in seconds, before a watch the host ended
(it restarted, or the reader fell behind) is opened again; it doubles from
one to the other while attempts deliver nothing."""

_TERMINAL = frozenset({
    grpc.StatusCode.INVALID_ARGUMENT,
    grpc.StatusCode.NOT_FOUND,
    grpc.StatusCode.PERMISSION_DENIED,
    grpc.StatusCode.UNAUTHENTICATED,
    grpc.StatusCode.UNIMPLEMENTED,
})
"""Codes a new attempt cannot get past: a selector the host refuses, an
unknown kind, a host without Watch."""

_Key = tuple[str, str]  # namespace, name

Stream = Callable[[cluster_pb2.WatchRequest], AsyncGenerator[cluster_pb2.WatchResponse, None]]
"""Opens one Watch stream; its iterator raises ClusterError when the stream
fails, and closing it cancels the call."""


async def watch(
    open_stream: Stream, kind: GVK, namespace: str, label_selector: str, field_selector: str
) -> AsyncGenerator[WatchEvent, None]:
    """The events of every attempt of a watch, resumed after an interruption
    from the last version delivered, relisted after an expiry."""
    what = f"watching {kind.kind}" + (f" in {namespace}" if namespace else " in every namespace")
    view = _View(kind)
    wait = RETRY_WAIT[0]
    while True:
        request = cluster_pb2.WatchRequest(
            kind=kind.to_proto(),
            namespace=namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            resource_version=view.resource_version,
        )
        view.start(listing=not request.resource_version)
        progressed = False
        try:
            async with contextlib.aclosing(open_stream(request)) as stream:
                async for response in stream:
                    progressed = True
                    for event in view.receive(response):
                        yield event
            failure = ClusterError(f"{what}: the host ended the stream", grpc.StatusCode.UNAVAILABLE)
        except ClusterError as err:
            failure = err
        if failure.code is grpc.StatusCode.FAILED_PRECONDITION:
            if not request.resource_version:
                raise failure  # not an expired version: the host will not serve this watch
            log.debug("%s: version %s expired, listing again", what, request.resource_version)
            view.resource_version = ""
            continue
        if failure.code in _TERMINAL:
            raise failure
        log.debug("%s: the stream ended (%s), resuming from version %r", what, failure, view.resource_version)
        if progressed:
            wait = RETRY_WAIT[0]
        await asyncio.sleep(wait)
        wait = min(2 * wait, RETRY_WAIT[1])


class _View:
    """What a watch delivered: the objects known and the version to resume
    from, so that a relist reports the objects that went meanwhile."""

    def __init__(self, kind: GVK) -> None:
        self.kind = kind
        self.resource_version = ""
        """The version to resume from; empty to list."""
        self.known: set[_Key] = set()
        """The objects delivered and not deleted."""
        self.listing = False
        self.listed: set[_Key] = set()

    def start(self, *, listing: bool) -> None:
        self.listing = listing
        self.listed = set()

    def receive(self, response: cluster_pb2.WatchResponse) -> list[WatchEvent]:
        events: list[WatchEvent] = []
        if response.type == cluster_pb2.WATCH_EVENT_TYPE_BOOKMARK:
            pass
        elif response.type == cluster_pb2.WATCH_EVENT_TYPE_INITIAL_LIST_DONE:
            if self.listing:
                for key in sorted(self.known - self.listed):
                    events.append(WatchEvent(WatchEventType.DELETED, self._gone(key)))
                self.known &= self.listed
                self.listing = False
            events.append(WatchEvent(WatchEventType.SYNCED, Object()))
        else:
            obj = Object.from_json(response.object)
            key = (obj.namespace, obj.name)
            if response.type == cluster_pb2.WATCH_EVENT_TYPE_DELETED:
                self.known.discard(key)
                self.listed.discard(key)
                events.append(WatchEvent(WatchEventType.DELETED, obj))
            else:
                typ = WatchEventType.MODIFIED if key in self.known else WatchEventType.ADDED
                self.known.add(key)
                if self.listing:
                    self.listed.add(key)
                events.append(WatchEvent(typ, obj))
        # While listing, an object's version is no place to resume from (the
        # list is in no order of versions): an interrupted list lists again.
        if response.resource_version and not self.listing:
            self.resource_version = response.resource_version
        return events

    def _gone(self, key: _Key) -> Object:
        namespace, name = key
        metadata = {"name": name, **({"namespace": namespace} if namespace else {})}
        return Object({"apiVersion": self.kind.api_version, "kind": self.kind.kind, "metadata": metadata})
