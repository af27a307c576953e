"""The Sidecar: register functions with decorators, then serve them to the host.

Each decorator records what the function handles and how; the answer to the
host's Describe is built from these registrations and nothing else. Every
decorator returns the function unchanged, so it can still be called directly
in a test.

A function may be ``async def``: :meth:`Sidecar.serve_async` serves on
grpc.aio and awaits it on the event loop, with an :class:`~polyop.AsyncContext`
whose cluster is an :class:`~polyop.AsyncCluster`; plain functions run on a
thread pool beside it, so that they never block the loop.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import os
import re
import threading
from collections.abc import Awaitable, Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar

import grpc
from opentelemetry.trace import TracerProvider

from polyop._address import DEFAULT_SIDECAR_ADDRESS
from polyop._version import SDK_NAME, __version__
from polyop.admission import AdmissionRequest, FailurePolicy, Operation
from polyop.cluster import ADDRESS_ENV, AsyncCluster, Cluster
from polyop.objects import GVK, KindLike, Object
from polyop.reconcile import (
    AsyncContext,
    Context,
    Owns,
    Request,
    Result,
    UpdateFilter,
    Watch,
)
from polyop.v1alpha1 import admission_pb2, describe_pb2, types_pb2

if TYPE_CHECKING:
    from polyop.crd import Resource
    from polyop.server import AsyncServer, Server

__all__ = [
    "OWNER_UID_INDEX",
    "PROTOCOL_VERSION",
    "ConvertFunc",
    "DefaultFunc",
    "DeletedFunc",
    "FinalizeFunc",
    "ReconcileFunc",
    "TypedReconcileFunc",
    "Sidecar",
    "ValidateFunc",
]

PROTOCOL_VERSION = describe_pb2.PROTOCOL_VERSION_V1ALPHA1

OWNER_UID_INDEX = ".metadata.controllerUID"
"""The index the host keeps on every kind a controller owns: the UID of an
object's controller owner. ``ctx.cluster.list(kind, namespace=ns,
field_selector=f"{OWNER_UID_INDEX}={owner.uid}")`` lists an owner's children
from the host's cache."""
"""The polyop protocol version this SDK speaks, the proto's ProtocolVersion."""

ReconcileFunc = Callable[[Object, Context], Result | None] | Callable[[Object, AsyncContext], Awaitable[Result | None]]
"""``reconcile(obj, ctx) -> Result | None``, or ``async def``."""
TypedReconcileFunc = Callable[[Any, Context], Result | None] | Callable[[Any, AsyncContext], Awaitable[Result | None]]
"""``reconcile(typed, ctx) -> Result | None``, or ``async def``, for a kind
declared as a :class:`polyop.crd.Resource`: ``typed`` is an instance of it."""
FinalizeFunc = ReconcileFunc
"""``finalize(obj, ctx) -> Result | None``, or ``async def``: clean-up done
unless it raises or asks for ``requeue_after``."""
DeletedFunc = Callable[[Request, Context], Result | None] | Callable[[Request, AsyncContext], Awaitable[Result | None]]
"""``deleted(request, ctx) -> Result | None``, or ``async def``: the object
``request`` names is gone."""
DefaultFunc = (
    Callable[[Object, AdmissionRequest], Sequence[str] | None]
    | Callable[[Object, AdmissionRequest], Awaitable[Sequence[str] | None]]
)
"""``default(obj, req) -> warnings | None``, or ``async def``: set the defaults on obj in place."""
ValidateFunc = Callable[[AdmissionRequest], Sequence[str] | None] | Callable[[AdmissionRequest], Awaitable[Sequence[str] | None]]
"""``validate(req) -> warnings | None``, or ``async def``: raise DeniedError to refuse."""
ConvertFunc = Callable[[Object, str], Mapping[str, Any]] | Callable[[Object, str], Awaitable[Mapping[str, Any]]]
"""``convert(obj, api_version) -> the object at api_version``, or ``async def``."""

_R = TypeVar("_R", bound=ReconcileFunc | TypedReconcileFunc)
_X = TypeVar("_X", bound=DeletedFunc)
_D = TypeVar("_D", bound=DefaultFunc)
_V = TypeVar("_V", bound=ValidateFunc)
_C = TypeVar("_C", bound=ConvertFunc)

_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_DNS1123_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")


@dataclass
class _Controller:
    description: describe_pb2.ControllerDescription
    kind: GVK
    owns: frozenset[GVK]
    reconcile: ReconcileFunc
    model: type[Resource] | None = None
    finalize: FinalizeFunc | None = None
    deleted: DeletedFunc | None = None


@dataclass
class _Webhook:
    kind: GVK
    resource: str = ""
    operations: tuple[Operation, ...] = ()
    failure_policy: FailurePolicy | None = None
    timeout_seconds: int = 0
    default: DefaultFunc | None = None
    validate: ValidateFunc | None = None

    def description(self) -> admission_pb2.WebhookDescription:
        return admission_pb2.WebhookDescription(
            kind=self.kind.to_proto(),
            resource=self.resource,
            default=self.default is not None,
            validate=self.validate is not None,
            operations=[op.value for op in self.operations],
            failure_policy=self.failure_policy.value if self.failure_policy else admission_pb2.FAILURE_POLICY_UNSPECIFIED,
            timeout_seconds=self.timeout_seconds,
        )


@dataclass
class _Converter:
    group: str
    kind: str
    versions: tuple[str, ...]
    convert: ConvertFunc
    description: admission_pb2.ConversionDescription = field(init=False)

    def __post_init__(self) -> None:
        self.description = admission_pb2.ConversionDescription(
            kind=types_pb2.GroupKind(group=self.group, kind=self.kind), versions=self.versions
        )


def _kind_of(kind: KindLike | type[Resource]) -> tuple[GVK, type[Resource] | None]:
    """The GVK of a kind, and its model when it is a polyop.crd.Resource class."""
    if isinstance(kind, type):
        # polyop.crd (and pydantic) are imported only by sidecars that use them.
        from polyop.crd import kind_info

        return kind_info(kind).gvk, kind
    return GVK.parse(kind), None


def _typed(model: type[Resource] | None, fn: _R) -> ReconcileFunc:
    """fn as the SDK calls it, with the object: as it is, or parsed into model."""
    if model is None:
        return fn
    from polyop.crd._typed import typed_function

    return typed_function(model, fn, is_async(fn))


def is_async(fn: Callable[..., Any]) -> bool:
    """Whether fn is an ``async def`` function (a partial of one, or an
    object whose ``__call__`` is one), awaited on the event loop rather than
    run on a thread."""
    if inspect.iscoroutinefunction(fn):
        return True
    call: Any = fn
    return not inspect.isroutine(fn) and inspect.iscoroutinefunction(call.__call__)


class Sidecar:
    """A polyop sidecar: the functions it registers, served to the host.

    ``name`` is a short name for the sidecar (lower-case letters, digits and
    '-'), used in the host's logs, metrics and leader election lease.
    ``cluster`` is the Cluster client handed to plain functions as
    ``ctx.cluster``, ``async_cluster`` the AsyncCluster handed to ``async def``
    ones; by default they are made, on first use, for the address the host
    sends in its DescribeRequest, or else POLYOP_CLUSTER_ADDRESS (the
    AsyncCluster on the serving event loop).
    """

    def __init__(
        self,
        name: str,
        *,
        cluster: Cluster | None = None,
        async_cluster: AsyncCluster | None = None,
        logger: logging.Logger | None = None,
    ) -> None:
        if not _DNS1123_LABEL.match(name) or len(name) > 63:
            raise ValueError(f"sidecar name {name!r}: lower-case letters, digits and '-', at most 63")
        self.name = name
        self.log = logger or logging.getLogger("polyop")
        self._cluster = cluster
        self._async_cluster = async_cluster
        self._async_cluster_loop: asyncio.AbstractEventLoop | None = None
        self._cluster_address = ""
        self._lock = threading.Lock()
        self._serving = False
        self._controllers: dict[str, _Controller] = {}
        self._webhooks: dict[GVK, _Webhook] = {}
        self._converters: dict[tuple[str, str], _Converter] = {}
        self._indexes: dict[tuple[str, str, str], describe_pb2.IndexDescription] = {}
        self._cached_kinds: dict[tuple[str, str], describe_pb2.CachedKind] = {}

    # Registration.

    def reconciler(
        self,
        kind: KindLike | type[Resource],
        *,
        name: str = "",
        owns: Iterable[KindLike | Owns] = (),
        watches: Iterable[Watch] = (),
        update_filters: Iterable[UpdateFilter] = (),
        label_selector: str = "",
        namespaces: Iterable[str] = (),
        max_concurrent_reconciles: int = 0,
        finalizer: str = "",
        skip_unchanged_inputs: bool = False,
    ) -> Callable[[_R], _R]:
        """Register a reconcile function for a kind, as
        ``ctrl.NewControllerManagedBy(mgr).For(kind)`` does in controller-runtime.

        - ``name``: the controller's name, unique in the sidecar; defaults to
          the kind in lower case;
        - ``owns``: the kinds of its children (``Owns(kind, send_observed=True)``
          to receive them in ``ctx.observed_children(kind)``);
        - ``watches``: other kinds whose events enqueue reconciled objects;
        - ``update_filters``: update events reconcile only when one of these
          changed (every update does by default);
        - ``label_selector``: only objects it selects are watched;
        - ``namespaces``: only these namespaces (all by default);
        - ``max_concurrent_reconciles``: objects reconciled at once (1 by default);
        - ``finalizer``: a finalizer the host adds to every object; register the
          clean-up with :meth:`finalizer`;
        - ``skip_unchanged_inputs``: declares that the function's answer depends
          on its inputs alone — the object without its status (and without
          ``metadata.resourceVersion`` and ``metadata.managedFields``) and the
          observed children sent (``send_observed``), status included — so the
          host skips a call whose inputs are those of the last answer that
          succeeded without ``requeue_after``, such as the call its own status
          write or child apply would cause. Leave it off (the default) for a
          function that reads the clock, other objects or anything outside the
          cluster.

        The function may be ``async def``; register what to do once an object
        is gone with :meth:`deleted`.

        With ``kind`` a class declared with :func:`polyop.crd.kind`, the
        function receives the object as an instance of it, and the instance's
        status is what the host writes; an object that does not fit the class
        is a terminal error naming its fields.
        """
        gvk, model = _kind_of(kind)
        controller_name = name or gvk.kind.lower()
        if not _DNS1123_SUBDOMAIN.match(controller_name) or len(controller_name) > 253:
            raise ValueError(f"controller name {controller_name!r}: lower-case letters, digits, '-' and '.'")
        owned = [o if isinstance(o, Owns) else Owns(o) for o in owns]
        filters = [UpdateFilter(f) for f in update_filters]
        namespace_list: list[str] = []
        for ns in namespaces:
            if not _DNS1123_LABEL.match(ns):
                raise ValueError(f"controller {controller_name!r}: namespace {ns!r} is not a valid name")
            if ns not in namespace_list:
                namespace_list.append(ns)
        if not 0 <= max_concurrent_reconciles < 2**31:
            raise ValueError(f"controller {controller_name!r}: max_concurrent_reconciles must be between 0 and 2^31-1")
        description = describe_pb2.ControllerDescription(
            name=controller_name,
            for_kind=gvk.to_proto(),
            namespaces=namespace_list,
            max_concurrent_reconciles=max_concurrent_reconciles,
            owns=[o.to_proto() for o in owned],
            watches=[w.to_proto() for w in watches],
            finalizer=finalizer,
            skip_unchanged_inputs=skip_unchanged_inputs,
        )
        if filters or label_selector:
            description.predicates.CopyFrom(
                describe_pb2.Predicates(update_filters=list(dict.fromkeys(f.value for f in filters)), label_selector=label_selector)
            )

        def register(fn: _R) -> _R:
            with self._registering():
                if controller_name in self._controllers:
                    raise ValueError(f"controller {controller_name!r} is already registered: give each a unique name=")
                self._controllers[controller_name] = _Controller(
                    description=description,
                    kind=gvk,
                    owns=frozenset(GVK.parse(o.kind) for o in owned),
                    reconcile=_typed(model, fn),
                    model=model,
                )
            return fn

        return register

    def finalizer(self, kind: KindLike | type[Resource] | None = None, *, controller: str = "") -> Callable[[_R], _R]:
        """Register the clean-up of a controller that declares a ``finalizer``,
        named by its ``kind`` (for the controller of the default name) or its
        ``controller`` name. The host calls it for an object being deleted and
        removes the finalizer once it returns without error or requeue. It
        receives the object as the controller's reconciler does: typed when
        that was registered with a :class:`polyop.crd.Resource` class."""
        controller_name = self._controller_name("finalizer", kind, controller)

        def register(fn: _R) -> _R:
            with self._registering():
                c = self._registered_controller("finalizer", controller_name)
                if not c.description.finalizer:
                    raise ValueError(f"finalizer: controller {controller_name!r} declares no finalizer=")
                if c.finalize is not None:
                    raise ValueError(f"finalizer: controller {controller_name!r} already has one")
                c.finalize = _typed(c.model, fn)
            return fn

        return register

    def deleted(self, kind: KindLike | type[Resource] | None = None, *, controller: str = "") -> Callable[[_X], _X]:
        """Register what a controller does once an object is gone, named as
        for :meth:`finalizer`: the host reconciles a key whose object no
        longer exists, and the function gets the :class:`~polyop.Request`
        (its key) and the context, ``deleted(request, ctx) -> Result | None``.
        Without one, such a call answers that there is nothing to do.

        Use it to forget what you keep outside the cluster about the object;
        to act before the object goes, declare a ``finalizer``. Status and
        events are ignored, since there is no object to write them to; a
        failure is retried as a reconcile's is."""
        controller_name = self._controller_name("deleted", kind, controller)

        def register(fn: _X) -> _X:
            with self._registering():
                c = self._registered_controller("deleted", controller_name)
                if c.deleted is not None:
                    raise ValueError(f"deleted: controller {controller_name!r} already has one")
                c.deleted = fn
            return fn

        return register

    def defaulter(
        self,
        kind: KindLike,
        *,
        resource: str = "",
        operations: Iterable[Operation] = (),
        failure_policy: FailurePolicy | None = None,
        timeout_seconds: int = 0,
    ) -> Callable[[_D], _D]:
        """Register a mutating admission webhook for a kind at one version: the
        function sets defaults on the object in place and may return warnings.

        ``operations`` default to create and update; ``failure_policy`` to
        FAIL; ``timeout_seconds`` (1 to 30) to 10. A defaulter and a validator
        of one kind share these settings. ``resource`` (the plural) is
        resolved through discovery when empty.
        """

        def register(fn: _D) -> _D:
            with self._registering():
                webhook = self._webhook(kind, resource, operations, failure_policy, timeout_seconds)
                if webhook.default is not None:
                    raise ValueError(f"defaulter: {webhook.kind} already has one")
                webhook.default = fn
            return fn

        return register

    def validator(
        self,
        kind: KindLike,
        *,
        resource: str = "",
        operations: Iterable[Operation] = (),
        failure_policy: FailurePolicy | None = None,
        timeout_seconds: int = 0,
    ) -> Callable[[_V], _V]:
        """Register a validating admission webhook for a kind at one version:
        the function raises DeniedError to refuse a request and may return warnings.
        The settings are those of :meth:`defaulter`."""

        def register(fn: _V) -> _V:
            with self._registering():
                webhook = self._webhook(kind, resource, operations, failure_policy, timeout_seconds)
                if webhook.validate is not None:
                    raise ValueError(f"validator: {webhook.kind} already has one")
                webhook.validate = fn
            return fn

        return register

    def converter(self, group: str, kind: str, versions: Sequence[str]) -> Callable[[_C], _C]:
        """Register the conversion of a kind between its versions (a CRD
        conversion webhook): the function returns the object at the apiVersion
        asked for, its metadata unchanged but for labels and annotations. The
        host calls it only with objects of the kind; it may be ``async def``."""
        if len(versions) < 2:
            raise ValueError(f"converter {group}/{kind}: name at least two versions")

        def register(fn: _C) -> _C:
            with self._registering():
                if (group, kind) in self._converters:
                    raise ValueError(f"converter: {group}/{kind} already has one")
                self._converters[(group, kind)] = _Converter(group, kind, tuple(versions), fn)
            return fn

        return register

    def index(self, kind: KindLike | type[Resource], name: str, *, path: str = "", cel: str = "") -> None:
        """Declare a cache index the host keeps on kind, the declarative form
        of controller-runtime's ``IndexField``: ``cluster.list(kind,
        field_selector=f"{name}={value}")`` is then answered from the host's
        cache with the objects indexed under value. The values are those at
        a field ``path`` (``".spec.nodeName"``,
        ``".metadata.ownerReferences[?(@.controller==true)].name"``) or the
        string, or list of strings, a ``cel`` expression over ``object``
        returns; exactly one is given. The host compiles both at start and
        stops, naming the index, if one does not compile. The kind is cached
        in every namespace the host watches (see :meth:`cache_kind`).
        """
        gvk, _ = _kind_of(kind)
        if not name or any(c in name for c in "=!, "):
            raise ValueError(f"index {name!r} on {gvk.kind}: a name is required, without '=', '!', ',' or spaces")
        if name == OWNER_UID_INDEX:
            raise ValueError(f"index {name!r} on {gvk.kind}: the host keeps this index itself on every owned kind; choose another name")
        if bool(path) == bool(cel):
            raise ValueError(f"index {name!r} on {gvk.kind}: give path= or cel=, one of them")
        if path:
            from polyop._fieldpath import compile_path

            compile_path(path)  # a ValueError now rather than at the host's start
        description = describe_pb2.IndexDescription(kind=gvk.to_proto(), name=name)
        if path:
            description.field_path = path
        else:
            description.cel = cel
        with self._registering():
            key = (gvk.group, gvk.kind, name)
            if key in self._indexes:
                raise ValueError(f"index {name!r} on {gvk.kind} is already declared")
            self._indexes[key] = description

    def cache_kind(
        self,
        kind: KindLike | type[Resource],
        *,
        namespaces: Iterable[str] = (),
        label_selector: str = "",
        field_selector: str = "",
    ) -> None:
        """Declare kind for cached reads: the host starts an informer for it at
        start, and reads of it through ``ctx.cluster`` come from its cache,
        with no controller and no event mapping. ``namespaces`` (every
        namespace the host watches by default), ``label_selector`` and
        ``field_selector`` select what is cached. A read outside the cached
        namespaces fails with FAILED_PRECONDITION unless it passes
        ``uncached=True``. A kind a controller reconciles, owns or watches is
        cached anyway; declaring it may then take no selectors.
        """
        gvk, _ = _kind_of(kind)
        for ns in namespaces:
            if not _DNS1123_LABEL.match(ns):
                raise ValueError(f"cached kind {gvk.kind}: namespace {ns!r} is not a valid name")
        description = describe_pb2.CachedKind(
            kind=gvk.to_proto(), namespaces=list(dict.fromkeys(namespaces)), label_selector=label_selector, field_selector=field_selector
        )
        with self._registering():
            if (gvk.group, gvk.kind) in self._cached_kinds:
                raise ValueError(f"cached kind {gvk.kind} is already declared")
            self._cached_kinds[(gvk.group, gvk.kind)] = description

    # Description.

    def describe(self) -> describe_pb2.DescribeResponse:
        """The answer to the host's Describe, built from the registrations."""
        self._check()
        with self._lock:
            return describe_pb2.DescribeResponse(
                protocol_version=PROTOCOL_VERSION,
                name=self.name,
                controllers=[c.description for c in self._controllers.values()],
                webhooks=[w.description() for w in self._webhooks.values()],
                conversions=[c.description for c in self._converters.values()],
                indexes=list(self._indexes.values()),
                cached_kinds=list(self._cached_kinds.values()),
                sdk_name=SDK_NAME,
                sdk_version=__version__,
            )

    @property
    def cluster(self) -> Cluster | None:
        """The Cluster client, or None while no address is known."""
        with self._lock:
            if self._cluster is None:
                address = self._cluster_address_locked()
                if address:
                    self._cluster = Cluster(address)
            return self._cluster

    @property
    def async_cluster(self) -> AsyncCluster | None:
        """The AsyncCluster client of the running event loop, or None while no
        address is known. One made here belongs to the loop it was first used
        on; on another loop (a second ``serve_async``) a new one is made."""
        loop = asyncio.get_running_loop()
        with self._lock:
            if self._async_cluster is not None and self._async_cluster_loop in (None, loop):
                return self._async_cluster
            address = self._cluster_address_locked()
            if not address:
                return None
            self._async_cluster, self._async_cluster_loop = AsyncCluster(address), loop
            return self._async_cluster

    def _cluster_address_locked(self) -> str:
        return self._cluster_address or os.environ.get(ADDRESS_ENV, "")

    def has_async_handlers(self) -> bool:
        """Whether any registered function is ``async def``."""
        with self._lock:
            fns: list[Callable[..., Any] | None] = []
            for c in self._controllers.values():
                fns += [c.reconcile, c.finalize, c.deleted]
            for w in self._webhooks.values():
                fns += [w.default, w.validate]
            fns += [c.convert for c in self._converters.values()]
        return any(fn is not None and is_async(fn) for fn in fns)

    # Serving.

    def start(
        self,
        address: str = DEFAULT_SIDECAR_ADDRESS,
        *,
        max_message_size: int = 64 << 20,
        max_workers: int | None = None,
        credentials: grpc.ServerCredentials | None = None,
        reflection: bool = True,
        tracer_provider: TracerProvider | None = None,
        reconcile_stream: bool = True,
    ) -> Server:
        """Serve on address in the background, on threads, and return the
        running Server. See :meth:`serve`. ``async def`` functions need an
        event loop: use :meth:`start_async`."""
        from polyop.server import start

        return start(
            self, address, max_message_size=max_message_size, max_workers=max_workers, credentials=credentials,
            reflection=reflection, tracer_provider=tracer_provider, reconcile_stream=reconcile_stream,
        )

    def serve(
        self,
        address: str = DEFAULT_SIDECAR_ADDRESS,
        *,
        max_message_size: int = 64 << 20,
        max_workers: int | None = None,
        credentials: grpc.ServerCredentials | None = None,
        grace: float = 30.0,
        reflection: bool = True,
        tracer_provider: TracerProvider | None = None,
        reconcile_stream: bool = True,
    ) -> None:
        """Serve until SIGTERM or SIGINT, then stop gracefully: report NOT_SERVING,
        refuse new calls and wait up to ``grace`` seconds for the calls in flight.

        ``address`` takes the forms of the host's --sidecar-address
        (``unix:///abs.sock``, ``unix:rel.sock``, ``tcp://host:port``,
        ``host:port``); it defaults to unix:///var/run/polyop/sidecar.sock, the
        host's default. Next to the SidecarService the server serves
        grpc.health.v1.Health and, unless ``reflection`` is False, gRPC server
        reflection (grpc.reflection.v1alpha), so that ``grpcurl -plaintext
        -unix <socket> list`` lists and calls the services without the proto
        files. ``max_message_size`` should match the host's
        --max-message-size; ``max_workers`` (the threads running plain
        functions) defaults to the controllers' concurrency plus room for
        webhooks and health checks. ``credentials``
        (``grpc.ssl_server_credentials(...)``) serve TLS or mTLS, for a
        sidecar on a TCP address; the default is plaintext, as on the unix
        socket a pod's containers share.

        Each Reconcile, Finalize, Default, Validate and Convert call runs in a
        span that continues the host's trace (``opentelemetry.trace.
        get_current_span()`` in the function), and the Cluster calls made in
        it are spans of their own, when tracing is on: with
        ``tracer_provider`` when one is passed, else with the global
        TracerProvider when the application set one, else with one made from
        the OTEL_* environment variables (OTEL_EXPORTER_OTLP_ENDPOINT,
        OTEL_TRACES_EXPORTER=otlp, ...; needs ``polyop[otlp]``). Otherwise
        tracing is off and costs nothing.

        With ``reconcile_stream`` (the default) the sidecar also serves
        ReconcileStream and says so in its Describe answer: the host then
        sends Reconcile and Finalize calls as messages on one long-lived
        stream per worker instead of a new gRPC call each, which costs less.
        Each call still runs the same function with the same deadline,
        cancellation, tracing, log fields and errors as a unary call. An open
        stream holds one of the ``max_workers`` threads of the threaded
        server (the default counts one per worker), which serves no streams
        when ``max_workers`` leaves no thread beside one per worker;
        ``reconcile_stream=False`` makes the host call the unary Reconcile
        and Finalize.

        When any registered function is ``async def``, this runs
        :meth:`serve_async` in a new event loop (``asyncio.run``).
        """
        if self.has_async_handlers():
            asyncio.run(
                self.serve_async(
                    address, max_message_size=max_message_size, max_workers=max_workers, credentials=credentials, grace=grace,
                    reflection=reflection, tracer_provider=tracer_provider, reconcile_stream=reconcile_stream,
                )
            )
            return
        from polyop.server import serve

        serve(
            self, address, max_message_size=max_message_size, max_workers=max_workers, credentials=credentials, grace=grace,
            reflection=reflection, tracer_provider=tracer_provider, reconcile_stream=reconcile_stream,
        )

    async def start_async(
        self,
        address: str = DEFAULT_SIDECAR_ADDRESS,
        *,
        max_message_size: int = 64 << 20,
        max_workers: int | None = None,
        credentials: grpc.ServerCredentials | None = None,
        reflection: bool = True,
        tracer_provider: TracerProvider | None = None,
        reconcile_stream: bool = True,
    ) -> AsyncServer:
        """Serve on address on grpc.aio, on the running event loop, and return
        the running AsyncServer. See :meth:`serve_async`."""
        from polyop.server import start_async

        return await start_async(
            self, address, max_message_size=max_message_size, max_workers=max_workers, credentials=credentials,
            reflection=reflection, tracer_provider=tracer_provider, reconcile_stream=reconcile_stream,
        )

    async def serve_async(
        self,
        address: str = DEFAULT_SIDECAR_ADDRESS,
        *,
        max_message_size: int = 64 << 20,
        max_workers: int | None = None,
        credentials: grpc.ServerCredentials | None = None,
        grace: float = 30.0,
        reflection: bool = True,
        tracer_provider: TracerProvider | None = None,
        reconcile_stream: bool = True,
    ) -> None:
        """Serve on grpc.aio until SIGTERM or SIGINT (or until cancelled), then
        stop as :meth:`serve` does::

            asyncio.run(sidecar.serve_async())

        ``async def`` functions are awaited on the event loop, so that one
        waiting on the cluster or an external API holds no thread; they get
        an :class:`~polyop.AsyncContext`, and are cancelled when the host's
        deadline passes or the host cancels the call. Plain functions run on
        a pool of ``max_workers`` threads, so they never block the loop. The
        arguments are :meth:`serve`'s.
        """
        from polyop.server import serve_async

        await serve_async(
            self, address, max_message_size=max_message_size, max_workers=max_workers, credentials=credentials, grace=grace,
            reflection=reflection, tracer_provider=tracer_provider, reconcile_stream=reconcile_stream,
        )

    # Internals.

    def _registering(self) -> _Registering:
        return _Registering(self)

    def _webhook(
        self,
        kind: KindLike,
        resource: str,
        operations: Iterable[Operation],
        failure_policy: FailurePolicy | None,
        timeout_seconds: int,
    ) -> _Webhook:
        gvk = GVK.parse(kind)
        if timeout_seconds and not 1 <= timeout_seconds <= 30:
            raise ValueError(f"webhook {gvk}: timeout_seconds must be between 1 and 30")
        settings = _Webhook(gvk, resource, tuple(dict.fromkeys(Operation(o) for o in operations)), failure_policy, timeout_seconds)
        webhook = self._webhooks.get(gvk)
        if webhook is None:
            self._webhooks[gvk] = settings
            return settings
        for attr in ("resource", "operations", "failure_policy", "timeout_seconds"):
            mine, theirs = getattr(settings, attr), getattr(webhook, attr)
            if mine and theirs and mine != theirs:
                raise ValueError(f"webhook {gvk}: the defaulter and the validator disagree on {attr} ({theirs!r} and {mine!r})")
            if mine:
                setattr(webhook, attr, mine)
        return webhook

    def _controller_name(self, decorator: str, kind: KindLike | type[Resource] | None, controller: str) -> str:
        if (kind is None) == (not controller):
            raise ValueError(f"{decorator}: name the controller by kind or by controller=, not both")
        return controller or _kind_of(kind or "")[0].kind.lower()

    def _registered_controller(self, decorator: str, name: str) -> _Controller:
        c = self._controllers.get(name)
        if c is None:
            raise ValueError(f"{decorator}: no controller {name!r}; register its reconciler first")
        return c

    def _check(self) -> None:
        with self._lock:
            if not (self._controllers or self._webhooks or self._converters):
                raise ValueError(f"sidecar {self.name!r} registers nothing: register a reconciler, a webhook or a converter")
            for c in self._controllers.values():
                if c.description.finalizer and c.finalize is None:
                    raise ValueError(
                        f"controller {c.description.name!r} declares finalizer {c.description.finalizer!r} "
                        "but registers no clean-up: add one with @sidecar.finalizer"
                    )

    def _start_serving(self) -> None:
        self._check()
        with self._lock:
            if self._serving:
                raise RuntimeError(f"sidecar {self.name!r} is already serving")
            self._serving = True

    def _stopped_serving(self) -> None:
        with self._lock:
            self._serving = False

    def _described_to(self, cluster_address: str) -> None:
        with self._lock:
            if cluster_address and not self._cluster_address:
                self._cluster_address = cluster_address


class _Registering:
    """Holds the Sidecar's lock during a registration, which must happen before it serves."""

    def __init__(self, sidecar: Sidecar) -> None:
        self.sidecar = sidecar

    def __enter__(self) -> None:
        self.sidecar._lock.acquire()
        if self.sidecar._serving:
            self.sidecar._lock.release()
            raise RuntimeError("register every function before serving: the host reads them once, at start")

    def __exit__(self, *_: object) -> None:
        self.sidecar._lock.release()
