"""The requests of the Cluster service's calls, built once for Cluster and
AsyncCluster, and the types they answer with."""

from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

from polyop._events import EventType, event_proto
from polyop._kinds import KindRef, ObjectLike, gvk_of, to_mapping
from polyop.objects import GVK, Object, encode
from polyop.v1alpha1 import cluster_pb2, types_pb2

__all__ = ["ObjectList", "Patch", "PatchType", "Propagation", "ReadSource", "ResolvedKind"]


class PatchType(enum.IntEnum):
    MERGE = cluster_pb2.PATCH_TYPE_MERGE
    """A JSON merge patch (RFC 7386)."""
    JSON = cluster_pb2.PATCH_TYPE_JSON
    """A JSON patch (RFC 6902): a list of operations."""
    STRATEGIC_MERGE = cluster_pb2.PATCH_TYPE_STRATEGIC_MERGE
    """A strategic merge patch; built-in kinds only."""
    APPLY = cluster_pb2.PATCH_TYPE_APPLY
    """Server-side apply; see :meth:`Cluster.apply`."""


class Propagation(enum.IntEnum):
    """What a delete does to the object's dependents."""

    BACKGROUND = cluster_pb2.DELETE_PROPAGATION_BACKGROUND
    FOREGROUND = cluster_pb2.DELETE_PROPAGATION_FOREGROUND
    ORPHAN = cluster_pb2.DELETE_PROPAGATION_ORPHAN


class ReadSource(enum.IntEnum):
    UNSPECIFIED = cluster_pb2.READ_SOURCE_UNSPECIFIED
    CACHE = cluster_pb2.READ_SOURCE_CACHE
    API_SERVER = cluster_pb2.READ_SOURCE_API_SERVER


@dataclass(frozen=True)
class ObjectList:
    """The objects a list selected; ``continue_token`` is empty on the last page."""

    items: list[Object]
    continue_token: str
    resource_version: str
    source: ReadSource


@dataclass(frozen=True)
class ResolvedKind:
    """How the API server serves a kind."""

    kind: GVK
    resource: str
    namespaced: bool


_T = TypeVar("_T")

Patch = Mapping[str, Any] | Sequence[Mapping[str, Any]] | bytes
"""A patch: a merge patch or applied configuration (a mapping), a JSON patch
(a list of operations), or the patch's JSON as bytes."""


@dataclass(frozen=True)
class _Call(Generic[_T]):
    """One ClusterService call: what it does (for error messages), the method,
    the request, and how to read the response."""

    what: str
    method: str
    request: Any
    decode: Callable[[Any], _T]


def _object(resp: Any) -> Object:
    return Object.from_json(resp.object)


def _nothing(resp: Any) -> None:
    return None


def _object_list(resp: Any) -> ObjectList:
    return ObjectList(
        items=[Object.from_json(item) for item in resp.items],
        continue_token=resp.continue_token,
        resource_version=resp.resource_version,
        source=ReadSource(resp.source),
    )


def _resolved(resp: Any) -> ResolvedKind:
    return ResolvedKind(GVK.from_proto(resp.kind), resp.resource, resp.namespaced)


class _Requests:
    """The requests of every Cluster method, built once for both clients.

    Every request names its object by kind and key, as the contract does;
    for Create and Update they are read from the object's apiVersion, kind and
    metadata.
    """

    def __init__(self, field_manager: str) -> None:
        self.field_manager = field_manager

    def _write_options(self, dry_run: bool, field_manager: str, force: bool = False) -> cluster_pb2.WriteOptions:
        return cluster_pb2.WriteOptions(dry_run=dry_run, field_manager=field_manager or self.field_manager, force=force)

    def _get(self, kind: KindRef, name: str, namespace: str, uncached: bool, subresource: str) -> _Call[Object]:
        gvk = gvk_of(kind)
        return _Call(
            f"getting {gvk.kind} {_key(namespace, name)}{_sub(subresource)}",
            "Get",
            cluster_pb2.GetRequest(
                kind=gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=namespace, name=name),
                subresource=subresource,
                options=cluster_pb2.ReadOptions(uncached=uncached),
            ),
            _object,
        )

    def _list(
        self,
        kind: KindRef,
        namespace: str,
        label_selector: str,
        field_selector: str,
        limit: int,
        continue_token: str,
        uncached: bool,
    ) -> _Call[ObjectList]:
        gvk = gvk_of(kind)
        return _Call(
            f"listing {gvk.kind}" + (f" in {namespace}" if namespace else ""),
            "List",
            cluster_pb2.ListRequest(
                kind=gvk.to_proto(),
                namespace=namespace,
                options=cluster_pb2.ReadOptions(uncached=uncached),
                label_selector=label_selector,
                field_selector=field_selector,
                limit=limit,
                continue_token=continue_token,
            ),
            _object_list,
        )

    def _resolve_kind(self, kind: KindRef) -> _Call[ResolvedKind]:
        gvk = gvk_of(kind)
        return _Call(f"resolving {gvk}", "ResolveKind", cluster_pb2.ResolveKindRequest(kind=gvk.to_proto()), _resolved)

    def _create(self, obj: ObjectLike, dry_run: bool, field_manager: str) -> _Call[Object]:
        o = _addressed(obj, "create")
        return _Call(
            f"creating {_describe(o)}",
            "Create",
            cluster_pb2.CreateRequest(
                kind=o.gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=o.namespace, name=o.name),
                options=self._write_options(dry_run, field_manager),
                object=encode(o),
            ),
            _object,
        )

    def _create_subresource(
        self,
        kind: KindRef,
        name: str,
        namespace: str,
        subresource: str,
        body: Mapping[str, Any],
        dry_run: bool,
        field_manager: str,
    ) -> _Call[Object]:
        gvk = gvk_of(kind)
        if not subresource:
            raise ValueError("create_subresource: name the subresource, for example subresource='eviction'")
        return _Call(
            f"creating {gvk.kind} {_key(namespace, name)}{_sub(subresource)}",
            "Create",
            cluster_pb2.CreateRequest(
                kind=gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=namespace, name=name),
                subresource=subresource,
                options=self._write_options(dry_run, field_manager),
                object=encode(body),
            ),
            _object,
        )

    def _update(self, obj: ObjectLike, subresource: str, dry_run: bool, field_manager: str) -> _Call[Object]:
        o = _addressed(obj, "update")
        return _Call(
            f"updating {_describe(o)}{_sub(subresource)}",
            "Update",
            cluster_pb2.UpdateRequest(
                kind=o.gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=o.namespace, name=o.name),
                subresource=subresource,
                options=self._write_options(dry_run, field_manager),
                object=encode(o),
            ),
            _object,
        )

    def _patch(
        self,
        kind: KindRef,
        name: str,
        patch: Patch,
        namespace: str,
        type: PatchType,
        subresource: str,
        force: bool,
        dry_run: bool,
        field_manager: str,
    ) -> _Call[Object]:
        gvk = gvk_of(kind)
        if force and type is not PatchType.APPLY:
            raise ValueError(f"patching {gvk.kind} {_key(namespace, name)}: force is for server-side apply only")
        return _Call(
            f"patching {gvk.kind} {_key(namespace, name)}{_sub(subresource)}",
            "Patch",
            cluster_pb2.PatchRequest(
                kind=gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=namespace, name=name),
                subresource=subresource,
                options=self._write_options(dry_run, field_manager, force),
                patch=patch if isinstance(patch, bytes) else encode(patch),
                type=PatchType(type).value,
            ),
            _object,
        )

    def _apply(
        self, obj: ObjectLike, subresource: str, force: bool, dry_run: bool, field_manager: str
    ) -> _Call[Object]:
        o = _addressed(obj, "apply")
        return self._patch(o.gvk, o.name, o, o.namespace, PatchType.APPLY, subresource, force, dry_run, field_manager)

    def _delete(
        self,
        kind: KindRef,
        name: str,
        namespace: str,
        propagation: Propagation | None,
        precondition_uid: str,
        precondition_resource_version: str,
        grace_period_seconds: int | None,
        dry_run: bool,
    ) -> _Call[None]:
        gvk = gvk_of(kind)
        req = cluster_pb2.DeleteRequest(
            kind=gvk.to_proto(),
            key=types_pb2.ObjectKey(namespace=namespace, name=name),
            options=cluster_pb2.WriteOptions(dry_run=dry_run),
            propagation=propagation.value if propagation is not None else cluster_pb2.DELETE_PROPAGATION_UNSPECIFIED,
            precondition_uid=precondition_uid,
            precondition_resource_version=precondition_resource_version,
        )
        if grace_period_seconds is not None:
            req.grace_period_seconds = grace_period_seconds
        return _Call(f"deleting {gvk.kind} {_key(namespace, name)}", "Delete", req, _nothing)

    def _record_event(
        self, kind: KindRef, name: str, namespace: str, type: EventType, reason: str, message: str, action: str
    ) -> _Call[None]:
        gvk = gvk_of(kind)
        return _Call(
            f"recording an event on {gvk.kind} {_key(namespace, name)}",
            "RecordEvent",
            cluster_pb2.RecordEventRequest(
                kind=gvk.to_proto(),
                key=types_pb2.ObjectKey(namespace=namespace, name=name),
                event=event_proto(type, reason, message, action),
            ),
            _nothing,
        )


def _key(namespace: str, name: str) -> str:
    return f"{namespace}/{name}" if namespace else name


def _sub(subresource: str) -> str:
    return f" ({subresource})" if subresource else ""


def _addressed(obj: ObjectLike, verb: str) -> Object:
    """obj as an Object, refused unless it names its kind: Create, Update and
    apply address the object by the kind and key it carries. A typed object
    (a polyop.crd model, a lightkube model) is its ``to_dict()``."""
    mapping = to_mapping(obj)
    o = mapping if isinstance(mapping, Object) else Object(mapping)
    if not o.api_version or not o.kind:
        raise ValueError(f"{verb}: the object needs apiVersion and kind")
    return o


def _describe(o: Object) -> str:
    name = o.name or (str((o.get("metadata") or {}).get("generateName", "")) + "*")
    return f"{o.kind} {_key(o.namespace, name)}"
