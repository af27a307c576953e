"""FakeCluster: an in-memory ClusterService, for unit tests of functions that
call ``ctx.cluster``.

It is a :class:`~polyop.Cluster` whose calls are answered in-process instead
of over gRPC: the requests are built, and the errors raised, exactly as
against the host, with the API server's reasons and messages.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import re
import threading
from collections.abc import AsyncGenerator, Callable, Iterable, Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from typing import Any

from polyop._requests import _Call, _Requests
from polyop.cluster import OWNER_UID_INDEX, AsyncCluster, Cluster
from polyop.errors import APIError, api_error
from polyop.objects import GVK, KindLike, Object, encode
from polyop.v1alpha1 import cluster_pb2, reconcile_pb2

__all__ = ["FakeCluster", "RecordedEvent"]

CLUSTER_SCOPED: tuple[str, ...] = (
    "v1/Namespace",
    "v1/Node",
    "v1/PersistentVolume",
    "rbac.authorization.k8s.io/v1/ClusterRole",
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding",
    "apiextensions.k8s.io/v1/CustomResourceDefinition",
    "storage.k8s.io/v1/StorageClass",
    "admissionregistration.k8s.io/v1/ValidatingWebhookConfiguration",
    "admissionregistration.k8s.io/v1/MutatingWebhookConfiguration",
)
"""The built-in kinds a FakeCluster knows to be cluster-scoped; every other
kind is namespaced unless named in ``cluster_scoped``."""


@dataclass(frozen=True)
class RecordedEvent:
    """An event recorded through :meth:`Cluster.record_event`, on the object
    of ``kind``, ``namespace`` and ``name``."""

    kind: GVK
    namespace: str
    name: str
    type: str
    reason: str
    message: str
    action: str = ""


_Key = tuple[str, str, str, str]  # group, kind, namespace, name


class FakeCluster(Cluster):
    """An in-memory cluster, for tests: a :class:`~polyop.Cluster` to pass to
    ``polyop.testing.Harness(sidecar, cluster=fake)``, which hands it to plain
    functions as ``ctx.cluster`` and :meth:`async_client` to ``async def``
    ones::

        fake = FakeCluster([secret])
        got = Harness(sidecar, cluster=fake).reconcile(tenant)
        assert fake.get("v1/ConfigMap", "tenant-a", "team-a").data == ...

    It keeps objects by kind (group and kind; one version of each), namespace
    and name, as the API server would: ``metadata.uid``,
    ``resourceVersion``, ``creationTimestamp`` and ``generation`` are set on
    create, the resourceVersion moves on every write, and an update or patch
    whose resourceVersion is not the stored one raises ConflictError. An
    update of the object keeps the stored status, an update of
    ``subresource="status"`` changes the status only. A delete of an object
    with finalizers sets its ``deletionTimestamp``; it goes once an update
    removes the last finalizer. ``list`` takes kubectl's label selectors, the
    field selectors ``metadata.name`` and ``metadata.namespace``, and
    ``"<index>=<value>"`` on :data:`~polyop.OWNER_UID_INDEX` and the indexes
    given to :meth:`index`. Merge
    and JSON patches are applied; server-side apply is approximated by a
    merge patch (create when missing, no field ownership) and a strategic
    merge patch is refused with BadRequestError. Dry runs store nothing.
    Subresources other than status are recorded in
    :attr:`subresource_creates` and answered with their body.

    Errors are the classes the real client raises (NotFoundError,
    AlreadyExistsError, ConflictError, ...), with the API server's messages.
    Recorded events are kept in :attr:`events`. Every kind is namespaced but
    the built-in cluster-scoped ones and those in ``cluster_scoped``.

    ``fake.async_client().watch(kind, namespace, ...)`` watches it as
    :meth:`~polyop.AsyncCluster.watch` watches the host: the objects it
    holds, SYNCED, then every change made through it (any client of it, or
    :meth:`add`), on the event loop that reads the watch.
    """

    def __init__(
        self,
        objects: Iterable[Mapping[str, Any]] = (),
        *,
        cluster_scoped: Iterable[KindLike] = (),
        field_manager: str = "",
    ) -> None:
        # No channel: the calls are answered by _invoke, in-process.
        _Requests.__init__(self, field_manager)
        self.timeout = None
        self._owns_channel = False
        self._lock = threading.RLock()
        self._objects: dict[_Key, Object] = {}
        self._version = itertools.count(1)
        self._resource_version = 0
        self._cluster_scoped = {(g.group, g.kind) for g in map(GVK.parse, (*CLUSTER_SCOPED, *cluster_scoped))}
        self.events: list[RecordedEvent] = []
        """The events recorded, in order."""
        self.subresource_creates: list[tuple[GVK, str, str, str, Object]] = []
        """The subresources created: kind, namespace, name, subresource and body."""
        self._indexes: dict[tuple[str, str, str], Callable[[Object], list[str]]] = {}
        self._changes: list[tuple[Object | None, Object | None]] = []
        """Every change, as the object before and after, for watches."""
        self._watchers: list[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = []
        self.add(*objects)

    def index(self, kind: KindLike, name: str, values: str | Callable[[Object], Iterable[str]]) -> None:
        """Index kind by name, as the host indexes what a sidecar declares
        with :meth:`~polyop.Sidecar.index`: ``list`` then selects
        ``field_selector=f"{name}={value}"``. ``values`` is a field path (the
        host's syntax) or a function of the object returning its values, for
        an index declared by CEL, which FakeCluster does not evaluate.
        :class:`~polyop.testing.Harness` indexes a FakeCluster by the field
        paths its sidecar declares; :data:`~polyop.OWNER_UID_INDEX` is always
        there."""
        gvk = GVK.parse(kind)
        if isinstance(values, str):
            from polyop._fieldpath import compile_path

            by_path = compile_path(values)
            fn: Callable[[Object], list[str]] = lambda o: by_path(dict(o))  # noqa: E731
        else:
            fn = lambda o: [v for v in dict.fromkeys(values(o)) if v]  # noqa: E731
        with self._lock:
            self._indexes[(gvk.group, gvk.kind, name)] = fn

    def _declare_cel_index(self, kind: KindLike, name: str, cel: str) -> None:
        """Refuse, with the remedy, a List by an index declared by CEL that
        the test did not index with a function."""
        gvk = GVK.parse(kind)

        def refuse(_: Object) -> list[str]:
            raise _bad_request(
                f"FakeCluster does not evaluate the CEL of index {name!r} on {gvk.kind} ({cel}): "
                f"give it the index as a function, fake.index({str(gvk)!r}, {name!r}, lambda obj: [...])"
            )

        with self._lock:
            self._indexes.setdefault((gvk.group, gvk.kind, name), refuse)

    def add(self, *objects: Mapping[str, Any]) -> None:
        """Store objects as they are, with the metadata a create would set
        where they have none; an object of the same key is replaced."""
        with self._lock:
            for obj in objects:
                o = Object(copy.deepcopy(dict(obj)))
                self._check_kind(o)
                self._stamp(o, created=True)
                self._put(o)

    def async_client(self) -> AsyncCluster:
        """An :class:`~polyop.AsyncCluster` on this same in-memory cluster,
        the ``ctx.cluster`` of ``async def`` functions."""
        return _AsyncFakeCluster(self)

    # The in-memory ClusterService.

    def _invoke(self, call: _Call[Any]) -> Any:
        return self._serve(call.method, call.request)

    def _serve(self, method: str, request: Any) -> Any:
        handler: Callable[[Any], Any] = getattr(self, "_serve_" + method.lower())
        with self._lock:
            return handler(request)

    def _serve_get(self, request: cluster_pb2.GetRequest) -> cluster_pb2.GetResponse:
        gvk = GVK.from_proto(request.kind)
        if request.subresource not in ("", "status"):
            raise _bad_request(f"FakeCluster serves no subresource {request.subresource!r} of {gvk.kind}")
        obj = self._stored(gvk, request.key.namespace, request.key.name)
        return cluster_pb2.GetResponse(object=encode(obj), source=cluster_pb2.READ_SOURCE_CACHE)

    def _serve_list(self, request: cluster_pb2.ListRequest) -> cluster_pb2.ListResponse:
        gvk = GVK.from_proto(request.kind)
        labels = _label_selector(request.label_selector)
        fields = self._index_selector(gvk, request.field_selector) or _field_selector(request.field_selector)
        items = [
            o
            for (group, kind, namespace, _), o in sorted(self._objects.items())
            if (group, kind) == (gvk.group, gvk.kind)
            and (not request.namespace or namespace == request.namespace)
            and labels(o.meta.labels)
            and fields(o)
        ]
        start = int(request.continue_token or 0)
        end = start + request.limit if request.limit > 0 else len(items)
        return cluster_pb2.ListResponse(
            items=[encode(o) for o in items[start:end]],
            continue_token=str(end) if end < len(items) else "",
            resource_version=str(self._resource_version),
            source=cluster_pb2.READ_SOURCE_CACHE,
        )

    def _index_selector(self, gvk: GVK, selector: str) -> Callable[[Object], bool] | None:
        """The test of a field selector "name=value" on an index of gvk, as the
        host's cache answers it; None when it names no index."""
        m = re.match(r"^\s*([^=!,\s]+)\s*==?\s*([^,\s]*)\s*$", selector)
        if m is None:
            return None
        name, value = m[1], m[2]
        if name == OWNER_UID_INDEX:
            return lambda o: any(
                r.get("controller") is True and r.get("uid") == value for r in (o.get("metadata") or {}).get("ownerReferences") or []
            )
        fn = self._indexes.get((gvk.group, gvk.kind, name))
        if fn is None:
            return None
        return lambda o: value in fn(o)

    def _serve_resolvekind(self, request: cluster_pb2.ResolveKindRequest) -> cluster_pb2.ResolveKindResponse:
        gvk = GVK.from_proto(request.kind)
        return cluster_pb2.ResolveKindResponse(
            kind=request.kind, resource=_resource(gvk), namespaced=(gvk.group, gvk.kind) not in self._cluster_scoped
        )

    def _serve_create(self, request: cluster_pb2.CreateRequest) -> cluster_pb2.CreateResponse:
        gvk = GVK.from_proto(request.kind)
        body = Object.from_json(request.object)
        if request.subresource:
            self._stored(gvk, request.key.namespace, request.key.name)
            if not request.options.dry_run:
                self.subresource_creates.append((gvk, request.key.namespace, request.key.name, request.subresource, body))
            return cluster_pb2.CreateResponse(object=encode(body))
        obj = self._addressed(gvk, request.key.namespace, request.key.name, body)
        if not obj.name:
            prefix = str(obj.metadata.get("generateName", ""))
            if not prefix:
                raise _invalid(gvk, "", "metadata.name", "name or generateName is required")
            obj.metadata["name"] = f"{prefix}{next(self._version):05x}"
        key = _key(gvk, obj.namespace, obj.name)
        if key in self._objects:
            raise api_error(_status("AlreadyExists", 409, f'{_resource_name(gvk)} "{obj.name}" already exists', gvk, obj.name))
        for managed in ("resourceVersion", "uid", "creationTimestamp", "deletionTimestamp", "generation"):
            obj.metadata.pop(managed, None)
        self._stamp(obj, created=True)
        if not request.options.dry_run:
            self._put(obj)
        return cluster_pb2.CreateResponse(object=encode(obj))

    def _serve_update(self, request: cluster_pb2.UpdateRequest) -> cluster_pb2.UpdateResponse:
        gvk = GVK.from_proto(request.kind)
        obj = self._addressed(gvk, request.key.namespace, request.key.name, Object.from_json(request.object))
        return cluster_pb2.UpdateResponse(object=encode(self._write(gvk, obj, request.subresource, request.options.dry_run)))

    def _serve_patch(self, request: cluster_pb2.PatchRequest) -> cluster_pb2.PatchResponse:
        gvk = GVK.from_proto(request.kind)
        namespace, name = request.key.namespace, request.key.name
        patch = json.loads(request.patch)
        key = _key(gvk, namespace, name)
        if request.type == cluster_pb2.PATCH_TYPE_APPLY and key not in self._objects:
            create = cluster_pb2.CreateRequest(kind=request.kind, key=request.key, options=request.options, object=request.patch)
            return cluster_pb2.PatchResponse(object=self._serve_create(create).object)
        stored = self._stored(gvk, namespace, name)
        if request.type in (cluster_pb2.PATCH_TYPE_MERGE, cluster_pb2.PATCH_TYPE_APPLY):
            if not isinstance(patch, dict):
                raise _bad_request("a merge patch must be a JSON object")
            patched = _merge(copy.deepcopy(dict(stored)), patch)
        elif request.type == cluster_pb2.PATCH_TYPE_JSON:
            patched = _json_patch(copy.deepcopy(dict(stored)), patch)
        else:
            raise _bad_request(f"FakeCluster does not apply patches of type {cluster_pb2.PatchType.Name(request.type)}")
        obj = Object(patched)
        return cluster_pb2.PatchResponse(object=encode(self._write(gvk, obj, request.subresource, request.options.dry_run)))

    def _serve_delete(self, request: cluster_pb2.DeleteRequest) -> cluster_pb2.DeleteResponse:
        gvk = GVK.from_proto(request.kind)
        stored = self._stored(gvk, request.key.namespace, request.key.name)
        meta = stored.meta
        for field, want, have in (
            ("UID", request.precondition_uid, meta.uid),
            ("ResourceVersion", request.precondition_resource_version, meta.resource_version),
        ):
            if want and want != have:
                raise api_error(_status(
                    "Conflict", 409,
                    f"Precondition failed: {field} in precondition: {want}, {field} in object meta: {have}", gvk, stored.name,
                ))
        if request.options.dry_run:
            return cluster_pb2.DeleteResponse()
        key = _key(gvk, stored.namespace, stored.name)
        if meta.finalizers:
            if not meta.deletion_timestamp:
                deleting = copy.deepcopy(stored)
                deleting.metadata["deletionTimestamp"] = _now()
                self._bump(deleting)
                self._put(deleting)
        else:
            self._remove(key)
        return cluster_pb2.DeleteResponse()

    def _serve_recordevent(self, request: cluster_pb2.RecordEventRequest) -> cluster_pb2.RecordEventResponse:
        e = request.event
        self.events.append(
            RecordedEvent(
                GVK.from_proto(request.kind), request.key.namespace, request.key.name,
                "Warning" if e.type == reconcile_pb2.EVENT_TYPE_WARNING else "Normal", e.reason, e.message, e.action,
            )
        )
        return cluster_pb2.RecordEventResponse()

    # Plumbing.

    def _stored(self, gvk: GVK, namespace: str, name: str) -> Object:
        obj = self._objects.get(_key(gvk, namespace, name))
        if obj is None:
            raise api_error(_status("NotFound", 404, f'{_resource_name(gvk)} "{name}" not found', gvk, name))
        return obj

    def _addressed(self, gvk: GVK, namespace: str, name: str, obj: Object) -> Object:
        """The object with the request's kind and key, refused where they differ."""
        meta = obj.metadata
        if obj.kind and (obj.gvk.group, obj.kind) != (gvk.group, gvk.kind):
            raise _bad_request(f"the object is a {obj.gvk}, the request is for {gvk}")
        if meta.get("namespace") and namespace and meta["namespace"] != namespace:
            raise _bad_request("the namespace of the provided object does not match the namespace sent on the request")
        if meta.get("name") and name and meta["name"] != name:
            raise _bad_request(f'the name of the object ({meta["name"]}) does not match the name on the URL ({name})')
        obj.setdefault("apiVersion", gvk.api_version)
        obj.setdefault("kind", gvk.kind)
        if namespace:
            meta["namespace"] = namespace
        if name:
            meta["name"] = name
        self._check_kind(obj)
        return obj

    def _check_kind(self, obj: Object) -> None:
        gvk = obj.gvk
        if (gvk.group, gvk.kind) in self._cluster_scoped:
            obj.metadata.pop("namespace", None)
        elif not obj.namespace:
            raise _bad_request(f"{gvk.kind} {obj.name!r} is namespaced: an empty namespace may not be set")

    def _write(self, gvk: GVK, obj: Object, subresource: str, dry_run: bool) -> Object:
        """Update the stored object with obj, as an update of the object or of
        its status subresource, with optimistic concurrency."""
        stored = self._stored(gvk, obj.namespace, obj.name)
        rv = obj.meta.resource_version
        if rv and rv != stored.meta.resource_version:
            raise api_error(_status(
                "Conflict", 409,
                f'Operation cannot be fulfilled on {_resource_name(gvk)} "{obj.name}": the object has been modified; '
                "please apply your changes to the latest version and try again",
                gvk, obj.name,
            ))
        if subresource == "status":
            new = copy.deepcopy(stored)
            if "status" in obj:
                new["status"] = copy.deepcopy(obj["status"])
            else:
                new.pop("status", None)
        elif subresource:
            raise _bad_request(f"FakeCluster updates no subresource {subresource!r} of {gvk.kind}")
        else:
            new = Object(copy.deepcopy(dict(obj)))
            new.pop("status", None)
            if "status" in stored:
                new["status"] = copy.deepcopy(stored["status"])
            for managed in ("uid", "creationTimestamp", "deletionTimestamp", "generation"):
                if managed in stored.metadata:
                    new.metadata[managed] = stored.metadata[managed]
                else:
                    new.metadata.pop(managed, None)
            if _spec(new) != _spec(stored):
                new.metadata["generation"] = int(stored.meta.generation) + 1
        if new == stored:
            return copy.deepcopy(stored)
        self._bump(new)
        if dry_run:
            return new
        if new.meta.deletion_timestamp and not new.meta.finalizers:
            self._remove(_key(gvk, new.namespace, new.name))
        else:
            self._put(new)
        return copy.deepcopy(new)

    def _put(self, obj: Object) -> None:
        """Store obj, created or changed, and tell the watches."""
        key = _key(obj.gvk, obj.namespace, obj.name)
        self._changed(self._objects.get(key), obj)
        self._objects[key] = obj

    def _remove(self, key: _Key) -> None:
        """Delete the object of key, and tell the watches."""
        self._changed(self._objects.pop(key), None)

    def _changed(self, old: Object | None, new: Object | None) -> None:
        self._changes.append((copy.deepcopy(old), copy.deepcopy(new)))
        for loop, wake in list(self._watchers):
            try:
                loop.call_soon_threadsafe(wake.set)
            except RuntimeError:  # the loop of a watch nobody closed has ended
                self._watchers.remove((loop, wake))

    async def _serve_watch(self, request: cluster_pb2.WatchRequest) -> AsyncGenerator[cluster_pb2.WatchResponse, None]:
        """The Watch stream, as the host serves it: the objects stored now,
        INITIAL_LIST_DONE, then every change of the selection. A
        resource_version resumes from the changes after this call (the
        fake's streams never end, so no resume is ever needed)."""
        gvk = GVK.from_proto(request.kind)
        labels = _label_selector(request.label_selector)
        fields = _field_selector(request.field_selector)

        def selected(o: Object | None) -> bool:
            return (
                o is not None
                and (o.gvk.group, o.kind) == (gvk.group, gvk.kind)
                and (not request.namespace or o.namespace == request.namespace)
                and labels(o.meta.labels)
                and fields(o)
            )

        wake = asyncio.Event()
        watcher = (asyncio.get_running_loop(), wake)
        with self._lock:
            self._watchers.append(watcher)
            seen = len(self._changes)
            initial = [copy.deepcopy(o) for _, o in sorted(self._objects.items()) if selected(o)]
            version = str(self._resource_version)
        try:
            if not request.resource_version:
                for o in initial:
                    yield _watch_response(cluster_pb2.WATCH_EVENT_TYPE_ADDED, o)
                yield cluster_pb2.WatchResponse(type=cluster_pb2.WATCH_EVENT_TYPE_INITIAL_LIST_DONE, resource_version=version)
            while True:
                await wake.wait()
                wake.clear()
                with self._lock:
                    changes, seen = self._changes[seen:], len(self._changes)
                for old, new in changes:
                    was, now = selected(old), selected(new)
                    if now:
                        assert new is not None
                        yield _watch_response(cluster_pb2.WATCH_EVENT_TYPE_MODIFIED if was else cluster_pb2.WATCH_EVENT_TYPE_ADDED, new)
                    elif was:
                        assert old is not None
                        yield _watch_response(cluster_pb2.WATCH_EVENT_TYPE_DELETED, new or old)
        finally:
            with self._lock:
                if watcher in self._watchers:
                    self._watchers.remove(watcher)

    def _stamp(self, obj: Object, *, created: bool) -> None:
        meta = obj.metadata
        if created:
            meta.setdefault("uid", f"fake-uid-{next(self._version)}")
            meta.setdefault("creationTimestamp", _now())
            meta.setdefault("generation", 1)
        if not meta.get("resourceVersion"):
            self._bump(obj)

    def _bump(self, obj: Object) -> None:
        self._resource_version += 1
        obj.metadata["resourceVersion"] = str(self._resource_version)


class _AsyncFakeCluster(AsyncCluster):
    """FakeCluster's calls, as coroutines."""

    def __init__(self, fake: FakeCluster) -> None:
        _Requests.__init__(self, fake.field_manager)
        self.timeout = None
        self._owns_channel = False
        self._fake = fake

    async def _invoke(self, call: _Call[Any]) -> Any:
        return self._fake._serve(call.method, call.request)

    def _watch_stream(self, request: cluster_pb2.WatchRequest) -> AsyncGenerator[cluster_pb2.WatchResponse, None]:
        return self._fake._serve_watch(request)


def _watch_response(type: cluster_pb2.WatchEventType.ValueType, obj: Object) -> cluster_pb2.WatchResponse:
    return cluster_pb2.WatchResponse(type=type, object=encode(obj), resource_version=obj.meta.resource_version)


def _key(gvk: GVK, namespace: str, name: str) -> _Key:
    return (gvk.group, gvk.kind, namespace, name)


def _resource(gvk: GVK) -> str:
    kind = gvk.kind.lower()
    if kind.endswith("y") and not kind.endswith(("ay", "ey", "oy", "uy")):
        return kind[:-1] + "ies"
    if kind.endswith(("s", "x", "ch", "sh")):
        return kind + "es"
    return kind + "s"


def _resource_name(gvk: GVK) -> str:
    """The resource as the API server names it in messages: "configmaps", "widgets.example.com"."""
    return f"{_resource(gvk)}.{gvk.group}" if gvk.group else _resource(gvk)


def _spec(obj: Mapping[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in obj.items() if k not in ("metadata", "status")}


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def _status(reason: str, code: int, message: str, gvk: GVK | None = None, name: str = "", causes: list[dict[str, str]] | None = None) -> dict[str, Any]:
    status: dict[str, Any] = {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": reason,
        "code": code,
    }
    if gvk is not None:
        details: dict[str, Any] = {"name": name, "kind": _resource(gvk)}
        if gvk.group:
            details["group"] = gvk.group
        if causes:
            details["causes"] = causes
        status["details"] = details
    return status


def _bad_request(message: str) -> APIError:
    return api_error(_status("BadRequest", 400, message))


def _invalid(gvk: GVK, name: str, field: str, message: str) -> APIError:
    cause = {"reason": "FieldValueRequired", "message": f"Required value: {message}", "field": field}
    return api_error(_status("Invalid", 422, f'{gvk.kind}.{gvk.group} "{name}" is invalid: {field}: Required value: {message}', gvk, name, [cause]))


def _merge(target: Any, patch: Any) -> Any:
    """A JSON merge patch (RFC 7386)."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    if not isinstance(target, dict):
        target = {}
    for k, v in patch.items():
        if v is None:
            target.pop(k, None)
        else:
            target[k] = _merge(target.get(k), v)
    return target


def _json_patch(doc: Any, ops: Any) -> Any:
    """A JSON patch (RFC 6902)."""
    if not isinstance(ops, list):
        raise _bad_request("a JSON patch must be a list of operations")
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise _bad_request(f"invalid JSON patch operation {op!r}")
        kind, path = op["op"], op["path"]
        try:
            if kind == "add":
                doc = _pointer_set(doc, path, copy.deepcopy(op["value"]), insert=True)
            elif kind == "remove":
                doc = _pointer_remove(doc, path)[0]
            elif kind == "replace":
                _pointer_get(doc, path)
                doc = _pointer_set(doc, path, copy.deepcopy(op["value"]), insert=False)
            elif kind == "test":
                if _pointer_get(doc, path) != op["value"]:
                    raise _bad_request(f"the JSON patch test of {path} failed")
            elif kind == "move":
                doc, value = _pointer_remove(doc, op["from"])
                doc = _pointer_set(doc, path, value, insert=True)
            elif kind == "copy":
                doc = _pointer_set(doc, path, copy.deepcopy(_pointer_get(doc, op["from"])), insert=True)
            else:
                raise _bad_request(f"unknown JSON patch operation {kind!r}")
        except (KeyError, IndexError, ValueError, TypeError) as err:
            raise _bad_request(f"the JSON patch operation {kind} {path} cannot be applied: {err!r}") from err
    return doc


def _tokens(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError(f"pointer {path!r} does not start with /")
    return [t.replace("~1", "/").replace("~0", "~") for t in path[1:].split("/")]


def _pointer_get(doc: Any, path: str) -> Any:
    for t in _tokens(path):
        doc = doc[int(t)] if isinstance(doc, list) else doc[t]
    return doc


def _pointer_set(doc: Any, path: str, value: Any, *, insert: bool) -> Any:
    tokens = _tokens(path)
    if not tokens:
        return value
    parent = _pointer_get(doc, "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens[:-1]))
    last = tokens[-1]
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        elif insert:
            index = int(last)
            if not 0 <= index <= len(parent):
                raise IndexError(index)
            parent.insert(index, value)
        else:
            parent[int(last)] = value
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise TypeError(f"{path}: the parent is neither an object nor an array")
    return doc


def _pointer_remove(doc: Any, path: str) -> tuple[Any, Any]:
    tokens = _tokens(path)
    if not tokens:
        raise ValueError("cannot remove the whole document")
    parent = _pointer_get(doc, "".join("/" + t.replace("~", "~0").replace("/", "~1") for t in tokens[:-1]))
    last = tokens[-1]
    value = parent.pop(int(last)) if isinstance(parent, list) else parent.pop(last)
    return doc, value


_REQUIREMENT = re.compile(
    r"^\s*(?:(?P<not>!)\s*(?P<absent>[\w./-]+)"
    r"|(?P<setkey>[\w./-]+)\s+(?P<setop>in|notin)\s*\((?P<values>[^)]*)\)"
    r"|(?P<key>[\w./-]+)\s*(?P<op>==|!=|=)\s*(?P<value>[\w.-]*)"
    r"|(?P<exists>[\w./-]+))\s*$"
)


def _split(selector: str) -> list[str]:
    parts, depth, current = [], 0, ""
    for ch in selector:
        if ch == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += ch == "("
        depth -= ch == ")"
        current += ch
    parts.append(current)
    return [p for p in parts if p.strip()]


def _label_selector(selector: str) -> Callable[[Mapping[str, str]], bool]:
    """A label selector in kubectl's -l syntax: k=v, k==v, k!=v, k in (a,b),
    k notin (a,b), k and !k, joined by commas."""
    tests: list[Callable[[Mapping[str, str]], bool]] = []
    for part in _split(selector):
        m = _REQUIREMENT.match(part)
        if m is None:
            raise _bad_request(f"unable to parse requirement {part.strip()!r} of label selector {selector!r}")
        tests.append(_requirement(m))
    return lambda labels: all(t(labels) for t in tests)


def _requirement(m: re.Match[str]) -> Callable[[Mapping[str, str]], bool]:
    if m["absent"]:
        key = m["absent"]
        return lambda labels: key not in labels
    if m["setkey"]:
        key, values, negate = m["setkey"], {v.strip() for v in m["values"].split(",") if v.strip()}, m["setop"] == "notin"
        return lambda labels: (labels.get(key) in values) != negate
    if m["key"]:
        key, value, negate = m["key"], m["value"], m["op"] == "!="
        return lambda labels: (labels.get(key) == value) != negate
    key = m["exists"]
    return lambda labels: key in labels


def _field_selector(selector: str) -> Callable[[Object], bool]:
    """metadata.name and metadata.namespace, with =, == or !=."""
    tests: list[Callable[[Object], bool]] = []
    for part in _split(selector):
        m = re.match(r"^\s*(metadata\.name|metadata\.namespace)\s*(==|!=|=)\s*(\S*)\s*$", part)
        if m is None:
            raise _bad_request(f"FakeCluster selects fields metadata.name and metadata.namespace only, not {part.strip()!r}")
        tests.append(_field_requirement(m[1], m[2] == "!=", m[3]))
    return lambda o: all(t(o) for t in tests)


def _field_requirement(field: str, negate: bool, value: str) -> Callable[[Object], bool]:
    if field == "metadata.name":
        return lambda o: (o.name == value) != negate
    return lambda o: (o.namespace == value) != negate
