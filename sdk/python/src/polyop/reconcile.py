"""What a reconcile function declares, receives and returns.

A reconcile function takes the object and a :class:`Context` and returns a
:class:`Result` (or None: done, nothing to requeue)::

    @sidecar.reconciler(kind="examples.polyop.dev/v1/Tenant", owns=["v1/ConfigMap"],
                        update_filters=[UpdateFilter.GENERATION_CHANGED])
    def reconcile(tenant: Object, ctx: Context) -> Result:
        tenant.status["observedGeneration"] = tenant.meta.generation
        ctx.event("Normal", "Reconciled", "the tenant is ready")
        return Result(desired_children=[config_map(tenant)], children_complete=True)

An ``async def`` function gets an :class:`AsyncContext`, whose ``cluster`` is
an :class:`~polyop.AsyncCluster`.

Changes to ``obj.status`` are sent back to the host, which writes the status
through the status subresource when it changed, also when the function
raises. Changes to anything else in the object are ignored.
"""

from __future__ import annotations

import enum
import logging
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import timedelta

from polyop._events import EventType, event_proto
from polyop._kinds import KindRef, ObjectLike, gvk_of
from polyop.cluster import AsyncCluster, Cluster
from polyop.errors import ClusterError
from polyop.objects import GVK, Object
from polyop.v1alpha1 import describe_pb2, reconcile_pb2

__all__ = ["AsyncContext", "Context", "EventType", "Owns", "Request", "Result", "UpdateFilter", "Watch"]


class UpdateFilter(enum.IntEnum):
    """A change an update event must carry to reconcile the object, after
    controller-runtime's predicates of the same name. Creates and deletes
    always reconcile."""

    GENERATION_CHANGED = describe_pb2.UPDATE_FILTER_GENERATION_CHANGED
    """metadata.generation changed: the spec changed. The usual choice for a
    controller that writes status, as status-only updates then do not
    reconcile again."""
    LABELS_CHANGED = describe_pb2.UPDATE_FILTER_LABELS_CHANGED
    ANNOTATIONS_CHANGED = describe_pb2.UPDATE_FILTER_ANNOTATIONS_CHANGED
    DELETION_CHANGED = describe_pb2.UPDATE_FILTER_DELETION_CHANGED
    """metadata.finalizers changed or metadata.deletionTimestamp was set."""


@dataclass(frozen=True)
class Owns:
    """A kind of child the controller owns, as ``Owns(kind)`` in controller-runtime.

    A plain kind in ``owns=[...]`` is ``Owns(kind)``, every option off:

    - ``send_observed``: the host sends the children of this kind that point
      at the reconciled object (``ReconcileRequest.observed_children``), read
      with :meth:`Context.observed_children`.
    - ``adopt``: the host may adopt an existing object of this kind that a
      desired child names and that no object controls (for example a
      ConfigMap someone created by hand): it applies the child over it, which
      makes the reconciled object its controller owner and merges the child's
      fields into it. An adopted object is a child like any other: it is
      pruned (deleted) once it is no longer desired. Off (the default), the
      host refuses such an object: nothing is written to it, the reconcile
      fails and a Warning event names the object. An object another object
      controls is never adopted.
    - ``replace_on_immutable``: when the API server refuses to apply a child
      of this kind because it changes an immutable field (a Pod's spec, a
      Job's ``spec.template``), the host deletes the child (with its UID as a
      precondition) and applies it again, which creates it. Off (the
      default), the child is left as it is, the reconcile fails and a Warning
      event names the child and the field.
    """

    kind: KindRef
    send_observed: bool = False
    adopt: bool = False
    replace_on_immutable: bool = False

    def to_proto(self) -> describe_pb2.OwnedKind:
        return describe_pb2.OwnedKind(
            kind=gvk_of(self.kind).to_proto(),
            send_observed=self.send_observed,
            adopt=self.adopt,
            replace_on_immutable=self.replace_on_immutable,
        )


@dataclass(frozen=True)
class Watch:
    """Another kind whose events enqueue reconciled objects of the same
    namespace, mapped by the host: set exactly one of ``label`` or
    ``annotation`` (whose value names the reconciled object), or
    ``field_path`` (a dot-separated field of the reconciled kind holding the
    watched object's name)."""

    kind: KindRef
    label: str = ""
    annotation: str = ""
    field_path: str = ""

    def __post_init__(self) -> None:
        if sum(bool(x) for x in (self.label, self.annotation, self.field_path)) != 1:
            raise ValueError(f"Watch({self.kind}): set exactly one of label, annotation or field_path")

    def to_proto(self) -> describe_pb2.Watch:
        out = describe_pb2.Watch(kind=gvk_of(self.kind).to_proto())
        if self.label:
            out.label = self.label
        elif self.annotation:
            out.annotation = self.annotation
        else:
            out.field_path = self.field_path
        return out


@dataclass
class Result:
    """The outcome of a successful reconcile.

    - ``requeue_after``: reconcile again after this long (seconds, or a
      timedelta), as controller-runtime's Result.RequeueAfter (which is all
      controller-runtime keeps: to be called again after the backoff, raise);
    - ``desired_children``: the desired children, of the kinds the controller
      owns (apiVersion, kind, metadata.name and what the controller manages;
      the namespace defaults to the object's): mappings, or typed objects
      such as lightkube's models of the built-in kinds
      (``lightkube.resources.core_v1.ConfigMap(...)``) or ``polyop.crd``
      models. The host applies them with server-side apply and makes the
      object their controller owner;
    - ``children_complete``: ``desired_children`` is the complete set, so the
      host deletes the owned children that are not in it. Off by default, so
      that a partial answer never removes a child.
    """

    requeue_after: float | timedelta | None = None
    desired_children: Sequence[ObjectLike] | None = None
    children_complete: bool = False

    @property
    def requeue_after_seconds(self) -> float:
        if isinstance(self.requeue_after, timedelta):
            return self.requeue_after.total_seconds()
        return float(self.requeue_after or 0)


@dataclass(frozen=True)
class Request:
    """What the host asked: the controller, the kind, the object's key, and how
    many times in a row this object has failed and been retried."""

    controller: str
    kind: GVK
    namespace: str
    name: str
    retries: int = 0


class _CallContext:
    """What a reconcile, finalize or deleted function gets beside the object;
    :class:`Context` and :class:`AsyncContext` differ only in their cluster."""

    def __init__(
        self,
        request: Request,
        observed_children: Sequence[Object] = (),
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
        *,
        deadline: float | None = None,
    ) -> None:
        self.request = request
        self.log = log or logging.getLogger("polyop")
        self._observed = list(observed_children)
        self._deadline = deadline
        self._events: list[reconcile_pb2.Event] = []
        self._lock = threading.Lock()

    def observed_children(self, kind: KindRef | None = None) -> list[Object]:
        """The observed children (``ReconcileRequest.observed_children``): the
        objects of the owned kinds declared with ``Owns(kind,
        send_observed=True)`` whose controller is this object, from the host's
        cache; only those of ``kind`` when given."""
        if kind is None:
            return list(self._observed)
        gvk = gvk_of(kind)
        return [c for c in self._observed if c.gvk == gvk]

    def event(self, type: EventType, reason: str, message: str, *, action: str = "") -> None:
        """Record an event on the object, in controller-runtime's order:
        ``type`` ("Normal" or "Warning"), ``reason`` a short CamelCase word,
        ``message`` for people, ``action`` what was done (defaults to the
        reason). The host records the events, in order, once the function
        returns (also when it raises)."""
        event = event_proto(type, reason, message, action)
        with self._lock:
            self._events.append(event)

    @property
    def events(self) -> list[reconcile_pb2.Event]:
        """The events recorded so far."""
        with self._lock:
            return list(self._events)

    def time_remaining(self) -> float | None:
        """Seconds left before the host's deadline for this call, or None
        without one. An ``async def`` function is cancelled
        (``asyncio.CancelledError``) when the deadline passes or the host
        cancels the call; a plain function should check this in long loops."""
        if self._deadline is None:
            return None
        return max(self._deadline - time.monotonic(), 0.0)


class Context(_CallContext):
    """Everything a reconcile, finalize or deleted function gets beside the object.

    - :attr:`request`: the controller, kind, key and retry count;
    - :meth:`observed_children`: the observed children (owned kinds declared
      with ``send_observed``);
    - :attr:`log`: a logger whose records carry the controller and object;
    - :meth:`event`: record a Kubernetes event on the object;
    - :attr:`cluster`: the host's Cluster service, for everything else;
    - :meth:`time_remaining`: the time left before the host's deadline.
    """

    def __init__(
        self,
        request: Request,
        observed_children: Sequence[Object] = (),
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
        cluster: Cluster | None = None,
        *,
        deadline: float | None = None,
    ) -> None:
        super().__init__(request, observed_children, log, deadline=deadline)
        self._cluster = cluster

    @property
    def cluster(self) -> Cluster:
        """The Cluster client, whose address comes from the host's
        DescribeRequest or the POLYOP_CLUSTER_ADDRESS environment variable."""
        if self._cluster is None:
            raise ClusterError("no Cluster service: the host announced none and POLYOP_CLUSTER_ADDRESS is not set")
        return self._cluster


class AsyncContext(_CallContext):
    """The :class:`Context` of an ``async def`` function: the same, but
    :attr:`cluster` is an :class:`~polyop.AsyncCluster`, whose methods are
    coroutines."""

    def __init__(
        self,
        request: Request,
        observed_children: Sequence[Object] = (),
        log: logging.Logger | logging.LoggerAdapter[logging.Logger] | None = None,
        cluster: AsyncCluster | None = None,
        *,
        deadline: float | None = None,
    ) -> None:
        super().__init__(request, observed_children, log, deadline=deadline)
        self._cluster = cluster

    @property
    def cluster(self) -> AsyncCluster:
        """The asyncio Cluster client, on the serving event loop."""
        if self._cluster is None:
            raise ClusterError("no Cluster service: the host announced none and POLYOP_CLUSTER_ADDRESS is not set")
        return self._cluster
