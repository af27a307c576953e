"""Call a Sidecar's functions without a host, through the code path the host's
calls take, for unit tests::

    from polyop.testing import FakeCluster, Harness

    def test_ready():
        fake = FakeCluster([secret("team-a")])
        got = Harness(sidecar, cluster=fake).reconcile(tenant("team-a"))
        assert got.error == ""
        assert got.status["conditions"][0]["status"] == "True"

Each method builds the request the host would send, hands it to the
sidecar's SidecarService in-process, and decodes the response. A call the
sidecar refuses (an unknown controller, a missing object name, a webhook it
does not declare) raises :class:`RPCError` with the gRPC status code it would
have answered with. ``async def`` functions are awaited in an event loop of
their own (on a thread of their own when the test itself runs in one).
:class:`FakeCluster` is an in-memory cluster for the functions that call
``ctx.cluster``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import json
import time
from collections.abc import Callable, Coroutine, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from polyop._calls import (
    Calls,
    Invocation,
    RPCError,
    convert,
    convert_async,
    run,
    run_async,
)
from polyop._fake import FakeCluster, RecordedEvent
from polyop.admission import FieldErrorType, Operation, UserInfo
from polyop.cluster import AsyncCluster, Cluster
from polyop.objects import GVK, KindLike, Object, encode
from polyop.sidecar import PROTOCOL_VERSION, Sidecar, is_async
from polyop.v1alpha1 import admission_pb2, describe_pb2, reconcile_pb2, types_pb2

__all__ = ["Admitted", "Event", "FakeCluster", "Harness", "RPCError", "RecordedEvent", "Reconciled"]

_T = TypeVar("_T")


@dataclass(frozen=True)
class Event:
    """An event a function recorded with ``ctx.event``."""

    type: str
    reason: str
    message: str
    action: str = ""


@dataclass
class Reconciled:
    """A decoded ReconcileResponse or FinalizeResponse."""

    response: Any
    status: dict[str, Any] | None = None
    events: list[Event] = field(default_factory=list)
    desired_children: list[Object] = field(default_factory=list)
    children_complete: bool = False
    requeue_after: float = 0.0
    """Seconds; 0 when not set."""
    error: str = ""
    """The Failure's message; empty when the call succeeded."""
    terminal: bool = False
    retry_after: float = 0.0
    """The Failure's retry_after in seconds; 0 when not set."""


@dataclass
class Admitted:
    """A decoded DefaultResponse or ValidateResponse."""

    allowed: bool
    message: str = ""
    field_errors: list[tuple[str, FieldErrorType, str]] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    object: Object | None = None
    """The defaulted object; None when the defaulter changed nothing."""
    code: int = 0
    """The denial's HTTP status code; 0 for the default (422 with field errors, 403 without)."""
    reason: str = ""
    """The denial's status reason; empty for the default."""


class Harness:
    """Calls a Sidecar's registered functions in-process.

    ``cluster`` is ``ctx.cluster`` of plain functions (a :class:`FakeCluster`,
    usually); an ``async def`` function gets ``async_cluster``, which
    defaults to the FakeCluster's :meth:`FakeCluster.async_client`. Without
    either, the functions get the sidecar's own clients, for the address a
    :meth:`describe` announced or POLYOP_CLUSTER_ADDRESS.
    """

    def __init__(self, sidecar: Sidecar, *, cluster: Cluster | None = None, async_cluster: AsyncCluster | None = None) -> None:
        self.sidecar = sidecar
        self.calls = Calls(sidecar, sidecar._clients)  # noqa: SLF001 (the SDK's own testing module)
        self.cluster = cluster
        if isinstance(cluster, FakeCluster):
            if async_cluster is None:
                async_cluster = cluster.async_client()
            _index_as_declared(cluster, sidecar)
        self.async_cluster = async_cluster

    def describe(self, cluster_address: str = "") -> describe_pb2.DescribeResponse:
        return self.calls.describe(describe_pb2.DescribeRequest(protocol_version=PROTOCOL_VERSION, cluster_address=cluster_address))

    def reconcile(
        self,
        obj: Mapping[str, Any],
        *,
        controller: str = "",
        observed_children: Sequence[Mapping[str, Any]] = (),
        retries: int = 0,
        timeout: float | None = None,
    ) -> Reconciled:
        """Reconcile obj, with the observed children the host would send.
        ``timeout`` is the call's deadline in seconds (none by default), as
        ``ctx.time_remaining()`` reports it; an ``async def`` function still
        running then is cancelled and TimeoutError raised, as the host's
        deadline would."""
        o = Object(obj)
        inv = self.calls.reconcile(
            reconcile_pb2.ReconcileRequest(
                controller=controller or self._controller_for(o.gvk),
                kind=o.gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=o.namespace, name=o.name),
                object=encode(obj),
                retries=retries,
                observed_children=[encode(c) for c in observed_children],
            ),
            _deadline(timeout),
        )
        resp = inv if isinstance(inv, reconcile_pb2.ReconcileResponse) else self._run(inv, timeout)
        got = _decoded(resp)
        got.status = json.loads(resp.status) if resp.status else None
        got.desired_children = [Object.from_json(c) for c in resp.desired_children]
        got.children_complete = resp.children_complete
        return got

    def reconcile_deleted(
        self, kind: KindLike, name: str, namespace: str = "", *, controller: str = "", retries: int = 0, timeout: float | None = None
    ) -> Reconciled:
        """Reconcile the key of an object that is gone, as the host does after
        a delete: the controller's ``@sidecar.deleted`` function is called."""
        gvk = GVK.parse(kind)
        inv = self.calls.reconcile(
            reconcile_pb2.ReconcileRequest(
                controller=controller or self._controller_for(gvk),
                kind=gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=namespace, name=name),
                retries=retries,
            ),
            _deadline(timeout),
        )
        return _decoded(inv if isinstance(inv, reconcile_pb2.ReconcileResponse) else self._run(inv, timeout))

    def finalize(self, obj: Mapping[str, Any], *, controller: str = "", retries: int = 0, timeout: float | None = None) -> Reconciled:
        """Finalize obj, which should carry a deletionTimestamp, as the host
        does for an object being deleted."""
        o = Object(obj)
        inv = self.calls.finalize(
            reconcile_pb2.FinalizeRequest(
                controller=controller or self._controller_for(o.gvk),
                kind=o.gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=o.namespace, name=o.name),
                object=encode(obj),
                retries=retries,
            ),
            _deadline(timeout),
        )
        return _decoded(self._run(inv, timeout))

    def default(
        self,
        obj: Mapping[str, Any],
        *,
        old: Mapping[str, Any] | None = None,
        operation: Operation | None = None,
        dry_run: bool = False,
        subresource: str = "",
        user: UserInfo | str | None = None,
    ) -> Admitted:
        """Default obj, as the mutating webhook; the arguments are :meth:`validate`'s."""
        request = _admission(obj, old, operation, dry_run, subresource, user)
        resp = self._run(self.calls.default(admission_pb2.DefaultRequest(request=request)), None)
        got = _admitted(resp.denied if resp.HasField("denied") else None, resp.warnings)
        got.object = Object.from_json(resp.object) if resp.object else None
        return got

    def validate(
        self,
        obj: Mapping[str, Any],
        *,
        old: Mapping[str, Any] | None = None,
        operation: Operation | None = None,
        dry_run: bool = False,
        subresource: str = "",
        user: UserInfo | str | None = None,
    ) -> Admitted:
        """Validate obj as the API server's admission request would ask:

        - ``old``: the object before the request (an update; a delete);
        - ``operation``: CREATE without ``old``, UPDATE with it, by default;
          on DELETE the request carries no object and ``old`` defaults to obj;
        - ``dry_run``: the request is a dry run;
        - ``subresource``: the subresource written, for example "status";
        - ``user``: the requesting user, a :class:`~polyop.UserInfo` (username,
          groups, ...) or a username.
        """
        request = _admission(obj, old, operation, dry_run, subresource, user)
        resp = self._run(self.calls.validate(admission_pb2.ValidateRequest(request=request)), None)
        return _admitted(resp.denied if resp.HasField("denied") else None, resp.warnings)

    def convert(self, objects: Sequence[Mapping[str, Any]], api_version: str) -> list[Object]:
        """Convert objects; raises ValueError with the response's error."""
        req = admission_pb2.ConvertRequest(desired_api_version=api_version, objects=[encode(o) for o in objects])
        if any(is_async(c.convert) for c in self.sidecar._converters.values()):
            resp = _await(lambda: convert_async(self.calls, req, None))
        else:
            resp = convert(self.calls, req)
        if resp.error:
            raise ValueError(resp.error)
        return [Object.from_json(o) for o in resp.objects]

    # Plumbing.

    def _run(self, inv: Invocation[_T], timeout: float | None) -> _T:
        if not is_async(inv.fn):
            return run(inv, self._cluster())

        async def call() -> _T:
            owned: list[AsyncCluster] = []

            def async_cluster() -> AsyncCluster | None:
                if self.async_cluster is not None:
                    return self.async_cluster
                cluster = self.sidecar.async_cluster
                if cluster is not None:
                    owned.append(cluster)
                return cluster

            try:
                return await asyncio.wait_for(run_async(inv, self._cluster, async_cluster, None), timeout)
            except asyncio.TimeoutError as err:  # not yet TimeoutError on Python 3.10
                raise TimeoutError(f"the function did not return within {timeout}s; it was cancelled") from err
            finally:
                if owned:
                    await self.sidecar._clients.close_async_cluster()  # noqa: SLF001

        return _await(call)

    def _cluster(self) -> Cluster | None:
        return self.cluster if self.cluster is not None else self.sidecar.cluster

    def _controller_for(self, gvk: GVK) -> str:
        names = [name for name, c in self.sidecar._controllers.items() if c.kind == gvk]
        if len(names) != 1:
            raise ValueError(f"{len(names)} controllers reconcile {gvk}: pass controller=")
        return names[0]


def _await(coroutine: Callable[[], Coroutine[Any, Any, _T]]) -> _T:
    """Run ``coroutine()`` to completion in an event loop of its own; on a
    thread of its own when this thread already runs a loop."""
    try:
        asyncio.get_running_loop()
    except RuntimeError:
        return asyncio.run(coroutine())
    with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(lambda: asyncio.run(coroutine())).result()


def _deadline(timeout: float | None) -> float | None:
    return None if timeout is None else time.monotonic() + timeout


def _decoded(resp: Any) -> Reconciled:
    got = Reconciled(response=resp)
    got.events = [
        Event("Warning" if e.type == reconcile_pb2.EVENT_TYPE_WARNING else "Normal", e.reason, e.message, e.action)
        for e in resp.events
    ]
    if resp.HasField("requeue_after"):
        got.requeue_after = resp.requeue_after.ToTimedelta().total_seconds()
    if resp.HasField("error"):
        got.error, got.terminal = resp.error.message, resp.error.terminal
        if resp.error.HasField("retry_after"):
            got.retry_after = resp.error.retry_after.ToTimedelta().total_seconds()
    return got


def _admission(
    obj: Mapping[str, Any],
    old: Mapping[str, Any] | None,
    operation: Operation | None,
    dry_run: bool,
    subresource: str,
    user: UserInfo | str | None,
) -> admission_pb2.AdmissionRequest:
    o = Object(obj)
    if operation is None:
        operation = Operation.CREATE if old is None else Operation.UPDATE
    if operation is Operation.DELETE and old is None:
        old = obj
    if isinstance(user, str):
        user = UserInfo(username=user)
    user = user or UserInfo()
    return admission_pb2.AdmissionRequest(
        uid="test",
        kind=o.gvk.to_proto(),
        key=types_pb2.ObjectKey(namespace=o.namespace, name=o.name),
        subresource=subresource,
        operation=operation.value,
        user_info=admission_pb2.UserInfo(
            username=user.username,
            uid=user.uid,
            groups=list(user.groups),
            extra={k: admission_pb2.ExtraValue(values=list(v)) for k, v in user.extra.items()},
        ),
        object=encode(obj) if operation is not Operation.DELETE else b"",
        old_object=encode(old) if old is not None else b"",
        dry_run=dry_run,
    )


def _admitted(denied: admission_pb2.Denial | None, warnings: Sequence[str]) -> Admitted:
    if denied is None:
        return Admitted(allowed=True, warnings=list(warnings))
    return Admitted(
        allowed=False,
        message=denied.message,
        field_errors=[(e.field, FieldErrorType(e.type), e.detail) for e in denied.field_errors],
        warnings=list(warnings),
        code=denied.code,
        reason=denied.reason,
    )


def _index_as_declared(fake: FakeCluster, sidecar: Sidecar) -> None:
    """Index fake by the indexes sidecar declares: by their field paths, and
    those by CEL refused until the test gives them a function."""
    for ix in sidecar._indexes.values():  # noqa: SLF001 (the SDK's own testing module)
        kind = GVK.from_proto(ix.kind)
        if ix.WhichOneof("value") == "field_path":
            fake.index(kind, ix.name, ix.field_path)
        else:
            fake._declare_cel_index(kind, ix.name, ix.cel)  # noqa: SLF001
